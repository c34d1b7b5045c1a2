"""Statistics, scalability fits and the gate of pgo.bench, on fixed and synthetic data."""

import math
import random

import pytest

from pgo.bench import analysis, gate, sequential, stats, usl
from pgo.bench.policy import BLOCK, CANARY, POLICIES, PUBLISH_IF_AHEAD, RELEASE

THREADS = [1, 2, 4, 8, 16, 32, 64, 128]


# --- paired ratios ---------------------------------------------------------------------------

def test_paired_ratio_matches_a_hand_computed_t_interval():
    a = [100.0, 200.0, 50.0, 400.0]
    b = [110.0, 240.0, 52.5, 460.0]             # ratios 1.10, 1.20, 1.05, 1.15
    logs = [math.log(r) for r in (1.10, 1.20, 1.05, 1.15)]
    mean = sum(logs) / 4
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 3)
    half = 3.182446305284263 * sd / 2           # t(0.975, 3 dof) * sd / sqrt(4)
    c = stats.paired_ratio(a, b)
    assert c["n"] == 4
    assert c["ratio"] == pytest.approx(math.exp(mean))
    assert c["low"] == pytest.approx(math.exp(mean - half))
    assert c["high"] == pytest.approx(math.exp(mean + half))
    assert 1.0 < c["low"] < c["ratio"] < c["high"]
    assert stats.classify(c) == "faster"
    assert c["p_sign"] is None                  # four pairs are too few for a sign test


def test_ratio_is_independent_of_the_scale_of_each_pair():
    c = stats.paired_ratio([1.0, 1000.0, 1e6], [0.9, 900.0, 9e5])
    assert c["ratio"] == pytest.approx(0.9)
    assert c["low"] == pytest.approx(0.9) and c["high"] == pytest.approx(0.9)
    assert stats.classify(c) == "slower"


def test_equal_builds_are_no_significant_difference():
    rng = random.Random(3)
    a = [1000 * rng.uniform(0.95, 1.05) for _ in range(8)]
    b = [x * rng.uniform(0.97, 1.03) for x in a]
    c = stats.paired_ratio(a, b)
    assert c["low"] < 1 < c["high"]
    assert stats.classify(c) == "no significant difference"
    assert c["p_sign"] is not None and c["p_sign"] > 0.05


def test_one_pair_has_no_interval_and_is_never_significant():
    c = stats.paired_ratio([100.0], [150.0])
    assert c["ratio"] == pytest.approx(1.5)
    assert c["low"] is None and c["high"] is None
    assert stats.classify(c) == "no significant difference"


def test_sign_test_exact_values():
    assert stats.sign_test_p([1] * 6) == pytest.approx(2 / 64)
    assert stats.sign_test_p([1] * 5 + [-1]) == pytest.approx(2 * 7 / 64)
    assert stats.sign_test_p([1, -1, 0, 0]) == pytest.approx(1.0)
    c = stats.paired_ratio([100.0] * 6, [101, 102, 103, 104, 105, 106])
    assert c["p_sign"] == pytest.approx(2 / 64)


def test_mismatched_pairs_are_refused():
    with pytest.raises(ValueError):
        stats.paired_ratio([1.0, 2.0], [1.0])


# --- Universal Scalability Law ---------------------------------------------------------------

def curve(lam, sigma, kappa, noise=0.0, seed=1, pairs=3):
    rng = random.Random(seed)
    return {n: [usl.throughput(n, lam, sigma, kappa) * rng.uniform(1 - noise, 1 + noise)
                for _ in range(pairs)] for n in THREADS}


def test_usl_fit_recovers_known_parameters():
    s = usl.scalability(curve(1000, 0.05, 0.0005, noise=0.01), fallover_retention=0.7)
    fit = s["usl"]
    assert fit["lam"] == pytest.approx(1000, rel=0.02)
    assert fit["sigma"] == pytest.approx(0.05, abs=0.01)
    assert fit["kappa"] == pytest.approx(0.0005, rel=0.15)
    assert s["peak_concurrency"] == pytest.approx(math.sqrt(0.95 / 0.0005), rel=0.1)
    assert not s["superlinear"]


def test_exact_data_is_fitted_exactly():
    fit = usl.scalability(curve(250, 0.1, 0.002), 0.7)["usl"]
    assert (fit["lam"], fit["sigma"], fit["kappa"]) == pytest.approx((250, 0.1, 0.002), rel=1e-4)
    assert fit["rms_rel_error"] < 1e-6


