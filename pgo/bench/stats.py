"""Paired comparison of two builds: ratio B/A with a confidence interval, and a sign test.

Runs are paired (A and B measured back to back, order alternating), so slow drift of the
machine cancels inside each pair. Throughput is compared as a ratio, and ratios average on
the log scale: a t-interval on the per-pair log ratios, turned back into a ratio interval.
"""

import math
import statistics

# With fewer pairs a two-sided sign test cannot reach p < 0.05 (2 * 0.5**5 = 0.0625),
# so printing its p-value would only suggest evidence that cannot exist.
MIN_PAIRS_FOR_SIGN_TEST = 6


def geometric_mean(values):
    return math.exp(statistics.fmean(math.log(v) for v in values))


def t_quantile(probability, dof):
    from scipy.stats import t
    return float(t.ppf(probability, dof))


def sign_test_p(differences):
    """Exact two-sided sign test that the median difference is zero (ties dropped)."""
    positive = sum(1 for d in differences if d > 0)
    negative = sum(1 for d in differences if d < 0)
    n = positive + negative
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(positive, negative) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def paired_ratio(baseline, candidate, confidence=0.95):
    """Ratio candidate/baseline over paired measurements, with its confidence interval.

    Returns ratio (geometric mean of the pair ratios), low and high (None when fewer than
    two pairs: one pair says nothing about the spread), n, and p_sign (None when there are
    too few pairs for a sign test).
    """
    if len(baseline) != len(candidate) or not baseline:
        raise ValueError("paired_ratio needs the same, non-zero number of values on both sides")
    logs = [math.log(b / a) for a, b in zip(baseline, candidate)]
    n = len(logs)
    mean = statistics.fmean(logs)
    low = high = None
    if n >= 2:
        half_width = t_quantile((1 + confidence) / 2, n - 1) * statistics.stdev(logs) / math.sqrt(n)
        low, high = math.exp(mean - half_width), math.exp(mean + half_width)
    return {
        "n": n,
        "ratio": math.exp(mean),
        "low": low,
        "high": high,
        "confidence": confidence,
        "p_sign": sign_test_p(logs) if n >= MIN_PAIRS_FOR_SIGN_TEST else None,
    }


def classify(comparison):
    """'faster', 'slower' or 'no significant difference' for a paired_ratio result."""
    if comparison["low"] is not None and comparison["low"] > 1:
        return "faster"
    if comparison["high"] is not None and comparison["high"] < 1:
        return "slower"
    return "no significant difference"
