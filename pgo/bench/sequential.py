"""When to stop measuring: add single-thread pairs until the gate can decide or its budget is spent.

Testing after every pair and stopping at the first clear interval makes a 95% interval
somewhat optimistic (repeated looks); the gate accepts that for a bounded number of looks,
because the alternative, a fixed count, either costs the maximum every time or, as three
pairs did in issue 14, decides nothing. Pairs stop once the threshold question is answered:
a small single-thread regression that more pairs would make significant is not sought.
"""

import time

from pgo.bench.gate import OPEN, speedup_state
from pgo.bench.stats import paired_ratio

DECIDED = "decided"
MAX_PAIRS = "max pairs"
MAX_MINUTES = "max minutes"


def extend(pairs, measure_pair, min_speedup, max_pairs, deadline, clock=time.monotonic,
           note=lambda line: None):
    """Add pairs, one workload after another, to each open single-thread comparison.

    pairs: {workload: ([baseline...], [candidate...])}, the pairs measured so far; new pairs
    are appended. measure_pair(workload, number) measures pair `number` and returns
    (baseline, candidate). No pair starts when the last one's duration would end it after
    deadline (a clock() value). Returns {workload: DECIDED, MAX_PAIRS or MAX_MINUTES}.
    """
    stopped = {}
    pair_seconds = 0.0
    out_of_time = False
    while True:
        for workload, (a, b) in pairs.items():
            if workload in stopped:
                continue
            comparison = paired_ratio(a, b)
            if speedup_state(comparison, min_speedup) != OPEN:
                stopped[workload] = DECIDED
            elif len(a) >= max_pairs:
                stopped[workload] = MAX_PAIRS
            elif out_of_time:
                stopped[workload] = MAX_MINUTES
        open_workloads = [w for w in pairs if w not in stopped]
        if not open_workloads:
            return {w: stopped[w] for w in pairs}
        for workload in open_workloads:
            if clock() + pair_seconds > deadline:
                out_of_time = True
                break
            a, b = pairs[workload]
            started = clock()
            baseline, candidate = measure_pair(workload, len(a) + 1)
            pair_seconds = clock() - started
            a.append(baseline)
            b.append(candidate)
            c = paired_ratio(a, b)
            if c["low"] is not None:
                note(f"{workload} N=1 after {c['n']} pairs: {c['ratio']:.3f} "
                     f"(95% CI {c['low']:.3f}-{c['high']:.3f})")