def test_superlinear_curve_is_flagged():
    s = usl.scalability(curve(1000, -0.02, 0.0001, noise=0.005), 0.7)
    assert s["usl"]["sigma"] < 0
    assert s["superlinear"]


def test_fall_over_curve_has_low_retention():
    s = usl.scalability(curve(500, 0.1, 0.01, noise=0.01), fallover_retention=0.7)
    assert s["peak_concurrency"] == pytest.approx(math.sqrt(0.9 / 0.01), rel=0.15)
    assert s["observed_peak_threads"] == 8
    assert s["retention"] < 0.3
    assert s["falls_over"]
    assert not usl.scalability(curve(500, 0.1, 0.01), fallover_retention=0.1)["falls_over"]


def test_curve_without_coherency_penalty_does_not_fall_over():
    assert usl.peak_concurrency(0.1, 0.0) == math.inf
    s = usl.scalability(curve(1000, 0.1, 0.0), 0.7)
    assert s["retention"] == pytest.approx(1.0)
    assert not s["falls_over"]
    assert s["peak_concurrency"] is None or s["peak_concurrency"] > 10 * max(THREADS)


def test_two_concurrencies_are_too_few_to_fit():
    s = usl.scalability({1: [100.0, 101.0], 2: [190.0, 195.0]}, 0.7)
    assert s["usl"] is None and s["peak_concurrency"] is None
    assert s["retention"] == pytest.approx(1.0)


# --- gate on crafted results -----------------------------------------------------------------

def crafted(candidate_factor, workloads=("oltp_read_only",), threads=THREADS, pairs=4, seed=5):
    """A result whose baseline follows a USL curve peaking near N=16 and falling over past it;
    candidate_factor(n) scales the candidate's throughput at concurrency n."""
    rng = random.Random(seed)
    runs = []
    for workload in workloads:
        for n in threads:
            for pair in range(1, pairs + 1):
                drift = rng.uniform(0.97, 1.03)
                for build, factor in (("A", 1.0), ("B", candidate_factor(n))):
                    tps = usl.throughput(n, 800, 0.05, 0.004) * factor * drift
                    runs.append({"workload": workload, "threads": n, "pair": pair, "build": build,
                                 "tps": tps * rng.uniform(0.99, 1.01)})
    result = {"settings": {"workloads": list(workloads), "fallover_retention": 0.7},
              "runs": runs, "latency": None, "callgrind": None}
    return analysis.analyse(result)


def judge(a, min_speedup, inconclusive=BLOCK, stopped=None):
    return gate.evaluate(a, min_speedup, inconclusive, stopped)


def failed(verdict):
    return [c["text"] for c in verdict["checks"] if c["status"] == gate.FAIL]


def test_faster_candidate_passes_and_a_high_minimum_refutes_it():
    a = crafted(lambda n: 1.25)
    verdict = judge(a, 1.05)
    assert (verdict["outcome"], verdict["publish"]) == ("pass", True)
    assert verdict["summary"].startswith("speedup shown: oltp_read_only 1.2")
    verdict = judge(a, 1.3, PUBLISH_IF_AHEAD)
    assert (verdict["outcome"], verdict["publish"]) == ("fail", False)
    assert "upper bound < minimum 1.3" in failed(verdict)[0]


def test_slower_only_beyond_the_peak_is_not_a_regression():
    a = crafted(lambda n: 1.2 if n <= 16 else 0.5)
    baseline = a["scalability"]["oltp_read_only"]["A"]
    assert baseline["falls_over"] and 14 < baseline["peak_concurrency"] < 18
    beyond = [c for c in a["throughput"] if c["threads"] >= 32]
    assert all(c["verdict"] == "slower" and not c["gated"] for c in beyond)
    assert all(c["gated"] for c in a["throughput"] if c["threads"] <= 16)
    verdict = judge(a, 1.05)
    assert verdict["outcome"] == "pass", verdict
    reported = [c["text"] for c in verdict["checks"] if c["status"] == gate.NOT_GATED]
    assert len(reported) == len(beyond) and all("not counted" in text for text in reported)


def test_slower_below_the_peak_is_a_regression_even_with_the_speedup_shown():
    verdict = judge(crafted(lambda n: 0.9 if n == 4 else 1.2), 1.05, PUBLISH_IF_AHEAD)
    assert (verdict["outcome"], verdict["publish"]) == ("fail", False)
    assert len(failed(verdict)) == 1 and "N=4: candidate significantly slower" in failed(verdict)[0]
    assert verdict["summary"] == failed(verdict)[0]


