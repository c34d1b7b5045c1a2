"""The gain of what ships, per CPU: one table made from the benchmarks a list names.

    pgo gains docs/gains/measurements.toml            write the table into the README beside the list
    pgo gains docs/gains/measurements.toml --check    fail when the README's table is not the list's

What PGO gains depends on the CPU (its instruction cache and branch predictor above all), so
the table is kept as the machines change: each benchmark of a build against its baseline is
one entry of the list, and its rows come from that benchmark's own `result.json` (the ratio
of throughputs, its 95% interval, the pairs, the verdict), never copied by hand. The README's
prose stays; only the part between its two markers is written.
"""

import argparse
import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pgo.base.atomic import write
from pgo.bench.errors import UsageError
from pgo.bench.report import interval

README = "README.md"
BEGIN = "<!-- gains: begin (written by `python3 -m pgo gains`; edit the list, not this part) -->"
END = "<!-- gains: end -->"
GLANCE_WORKLOADS = ("oltp_point_select", "oltp_read_only", "oltp_read_write")
ENTRY_KEYS = {"result": str, "config": str, "version": str, "compared": str, "cpu": dict}
REQUIRED = ("result", "config", "version", "compared")

# Microarchitectures by vendor, family and model, as the vendors number them (a VM shows the
# host's). A CPU not named here is named by its family and model only.
MICROARCHITECTURES = (
    ("AMD", 25, range(0x00, 0x10), "Zen 3"),
    ("AMD", 25, range(0x10, 0x20), "Zen 4"),
    ("AMD", 25, range(0xA0, 0xB0), "Zen 4c"),
    ("AMD", 26, range(0x00, 0x100), "Zen 5"),
    ("Intel", 6, (0x8F,), "Sapphire Rapids"),
    ("Intel", 6, (0xCF,), "Emerald Rapids"),
)


@dataclass(frozen=True)
class Measurement:
    source: str             # the result.json, as the list names it
    config: str
    version: str
    compared: str
    cpu: str                # 'AMD EPYC family 26 model 2 (Zen 5)'
    rows: tuple             # result.json's analysis.throughput


def cpu_name(machine):
    """'Intel(R) Xeon(R) Processor family 6 model 207 (Emerald Rapids)' from a result's machine record."""
    name = " ".join(machine["cpu"].replace("(R)", "").replace("(TM)", "").split())
    family, model = int(machine["family"]), int(machine["model"])
    vendor = "AMD" if "AMD" in name else "Intel" if "Intel" in name else None
    arch = next((a for v, f, models, a in MICROARCHITECTURES if v == vendor and f == family and model in models), None)
    return f"{name} family {family} model {model}" + (f" ({arch})" if arch else "")


def load(path):
    """The list's measurements, each with its result's rows; every fault one line."""
    path = Path(path)
    try:
        entries = tomllib.loads(path.read_text(encoding="utf-8")).get("measurement")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: cannot read the list of measurements ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{path}: not TOML ({e})") from None
    if not isinstance(entries, list) or not entries:
        raise UsageError(f"{path}: no [[measurement]] entries")
    return [measurement(path, n, entry) for n, entry in enumerate(entries, 1)]


def measurement(path, n, entry):
    where = f"{path}: measurement {n}"
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(ENTRY_KEYS)})")
    for key in REQUIRED:
        if key not in entry:
            raise UsageError(f"{where}: {key!r} is missing")
    for key, kind in ENTRY_KEYS.items():
        if key in entry and not isinstance(entry[key], kind):
            raise UsageError(f"{where}: {key!r} must be a {kind.__name__}")
    result_path = path.parent / entry["result"]
    try:
        result = json.loads(result_path.read_text(encoding="utf-8"))
        rows = tuple(result["analysis"]["throughput"])
        if not all(readable(r) for r in rows):
            raise ValueError
    except OSError as e:
        raise UsageError(f"{where}: cannot read {entry['result']} ({e.strerror})") from None
    except (ValueError, KeyError, TypeError):
        raise UsageError(f"{where}: {entry['result']} is not a benchmark result of `pgo bench`") from None
    recorded, given = result.get("machine"), entry.get("cpu")
    if recorded and given and {k: str(v) for k, v in given.items()} != {k: str(recorded.get(k)) for k in given}:
        raise UsageError(f"{where}: 'cpu' says {given}, the result recorded {recorded}")
    machine = recorded or given
    if not machine:
        raise UsageError(f"{where}: {entry['result']} does not record its CPU (measured before results did): "
                         "say it with cpu = {cpu = ..., family = ..., model = ...} from its report")
    try:
        cpu = cpu_name(machine)
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{where}: the CPU needs cpu, family and model, got {machine}") from None
    return Measurement(entry["result"], entry["config"], entry["version"], entry["compared"], cpu, rows)


