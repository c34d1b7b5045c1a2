"""The test phase and its verdict on the fixture: its own small test suite, run as mtr is run.

The fixture's faults stand for what the phase must catch: FIXTURE_INJECT=wrong-digest at
configure time is a miscompile (the build's digests are wrong), FIXTURE_CRASH=1 a server that
crashes, FIXTURE_SLOW=N a server that hangs (tests/fixture/src/main.c).
"""

import json
import os
import pwd
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest
from conftest import FIXTURE, run_pgo

from pgo.build import testrun
from pgo.core.config import build_config

BUILD = ("build", "--version", "1.0.0", "--config", "fixture", "--source", FIXTURE)


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """An optimised and a plain build of the fixture, each with its release set run."""
    root = tmp_path_factory.mktemp("tested")
    pgo, plain = root / "pgo", root / "plain"
    run_pgo(*BUILD, "--workdir", pgo)
    run_pgo(*BUILD, "--workdir", plain, "--pgo", "off")
    return pgo, plain


def results(workdir, set_name="release"):
    return json.loads((workdir / "tests" / set_name / "results.json").read_text())


def test_the_release_set_runs_on_both_builds_and_the_verdict_passes(builds):
    pgo, plain = builds
    for workdir in builds:
        got = results(workdir)
        assert got["counts"] == {"passed": 2, "failed": 0, "skipped": 1}
        assert got["outcomes"]["main.skipped_by_list"] == "skipped"     # pgo/testsets/fixture.skip
        build_info = json.loads((workdir / "build-info.json").read_text())
        assert got["build_token"] == build_info["build_token"]
        # The runner's own JUnit report, kept beside the results.
        cases = ET.parse(workdir / "tests" / "release" / "junit.xml").getroot().iter("testcase")
        assert sorted(c.get("name") for c in cases) == ["cold", "digest", "skipped_by_list"]
    run = run_pgo("test-verdict", "--candidate", pgo, "--baseline", plain)
    assert "[test-verdict] release PASSED: optimised build 2 passed, 0 failed; plain build 2 passed, 0 failed" \
        in run.stdout
    verdict = json.loads((pgo / "tests" / "release" / "verdict.json").read_text())
    assert verdict["passed"] and verdict["build_only_failures"] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="runs as root only: the unprivileged test user is root's choice")
def test_as_root_the_suite_runs_as_the_unprivileged_test_user(builds):
    pgo, _ = builds
    owner = (pgo / "tests" / "release" / "var").stat().st_uid
    assert owner == pwd.getpwnam(testrun.TEST_USER).pw_uid != 0
    assert f"as {testrun.TEST_USER}" in (pgo / "logs" / "test.log").read_text()


def test_the_nightly_set_runs_more_suites_and_keeps_the_release_results(builds):
    pgo, _ = builds
    run = run_pgo("test", "--workdir", pgo, "--set", "nightly")
    assert "[test] fixture tests nightly: 3 passed, 0 failed, 1 skipped" in run.stdout
    # The optional suite (a plugin's) is not in the fixture's staged tree: left out, not an error.
    assert results(pgo, "nightly")["suites"] == ["main", "more"]
    assert results(pgo)["counts"]["passed"] == 2


def test_a_miscompiled_optimised_build_is_refused_naming_the_test(tmp_path, builds):
    _, plain = builds
    bad = tmp_path / "bad"
    built = run_pgo(*BUILD, "--workdir", bad, env={"FIXTURE_INJECT": "wrong-digest"})
    # The run itself completed: the phase succeeds and says what failed; the verdict decides.
    assert "[test] failed: main.digest: fixture-test: result content mismatch" in built.stdout
    refused = run_pgo("test-verdict", "--candidate", bad, "--baseline", plain, check=False)
    assert refused.returncode == 1
    assert refused.stderr == ("pgo: error: the release is refused: main.digest fails on the optimised build (the "
                              "plain build passes it): fixture-test: result content mismatch\n")
    # Without a plain build nothing tells the build's failure from the machine's: refused too.
    alone = run_pgo("test-verdict", "--candidate", bad, check=False)
    assert alone.returncode == 1 and "(no plain build to compare with)" in alone.stderr


