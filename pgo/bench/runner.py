"""The measurement session: two servers, the same data, interleaved sysbench runs.

Both servers stay up for the whole session and the one not being measured sits idle (no
client connected). Restarting per run would cost a prepare-and-prewarm each time and compare
cold servers; keeping both up means every run meets a warm buffer pool, and the idle server's
background threads cost next to nothing. Interleaving (A B B A A B ...) makes slow drift of
the machine (thermal, other tenants, page cache) hit both builds alike.
"""

import shutil

from pgo.bench import builds, callgrind
from pgo.bench.server import Server, common_options
from pgo.bench.stats import geometric_mean
from pgo.bench.sysbench import Sysbench

LABELS = {"A": "baseline", "B": "candidate"}


def say(line):
    print(f"[bench] {line}", flush=True)


class Session:
    def __init__(self, settings, out):
        self.settings = settings
        self.out = out
        self.work = out / "work"
        self.logs = out / "logs"
        self.step = 0
        self.total_steps = (len(settings["workloads"]) * len(settings["threads"])
                            * settings["pairs"] * 2
                            + (4 if settings["rate"] != "off" else 0)
                            + (2 if settings["callgrind"] else 0))

    def progress(self, what):
        self.step += 1
        say(f"step {self.step} of {self.total_steps}: {what}")

    def measure(self):
        """Run everything; returns the raw result (builds, runs, latency, callgrind)."""
        s = self.settings
        shutil.rmtree(self.logs, ignore_errors=True)        # logs of an earlier session
        self.logs.mkdir(parents=True)
        self.work.mkdir(parents=True, exist_ok=True)
        found = {label: builds.resolve(label, s[LABELS[label]], self.work) for label in LABELS}
        for build in found.values():
            say(f"build {build.label} ({LABELS[build.label]}): {build.kind} {build.basedir}: "
                f"{build.version}")
        options = common_options(s["buffer_pool"], max(s["threads"]), s["server_options"])
        servers = {label: Server(build, self.work / f"server-{label}", self.logs,
                                 s["server_cpus"], options) for label, build in found.items()}
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
            runs = self.throughput_sweep(servers)
            latency = self.response_time(servers, runs) if s["rate"] != "off" else None
            for server in servers.values():
                say(f"shutting down {server.name}")
                server.stop()
        except BaseException:
            for server in servers.values():
                server.stop(check=False)
            raise
        profile = self.instruction_profile(servers) if s["callgrind"] else None
        shutil.rmtree(self.work)
        return {
            "builds": {label: {"role": LABELS[label], "source": b.source, "kind": b.kind,
                               "basedir": str(b.basedir), "version": b.version}
                       for label, b in found.items()},
            "server_options": options,
            "runs": runs,
            "latency": latency,
            "callgrind": profile,
        }

    def throughput_sweep(self, servers):
        s = self.settings
        runs = []
        for workload in s["workloads"]:
            say(f"warming up {workload} on A and B ({s['warmup']} s each)")
            for server in servers.values():
                self.sysbench.run(server, workload, max(s["threads"]), seconds=s["warmup"])
            for threads in s["threads"]:
                for pair in range(s["pairs"]):
                    for label in ("A", "B") if pair % 2 == 0 else ("B", "A"):
                        self.progress(f"{workload} N={threads} run {label} "
                                      f"(pair {pair + 1} of {s['pairs']})")
                        result = self.sysbench.run(servers[label], workload, threads,
                                                   seconds=s["time"])
                        runs.append({"workload": workload, "threads": threads, "pair": pair + 1,
                                     "build": label, "tps": result["tps"],
                                     "p95_ms": result["latency_ms"],
                                     "ignored_errors": result["ignored_errors"]})
        return runs

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
        series = []
        for label, percentile in (("A", 95), ("B", 95), ("B", 99), ("A", 99)):
            self.progress(f"{workload} N={threads} at {rate} tx/s: p{percentile} run {label}")
            result = self.sysbench.run(servers[label], workload, threads, seconds=s["latency_time"],
                                       rate=rate, percentile=percentile, interval=s["interval"])
            series.append({"build": label, "percentile": percentile, "tps": result["tps"],
                           "overall_ms": result["latency_ms"], "intervals": result["intervals"]})
        return {"workload": workload, "threads": threads, "rate": rate,
                "interval": s["interval"], "series": series}

    def instruction_profile(self, servers):
        s = self.settings
        profile = {}
        for label in ("A", "B"):
            self.progress(f"callgrind {s['callgrind_workload']} run {label} "
                          f"({s['callgrind_events']} transactions)")
            profile[label] = callgrind.measure(servers[label], self.sysbench,
                                               s["callgrind_workload"], s["callgrind_events"],
                                               self.logs)
        return profile
