"""The measurement session: two servers, the same data, interleaved sysbench runs.

Both servers stay up for the whole session and the one not being measured sits idle (no
client connected). Restarting per run would cost a prepare-and-prewarm each time and compare
cold servers; keeping both up means every run meets a warm buffer pool, and the idle server's
background threads cost next to nothing. Interleaving (A B B A A B ...) makes slow drift of
the machine (thermal, other tenants, page cache) hit both builds alike.
"""

import os
import shutil
import statistics
import time
from collections import Counter
from pathlib import Path

from pgo.base import lines
from pgo.bench import builds, callgrind, sequential
from pgo.bench.errors import InfraError
from pgo.bench.gate import SPEEDUP_WORKLOADS
from pgo.bench.server import Server, common_options
from pgo.bench.stats import geometric_mean
from pgo.bench.sysbench import Sysbench, histogram_percentile

LABELS = {"A": "baseline", "B": "candidate"}
PERCENTILES = (95, 99)


def say(line):
    print(lines.tagged("bench", line), flush=True)


def machine(cpuinfo="/proc/cpuinfo"):
    """The CPU the figures were measured on: a speedup from PGO depends on it (its instruction
    cache above all), so every result names it. The first processor's fields, as the kernel
    reports them (under a hypervisor, what the VM is shown)."""
    fields = {}
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return {"cpu": fields.get("model name", "unknown"), "family": fields.get("cpu family"),
            "model": fields.get("model"), "cpus": os.cpu_count()}


