"""Publish or not: the candidate must be faster single-threaded and never slower where it counts.

The headline is the single-thread throughput of the read-only workloads: there the server runs
the code a compiler lays out, one client at a time, so the PGO effect (fewer instruction-cache
misses) shows. Writes spend much of their time in InnoDB's redo log and background flushing,
which a compiler barely changes, and vary more; they, and every other concurrency, are gated
only against a significant regression up to the baseline's peak concurrency N*.

A single-thread speedup is "shown" when its 95% interval lies at or above the minimum,
"refuted" when it lies below, and "open" otherwise: then the gate is inconclusive, which
is not "slower", and the policy decides whether that blocks publishing.
"""

from pgo.bench.policy import PUBLISH_IF_AHEAD

SPEEDUP_WORKLOADS = ("oltp_point_select", "oltp_read_only", "select_random_points",
                     "select_random_ranges")
SHOWN, REFUTED, OPEN = "shown", "refuted", "open"
PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
NOT_GATED = "not gated"      # a check that is reported but cannot fail the gate


def speedup_state(comparison, min_speedup):
    if comparison["low"] is not None and comparison["low"] >= min_speedup:
        return SHOWN
    if comparison["high"] is not None and comparison["high"] < min_speedup:
        return REFUTED
    return OPEN


def speedup_text(c):
    if c["low"] is None:
        return f"{c['ratio']:.3f} (no interval: one pair)"
    return f"{c['ratio']:.3f} (95% CI {c['low']:.3f}-{c['high']:.3f}, {c['n']} pairs)"


def evaluate(analysis, min_speedup, inconclusive, stopped=None):
    """The verdict on an analysis: outcome (pass, fail or inconclusive), publish, summary, checks.

    stopped: {workload: why its single-thread pairs stopped} from the measurement, to say
    why an open speedup was left open.
    """
    stopped = stopped or {}
    checks, headline = [], []
    workloads = dict.fromkeys(c["workload"] for c in analysis["throughput"])
    for workload in [w for w in workloads if w in SPEEDUP_WORKLOADS]:
        single = [c for c in analysis["throughput"] if c["workload"] == workload and c["threads"] == 1]
        if not single:
            checks.append({"status": FAIL, "text": f"{workload}: no single-thread measurement"})
            continue
        c = single[0]
        state = speedup_state(c, min_speedup)
        headline.append((workload, c, state))
        text = f"{workload}: single-thread speedup {speedup_text(c)}"
        if state == SHOWN:
            checks.append({"status": PASS, "text": f"{text}, lower bound >= minimum {min_speedup:g}"})
        elif state == REFUTED:
            checks.append({"status": FAIL, "text": f"{text}, upper bound < minimum {min_speedup:g}"})
        else:
            why = f" (stopped: {stopped[workload]})" if workload in stopped else ""
            checks.append({"status": INCONCLUSIVE,
                           "text": f"{text}, interval spans the minimum {min_speedup:g}: not shown{why}"})
    if not headline and not checks:
        checks.append({"status": FAIL, "text": "no read-only workload measured: nothing shows the speedup "
                                               f"({', '.join(SPEEDUP_WORKLOADS)})"})
    slower = [c for c in analysis["throughput"] if c["verdict"] == "slower"]
    for c in slower:
        where = ("at or below the baseline's peak concurrency" if c["gated"] else
                 "beyond the baseline's peak concurrency, where servers fall over: not counted")
        checks.append({"status": FAIL if c["gated"] else NOT_GATED,
                       "text": f"{c['workload']} N={c['threads']}: candidate significantly slower, "
                               f"{speedup_text(c)}, {where}"})
    if not any(c["gated"] for c in slower):
        checks.append({"status": PASS, "text": "no significant regression up to the baseline's peak concurrency"})

    statuses = {check["status"] for check in checks}
    outcome = FAIL if FAIL in statuses else INCONCLUSIVE if INCONCLUSIVE in statuses else PASS
    ahead = all(c["ratio"] > 1 for _, c, state in headline if state == OPEN)
    publish = outcome == PASS or (outcome == INCONCLUSIVE and inconclusive == PUBLISH_IF_AHEAD and ahead)
    return {"outcome": outcome, "publish": publish, "min_speedup": min_speedup,
            "inconclusive": inconclusive, "summary": summary(outcome, checks, headline),
            "checks": checks}


def summary(outcome, checks, headline):
    """What the build summary says: the decision in words, then the speedups behind it."""
    speedups = ", ".join(f"{w} {speedup_text(c)}" for w, c, _ in headline)
    if outcome == PASS:
        return f"speedup shown: {speedups}"
    if outcome == INCONCLUSIVE:
        return f"speedup not shown: {speedups}"
    return "; ".join(check["text"] for check in checks if check["status"] == FAIL)