def cell(text):
    """A table cell's text: a `|` of the list's would end the cell."""
    return str(text).replace("|", "\\|")


def readable(row):
    """A row of result.json's analysis.throughput with what the tables print."""
    return (isinstance(row, dict) and isinstance(row.get("workload"), str) and isinstance(row.get("threads"), int)
            and isinstance(row.get("n"), int) and isinstance(row.get("ratio"), float)
            and isinstance(row.get("verdict"), str) and "low" in row and "high" in row)


def render(measurements):
    """The two tables: single thread at a glance, then every workload and concurrency measured."""
    ordered = sorted(measurements, key=lambda m: (m.cpu, m.config, m.version))
    glance = [
        "| CPU | configuration | MariaDB | compared | " + " | ".join(GLANCE_WORKLOADS) + " |",
        "|---|---|---|---|" + "---|" * len(GLANCE_WORKLOADS),
    ]
    for m in ordered:
        single = {r["workload"]: r for r in m.rows if r["threads"] == 1}
        cells = [f"{interval(single[w])} ({single[w]['n']})" if w in single else "not measured"
                 for w in GLANCE_WORKLOADS]
        glance.append(f"| {cell(m.cpu)} | {cell(m.config)} | {cell(m.version)} | {cell(m.compared)} | "
                      + " | ".join(cells) + " |")
    every = ["| CPU | configuration | MariaDB | compared | workload | threads | pairs | B/A [95% CI] | verdict "
             "| result |", "|---|---|---|---|---|---:|---:|---|---|---|"]
    for m in ordered:
        for r in sorted(m.rows, key=lambda r: (r["workload"], r["threads"])):
            every.append(f"| {cell(m.cpu)} | {cell(m.config)} | {cell(m.version)} | {cell(m.compared)} | "
                         f"{r['workload']} | {r['threads']} | {r['n']} | {interval(r)} | {r['verdict']} | "
                         f"`{cell(m.source)}` |")
    return "\n".join([
        "Single thread, the candidate's throughput over the baseline's (geometric mean of the paired "
        "ratios, 95% interval; pairs in parentheses):", "", *glance, "",
        "Every workload and concurrency the listed benchmarks measured:", "", *every])


def replace_part(text, part, readme):
    """The README's text with the part between the markers replaced by `part`."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise UsageError(f"{readme}: needs the markers {BEGIN!r} and {END!r}, once each, in that order")
    head, rest = text.split(BEGIN)
    return f"{head}{BEGIN}\n{part}\n{END}{rest.split(END, 1)[1]}"


def main(args):
    measurements = load(args.measurements)
    readme = Path(args.measurements).parent / README
    try:
        text = readme.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"{readme}: {e.strerror}") from None
    new = replace_part(text, render(measurements), readme)
    if args.check:
        if new != text:
            raise UsageError(f"{readme}: its table is not the one {args.measurements} makes "
                             f"(run python3 -m pgo gains {args.measurements})")
        print(f"{readme}: up to date ({len(measurements)} benchmarks)")
        return 0
    if new != text:
        write(readme, new.encode())
    print(f"{readme}: {len(measurements)} benchmarks, "
          f"{sum(len(m.rows) for m in measurements)} rows, on {len({m.cpu for m in measurements})} CPUs")
    return 0


def register(subparsers):
    parser = subparsers.add_parser("gains", help="the gain per CPU: a table from the benchmarks a list names",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("measurements", help="the list (TOML, [[measurement]] entries); the table goes into the "
                        f"{README} beside it")
    parser.add_argument("--check", action="store_true", help="write nothing; fail when the table is out of date")
    parser.set_defaults(func=main)
    return parser