class Session:
    def __init__(self, settings, out):
        self.settings = settings
        # Absolute: mariadbd resolves a relative --datadir against its --basedir, and writes
        # relative files (callgrind's, the error log) after changing into the datadir.
        root = Path(out).absolute()
        self.work = root / "work"
        self.logs = root / "logs"
        self.started = None

    def minutes(self):
        return (time.monotonic() - self.started) / 60

    def measure(self):
        """Run everything; returns the raw result (builds, runs, latency, callgrind)."""
        s = self.settings
        self.started = time.monotonic()
        shutil.rmtree(self.logs, ignore_errors=True)        # logs of an earlier session
        self.logs.mkdir(parents=True)
        self.work.mkdir(parents=True, exist_ok=True)
        found = {label: builds.resolve(label, s[LABELS[label]], self.work) for label in LABELS}
        for build in found.values():
            say(f"build {build.label} ({LABELS[build.label]}): {build.kind} {build.basedir}: "
                f"{build.version}")
        options = common_options(s["buffer_pool"], max(s["threads"]), s["server_options"])
        # A handicap (the candidate only) exists to show that the gate stops a slower build.
        handicap = {"A": [], "B": list(s.get("candidate_handicap", ()))}
        if handicap["B"]:
            say(f"candidate handicapped (to test the gate): {' '.join(handicap['B'])}")
        servers = {label: Server(build, self.work / f"server-{label}", self.logs,
                                 s["server_cpus"], options + handicap[label])
                   for label, build in found.items()}
        self.sysbench = Sysbench(s["sysbench"], s["client_cpus"], s["tables"], s["table_size"],
                                 self.logs / "sysbench.log")
        try:
            for server in servers.values():
                say(f"starting {server.name} and loading {s['tables']} x {s['table_size']} rows")
                server.install()
                server.start()
                self.sysbench.load(server)
                # A clean restart writes the freshly loaded pages back now, rather than while
                # the other build is being measured.
                server.stop()
                server.start()
                self.sysbench.prewarm(server)
            runs, stopped = self.throughput_sweep(servers)
            latency = self.response_time(servers, runs) if s["rate"] != "off" else None
            for server in servers.values():
                say(f"shutting down {server.name}")
                server.stop()
        except BaseException:
            for server in servers.values():
                server.stop(check=False)
            raise
        profile = self.instruction_profile(servers) if s["callgrind"] else None
        if profile and "error" in profile:
            # The work files of the server valgrind could not run stay, for its log.
            say(f"callgrind not measured: {profile['error']}")
        else:
            shutil.rmtree(self.work)
        return {
            "builds": {label: {"role": LABELS[label], "source": b.source, "kind": b.kind,
                               "basedir": str(b.basedir), "version": b.version}
                       for label, b in found.items()},
            "server_options": options,
            "machine": machine(),
            "runs": runs,
            "sequential": {"stopped": stopped, "minutes": round(self.minutes(), 1)},
            "latency": latency,
            "callgrind": profile,
        }

    def throughput_sweep(self, servers):
        """Every workload and concurrency at the minimum pairs, then single-thread pairs of the
        read-only workloads until the gate can decide (pgo.bench.sequential); returns the runs
        and why each single-thread comparison stopped."""
        s = self.settings
        runs = []
        extended = [w for w in s["workloads"] if w in SPEEDUP_WORKLOADS]

        # The fixed sweep's pairs, counted for the progress line; the single-thread pairs after it go on
        # until the gate can decide or the time runs out, so only the minutes bound them.
        sweep = {"done": 0, "of": len(s["workloads"]) * len(s["threads"]) * s["pairs"]}

        def measure_pair(workload, threads, pair, extra=False):
            most = s["max_pairs"] if threads == 1 and workload in extended else s["pairs"]
            if not extra:
                sweep["done"] += 1
            place = "more single-thread pairs" if extra else f"sweep {sweep['done']} of {sweep['of']}"
            print(lines.bench_pair(pair, most, workload, threads, self.minutes(), s["max_minutes"], place),
                  flush=True)
            tps = {}
            for label in ("A", "B") if pair % 2 == 1 else ("B", "A"):
                result = self.sysbench.run(servers[label], workload, threads, seconds=s["time"])
                tps[label] = result["tps"]
                runs.append({"workload": workload, "threads": threads, "pair": pair, "build": label,
                             "tps": result["tps"], "p95_ms": result["latency_ms"],
                             "ignored_errors": result["ignored_errors"]})
            return tps["A"], tps["B"]

        single_thread = {w: ([], []) for w in extended}
        for workload in s["workloads"]:
            say(f"warming up {workload} on A and B ({s['warmup']} s each)")
            for server in servers.values():
                self.sysbench.run(server, workload, max(s["threads"]), seconds=s["warmup"])
            for threads in s["threads"]:
                for pair in range(1, s["pairs"] + 1):
                    a, b = measure_pair(workload, threads, pair)
                    if threads == 1 and workload in single_thread:
                        single_thread[workload][0].append(a)
                        single_thread[workload][1].append(b)
        # Both servers are warm from the sweep, and the alternating order of the pairs
        # cancels whatever the workload measured last left behind.
        stopped = sequential.extend(
            single_thread, lambda workload, pair: measure_pair(workload, 1, pair, extra=True), s["min_speedup"],
            s["max_pairs"], self.started + 60 * s["max_minutes"], note=say)
        for workload, why in stopped.items():
            say(f"{workload} N=1: {len(single_thread[workload][0])} pairs, stopped: {why}")
        return runs, stopped

    def response_time(self, servers, runs):
        """p95 and p99 per interval at a fixed Poisson arrival rate, for both builds."""
        s = self.settings
        workload = s["rate_workload"]
        baseline = {}
        for run in runs:
            if run["workload"] == workload and run["build"] == "A":
                baseline.setdefault(run["threads"], []).append(run["tps"])
        means = {n: geometric_mean(v) for n, v in baseline.items()}
        # The command line checked that what "auto" needs was measured.
        threads = s["rate_threads"]
        if threads == "auto":
            threads = max(means, key=means.get)
        rate = max(1, round(s["rate_fraction"] * means[threads])) if s["rate"] == "auto" else s["rate"]
        # One run per build and interval, the builds alternating like the throughput pairs:
        # p95 and p99 come from that run's histogram, so p99 can never fall below p95 (as it
        # could when each percentile had a run of its own).
        intervals, overall = {"A": [], "B": []}, {"A": Counter(), "B": Counter()}
        count = s["latency_time"] // s["interval"]
        for number in range(1, count + 1):
            for label in ("A", "B") if number % 2 == 1 else ("B", "A"):
                say(f"response time: {workload} N={threads} at {rate} tx/s, interval {number} of {count}, "
                    f"run {label}")
                result = self.sysbench.run(servers[label], workload, threads, seconds=s["interval"],
                                           rate=rate, with_histogram=True)
                overall[label].update(result["histogram"])
                intervals[label].append({"t": number * s["interval"], "tps": result["tps"], "ms": {
                    p: histogram_percentile(result["histogram"], p) for p in PERCENTILES}})
        series = [{"build": label, "percentile": p,
                   "tps": statistics.fmean(i["tps"] for i in intervals[label]),
                   "overall_ms": histogram_percentile(overall[label], p),
                   "intervals": [{"t": i["t"], "tps": i["tps"], "latency_ms": i["ms"][p]}
                                 for i in intervals[label]]}
                  for label in ("A", "B") for p in PERCENTILES]
        return {"workload": workload, "threads": threads, "rate": rate,
                "interval": s["interval"], "series": series}

    def instruction_profile(self, servers):
        """callgrind's counts of both builds; or {"error": why} when one could not run under valgrind
        (valgrind 3.19 gives up on a BOLTed binary's DWARF): the throughput measured before it stands."""
        s = self.settings
        profile = {}
        for label in ("A", "B"):
            say(f"callgrind {s['callgrind_workload']} run {label} ({s['callgrind_events']} transactions)")
            try:
                profile[label] = callgrind.measure(servers[label], self.sysbench,
                                                   s["callgrind_workload"], s["callgrind_events"],
                                                   self.logs)
            except InfraError as e:
                return {"error": f"build {label} under valgrind: {e}"}
        return profile
