"""Universal Scalability Law: where a server's throughput peaks and whether it falls over.

    X(N) = lambda * N / (1 + sigma * (N - 1) + kappa * N * (N - 1))

lambda is single-client throughput, sigma contention (queueing on shared resources), kappa
coherency (crosstalk that makes throughput fall as clients are added). The curve peaks at
N* = sqrt((1 - sigma) / kappa). Past N* the server "falls over": two builds compared there
mostly measure how each collapses, not how fast its code is.
"""

import math

from pgo.bench.stats import geometric_mean

# Three parameters need at least three distinct concurrencies.
MIN_CONCURRENCIES = 3


def throughput(n, lam, sigma, kappa):
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def peak_concurrency(sigma, kappa):
    """N*; math.inf when there is no coherency penalty (the curve never turns down)."""
    if kappa <= 0:
        return math.inf
    return math.sqrt(max(0.0, 1 - sigma) / kappa)


def fit(concurrency, observed):
    """Bounded least-squares USL fit; returns dict(lam, sigma, kappa, rms_rel_error) or None.

    Residuals are relative so that the few-client points (small throughput, where the PGO
    gain shows) weigh as much as the many-client ones.
    """
    import numpy as np
    from scipy.optimize import least_squares

    n = np.asarray(concurrency, dtype=float)
    x = np.asarray(observed, dtype=float)
    if len(set(concurrency)) < MIN_CONCURRENCIES:
        return None

    def residuals(p):
        return throughput(n, *p) / x - 1

    lowest = n == n.min()
    lam0 = float(np.mean(x[lowest] / n[lowest]))
    best = None
    # A few starting points: the problem is small and least_squares is local.
    for sigma0 in (0.0, 0.05, 0.3):
        for kappa0 in (0.0, 1e-4, 1e-2):
            result = least_squares(residuals, [lam0, sigma0, kappa0],
                                   bounds=([0.0, -1.0, 0.0], [np.inf, 1.0, np.inf]))
            if best is None or result.cost < best.cost:
                best = result
    lam, sigma, kappa = (float(v) for v in best.x)
    return {
        "lam": lam,
        "sigma": sigma,
        "kappa": kappa,
        "rms_rel_error": float(np.sqrt(np.mean(best.fun ** 2))),
    }


def scalability(samples, fallover_retention):
    """Scalability summary of one build from {concurrency: [throughput, ...]}.

    retention = X(N_max) / X(peak observed), from the measured means; below
    fallover_retention the build "falls over". peak_concurrency is N* from the fit
    (None when the fit says unbounded or there are too few concurrencies to fit).
    """
    means = {n: geometric_mean(values) for n, values in sorted(samples.items())}
    peak_n = max(means, key=means.get)
    retention = means[max(means)] / means[peak_n]
    points = [(n, v) for n, values in samples.items() for v in values]
    usl = fit([n for n, _ in points], [v for _, v in points])
    peak = peak_concurrency(usl["sigma"], usl["kappa"]) if usl else math.inf
    return {
        "means": {str(n): m for n, m in means.items()},
        "usl": usl,
        "peak_concurrency": None if math.isinf(peak) else peak,
        "superlinear": bool(usl and usl["sigma"] < 0),
        "observed_peak_threads": peak_n,
        "retention": retention,
        "falls_over": retention < fallover_retention,
    }
