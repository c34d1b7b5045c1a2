"""The `bench` command: measure two builds (or re-judge a stored result), report, and gate.

Exit status: 0 the gate lets the candidate be published (it passed, or its policy publishes
an inconclusive result), 1 it does not, 2 usage error, 3 the benchmark could not run (a server
did not start, sysbench failed).

Only the standard library is imported here; numpy, scipy and matplotlib are imported when a
result is analysed, so the rest of the pgo CLI stays stdlib-only.
"""

import json
import shlex
import shutil
from pathlib import Path

from pgo import PipelineError
from pgo.base import atomic, lines
from pgo.base.errors import fail
from pgo.base.protocol import BENCH_RESULT
from pgo.bench.errors import InfraError, UsageError
from pgo.bench.gate import SPEEDUP_WORKLOADS
from pgo.bench.policy import INCONCLUSIVE_CHOICES, POLICIES, RELEASE
from pgo.core import profile

SYSBENCH_SCRIPTS = ("oltp_point_select", "oltp_read_only", "oltp_read_write", "oltp_write_only",
                    "oltp_update_index", "oltp_update_non_index", "oltp_insert", "oltp_delete",
                    "select_random_points", "select_random_ranges")
DEFAULT_WORKLOADS = "oltp_point_select,oltp_read_only,oltp_read_write"
DEFAULT_THREADS = "1,2,4,8,16,32,64,128"
FALLOVER_RETENTION = 0.7


def add_arguments(parser):
    run = parser.add_argument_group("what to compare")
    run.add_argument("--baseline", help="plain build: basedir, bintar (.tar.gz) or CMake build tree")
    run.add_argument("--candidate", help="PGO build: basedir, bintar (.tar.gz) or CMake build tree")
    run.add_argument("--out", required=True, help=f"directory for {BENCH_RESULT}, report.md and plots")
    run.add_argument("--from-result", metavar="JSON",
                     help="do not measure: re-analyse this result.json, redraw and re-judge it")
    load = parser.add_argument_group("workload")
    load.add_argument("--workloads", nargs="+", default=[DEFAULT_WORKLOADS],
                      help=f"sysbench scripts, comma or space separated (default {DEFAULT_WORKLOADS})")
    load.add_argument("--threads", default=DEFAULT_THREADS,
                      help=f"concurrency sweep, must include 1 (default {DEFAULT_THREADS})")
    load.add_argument("--time", type=int, default=20, help="seconds per run (default 20)")
    load.add_argument("--pairs", type=int, help="A/B pairs at least, per workload and concurrency "
                      "(default: the policy's; at least 2, 6+ for a sign test)")
    load.add_argument("--warmup", type=int, default=10,
                      help="warm-up seconds per workload and build (default 10)")
    load.add_argument("--tables", type=int, default=4, help="sysbench tables (default 4)")
    load.add_argument("--table-size", type=int, default=100000, help="rows per table (default 100000)")
    load.add_argument("--sysbench", default="sysbench", help="sysbench binary (default: from PATH)")
    server = parser.add_argument_group("server (the same for both builds)")
    server.add_argument("--buffer-pool", default="512M", help="InnoDB buffer pool size (default 512M)")
    server.add_argument("--server-option", action="append", default=[], metavar="OPTION",
                        help="extra mariadbd option for both builds, "
                        "e.g. --server-option=--thread-handling=pool-of-threads")
    server.add_argument("--candidate-handicap", action="append", default=[], metavar="OPTION",
                        help="extra mariadbd option for the candidate only, to prove that the gate stops "
                        "a slower build, e.g. --candidate-handicap=--slow-query-log=ON; the report says so")
    server.add_argument("--server-cpus", default="0", help="taskset CPU list for the server (default 0)")
    server.add_argument("--client-cpus", default="1", help="taskset CPU list for sysbench (default 1)")
    latency = parser.add_argument_group("response time at a fixed arrival rate")
    latency.add_argument("--rate", default="auto",
                         help="Poisson arrival rate in tx/s, 'auto' (--rate-fraction of the baseline's "
                         "throughput at --rate-threads) or 'off' (default auto)")
    latency.add_argument("--rate-fraction", type=float, default=0.7, help="for --rate auto (default 0.7)")
    latency.add_argument("--rate-workload", help="default oltp_read_only if measured, else the first workload")
    latency.add_argument("--rate-threads", default="auto",
                         help="client threads; 'auto' = the baseline's best concurrency (default auto)")
    latency.add_argument("--latency-time", type=int, default=60, help="seconds per run (default 60)")
    latency.add_argument("--interval", type=int, default=10,
                         help="seconds per reported latency interval (default 10)")
    cg = parser.add_argument_group("callgrind cross-check (slow)")
    cg.add_argument("--callgrind", action="store_true",
                    help="also count instructions and simulated I1 misses per transaction")
    cg.add_argument("--callgrind-events", type=int, default=5000,
                    help="transactions counted (default 5000)")
    cg.add_argument("--callgrind-workload", help="default as --rate-workload")
    cg.add_argument("--training-counts", metavar="FILE",
                    help="the candidate's training-counts.json (its pgo build work directory, written by "
                         "the check): how often the training entered each of the top functions")
    gate = parser.add_argument_group(
        "gate", "pairs are added at the single-thread points of the read-only workloads until "
        "their speedup's 95% interval clears --min-speedup, or --max-pairs or --max-minutes are "
        "spent: then the gate is inconclusive. Defaults come from the policy (pgo/bench/policy.py).")
    gate.add_argument("--policy", choices=sorted(POLICIES),
                      help=f"gate policy (default {RELEASE.name}; with --from-result, the stored one)")
    gate.add_argument("--min-speedup", type=float,
                      help="the single-thread speedup's 95%% interval must lie above it "
                      "(default: the policy's; with --from-result, the stored one)")
    gate.add_argument("--max-pairs", type=int,
                      help="most pairs at a single-thread point (default: the policy's, at least --pairs)")
    gate.add_argument("--max-minutes", type=float,
                      help="no pair is added after this many minutes of the benchmark (default: the policy's)")
    gate.add_argument("--inconclusive", choices=INCONCLUSIVE_CHOICES,
                      help="what an inconclusive gate does: block publishing, or publish when every "
                      "unproven speedup's estimate is above 1 (default: the policy's; with "
                      "--from-result, the stored one)")
    gate.add_argument("--fallover-retention", type=float,
                      help=f"retention X(N_max)/X(peak) below which a build 'falls over' (default "
                      f"{FALLOVER_RETENTION}; with --from-result, the stored one)")


