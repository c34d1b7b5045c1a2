"""Instructions and simulated I1 misses per transaction: a noise-free cross-check.

Without hardware counters, timing is all the throughput runs have. Callgrind counts the
instructions the server executes and simulates its instruction cache, so the PGO effect
(fewer instructions, fewer I1 misses through hot/cold code layout) shows without noise.
Only the measured window is counted: instrumentation is switched on after a warm-up and
dumped right after the fixed number of transactions.
"""

import re
import shutil

from pgo.base import process
from pgo.bench.errors import InfraError

WARMUP_EVENTS = 500
COUNTERS = ("Ir", "I1mr", "ILmr")
TOP_FUNCTIONS = 15
# A callgrind_annotate row: "1,234 (12.34%)  file:function [object]".
ANNOTATED = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+[^:]*:(.+?)(?: \[[^\]]*\])?$")
# GCC moves the blocks a profile never saw out of line, as symbols "f.cold" (C) or
# "f() [clone .cold]" (C++): instructions run there are paths the training missed.
COLD_PART = re.compile(r"\.cold\b")


def measure(server, sysbench, workload, events, out_dir):
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            raise InfraError(f"--callgrind needs {tool} (Debian package valgrind)")
    label = server.build.label
    out_file = out_dir / f"callgrind-{label}.out"
    for old in out_dir.glob(out_file.name + "*"):
        old.unlink()
    wrapper = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--instr-atstart=no",
               f"--callgrind-out-file={out_file}"]
    # valgrind does not emulate Linux native AIO; both builds run without it here.
    server.start(wrapper=wrapper, timeout=900, extra_options=["--innodb-use-native-aio=0"])
    try:
        sysbench.run(server, workload, 1, events=min(WARMUP_EVENTS, events))
        control(server, "--instr=on")
        sysbench.run(server, workload, 1, events=events)
        control(server, "--dump")
        control(server, "--instr=off")
    except BaseException:
        server.stop(check=False)
        raise
    server.stop()
    dumps = sorted(out_dir.glob(out_file.name + ".*"), key=lambda p: int(p.suffix[1:]))
    if not dumps:
        raise InfraError(f"callgrind wrote no dump for build {label}")
    totals = read_totals(dumps[-1].read_text())
    return {"workload": workload, "events": events, "file": dumps[-1].name,
            **{name: totals[name] for name in COUNTERS}, **where_it_runs(dumps[-1])}


def where_it_runs(dump):
    """The share of instructions in out-of-line cold parts, and the top functions by own cost."""
    result = process.run(["callgrind_annotate", "--show=Ir", "--threshold=100", "--inclusive=no", "--auto=no", dump],
                         error=InfraError, timeout=600)
    if result.returncode != 0:
        raise InfraError(f"callgrind_annotate {dump.name} failed: {(result.stderr or result.stdout).strip()}")
    costs = self_costs(result.stdout)
    total = sum(costs.values()) or 1
    top = sorted(costs.items(), key=lambda item: item[1], reverse=True)[:TOP_FUNCTIONS]
    return {"cold_share": sum(ir for name, ir in costs.items() if COLD_PART.search(name)) / total,
            "top": [{"function": name, "share": ir / total, "cold": bool(COLD_PART.search(name))}
                    for name, ir in top]}


def self_costs(annotated):
    """{function: own instructions} from `callgrind_annotate --inclusive=no --show=Ir` output."""
    costs = {}
    for line in annotated.splitlines():
        row = ANNOTATED.match(line)
        if row and "PROGRAM TOTALS" not in line:
            name = row.group(2).strip()
            costs[name] = costs.get(name, 0) + int(row.group(1).replace(",", ""))
    return costs


def control(server, option):
    result = process.run(["callgrind_control", option, server.pid], error=InfraError, timeout=600)
    if result.returncode != 0:
        raise InfraError(f"callgrind_control {option} for build {server.build.label} failed: "
                         f"{(result.stderr or result.stdout).strip()}")


def read_totals(text):
    """{event name: total} from a callgrind output file."""
    names = re.search(r"^events:\s*(.+)$", text, re.M)
    values = re.search(r"^(?:summary|totals):\s*(.+)$", text, re.M)
    if not names or not values:
        raise InfraError("callgrind output has no events/summary line")
    return dict(zip(names.group(1).split(), (int(v) for v in values.group(1).split())))