def test_a_crash_is_a_failure_that_names_the_test_and_keeps_its_folder(tmp_path, builds):
    _, plain = builds
    workdir = tmp_path / "w"
    run_pgo(*BUILD, "--workdir", workdir, "--tests", "off")
    crashed = run_pgo("test", "--workdir", workdir, env={"FIXTURE_CRASH": "1"})
    assert "[test] failed: main.digest: fixture-test: At line 1: fixture crashed: killed by signal 6 (SIGABRT)" \
        in crashed.stdout
    assert (workdir / "tests" / "release" / "var" / "main.digest").is_dir()
    refused = run_pgo("test-verdict", "--candidate", workdir, "--baseline", plain, check=False)
    assert refused.returncode == 1 and "main.digest fails on the optimised build" in refused.stderr


def test_failures_of_both_builds_are_the_environment_up_to_the_limit(tmp_path):
    pgo, plain = tmp_path / "pgo", tmp_path / "plain"
    run_pgo(*BUILD, "--workdir", pgo, "--tests", "off")
    run_pgo(*BUILD, "--workdir", plain, "--pgo", "off", "--tests", "off")
    for workdir in (pgo, plain):
        run_pgo("test", "--workdir", workdir, env={"FIXTURE_CRASH": "1"})
    passed = run_pgo("test-verdict", "--candidate", pgo, "--baseline", plain)
    assert "PASSED" in passed.stdout and "failing on both (environment, at most 1): main.digest" in passed.stdout
    refused = run_pgo("test-verdict", "--candidate", pgo, "--baseline", plain, "--max-environment-failures", "0",
                      check=False)
    assert refused.returncode == 1
    assert "1 tests fail on the plain build too, above the limit of 0" in refused.stderr


def test_an_error_in_a_servers_log_at_shutdown_is_a_failure_the_verdict_judges(tmp_path):
    """mtr fails a run whose server logged an error at its shutdown (a crash after `Shutdown complete`)
    although every test passed; the JUnit report has no entry for it. Found on 10.11.18's plain build
    (main.ssl_timeout-9836, signal 11 at exit): the phase failed and with it the release."""
    pgo, plain = tmp_path / "pgo", tmp_path / "plain"
    run_pgo(*BUILD, "--workdir", pgo, "--tests", "off")
    run_pgo(*BUILD, "--workdir", plain, "--pgo", "off", "--tests", "off")
    warned = run_pgo("test", "--workdir", plain, env={"FIXTURE_SHUTDOWN_ERROR": "main.digest"})
    assert "[test] fixture tests release: 2 passed, 1 failed, 1 skipped" in warned.stdout
    assert ("[test] failed: server log at shutdown after main.digest: 261127  3:15:17 [ERROR] "
            f"{plain}/stage/bin/fixture got signal 11 ;") in warned.stdout
    run_pgo("test", "--workdir", pgo)
    # The plain build's alone: reported with its results, not the optimised build's fault.
    assert "PASSED" in run_pgo("test-verdict", "--candidate", pgo, "--baseline", plain).stdout
    # The optimised build's alone: refused, naming the tests that server ran and the log's error.
    run_pgo("test", "--workdir", plain)
    run_pgo("test", "--workdir", pgo, env={"FIXTURE_SHUTDOWN_ERROR": "main.digest"})
    refused = run_pgo("test-verdict", "--candidate", pgo, "--baseline", plain, check=False)
    assert refused.returncode == 1
    assert refused.stderr == ("pgo: error: the release is refused: server log at shutdown after main.digest fails "
                              "on the optimised build (the plain build did not run it): 261127  3:15:17 [ERROR] "
                              f"{pgo}/stage/bin/fixture got signal 11 ;\n")