def main(args):
    try:
        if args.from_result:
            return rejudge(args)
        return measure(args)
    except (UsageError, InfraError) as e:
        return fail("bench", e, e.exit_code)


def settings_from(args):
    """Validated settings (what result.json records and the reproduce command is built from)."""
    workloads = [w for item in args.workloads for w in item.split(",") if w]
    unknown = [w for w in workloads if w not in SYSBENCH_SCRIPTS]
    if unknown or not workloads:
        raise UsageError(f"unknown workload {unknown[0] if unknown else '(none)'}; "
                         f"choose from {', '.join(SYSBENCH_SCRIPTS)}")
    threads = sorted(set(positive_ints(args.threads, "--threads")))
    if 1 not in threads:
        raise UsageError("--threads must include 1: the gate judges the single-thread speedup")
    for name in ("time", "warmup", "tables", "table_size", "latency_time", "interval",
                 "callgrind_events"):
        if getattr(args, name) < (0 if name == "warmup" else 1):
            raise UsageError(f"--{name.replace('_', '-')} must be positive")
    if not any(w in SPEEDUP_WORKLOADS for w in workloads):
        raise UsageError(f"--workloads needs a read-only workload to show the speedup "
                         f"({', '.join(SPEEDUP_WORKLOADS)})")
    policy = POLICIES[args.policy or RELEASE.name]
    pairs = policy.min_pairs if args.pairs is None else args.pairs
    if pairs < 2:
        raise UsageError("--pairs must be at least 2: one pair gives no confidence interval")
    max_pairs = max(policy.max_pairs, pairs) if args.max_pairs is None else args.max_pairs
    if max_pairs < pairs:
        raise UsageError(f"--max-pairs {max_pairs} is below --pairs {pairs}")
    max_minutes = policy.max_minutes if args.max_minutes is None else args.max_minutes
    if max_minutes <= 0:
        raise UsageError("--max-minutes must be positive")
    if not args.baseline or not args.candidate:
        raise UsageError("--baseline and --candidate are required (or --from-result)")
    focus = "oltp_read_only" if "oltp_read_only" in workloads else workloads[0]
    settings = {
        "baseline": args.baseline, "candidate": args.candidate, "out": args.out,
        "workloads": workloads, "threads": threads, "time": args.time, "pairs": pairs,
        "max_pairs": max_pairs, "max_minutes": max_minutes,
        "warmup": args.warmup, "tables": args.tables, "table_size": args.table_size,
        "sysbench": args.sysbench, "buffer_pool": args.buffer_pool,
        "server_options": args.server_option, "candidate_handicap": args.candidate_handicap,
        "server_cpus": args.server_cpus,
        "client_cpus": args.client_cpus,
        "rate": rate(args.rate), "rate_fraction": args.rate_fraction,
        "rate_workload": args.rate_workload or focus,
        "rate_threads": "auto" if args.rate_threads == "auto" else
        positive_ints(args.rate_threads, "--rate-threads")[0],
        "latency_time": args.latency_time, "interval": args.interval,
        "callgrind": args.callgrind, "callgrind_events": args.callgrind_events,
        "callgrind_workload": args.callgrind_workload or focus,
        "training_counts": args.training_counts,
        **gate_settings(args, {}),
        "fallover_retention": FALLOVER_RETENTION if args.fallover_retention is None
        else args.fallover_retention,
    }
    if args.training_counts and not args.callgrind:
        raise UsageError("--training-counts needs --callgrind: the counts are shown for callgrind's top functions")
    for name in ("rate_workload", "callgrind_workload"):
        if settings[name] not in SYSBENCH_SCRIPTS:
            raise UsageError(f"--{name.replace('_', '-')}: unknown workload {settings[name]}")
    measured_rate = settings["rate"] == "auto" or settings["rate_threads"] == "auto"
    if settings["rate"] != "off" and measured_rate and settings["rate_workload"] not in workloads:
        raise UsageError("--rate auto and --rate-threads auto need --rate-workload among --workloads")
    if settings["rate"] == "auto" and settings["rate_threads"] not in (["auto"] + threads):
        raise UsageError("--rate auto needs --rate-threads among --threads")
    if args.latency_time < args.interval:
        raise UsageError("--latency-time must be at least one --interval")
    return settings


