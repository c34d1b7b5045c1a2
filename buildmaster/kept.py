"""What a build keeps of its steps' records (pgo/base/protocol.py) as build properties, read from the record, never
from a summary's text: the plan its later steps run or skip by (buildmaster/factories.py), and what the release
dashboard (buildmaster/dashboard.py) shows of it."""

from collections.abc import Callable, Mapping
from typing import Any

from pgo.base.lines import instrumented_share
from pgo.base.protocol import PhaseName


def kept_profile(record: Mapping[str, Any]) -> dict[str, Any]:
    """Of the profile check (profile-check.json): the profile, how many objects it trained, its quality."""
    quality = record.get("quality") or {}
    return {"id": record["profile_id"], "trained": record["build_objects_with_profile"],
            "objects": record["build_objects"], "hot_share": quality.get("hot_share"),
            "runs": quality.get("runs")}


def kept_profile_use(record: Mapping[str, Any]) -> dict[str, Any]:
    """Of the optimised build's proof (profile-use.json): how much of the hot code got the profile."""
    return {"hot_coverage": record["hot_coverage"], "hot_objects": record["hot_objects"],
            "instrumented": instrumented_share(record), "mismatches": record["coverage_mismatch"],
            "stale": bool(record.get("stale"))}


def kept_tests(record: Mapping[str, Any]) -> dict[str, Any]:
    """Of a test run (results.json): its counts, flaky tests and time."""
    return {"set": record["set"], **record["counts"], "flaky": list(record.get("flaky", [])),
            "minutes": round(record["seconds"] / 60, 1)}


def kept_test_verdict(record: Mapping[str, Any]) -> dict[str, Any]:
    """Of the test verdict (verdict.json): whether it passed, the failures of the optimised build alone."""
    return {"passed": record["passed"], "pgo_only": list(record.get("build_only_failures", [])),
            "environment": list(record.get("environment_failures", []))}


def kept_gate(record: Mapping[str, Any]) -> dict[str, Any]:
    """Of the benchmark (its result.json): the gate's decision and the gated single-thread ratios."""
    verdict = record["verdict"]
    gated = [{"workload": r["workload"], "ratio": r["ratio"], "low": r["low"], "high": r["high"], "pairs": r["n"]}
             for r in record.get("analysis", {}).get("throughput", []) if r.get("threads") == 1 and r.get("gated")]
    return {"outcome": verdict["outcome"], "publish": verdict["publish"], "speedups": gated}


def kept_baseline(record: Mapping[str, Any]) -> dict[str, Any]:
    """Of the baseline step (baseline.json): the distribution's packages (their version) or the plain build,
    and why."""
    if record["kind"] == "distribution":
        return {"kind": "distribution", "source": record["source"], "version": record["version"],
                "server_version": record["server_version"]}
    return {"kind": "plain", "why": record["why"]}


def kept_plan(record: Mapping[str, Any]) -> dict[str, Any]:
    """Of the source phase's plan (plan.json): the configuration resolved once, on the worker."""
    return {"config": record["config"], "product": record["product"], "phases": list(record["phases"])}


# The build property the release's later steps go by: whether the plain build is its baseline.
BASELINE_PROPERTY = "baseline_used"

# step name: (build property, what of the step's record it keeps)
KEPT: dict[str, tuple[str, Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    PhaseName.SOURCE: ("plan", kept_plan),
    "baseline": (BASELINE_PROPERTY, kept_baseline),
    "baseline-source": ("baseline_plan", kept_plan),
    PhaseName.CHECK: ("profile_check", kept_profile),
    PhaseName.OPTIMIZED: ("profile_use", kept_profile_use),
    PhaseName.TEST: ("test_counts", kept_tests),
    "baseline-test": ("baseline_test_counts", kept_tests),
    "test-verdict": ("test_verdict", kept_test_verdict),
    "benchmark": ("gate", kept_gate),
}


def keep(step_name: str) -> dict[str, Any]:
    """The keep= argument of a step (buildsteps.PgoCommand) for what is kept of its record."""
    return {"keep": KEPT[step_name]} if step_name in KEPT else {}
