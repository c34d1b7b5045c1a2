"""PNG figures: throughput with the fitted USL curves, the paired ratios, response-time stability."""

COLORS = {"A": "tab:blue", "B": "tab:orange"}
NAMES = {"A": "A baseline", "B": "B candidate"}


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def grid(plt, count):
    columns = min(3, count)
    rows = -(-count // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4.2 * rows), squeeze=False)
    for extra in axes.flat[count:]:
        extra.set_visible(False)
    return fig, list(axes.flat)


def throughput(result, path):
    import numpy as np

    from pgo.bench import usl

    plt = pyplot()
    workloads = result["settings"]["workloads"]
    fig, axes = grid(plt, len(workloads))
    for ax, workload in zip(axes, workloads):
        runs = [r for r in result["runs"] if r["workload"] == workload]
        top = max(r["threads"] for r in runs)
        for label in ("A", "B"):
            mine = [r for r in runs if r["build"] == label]
            ax.scatter([r["threads"] for r in mine], [r["tps"] for r in mine], s=12, alpha=0.45,
                       color=COLORS[label])
            scal = result["analysis"]["scalability"][workload][label]
            means = sorted((int(n), m) for n, m in scal["means"].items())
            ax.plot(*zip(*means), "o", color=COLORS[label], label=NAMES[label])
            fit = scal["usl"]
            if fit:
                n = np.geomspace(1, top, 200)
                ax.plot(n, usl.throughput(n, fit["lam"], fit["sigma"], fit["kappa"]), "--",
                        color=COLORS[label], label=f"USL fit {label}")
            peak = scal["peak_concurrency"]
            if peak is not None and peak <= top:
                ax.axvline(peak, color=COLORS[label], linestyle=":", linewidth=1)
                ax.annotate(f"N*={peak:.0f}", (peak, 0), xycoords=("data", "axes fraction"),
                            xytext=(3, 4 + 12 * (label == "B")), textcoords="offset points",
                            color=COLORS[label], fontsize=8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("client threads (N)")
        ax.set_ylabel("transactions/s")
        ax.set_title(workload)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Throughput vs concurrency, with Universal Scalability Law fits")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def speedup(result, path):
    plt = pyplot()
    workloads = result["settings"]["workloads"]
    fig, axes = grid(plt, len(workloads))
    for ax, workload in zip(axes, workloads):
        cells = [c for c in result["analysis"]["throughput"] if c["workload"] == workload]
        for c in cells:
            low, high = c["low"] or c["ratio"], c["high"] or c["ratio"]
            ax.errorbar([c["threads"]], [c["ratio"]], yerr=[[c["ratio"] - low], [high - c["ratio"]]],
                        fmt="o" if c["gated"] else "x", color="black" if c["gated"] else "grey",
                        capsize=4)
        ax.axhline(1.0, color="grey", linewidth=1)
        ax.axhline(result["verdict"]["min_speedup"], color="tab:red", linestyle="--", linewidth=1,
                   label=f"minimum single-thread speedup {result['verdict']['min_speedup']:g}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("client threads (N); x = beyond the baseline's N*, not gated")
        ax.set_ylabel("throughput B/A (95% CI)")
        ax.set_title(workload)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Paired throughput ratio candidate/baseline")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def latency(result, path):
    plt = pyplot()
    latency = result["latency"]
    fig, axes = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for ax, percentile in zip(axes, (95, 99)):
        for x in sorted(latency["series"], key=lambda x: x["build"]):
            if x["percentile"] == percentile:
                ax.plot([i["t"] for i in x["intervals"]], [i["latency_ms"] for i in x["intervals"]],
                        "o-", color=COLORS[x["build"]], label=NAMES[x["build"]])
        ax.set_ylabel(f"p{percentile} latency (ms)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[-1].set_xlabel(f"time (s), one point per {latency['interval']} s interval")
    fig.suptitle(f"Response time at {latency['rate']} tx/s (Poisson arrivals), "
                 f"{latency['workload']}, {latency['threads']} threads")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def draw_all(result, out):
    """Draw every figure the result has data for; returns {name: file name}."""
    figures = {"throughput": "throughput.png", "speedup": "speedup.png"}
    throughput(result, out / figures["throughput"])
    speedup(result, out / figures["speedup"])
    if result["latency"]:
        figures["latency"] = "latency.png"
        latency(result, out / figures["latency"])
    return figures