def gate_settings(args, stored):
    """policy, min_speedup and inconclusive: from the command line, else stored, else the policy's.

    A stored value stands unless the command line names a policy anew. A result stored before
    the policies existed was judged by its minimum alone; it is re-judged under the release policy.
    """
    name = args.policy or stored.get("policy") or RELEASE.name
    if name not in POLICIES:
        raise UsageError(f"unknown gate policy '{name}' (known: {', '.join(sorted(POLICIES))})")
    policy = POLICIES[name]
    kept = {} if args.policy else stored
    min_speedup = first_given(args.min_speedup, kept.get("min_speedup"), policy.min_speedup)
    if not 0 < min_speedup < 10:
        raise UsageError(f"--min-speedup {min_speedup:g} is not a speedup (like 1.0 or 0.9)")
    return {"policy": name, "min_speedup": min_speedup,
            "inconclusive": first_given(args.inconclusive, kept.get("inconclusive"), policy.inconclusive)}


def first_given(*values):
    return next(v for v in values if v is not None)


def positive_ints(text, option):
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UsageError(f"{option} wants positive integers separated by commas, not {text!r}")
    return values


def rate(text):
    if text in ("auto", "off"):
        return text
    return positive_ints(text, "--rate")[0]


def reproduce_command(s):
    cmd = ["python3", "-m", "pgo.bench", "--baseline", s["baseline"], "--candidate", s["candidate"],
           "--out", s["out"], "--workloads", ",".join(s["workloads"]),
           "--threads", ",".join(map(str, s["threads"]))]
    for name in ("time", "pairs", "max_pairs", "max_minutes", "warmup", "tables", "table_size",
                 "sysbench", "buffer_pool", "server_cpus", "client_cpus", "rate", "rate_fraction",
                 "rate_workload", "rate_threads", "latency_time", "interval"):
        value = s[name]
        if value is not None:     # max_minutes of a result measured before budgets existed
            cmd += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    cmd += [f"--server-option={option}" for option in s["server_options"]]
    cmd += [f"--candidate-handicap={option}" for option in s.get("candidate_handicap", ())]
    if s["callgrind"]:
        cmd += ["--callgrind", "--callgrind-events", str(s["callgrind_events"]),
                "--callgrind-workload", s["callgrind_workload"]]
        if s.get("training_counts"):     # results measured before it existed have none
            cmd += ["--training-counts", s["training_counts"]]
    cmd += ["--policy", s["policy"], "--min-speedup", f"{s['min_speedup']:g}",
            "--inconclusive", s["inconclusive"], "--fallover-retention", f"{s['fallover_retention']:g}"]
    return shlex.join(cmd)


