"""pgo.bench's command line without servers: re-rendering a stored result, the gate's exit
status, usage errors, and the promise that importing pgo.bench needs only the standard library."""

import argparse
import html
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RESULT = REPO / "tests" / "data" / "bench" / "result.json"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def bench(*args):
    return subprocess.run([sys.executable, "-m", "pgo.bench", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def rerender(tmp_path, result):
    """`pgo bench --from-result` of an edited result, into tmp_path/out."""
    stored = tmp_path / "result.json"
    stored.write_text(json.dumps(result))
    return bench("--from-result", stored, "--out", tmp_path / "out")


def rerendered_report(tmp_path, result):
    """The report.md of an edited result that renders without an error."""
    run = rerender(tmp_path, result)
    assert run.returncode == 0, run.stderr
    return (tmp_path / "out" / "report.md").read_text()


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return bench("--from-result", RESULT, "--out", out), out


def test_rerender_passes_the_gate_of_the_fixed_result(rendered):
    run, out = rendered
    assert run.returncode == 0, run.stderr
    assert "[bench] verdict: PASS" in run.stdout
    result = json.loads((out / "result.json").read_text())
    assert (result["verdict"]["outcome"], result["verdict"]["publish"]) == ("pass", True)
    # The candidate collapses past the baseline's peak; that is reported, not gated.
    scal = result["analysis"]["scalability"]["oltp_read_only"]
    assert scal["A"]["falls_over"] and scal["B"]["falls_over"]
    beyond = [c for c in result["analysis"]["throughput"] if c["threads"] >= 64]
    assert beyond and all(c["verdict"] == "slower" and not c["gated"] for c in beyond)


def test_plots_are_valid_pngs(rendered):
    import matplotlib.image

    _, out = rendered
    for name in ("throughput.png", "speedup.png", "latency.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE), name
        height, width, _ = matplotlib.image.imread(out / name).shape
        assert height > 200 and width > 400, name


def test_markdown_report_has_tables_figures_verdict_and_command(rendered):
    _, out = rendered
    md = (out / "report.md").read_text()
    assert "**Verdict: PASS**" in md
    for figure in ("throughput.png", "speedup.png", "latency.png"):
        assert f"]({figure})" in md
        assert (out / figure).is_file()
    assert "| 1 | 8,790.6 | 11,002.9 | 1.252 [1.228, 1.276] |" in md
    assert "falls over" in md and "N*" in md and "retention" in md
    assert "| p95 |" in md and "| p99 |" in md
    assert "| I1 misses (I1mr) | 28,400 | 12,200 | 0.430 |" in md
    command = md.split("## Reproduce")[1]
    assert "python3 -m pgo.bench --baseline plain.tar.gz --candidate pgo.tar.gz" in command
    assert "--min-speedup 1.05" in command


def test_rejudging_with_a_higher_minimum_fails_with_exit_1(tmp_path):
    run = bench("--from-result", RESULT, "--out", tmp_path, "--min-speedup", "1.3")
    assert run.returncode == 1, run.stderr
    assert "[bench] verdict: FAIL" in run.stdout
    md = (tmp_path / "report.md").read_text()
    assert "**Verdict: FAIL**" in md and "--min-speedup 1.3" in md


@pytest.mark.parametrize("args, message", [
    (["--threads", "2,4"], "--threads must include 1"),
    (["--pairs", "1"], "--pairs must be at least 2"),
    (["--pairs", "6", "--max-pairs", "4"], "--max-pairs 4 is below --pairs 6"),
    (["--max-minutes", "0"], "--max-minutes must be positive"),
    (["--min-speedup", "0"], "--min-speedup 0 is not a speedup"),
    (["--workloads", "oltp_write_only,oltp_read_write"], "needs a read-only workload to show the speedup"),
    (["--workloads", "oltp_nonsense"], "unknown workload oltp_nonsense"),
    (["--rate", "fast"], "--rate wants positive integers"),
    (["--rate-workload", "oltp_read_write", "--workloads", "oltp_point_select"],
     "--rate-workload among --workloads"),
])
def test_usage_errors_exit_2_with_one_line(tmp_path, args, message):
    run = bench("--baseline", "/usr", "--candidate", "/usr", "--out", tmp_path, *args)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and message in run.stderr


def test_rejudging_under_another_policy_takes_its_minimum_and_its_inconclusive(tmp_path):
    run = bench("--from-result", RESULT, "--out", tmp_path, "--policy", "canary")
    assert run.returncode == 0, run.stderr
    command = (tmp_path / "report.md").read_text().split("## Reproduce")[1]
    assert "--policy canary --min-speedup 0.9 --inconclusive block" in command
    # A result measured before the gate was sequential had a fixed number of pairs.
    assert "--pairs 4 --max-pairs 4 --warmup" in command and "--max-minutes" not in command


def test_an_inconclusive_speedup_that_is_ahead_publishes_under_the_release_policy(tmp_path):
    # 1.25 is well inside an interval around the stored result's 1.25 single-thread speedup.
    run = bench("--from-result", RESULT, "--out", tmp_path, "--min-speedup", "1.25")
    assert run.returncode == 0, run.stderr
    assert "[bench] verdict: INCONCLUSIVE, publish: speedup not shown: oltp_point_select 1.252" in run.stdout
    md = (tmp_path / "report.md").read_text()
    assert "**Verdict: INCONCLUSIVE** (published): speedup not shown" in md
    blocked = bench("--from-result", RESULT, "--out", tmp_path, "--min-speedup", "1.25", "--inconclusive", "block")
    assert blocked.returncode == 1
    assert "[bench] verdict: INCONCLUSIVE, do not publish: speedup not shown" in blocked.stdout


def test_a_sequential_result_reports_how_its_pairs_stopped(tmp_path):
    result = json.loads(RESULT.read_text())
    result["settings"].update(policy="release", inconclusive="publish-if-ahead", max_pairs=20, max_minutes=22)
    result["sequential"] = {"stopped": {"oltp_point_select": "decided", "oltp_read_only": "max pairs"},
                            "minutes": 21.5}
    md = rerendered_report(tmp_path, result)
    assert ("single-thread pairs of the read-only workloads up to 20, none started after 22 minutes "
            "(stopped: oltp_point_select decided, oltp_read_only max pairs; 21.5 minutes in all)") in md
    assert "--pairs 4 --max-pairs 20 --max-minutes 22 --warmup" in md


@pytest.mark.parametrize("stored", sorted((REPO / "docs").glob("**/result.json")),
                         ids=lambda path: str(path.parent.relative_to(REPO)))
def test_published_results_still_rerender(tmp_path, stored):
    run = bench("--from-result", stored, "--out", tmp_path)
    assert run.returncode in (0, 1), run.stderr
    md = (tmp_path / "report.md").read_text()
    assert "**Verdict: " in md
    machine = json.loads(stored.read_text()).get("machine")
    assert f"Machine: {machine['cpu']}" in md if machine else "Machine: not recorded" in md


def test_a_stored_policy_that_does_not_exist_is_a_usage_error(tmp_path):
    result = json.loads(RESULT.read_text())
    result["settings"]["policy"] = "lenient"
    run = rerender(tmp_path, result)
    assert run.returncode == 2
    assert run.stderr.strip() == "bench: error: unknown gate policy 'lenient' (known: canary, release)"


def test_missing_build_is_a_usage_error(tmp_path):
    run = bench("--baseline", tmp_path / "nowhere", "--candidate", "/usr", "--out", tmp_path / "o")
    assert run.returncode == 2
    assert "build A:" in run.stderr and "does not exist" in run.stderr


def test_unreadable_result_is_a_usage_error(tmp_path):
    bad = tmp_path / "result.json"
    bad.write_text("{not json")
    run = bench("--from-result", bad, "--out", tmp_path)
    assert run.returncode == 2 and "not a benchmark result" in run.stderr


def test_register_adds_a_bench_subcommand(tmp_path):
    from pgo.bench import register

    parser = argparse.ArgumentParser(prog="pgo")
    register(parser.add_subparsers())
    args = parser.parse_args(["bench", "--from-result", str(RESULT), "--out", str(tmp_path)])
    assert args.func(args) == 0
    assert (tmp_path / "report.md").is_file()


def test_importing_pgo_bench_needs_only_the_standard_library():
    check = ("import sys, pgo.bench; "
             "heavy = [m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy', 'matplotlib')]; "
             "sys.exit(repr(heavy) if heavy else 0)")
    run = subprocess.run([sys.executable, "-c", check], cwd=REPO, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_result_without_response_time_or_callgrind_still_renders(tmp_path):
    result = json.loads(RESULT.read_text())
    result["latency"] = result["callgrind"] = None
    result["settings"].update(rate="off", callgrind=False)
    md = rerendered_report(tmp_path, result)
    assert "Not measured (--rate off)" in md and "Not measured (run with --callgrind)" in md
    assert not (tmp_path / "out" / "latency.png").exists()
    assert "--rate off" in md and "--callgrind" not in md.split("## Reproduce")[1]


def test_callgrind_that_could_not_run_is_said_and_the_throughput_stands(tmp_path):
    """A build valgrind cannot run (a BOLTed binary under valgrind 3.19) costs the instruction counts only."""
    result = json.loads(RESULT.read_text())
    result["callgrind"] = {"error": "build B under valgrind: server B did not start (exit 1): Valgrind: I can't "
                                    "recover.  Giving up.  Sorry. (server-B.console)"}
    md = rerendered_report(tmp_path, result)
    assert ("Not measured: build B under valgrind: server B did not start (exit 1): Valgrind: I can't recover.  "
            "Giving up.  Sorry. (server-B.console).") in md
    assert "**Verdict: PASS**" in md


def test_top_functions_show_their_entries_in_the_training(tmp_path):
    """pgo bench --training-counts: each top function of the candidate with the training's entries."""
    result = json.loads(RESULT.read_text())
    for label, cold in (("A", 0.003), ("B", 0.001)):
        result["callgrind"][label].update(cold_share=cold, top=[
            {"function": "row_search_mvcc(unsigned char*, page_cur_mode_t)", "share": 0.07, "cold": False,
             "training_entries": 1234567},
            {"function": "__memcpy_avx_unaligned_erms", "share": 0.03, "cold": False, "training_entries": None}])
    result["callgrind"]["training_profile"] = "10.11.18-2890a9efe874"
    md = rerendered_report(tmp_path, result)
    assert "how often the training of profile 10.11.18-2890a9efe874 entered the function" in md
    assert '"-": never entered by the training, or not the profile\'s' in md
    assert "| function | share | cold part | entries in training |" in md
    assert "| `row_search_mvcc(unsigned char*, page_cur_mode_t)` | 7.00% |  | 1,234,567 |" in md
    assert "| `__memcpy_avx_unaligned_erms` | 3.00% |  | - |" in md


def test_training_entries_count_clones_and_cold_parts_as_their_function():
    from pgo.core import profile
    entries = {"row_sel(sel_node_t*, que_thr_t*)": 40, "my_hash_sort_simple": 7}
    assert profile.entries_of(entries, "row_sel(sel_node_t*, que_thr_t*) [clone .cold]") == 40
    assert profile.entries_of(entries, "row_sel(sel_node_t*, que_thr_t*) [clone .constprop.0] [clone .cold]") == 40
    assert profile.entries_of(entries, "my_hash_sort_simple.part.0") == 7
    assert profile.entries_of(entries, "my_hash_sort_simple.constprop.0.isra.0") == 7
    assert profile.entries_of(entries, "__memcmp_avx2_movbe") is None


@pytest.mark.parametrize("write, message", [
    (None, "--training-counts needs --callgrind"),
    ("not json", "not the training counts of a pgo build's check"),
    ('{"identity": {}}', "not the training counts of a pgo build's check"),
])
def test_training_counts_are_refused_before_the_benchmark(tmp_path, write, message):
    counts = tmp_path / "training-counts.json"
    args = ["--training-counts", counts]
    if write is not None:
        counts.write_text(write)
        args.append("--callgrind")
    run = bench("--baseline", "/usr", "--candidate", "/usr", "--out", tmp_path / "out", *args)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and message in run.stderr
    assert not (tmp_path / "out").exists()


def test_instructions_in_cold_parts_are_counted_from_callgrind_annotate():
    """GCC names the out-of-line parts 'f.cold' (C) and 'f() [clone .cold]' (C++)."""
    from pgo.bench import callgrind
    annotated = """\
--------------------------------------------------------------------------------
Ir                   file:function
--------------------------------------------------------------------------------
10,000 (100.0%)  PROGRAM TOTALS

--------------------------------------------------------------------------------
Ir                   file:function
--------------------------------------------------------------------------------
6,000 (60.00%)  ???:row_sel(sel_node_t*, que_thr_t*) [/stage/bin/mariadbd]
2,500 (25.00%)  ???:row_sel(sel_node_t*, que_thr_t*) [clone .cold] [/stage/bin/mariadbd]
1,000 (10.00%)  ./strings/ctype-simple.c:my_hash_sort_simple.cold [/stage/bin/mariadbd]
  500 ( 5.00%)  ./strings/ctype-simple.c:my_hash_sort_simple [/stage/bin/mariadbd]
"""
    costs = callgrind.self_costs(annotated)
    assert costs == {"row_sel(sel_node_t*, que_thr_t*)": 6000, "row_sel(sel_node_t*, que_thr_t*) [clone .cold]": 2500,
                     "my_hash_sort_simple.cold": 1000, "my_hash_sort_simple": 500}
    assert sum(v for k, v in costs.items() if callgrind.COLD_PART.search(k)) == 3500


def test_published_release_renders_the_report_as_a_page_with_its_plots(rendered, tmp_path):
    """The downloads site shows the benchmark's report as HTML (tables, verdict, plots) and links it from the
    release's page; the front page lists the release with what it is."""
    from buildmaster import publish

    _, out = rendered
    downloads = tmp_path / "downloads"
    staging = publish.staging_dir(downloads, "release-local-1")
    (staging / "benchmark").mkdir(parents=True)
    for name in ("report.md", "result.json", "throughput.png", "speedup.png", "latency.png"):
        (staging / "benchmark" / name).write_bytes((out / name).read_bytes())
    (staging / "build-info.json").write_text(json.dumps({"product": "mariadb", "version": "10.11.18", "pgo": "on",
                                                          "config": "release", "profile_id": "10.11.18-0123"}))
    # What the gate compared with (the baseline step's record, pgo/build/baseline.py): said on the release's page.
    (staging / "baseline.json").write_text(json.dumps({
        "kind": "distribution", "source": "mariadb", "version": "1:10.11.18-0+deb12u1", "packages": [{}] * 7,
        "server_version": "Ver 10.11.18-MariaDB-0+deb12u1 for debian-linux-gnu on x86_64 (Debian 12)"}))
    destination = publish.release_dir(downloads, "10.11.18", "debian-12")
    publish.publish(staging, destination)
    assert html.escape("baseline: the distribution's mariadb 1:10.11.18-0+deb12u1 (7 packages, Ver 10.11.18-MariaDB-"
                       "0+deb12u1") in (destination / publish.INDEX).read_text()
    page = (destination / publish.REPORT_PAGE).read_text()
    assert "<strong>Verdict: PASS</strong>" in page
    assert "<table>" in page and "<th>B/A [95% CI]</th>" in page, page[:2000]
    assert all(f'src="{name}"' in page for name in ("latency.png", "speedup.png", "throughput.png")), page
    assert f'<a href="{publish.REPORT_PAGE}">' in (destination / publish.INDEX).read_text()
    assert publish.REPORT_PAGE in (destination / "sha256sums.txt").read_text()
    publish.write_downloads_index(downloads)
    front = (downloads / publish.INDEX).read_text()
    assert '<a href="10.11.18/debian-12/">10.11.18/debian-12</a></td><td>mariadb</td><td>release</td><td>PGO</td>' \
        "<td><code>10.11.18-0123</code></td>" in front, front
    (listed,) = json.loads((downloads / publish.LISTING).read_text())
    assert (listed["path"], listed["version"], listed["pgo"]) == ("10.11.18/debian-12", "10.11.18", True)


def test_downloads_front_page_says_when_nothing_is_published(tmp_path):
    from buildmaster import publish

    publish.write_downloads_index(tmp_path)
    assert "Nothing is published yet" in (tmp_path / publish.INDEX).read_text()
    assert json.loads((tmp_path / publish.LISTING).read_text()) == []


def test_the_dashboard_shows_a_real_gates_speedups_with_their_intervals_and_report(rendered):
    """What the benchmark step keeps of a real result (tests/data/bench/result.json, judged again) is what the
    dashboard's speedup column shows: each gated single-thread workload's ratio and interval, the outcome,
    the report."""
    from datetime import UTC, datetime

    from flask import render_template

    from buildmaster import dashboard, kept

    _, out = rendered
    gate = kept.kept_gate(json.loads((out / "result.json").read_text()))
    assert [s["workload"] for s in gate["speedups"]] == ["oltp_point_select", "oltp_read_only"]
    row = dashboard.Row(kind="release", builder="release-debian-12", platform="debian-12", buildid=7, number=3,
                        url="http://ui/#/builders/1/builds/3", started=datetime(2026, 11, 28, tzinfo=UTC),
                        version="10.11.18", config="release", state="releasable", reason="published",
                        properties={"gate": gate, "published_url": "http://dl/10.11.18/debian-12/"})
    app = dashboard.make_app("MariaDB PGO", "http://ui/")
    with app.test_request_context():
        page = render_template("dashboard.html", title="MariaDB PGO", lines=dashboard.latest([row]),
                               history=[row], total=1, base="http://ui/plugins/wsgi_dashboards/releases/")
    point = gate["speedups"][0]
    assert (f"oltp_point_select <b>{point['ratio']:.3f}</b> [{point['low']:.3f}, {point['high']:.3f}], "
            f"{point['pairs']} pairs") in page, page
    assert f"gate: {gate['outcome']}" in page
    assert '<a href="http://dl/10.11.18/debian-12/benchmark/report.html" target="_blank">report</a>' in page
    assert 'src="http://ui/plugins/wsgi_dashboards/releases/badge/release/debian-12.svg"' in page
