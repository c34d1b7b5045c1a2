"""The Markdown report: every ratio with its interval, the verdict, and how to reproduce it."""

from pgo.bench.stats import MIN_PAIRS_FOR_SIGN_TEST


def describe_machine(m):
    """One phrase for a report: 'Intel(R) Xeon(R) Processor (family 6, model 167), 2 CPUs'."""
    if not m:
        return "not recorded (a result from before the machine was recorded)"
    ids = f" (family {m['family']}, model {m['model']})" if m.get("family") else ""
    return f"{m['cpu']}{ids}, {m['cpus']} CPUs"


def interval(c):
    if c is None:
        return "n/a"
    if c["low"] is None:
        return f"{c['ratio']:.3f} (no interval: one pair)"
    return f"{c['ratio']:.3f} [{c['low']:.3f}, {c['high']:.3f}]"


def extension(result):
    """How the single-thread points were extended, for results measured sequentially."""
    s, sequential = result["settings"], result.get("sequential")
    if not sequential:
        return ""
    stopped = ", ".join(f"{w} {why}" for w, why in sequential["stopped"].items())
    return (f"; then single-thread pairs of the read-only workloads up to {s['max_pairs']}, none "
            f"started after {s['max_minutes']:g} minutes (stopped: {stopped}; "
            f"{sequential['minutes']:g} minutes in all)")


def number(value, digits=1):
    return "n/a" if value is None else f"{value:,.{digits}f}"


