"""The lines the CLI prints, read by the progress parser the Buildbot steps use (pgo/base/lines.py), and
the records whose summaries the steps show (pgo/base/protocol.py).

The lines and records come from real runs: a PGO build of the fixture project and a re-judged
benchmark result; a line the CLI stops printing, or a record it writes differently, fails here
before a build summary goes blank.
"""

import json
import subprocess
import sys

import pytest
from conftest import FIXTURE, REPO, run_pgo

from buildmaster.kept import kept_profile_use
from pgo.base import lines, protocol
from pgo.base.errors import error_reason

RESULT = REPO / "tests" / "data" / "bench" / "result.json"


@pytest.fixture(scope="module")
def build_output(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("pgo") / "w"
    result = run_pgo("build", "--version", "1.0.0", "--config", "fixture", "--source", FIXTURE,
                     "--workdir", workdir)
    return workdir, result.stdout.splitlines()


def read(parser, output):
    return [summary for summary in map(parser, output) if summary]


def test_compile_progress_of_both_builds(build_output):
    _, output = build_output
    progress = [p for p in read(lines.progress, output) if not p.endswith(" failed")]   # the tests'
    assert progress and all(p.startswith("compile ") for p in progress)
    assert progress[-1] == "compile 4/4"
    assert "[instrumented] compile 4/4" in output and "[optimized] compile 4/4" in output


def test_profile_check_record_becomes_its_summary(build_output):
    workdir, _ = build_output
    check = json.loads((workdir / protocol.PROFILE_CHECK).read_text())
    largest = check["quality"]["largest"][0]
    assert lines.profile_check_summary(check) == (
        f"profile {check['profile_id']}: 2 of 2 objects trained; "
        f"100% of trained functions hot from {lines.si(largest['hot_threshold'])}, largest counter "
        f"{lines.si(largest['counter'])} in {largest['object'].rsplit('/', 1)[-1]}, 1 runs;")


def test_profile_use_record_becomes_its_summary(build_output):
    workdir, _ = build_output
    use = json.loads((workdir / protocol.PROFILE_USE).read_text())
    assert lines.profile_use_summary(use) == f"profile used by 100% of {use['hot_objects']} hot objects, 0 mismatches;"
    assert use["hot_instrumented"] == use["hot_objects"]


def test_hot_objects_a_reduced_instrumented_build_left_out_are_said_apart(build_output):
    """release-11.8's optimised build: 532 of its 782 hot objects used the profile, 143 of them never compiled
    instrumented (the embedded server's InnoDB, Galera's provider): of the 639 the profile could reach, 83%."""
    workdir, _ = build_output
    use = {**json.loads((workdir / protocol.PROFILE_USE).read_text()),
           "hot_objects": 782, "hot_with_profile": 532, "hot_coverage": 0.68, "hot_instrumented": 639}
    assert lines.profile_use_summary(use) == (
        "profile used by 68% of 782 hot objects (83% of the 639 the instrumented build compiled), 0 mismatches;")
    assert "by their own records; 83% of the 639 the instrumented build compiled; hot code laid out in" in \
        lines.profile_use(use["profile_id"], use)
    # The release dashboard shows it beside the share (buildmaster/templates/dashboard.html).
    assert kept_profile_use(use)["instrumented"] == "83% of the 639 the instrumented build compiled"
    del use["hot_instrumented"]     # a record of a pgo before the figure
    assert lines.profile_use_summary(use) == "profile used by 68% of 782 hot objects, 0 mismatches;"
    assert kept_profile_use(use)["instrumented"] == ""


def test_test_run_lines_are_progress_and_its_record_the_summary(build_output):
    workdir, output = build_output
    results = json.loads((workdir / protocol.TESTS / "release" / protocol.TEST_RESULTS).read_text())
    assert "1 tests run, 0 failed" in read(lines.progress, output)
    assert lines.test_result_summary(results) == (f"fixture tests release: 2 passed, 0 failed, 1 skipped, "
                                                  f"{results['seconds'] / 60:.1f} min;")
    assert f"[test] {lines.test_result_summary(results)[:-1]}" in output


def test_test_verdict_record_becomes_its_summary(build_output):
    workdir, _ = build_output
    run = run_pgo("test-verdict", "--candidate", workdir)
    verdict = json.loads((workdir / protocol.TESTS / "release" / protocol.TEST_VERDICT).read_text())
    assert lines.test_verdict_summary(verdict) == "tests release passed: optimised build 2 passed, 0 failed; " \
                                                  "no plain build;"
    assert "[test-verdict] release PASSED: optimised build 2 passed, 0 failed; no plain build" in run.stdout


@pytest.mark.parametrize("args, outcome", [([], "pass"), (["--min-speedup", "1.3"], "fail"),
                                           (["--min-speedup", "1.25"], "inconclusive")])
def test_benchmark_verdict_record_becomes_its_summary(tmp_path, args, outcome):
    run = subprocess.run([sys.executable, "-m", "pgo.bench", "--from-result", RESULT, "--out", tmp_path, *args],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    result = protocol.read_record((tmp_path / protocol.BENCH_RESULT).read_text(), protocol.BENCH_RESULT)
    assert result["verdict"]["outcome"] == outcome, run.stderr
    assert lines.bench_verdict_summary(result) == f"{result['verdict']['summary']} ({outcome});"
    assert read(lines.progress, run.stdout.splitlines()) == []


def test_latest_version_record_names_the_version_the_build_goes_on_with(tmp_path):
    record = tmp_path / protocol.VERSION_RECORD
    output = run_pgo("latest", "--config", "fixture", "--source", "tests/fixture",
                     "--record", record).stdout.splitlines()
    assert output == ["[version] latest is 1.0.0: the version of tests/fixture"]
    assert protocol.read_record(record.read_text(), record.name) == {"version": "1.0.0",
                                                                     "how": "the version of tests/fixture"}


def test_benchmark_pair_is_progress():
    line = lines.bench_pair(7, 20, "oltp_read_only", 1, 12.4, 22)
    assert line == "[bench] pair 7 (max 20): oltp_read_only N=1, minute 12 of 22"
    assert lines.progress(line) == "pair 7 (max 20): oltp_read_only N=1, minute 12 of 22"
    # Its place in the whole plan: the fixed sweep, then the single-thread pairs only the minutes bound.
    line = lines.bench_pair(2, 3, "oltp_read_only", 4, 5.2, 22, "sweep 14 of 36")
    assert lines.progress(line) == "pair 2 (max 3): oltp_read_only N=4, sweep 14 of 36, minute 5 of 22"
    # A sweep longer than the budget for added pairs: the line does not count past its own end.
    line = lines.bench_pair(10, 10, "oltp_read_write", 64, 31.2, 22, "sweep 90 of 90")
    assert line.endswith("sweep 90 of 90, minute 31 (no pairs added after minute 22)")
    assert lines.progress("[bench] report: report.md") is None
    assert lines.progress("[train] compile 3/4 files of the workload") is None


@pytest.mark.parametrize("args, reason", [
    (["--version", "1.0"], "argument --version: invalid version '1.0': expected MAJOR.MINOR.PATCH, e.g. 10.11.19 "
                           "(see pgo build --help)"),
    (["--version", "1.0.0", "--source", "tests/no-such-source"],
     "source 'tests/no-such-source' is neither 'debian', a git URL, nor an existing .dsc, tarball or directory"),
])
def test_a_failed_command_says_why_in_its_last_error_line(tmp_path, args, reason):
    failed = run_pgo("build", "--config", "fixture", "--workdir", tmp_path / "w", *args, check=False)
    assert failed.returncode != 0
    assert error_reason((failed.stdout + failed.stderr).splitlines()) == reason
    assert error_reason(failed.stdout.splitlines()) is None


def test_training_passes_are_progress():
    """profile_load's pass lines, as the train phase echoes them (tagged [train]), and only those."""
    assert lines.progress("[train] pass 3 of 24: engine=innodb binlog=row api=prepared") == "pass 3 of 24"
    assert lines.progress("[check] pass 3 of 24") is None


def test_a_silent_compile_says_what_it_waits_on(tmp_path, monkeypatch, capsys):
    """A compile that prints nothing for a while (a whole server's link) keeps its step's progress moving:
    what Ninja started last, and for how long; the master's parser reads it as progress."""
    from pgo.base import runner

    monkeypatch.setattr(runner, "WAITING_SAY_SECONDS", 0.3)
    log = runner.PhaseLog(tmp_path / "optimized.log", "optimized")
    script = "echo '[1/2] Building C object hot.c.o'; echo '[2/2] Linking C executable sql/mariadbd'; sleep 1.5"
    assert log.run(["sh", "-c", script]) == 0
    said = capsys.readouterr().out.splitlines()
    waiting = [line for line in said if ": linking" in line]
    assert waiting and waiting[0] == "[optimized] compile 2/2: linking C executable sql/mariadbd for 0 min", said
    assert lines.progress(waiting[0]) == "compile 2/2: linking C executable sql/mariadbd for 0 min"
    # ... and make's (a Makefiles build: Debian's rules), by its share.
    script = "echo '[ 99%] Linking CXX executable mariadbd'; sleep 1.5"
    assert log.run(["sh", "-c", script], progress=runner.MAKE_PROGRESS) == 0
    said = capsys.readouterr().out.splitlines()
    assert "[optimized] compile 99%: linking CXX executable mariadbd for 0 min" in said, said
    assert lines.progress("[optimized] compile 99%: linking CXX executable mariadbd for 3 min") == (
        "compile 99%: linking CXX executable mariadbd for 3 min")
    log.close()