def test_a_test_that_passed_on_a_retry_is_flaky_and_the_run_completes(tmp_path):
    """mtr names a test that failed one attempt among the failing tests and exits 1, although a retry
    passed (main.lowercase_table5 on 10.11.18's plain full build): the phase failed "although no test
    failed". The run completes, the test is flaky in results.json, and the verdict passes."""
    pgo, plain = tmp_path / "pgo", tmp_path / "plain"
    run_pgo(*BUILD, "--workdir", pgo, "--tests", "off")
    run_pgo(*BUILD, "--workdir", plain, "--pgo", "off", "--tests", "off")
    flaky = run_pgo("test", "--workdir", pgo, env={"FIXTURE_FLAKY": "main.digest"})
    assert ("[test] fixture tests release exited with status 1 for main.digest, which passed on a retry (flaky)"
            in flaky.stdout)
    results = json.loads((pgo / "tests" / "release" / "results.json").read_text())
    assert results["flaky"] == ["main.digest"] and results["exit_status"] == 1 and not results["failed"]
    run_pgo("test", "--workdir", plain)
    assert "PASSED" in run_pgo("test-verdict", "--candidate", pgo, "--baseline", plain).stdout
    # A test that failed every attempt is a failure, whatever the exit status says.
    assert testrun.only_flaky(["main.a"], ["main.a"]) and not testrun.only_flaky(["main.a", "main.b"], ["main.a"])


def test_a_run_past_its_time_limit_is_stopped_with_one_line(tmp_path):
    workdir = tmp_path / "w"
    run_pgo(*BUILD, "--workdir", workdir, "--tests", "off")
    started = time.monotonic()
    slow = run_pgo("test", "--workdir", workdir, "--time-limit", "0.05", env={"FIXTURE_SLOW": "60"}, check=False)
    assert time.monotonic() - started < 45
    assert slow.returncode == 1
    assert slow.stderr.startswith("pgo: error: fixture tests release ran past its time limit of 0.05 min, stopped "
                                  "after ") and slow.stderr.count("\n") == 1
    # The runner and the hung program it ran are gone; no results are left to publish.
    leftover = subprocess.run(["pgrep", "-f", f"{workdir}/stage/bin/fixture"], capture_output=True, text=True)
    assert leftover.stdout == ""
    assert not (workdir / "tests" / "release" / "results.json").exists()
    refused = run_pgo("test-verdict", "--candidate", workdir, check=False)
    assert refused.returncode == 1 and "has no results of test set release" in refused.stderr


def test_a_build_without_its_test_suite_fails_the_phase_with_one_line(tmp_path):
    workdir = tmp_path / "w"
    run_pgo(*BUILD, "--workdir", workdir, "--tests", "off")
    (workdir / "stage" / "share" / "fixture" / "test" / "run").unlink()
    failed = run_pgo("test", "--workdir", workdir, check=False)
    assert failed.returncode == 1
    assert failed.stderr == (f"pgo: error: no test suite in the staged build: {workdir}/stage/share/fixture/test/run "
                             "is missing (configuration fixture installs no share/fixture/test/run)\n")


@pytest.mark.parametrize("args", [("--tests", "everything"), ("--tests", "")])
def test_an_unknown_test_set_is_refused_before_building(tmp_path, args):
    failed = run_pgo(*BUILD, "--workdir", tmp_path / "w", *args, check=False)
    assert failed.returncode == 1
    assert failed.stderr.startswith(f"pgo: error: unknown test set '{args[1]}' "
                                    "(known: nightly, release, smoke; or off)")
    assert not (tmp_path / "w" / "build").exists()


def test_a_vardir_without_room_is_refused_before_the_run(tmp_path, builds):
    pgo, _ = builds
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", small], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        failed = run_pgo("test", "--workdir", pgo, "--vardir", small, check=False)
    finally:
        subprocess.run(["umount", small], check=True)
    assert failed.returncode == 1
    assert failed.stderr.startswith(f"pgo: error: the test vardir {small}/pgo-release has ")
    assert "test set release needs 16 MiB" in failed.stderr
    # Refused before anything of the earlier run was touched: its results still stand.
    assert "PASSED" in run_pgo("test-verdict", "--candidate", pgo).stdout