def render(result, figures):
    s, a, verdict = result["settings"], result["analysis"], result["verdict"]
    lines = [
        "# Benchmark: candidate (B) vs baseline (A)",
        "",
        f"**Verdict: {verdict['outcome'].upper()}** "
        f"({'published' if verdict['publish'] else 'not published'}): {verdict['summary']}",
        "",
        f"Gate policy `{s['policy']}`: the single-thread speedup of the read-only workloads must "
        f"have its 95% confidence interval at or above {verdict['min_speedup']:g}; an interval "
        f"that spans it is inconclusive, and then the gate does `{verdict['inconclusive']}`. "
        "Every other point fails the gate only when the candidate is significantly slower at or "
        "below the baseline's peak concurrency.",
        "",
        *[f"- {c['status']}: {c['text']}" for c in verdict["checks"]],
        "",
        "## Builds",
        "",
        "| | role | given as | version |",
        "|---|---|---|---|",
        *[f"| {label} | {b['role']} | {b['kind']} `{b['source']}` | {b['version']} |"
          for label, b in result["builds"].items()],
        "",
        f"Same server options for both: `{' '.join(result['server_options'])}`. "
        + (f"**The candidate was handicapped** (to test the gate) with `{' '.join(s['candidate_handicap'])}`. "
           if s.get("candidate_handicap") else "") +
        f"Machine: {describe_machine(result.get('machine'))}. "
        f"Data: {s['tables']} tables x {s['table_size']} rows. Server on CPUs {s['server_cpus']}, "
        f"sysbench on CPUs {s['client_cpus']}. {s['pairs']} interleaved pairs (A B, B A, ...) of "
        f"{s['time']} s per workload and concurrency, after a {s['warmup']} s warm-up{extension(result)}.",
        "",
        "## Throughput, paired ratio B/A with 95% confidence interval",
        "",
        f"Ratio = geometric mean of the per-pair ratios; interval = t-interval on the log ratios. "
        f"Sign-test p-values need at least {MIN_PAIRS_FOR_SIGN_TEST} pairs.",
        "",
    ]
    for workload in s["workloads"]:
        lines += [f"### {workload}", "",
                  "| N | A tx/s | B tx/s | B/A [95% CI] | sign test p | result | gated |",
                  "|---:|---:|---:|---|---:|---|---|"]
        for c in a["throughput"]:
            if c["workload"] == workload:
                p = "n/a" if c["p_sign"] is None else f"{c['p_sign']:.3f}"
                gated = "yes" if c["gated"] else "no (beyond A's N*)"
                lines.append(f"| {c['threads']} | {number(c['tps_a'])} | {number(c['tps_b'])} | "
                             f"{interval(c)} | {p} | {c['verdict']} | {gated} |")
        lines.append("")
    lines += [f"![Paired throughput ratio]({figures['speedup']})", "",
              "## Scalability (Universal Scalability Law)", "",
              "X(N) = lambda N / (1 + sigma (N-1) + kappa N (N-1)); peak N* = sqrt((1-sigma)/kappa); "
              f"retention = X(N_max)/X(observed peak); \"falls over\" below {s['fallover_retention']:g}.",
              "",
              "| workload | build | lambda | sigma | kappa | N* | observed peak N | retention | notes |",
              "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for workload in s["workloads"]:
        for label, sc in a["scalability"][workload].items():
            fit = sc["usl"]
            notes = [n for n, flag in (("falls over", sc["falls_over"]),
                                       ("superlinear (sigma < 0)", sc["superlinear"])) if flag]
            if fit is None:
                notes.append("too few concurrencies to fit")
                params, peak = "n/a | n/a | n/a", "n/a"
            else:
                params = f"{fit['lam']:,.1f} | {fit['sigma']:.4f} | {fit['kappa']:.2e}"
                peak = "unbounded" if sc["peak_concurrency"] is None else f"{sc['peak_concurrency']:.1f}"
            lines.append(f"| {workload} | {label} | {params} | {peak} | {sc['observed_peak_threads']} "
                         f"| {sc['retention']:.2f} | {', '.join(notes) or '-'} |")
    lines += ["", f"![Throughput vs concurrency]({figures['throughput']})", ""]
    lines += response_time(a["response_time"], figures)
    lines += instruction_profile(a["callgrind"])
    lines += ["## Reproduce", "", "```", result["command"], "```", ""]
    return "\n".join(lines)


def response_time(rt, figures):
    lines = ["## Response time at a fixed arrival rate", ""]
    if rt is None:
        return lines + ["Not measured (--rate off).", ""]
    lines += [f"{rt['workload']}, {rt['threads']} threads, Poisson arrivals at {rt['rate']} tx/s; "
              f"latency per {rt['interval']} s interval (median, and min-max over intervals); each "
              "interval is a run of its own, the builds alternating, and its p95 and p99 come from "
              "that run's latency histogram.", "",
              "| percentile | A median (min-max) ms | B median (min-max) ms | B/A by interval [95% CI] "
              "| kept up with the rate (A / B) |",
              "|---|---|---|---|---|"]
    for row in rt["percentiles"]:
        cells = [f"{row[b]['median_ms']:.2f} ({row[b]['min_ms']:.2f}-{row[b]['max_ms']:.2f})"
                 for b in ("A", "B")]
        kept = " / ".join("yes" if row[b]["kept_up"] else f"no ({row[b]['tps']:.0f} tx/s)"
                          for b in ("A", "B"))
        lines.append(f"| p{row['percentile']} | {cells[0]} | {cells[1]} | {interval(row['ratio'])} "
                     f"| {kept} |")
    return lines + ["", f"![Response-time stability]({figures['latency']})", ""]


def instruction_profile(cg):
    lines = ["## Callgrind: instructions and simulated I1 misses per transaction", ""]
    if cg is None:
        return lines + ["Not measured (run with --callgrind).", ""]
    if "error" in cg:
        return lines + [f"Not measured: {cg['error']}.", ""]
    rows = cg["per_transaction"]
    lines += [f"{cg['workload']}, one client, {cg['events']} transactions, server under "
              "`valgrind --tool=callgrind --cache-sim=yes` (deterministic: no interval needed).", "",
              "| per transaction | A | B | B/A |", "|---|---:|---:|---:|"]
    for name, title in (("Ir", "instructions (Ir)"), ("I1mr", "I1 misses (I1mr)"),
                        ("ILmr", "last-level instruction misses (ILmr)")):
        r = rows[name]
        lines.append(f"| {title} | {r['A']:,.0f} | {r['B']:,.0f} | {number(r['ratio'], 3)} |")
    r = rows["I1_miss_rate"]
    lines.append(f"| I1 miss rate | {r['A']:.2%} | {r['B']:.2%} | {r['ratio']:.3f} |")
    cold = cg.get("cold_share") or {}
    if cold.get("B") is not None:
        lines.append(f"| instructions in `.cold` parts | {cold['A']:.2%} | {cold['B']:.2%} | |")
        lines += ["", "Instructions in `.cold` parts ran in blocks the profile never saw: GCC moved them "
                  "out of line. The candidate's top functions by own instructions:", ""]
        trained = any("training_entries" in t for t in cg["top"]["B"])
        if trained:
            of = f" of profile {cg['training_profile']}" if cg.get("training_profile") else ""
            lines += [f"Entries in training: how often the training{of} "
                      "entered the function (clones and cold parts counted as the function); \"-\": never "
                      "entered by the training, or not the profile's (a library's function, or one "
                      "inlined wherever it was called).", ""]
        lines += ["| function | share | cold part |" + (" entries in training |" if trained else ""),
                  "|---|---:|---|" + ("---:|" if trained else "")]
        for t in cg["top"]["B"]:
            row = f"| `{t['function'][:90]}` | {t['share']:.2%} | {'yes' if t['cold'] else ''} |"
            if trained:
                entries = t.get("training_entries")
                row += " - |" if entries is None else f" {entries:,} |"
            lines.append(row)
    return lines + [""]