def test_read_write_is_gated_only_against_regression():
    workloads = ("oltp_read_only", "oltp_read_write")
    # Equal on read_write, faster on read_only: read_write's open interval decides nothing.
    rng = random.Random(9)
    a = crafted(lambda n: 1.25, workloads=workloads)
    for c in a["throughput"]:
        if c["workload"] == "oltp_read_write":
            c.update(ratio=rng.uniform(0.98, 1.02), low=0.95, high=1.05, verdict="no significant difference")
    verdict = judge(a, 1.0)
    assert verdict["outcome"] == "pass"
    assert not any(c["text"].startswith("oltp_read_write") for c in verdict["checks"])
    # Significantly slower on read_write at N=4 (below N*): a regression.
    slow = next(c for c in a["throughput"] if c["workload"] == "oltp_read_write" and c["threads"] == 4)
    slow.update(ratio=0.9, low=0.85, high=0.95, verdict="slower")
    assert failed(judge(a, 1.0)) == ["oltp_read_write N=4: candidate significantly slower, "
                                     "0.900 (95% CI 0.850-0.950, 4 pairs), at or below the baseline's peak concurrency"]


def equal_builds(seed):
    """Equal builds: the candidate's single-thread interval spans 1."""
    return crafted(lambda n: 1.0, seed=seed)


def test_equal_builds_are_inconclusive_at_a_minimum_of_one():
    a = equal_builds(seed=5)
    single = next(c for c in a["throughput"] if c["threads"] == 1)
    assert single["low"] < 1 < single["high"]
    verdict = judge(a, 1.0, stopped={"oltp_read_only": sequential.MAX_PAIRS})
    assert verdict["outcome"] == "inconclusive" and not verdict["publish"]
    assert "interval spans the minimum 1: not shown (stopped: max pairs)" in verdict["checks"][0]["text"]
    assert verdict["summary"].startswith("speedup not shown: oltp_read_only")
    # Well below the interval the same data shows the speedup; well above, refutes it.
    assert judge(a, 0.9)["outcome"] == "pass"
    assert judge(a, 1.05)["outcome"] == "fail"


def test_an_inconclusive_gate_publishes_only_when_ahead_and_the_policy_allows():
    ahead = behind = None
    for seed in range(40):
        single = next(c for c in equal_builds(seed)["throughput"] if c["threads"] == 1)
        if single["low"] < 1 < single["high"]:
            if single["ratio"] > 1 and ahead is None:
                ahead = seed
            if single["ratio"] < 1 and behind is None:
                behind = seed
    assert ahead is not None and behind is not None
    assert judge(equal_builds(ahead), 1.0, PUBLISH_IF_AHEAD)["publish"]
    assert not judge(equal_builds(ahead), 1.0, BLOCK)["publish"]
    assert not judge(equal_builds(behind), 1.0, PUBLISH_IF_AHEAD)["publish"]
    assert all(judge(equal_builds(s), 1.0, PUBLISH_IF_AHEAD)["outcome"] == "inconclusive"
               for s in (ahead, behind))


def test_every_read_only_workload_needs_a_single_thread_measurement():
    a = crafted(lambda n: 1.25, workloads=("oltp_point_select", "oltp_read_only"))
    a["throughput"] = [c for c in a["throughput"]
                       if not (c["workload"] == "oltp_point_select" and c["threads"] == 1)]
    verdict = judge(a, 1.05)
    assert verdict["outcome"] == "fail"
    assert "oltp_point_select: no single-thread measurement" in failed(verdict)


def test_without_a_read_only_workload_nothing_shows_the_speedup():
    verdict = judge(crafted(lambda n: 1.25, workloads=("oltp_write_only",)), 1.0)
    assert verdict["outcome"] == "fail" and "no read-only workload measured" in failed(verdict)[0]


# --- the sequential gate: pairs until the interval clears the minimum, within a budget ----------

class Pairs:
    """Pairs measured from fixed lists of candidate/baseline ratios, one list per workload,
    on a clock that a pair advances by pair_seconds."""

    def __init__(self, ratios, pair_seconds=25.0):
        self.ratios = ratios
        self.pair_seconds = pair_seconds
        self.now = 0.0
        self.measured = []

    def clock(self):
        return self.now

    def first(self, count):
        return {w: ([1000.0] * count, [1000.0 * r for r in ratios[:count]]) for w, ratios in self.ratios.items()}

    def measure(self, workload, number):
        self.measured.append((workload, number))
        self.now += self.pair_seconds
        return 1000.0, 1000.0 * self.ratios[workload][number - 1]

    def extend(self, pairs, min_speedup=1.0, max_pairs=20, deadline=3600.0):
        return sequential.extend(pairs, self.measure, min_speedup, max_pairs, deadline, clock=self.clock)


