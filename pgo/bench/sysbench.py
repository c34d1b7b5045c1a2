"""Drive sysbench's OLTP scripts against a server's socket and read its report."""

import math
import re
from collections import Counter

from pgo.base import process
from pgo.bench.errors import InfraError
from pgo.bench.server import DATABASE

TRANSACTIONS = re.compile(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec\.\)")
PERCENTILE = re.compile(r"(\d+)th percentile:\s+([\d.]+)")
# A row of --histogram's table: "       0.089 |******      3" (bucket value in ms, count).
HISTOGRAM_ROW = re.compile(r"^\s*(\d+\.\d+) \|\**\s+(\d+)\s*$", re.M)
IGNORED = re.compile(r"ignored errors:\s+(\d+)")


class Sysbench:
    def __init__(self, binary, cpus, tables, table_size, log):
        self.binary = binary
        self.cpus = cpus
        self.tables = tables
        self.table_size = table_size
        self.log = log

    def command(self, server, script, *options):
        return ["taskset", "-c", self.cpus, self.binary, script, "--db-driver=mysql",
                f"--mysql-socket={server.socket}", "--mysql-user=root", f"--mysql-db={DATABASE}",
                f"--tables={self.tables}", f"--table-size={self.table_size}", *options]

    def call(self, what, cmd, timeout):
        result = process.run(cmd, error=InfraError, timeout=timeout, what=f"sysbench {what}")
        with open(self.log, "a") as log:
            log.write(f"### {what}\n$ {' '.join(cmd)}\n{result.stdout}{result.stderr}\n")
        if result.returncode != 0:
            lines = (result.stderr + result.stdout).strip().splitlines()
            fatal = [line for line in lines if "FATAL" in line] or lines[-1:] or ["no output"]
            raise InfraError(f"sysbench {what} failed (exit {result.returncode}): {fatal[0].strip()}")
        return result.stdout

    def load(self, server):
        """Create and fill the tables; a fixed seed gives both builds the same rows."""
        self.call(f"prepare on {server.build.label}",
                  self.command(server, "oltp_common", "--rand-seed=1", "prepare"), timeout=3600)

    def prewarm(self, server):
        """Read the tables and their indexes into the buffer pool."""
        self.call(f"prewarm on {server.build.label}",
                  self.command(server, "oltp_common", "prewarm"), timeout=3600)

    def run(self, server, workload, threads, seconds=None, events=None, rate=None, with_histogram=False):
        """One sysbench run; returns tps, the p95 latency (ms), and with histogram its latency histogram."""
        options = [f"--threads={threads}", "--percentile=95"]
        if events is None:
            options.append(f"--time={seconds}")
        else:
            options += [f"--events={events}", "--time=0"]
        if rate is not None:
            options.append(f"--rate={rate}")
        if with_histogram:
            options.append("--histogram=on")
        what = f"{workload} N={threads} on {server.build.label}"
        timeout = 3600 if events is not None else seconds + 300
        return parse(self.call(what, self.command(server, workload, *options, "run"), timeout), what)


def parse(output, what="run"):
    transactions = TRANSACTIONS.search(output)
    latency = PERCENTILE.search(output)
    if not transactions or not latency:
        raise InfraError(f"sysbench {what}: no transaction summary in its output")
    if int(transactions.group(1)) == 0:
        raise InfraError(f"sysbench {what}: no transaction completed")
    ignored = IGNORED.search(output)
    return {
        "transactions": int(transactions.group(1)),
        "tps": float(transactions.group(2)),
        "percentile": int(latency.group(1)),
        "latency_ms": float(latency.group(2)),
        "ignored_errors": int(ignored.group(1)) if ignored else 0,
        "histogram": histogram(output),
    }


def histogram(output):
    """{latency ms: count} from --histogram's table (empty without one)."""
    counts = Counter()
    for value, count in HISTOGRAM_ROW.findall(output):
        counts[float(value)] += int(count)
    return counts


def histogram_percentile(counts, percentile):
    """The latency (ms) below which `percentile` % of the histogram's events fall, as sysbench
    computes it: the first bucket whose cumulative count reaches the rounded share."""
    wanted = math.floor(sum(counts.values()) * percentile / 100 + 0.5)
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= wanted:
            return value
    raise ValueError("histogram_percentile of an empty histogram")