def measure(args):
    from pgo.bench.runner import Session

    settings = settings_from(args)
    # Read before the benchmark, not after it: a wrong file must not cost its minutes.
    counts = training_counts(settings["training_counts"]) if settings["training_counts"] else None
    for tool in ("taskset", settings["sysbench"]):
        if shutil.which(tool) is None:
            raise InfraError(f"{tool} not found")
    out = Path(args.out)
    session = Session(settings, out)
    try:
        raw = session.measure()
    except InfraError as e:
        raise InfraError(f"{e} (logs in {session.logs}, work files kept in {session.work})") from None
    if counts and raw.get("callgrind") and "error" not in raw["callgrind"]:
        raw["callgrind"]["training_profile"] = counts["profile_id"]
        for top in raw["callgrind"]["B"]["top"]:
            top["training_entries"] = profile.entries_of(counts["functions"], top["function"])
    result = {"schema": 1, "settings": settings, "command": reproduce_command(settings), **raw}
    return publish(result, out)


def training_counts(path):
    try:
        return profile.read_training_counts(path)
    except PipelineError as e:
        raise UsageError(f"--training-counts {e}") from None


def rejudge(args):
    path = Path(args.from_result)
    try:
        result = json.loads(path.read_text())
        settings = result["settings"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"--from-result {path}: not a benchmark result ({e})") from None
    # Results measured before the gate was sequential had a fixed number of pairs.
    settings.setdefault("max_pairs", settings.get("pairs"))
    settings.setdefault("max_minutes", None)
    settings.update(gate_settings(args, settings))
    if args.fallover_retention is not None:
        settings["fallover_retention"] = args.fallover_retention
    result["command"] = reproduce_command(settings)
    return publish(result, Path(args.out))


def publish(result, out):
    """Analyse, judge, write result.json, report.md and the plots; return the exit status."""
    from pgo.bench import analysis, gate, plots, report

    s = result["settings"]
    result["analysis"] = analysis.analyse(result)
    stopped = (result.get("sequential") or {}).get("stopped")
    result["verdict"] = gate.evaluate(result["analysis"], s["min_speedup"], s["inconclusive"], stopped)
    out.mkdir(parents=True, exist_ok=True)
    figures = plots.draw_all(result, out)
    rendered = out / "report.md"
    rendered.write_text(report.render(result, figures))
    atomic.write(out / BENCH_RESULT, (json.dumps(result, indent=1, allow_nan=False) + "\n").encode())
    verdict = result["verdict"]
    for check in verdict["checks"]:
        print(lines.tagged("bench", f"{check['status']}: {check['text']}"), flush=True)
    print(lines.bench_verdict(verdict), flush=True)
    print(lines.tagged("bench", f"report: {rendered}"), flush=True)
    return 0 if verdict["publish"] else 1