# A PGO gain of about 4% on a machine whose pairs vary by about 5%: three pairs cannot show it.
SMALL_GAIN = [1.10, 0.98, 1.01, 1.09, 1.04, 0.99, 1.08, 1.03, 1.06, 1.02, 1.05, 1.00] + [1.04] * 8
# Equal builds: the interval keeps spanning 1.
NO_GAIN = [1.05, 0.95, 1.02, 0.98, 1.04, 0.96, 1.01, 0.99] * 5
CLEAR_GAIN = [1.21, 1.18, 1.24] + [1.2] * 20
CLEAR_LOSS = [0.81, 0.78, 0.83] + [0.8] * 20


def test_a_clear_result_needs_no_more_pairs():
    runs = Pairs({"oltp_point_select": CLEAR_GAIN, "oltp_read_only": CLEAR_LOSS})
    pairs = runs.first(3)
    assert runs.extend(pairs) == {"oltp_point_select": sequential.DECIDED, "oltp_read_only": sequential.DECIDED}
    assert runs.measured == []


def test_pairs_are_added_until_a_small_gain_is_shown():
    runs = Pairs({"oltp_read_only": SMALL_GAIN})
    pairs = runs.first(3)
    assert stats.paired_ratio(*pairs["oltp_read_only"])["low"] < 1     # three pairs: undecided
    assert runs.extend(pairs) == {"oltp_read_only": sequential.DECIDED}
    n = len(pairs["oltp_read_only"][0])
    assert 3 < n < 20 and runs.measured == [("oltp_read_only", k) for k in range(4, n + 1)]
    shown = stats.paired_ratio(*pairs["oltp_read_only"])
    assert shown["low"] >= 1.0
    # It stopped at the first pair that showed it.
    assert stats.paired_ratio(*(side[:-1] for side in pairs["oltp_read_only"]))["low"] < 1.0


def test_equal_builds_stop_at_the_maximum_pairs_and_are_inconclusive():
    runs = Pairs({"oltp_read_only": NO_GAIN, "oltp_point_select": CLEAR_GAIN})
    pairs = runs.first(3)
    stopped = runs.extend(pairs, max_pairs=12)
    assert stopped == {"oltp_read_only": sequential.MAX_PAIRS, "oltp_point_select": sequential.DECIDED}
    assert len(pairs["oltp_read_only"][0]) == 12 and len(pairs["oltp_point_select"][0]) == 3
    c = stats.paired_ratio(*pairs["oltp_read_only"])
    assert c["low"] < 1 < c["high"] and gate.speedup_state(c, 1.0) == gate.OPEN


def test_the_time_budget_stops_the_pairs():
    runs = Pairs({"oltp_point_select": NO_GAIN, "oltp_read_only": NO_GAIN}, pair_seconds=25)
    pairs = runs.first(3)
    # 110 s: four pairs fit (the first pair starts with no duration known, the fifth would end
    # at 125 s); both workloads are left open.
    stopped = runs.extend(pairs, deadline=110.0)
    assert stopped == {"oltp_point_select": sequential.MAX_MINUTES, "oltp_read_only": sequential.MAX_MINUTES}
    assert runs.measured == [("oltp_point_select", 4), ("oltp_read_only", 4),
                             ("oltp_point_select", 5), ("oltp_read_only", 5)]
    assert runs.now <= 110.0


def test_the_pair_that_decides_counts_even_when_the_time_is_up():
    runs = Pairs({"oltp_point_select": [1.10, 1.02, 1.06, 1.06], "oltp_read_only": NO_GAIN}, pair_seconds=25)
    pairs = runs.first(3)
    # One pair fits in 30 s: point_select's fourth, which shows its gain.
    assert runs.extend(pairs, deadline=30.0) == {"oltp_point_select": sequential.DECIDED,
                                                 "oltp_read_only": sequential.MAX_MINUTES}
    assert runs.measured == [("oltp_point_select", 4)]


# --- the policies ------------------------------------------------------------------------------

def test_policies_are_consistent():
    assert POLICIES == {"release": RELEASE, "canary": CANARY}
    for policy in POLICIES.values():
        assert 2 <= policy.min_pairs <= policy.max_pairs and policy.max_minutes > 0
        assert policy.inconclusive in (BLOCK, PUBLISH_IF_AHEAD)
    assert RELEASE.min_speedup == 1.0 and RELEASE.inconclusive == PUBLISH_IF_AHEAD
    assert CANARY.min_speedup < 1 and CANARY.inconclusive == BLOCK
