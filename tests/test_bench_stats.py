"""Statistics, scalability fits and the gate of pgo.bench, on fixed and synthetic data."""

import math
import random

import pytest

from pgo.bench import analysis, gate, stats, usl

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


def test_faster_candidate_passes_and_a_high_minimum_fails_it():
    a = crafted(lambda n: 1.25)
    assert gate.evaluate(a, min_speedup=1.05)["passed"]
    verdict = gate.evaluate(a, min_speedup=1.3)
    assert not verdict["passed"]
    assert "lower bound < minimum 1.3" in verdict["checks"][0]["text"]


def test_slower_only_beyond_the_peak_is_not_a_regression():
    a = crafted(lambda n: 1.2 if n <= 16 else 0.5)
    baseline = a["scalability"]["oltp_read_only"]["A"]
    assert baseline["falls_over"] and 14 < baseline["peak_concurrency"] < 18
    beyond = [c for c in a["throughput"] if c["threads"] >= 32]
    assert all(c["verdict"] == "slower" and not c["gated"] for c in beyond)
    assert all(c["gated"] for c in a["throughput"] if c["threads"] <= 16)
    verdict = gate.evaluate(a, min_speedup=1.05)
    assert verdict["passed"], verdict
    assert any("not counted" in c["text"] for c in verdict["checks"])


def test_slower_below_the_peak_is_a_regression():
    verdict = gate.evaluate(crafted(lambda n: 0.9 if n == 4 else 1.2), min_speedup=1.05)
    assert not verdict["passed"]
    failed = [c["text"] for c in verdict["checks"] if not c["ok"]]
    assert failed == [failed[0]] and "N=4: candidate significantly slower" in failed[0]


def test_equal_builds_pass_a_low_minimum_only():
    a = crafted(lambda n: 1.0)
    assert all(c["verdict"] == "no significant difference" for c in a["throughput"])
    assert gate.evaluate(a, min_speedup=0.9)["passed"]
    assert not gate.evaluate(a, min_speedup=1.05)["passed"]


def test_every_workload_needs_a_single_thread_measurement():
    a = crafted(lambda n: 1.25, workloads=("oltp_point_select", "oltp_read_only"))
    a["throughput"] = [c for c in a["throughput"]
                       if not (c["workload"] == "oltp_point_select" and c["threads"] == 1)]
    verdict = gate.evaluate(a, min_speedup=1.05)
    assert not verdict["passed"]
    assert "oltp_point_select: no single-thread measurement" in [c["text"] for c in verdict["checks"]]