def test_results_of_an_earlier_staged_build_prove_nothing(tmp_path):
    workdir = tmp_path / "w"
    run_pgo(*BUILD, "--workdir", workdir)
    run_pgo("phase", "stage", "--workdir", workdir)
    refused = run_pgo("test-verdict", "--candidate", workdir, check=False)
    assert refused.returncode == 1 and "has no results of test set release" in refused.stderr


def test_a_flaky_test_passes_and_is_named():
    attempts = [("main.a", "failed", "mysqltest: At line 3: query 'x' failed"), ("main.a", "passed", ""),
                ("main.b", "failed", "\nCURRENT_TEST: main.b\nmysqltest: At line 9: result mismatch\n"),
                ("main.b", "failed", "CURRENT_TEST: main.b\nmysqltest: At line 9: result mismatch"),
                ("main.c", "skipped", "Test needs --big-test")]
    summary = testrun.summarise(attempts)
    assert summary["counts"] == {"passed": 1, "failed": 1, "skipped": 1}
    assert summary["flaky"] == ["main.a"]
    assert summary["failed"][0]["first_error"] == "mysqltest: At line 9: result mismatch"
    assert summary["failed"][0]["attempts"] == 2


@pytest.fixture(scope="module")
def miscompiled(tmp_path_factory):
    """A build whose hot path computes a wrong digest: what only the test suite notices."""
    bad = tmp_path_factory.mktemp("miscompiled") / "w"
    run_pgo(*BUILD, "--workdir", bad, "--tests", "off", env={"FIXTURE_INJECT": "wrong-digest"})
    return bad


# What each format's proof calls what it ran the smoke set on.
RAN_ON = {"bintar": "fixture-1.0.0+pgo-linux-x86_64.tar.gz", "rpm": "the rpm set's /usr/share/fixture/test/run",
          "deb": "the installed deb packages"}


@pytest.mark.parametrize("fmt", ["bintar", "rpm", "deb"])
def test_prove_runs_the_smoke_set_from_the_package_and_refuses_a_failing_one(tmp_path, builds, miscompiled, fmt):
    if fmt == "deb" and (shutil.which("mmdebstrap") is None or os.geteuid() != 0):
        pytest.skip("the deb proof needs mmdebstrap and root for its chroot")
    pgo, _ = builds
    # The deb's passing run is test_package's chroot proof: one chroot less here (minutes).
    if fmt != "deb":
        run_pgo("package", "--workdir", pgo, "--format", fmt, "--out", tmp_path / "good")
        proof = run_pgo("prove", tmp_path / "good")
        assert "  fixture tests smoke: 1 passed, 0 failed, 0 skipped" in proof.stdout
    # the rpm route compiles again: the same fault in its build
    run_pgo("package", "--workdir", miscompiled, "--format", fmt, "--out", tmp_path / "bad-packages",
            env={"FIXTURE_INJECT": "wrong-digest"})
    refused = run_pgo("prove", tmp_path / "bad-packages", check=False)
    assert refused.returncode == 1
    assert refused.stderr.endswith(f"pgo: error: the smoke test set failed on {RAN_ON[fmt]}: "
                                   "main.digest: fixture-test: result content mismatch\n")


@pytest.mark.parametrize("place", ["mysql-test", "mariadb-test", "share/mysql/mysql-test",
                                   "share/mariadb/mariadb-test"])
def test_mariadbs_suite_is_found_in_every_layout_a_configuration_stages(tmp_path, place):
    """The standalone layouts of 10.x and 11.x, and Debian's (-DDEB, the release configurations) of both."""
    runner_dir = tmp_path / "stage" / place
    (runner_dir / "main").mkdir(parents=True)
    (runner_dir / "mariadb-test-run.pl").write_text("")
    suite = testrun.test_suite(build_config("release").product)
    planned = testrun.plan_tree(suite, suite.test_set("smoke"), tmp_path / "stage", tmp_path / "out",
                                "the staged build", "configuration release")
    assert planned.runner == runner_dir / "mariadb-test-run.pl"
