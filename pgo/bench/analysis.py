"""From raw runs to what the report says: paired ratios, scalability, response time, callgrind.

Pure functions of the result JSON, so a report can be re-rendered (and the gate re-judged
with other thresholds) without measuring again.
"""

import statistics

from pgo.bench import usl
from pgo.bench.stats import classify, geometric_mean, paired_ratio


def analyse(result):
    s = result["settings"]
    throughput, scalability = [], {}
    for workload in s["workloads"]:
        runs = [r for r in result["runs"] if r["workload"] == workload]
        by_build = {label: {} for label in ("A", "B")}
        for r in runs:
            by_build[r["build"]].setdefault(r["threads"], []).append(r["tps"])
        scalability[workload] = {label: usl.scalability(samples, s["fallover_retention"])
                                 for label, samples in by_build.items()}
        # Regressions count only where the baseline still scales: past its peak the comparison
        # measures how each server collapses, not how fast its code is. The peak is N* from the
        # fit, or the measured best concurrency when that lies further out (N* is an estimate
        # that can fall just short of a sweep point).
        baseline = scalability[workload]["A"]
        peak = baseline["peak_concurrency"]
        if peak is not None:
            peak = max(peak, baseline["observed_peak_threads"])
        for threads in sorted(by_build["A"]):
            pairs = {}
            for r in runs:
                if r["threads"] == threads:
                    pairs.setdefault(r["pair"], {})[r["build"]] = r["tps"]
            complete = [p for _, p in sorted(pairs.items()) if len(p) == 2]
            a, b = [p["A"] for p in complete], [p["B"] for p in complete]
            comparison = paired_ratio(a, b)
            throughput.append({"workload": workload, "threads": threads,
                               "tps_a": geometric_mean(a), "tps_b": geometric_mean(b),
                               **comparison, "verdict": classify(comparison),
                               "gated": peak is None or threads <= peak})
    return {
        "throughput": throughput,
        "scalability": scalability,
        "response_time": response_time(result["latency"]),
        "callgrind": instruction_profile(result["callgrind"]),
    }


def response_time(latency):
    if not latency:
        return None
    rows = []
    for percentile in (95, 99):
        series = {x["build"]: x for x in latency["series"] if x["percentile"] == percentile}
        row = {"percentile": percentile}
        for label, x in series.items():
            values = [i["latency_ms"] for i in x["intervals"]] or [x["overall_ms"]]
            row[label] = {"median_ms": statistics.median(values), "min_ms": min(values),
                          "max_ms": max(values), "overall_ms": x["overall_ms"], "tps": x["tps"],
                          # An arrival rate the server cannot sustain turns latency into
                          # queue length; say so rather than compare queues.
                          "kept_up": x["tps"] >= 0.95 * latency["rate"]}
        # Intervals of the two runs paired by position: both ran the same schedule.
        a = [i["latency_ms"] for i in series["A"]["intervals"]]
        b = [i["latency_ms"] for i in series["B"]["intervals"]]
        n = min(len(a), len(b))
        usable = n >= 2 and min(a[:n] + b[:n]) > 0
        row["ratio"] = paired_ratio(a[:n], b[:n]) if usable else None
        rows.append(row)
    return {"workload": latency["workload"], "threads": latency["threads"],
            "rate": latency["rate"], "interval": latency["interval"], "percentiles": rows}


def instruction_profile(profile):
    if not profile:
        return None
    if "error" in profile:
        return {"error": profile["error"]}
    rows = {}
    for counter in ("Ir", "I1mr", "ILmr"):
        per_tx = {label: profile[label][counter] / profile[label]["events"] for label in ("A", "B")}
        rows[counter] = {"A": per_tx["A"], "B": per_tx["B"],
                         "ratio": per_tx["B"] / per_tx["A"] if per_tx["A"] else None}
    for label in ("A", "B"):
        rows.setdefault("I1_miss_rate", {})[label] = profile[label]["I1mr"] / profile[label]["Ir"]
    rows["I1_miss_rate"]["ratio"] = rows["I1_miss_rate"]["B"] / rows["I1_miss_rate"]["A"]
    return {"workload": profile["A"]["workload"], "events": profile["A"]["events"],
            "per_transaction": rows,
            # Results measured before the cold share was recorded have neither.
            "cold_share": {label: profile[label].get("cold_share") for label in ("A", "B")},
            "top": {label: profile[label].get("top") for label in ("A", "B")},
            # The candidate's profile, when its top functions carry their entries in the training.
            "training_profile": profile.get("training_profile")}
