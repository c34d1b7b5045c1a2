"""Publish or not: the candidate must be faster single-threaded and never slower where it counts."""


def evaluate(analysis, min_speedup):
    """{"passed": bool, "checks": [{"ok": bool, "text": str}]} for an analysis."""
    checks = []
    workloads = dict.fromkeys(c["workload"] for c in analysis["throughput"])
    for workload in workloads:
        single = [c for c in analysis["throughput"] if c["workload"] == workload and c["threads"] == 1]
        if not single:
            checks.append({"ok": False, "text": f"{workload}: no single-thread measurement"})
            continue
        c = single[0]
        if c["low"] is None:
            checks.append({"ok": False, "text": f"{workload}: single-thread speedup "
                           f"{c['ratio']:.3f} has no confidence interval (one pair)"})
            continue
        ok = c["low"] >= min_speedup
        checks.append({"ok": ok, "text": f"{workload}: single-thread speedup {c['ratio']:.3f} "
                       f"(95% CI {c['low']:.3f}-{c['high']:.3f}), lower bound "
                       f"{'>=' if ok else '<'} minimum {min_speedup:g}"})
    slower = [c for c in analysis["throughput"] if c["verdict"] == "slower"]
    for c in slower:
        where = ("at or below the baseline's peak concurrency" if c["gated"] else
                 "beyond the baseline's peak concurrency, where servers fall over: not counted")
        checks.append({"ok": not c["gated"], "text": f"{c['workload']} N={c['threads']}: candidate "
                       f"significantly slower, {c['ratio']:.3f} (95% CI {c['low']:.3f}-"
                       f"{c['high']:.3f}), {where}"})
    if not any(c["gated"] for c in slower):
        checks.append({"ok": True, "text": "no significant regression up to the baseline's "
                       "peak concurrency"})
    return {"passed": all(c["ok"] for c in checks), "min_speedup": min_speedup, "checks": checks}
