"""The custom build steps, run by Buildbot's own step-testing harness (fake worker, fake master)."""

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

from buildbot.process import remotetransfer
from buildbot.process.results import FAILURE, RETRY, SKIPPED, SUCCESS, WARNINGS
from buildbot.test import fakedb
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import ExpectRemoteRef, ExpectShell, ExpectUploadFile, TestBuildStepMixin
from twisted.trial import unittest

from buildmaster import factories
from buildmaster.buildsteps import GiveUpOnLostWorkers, PgoCommand, PublishFolder
from buildmaster.settings import from_dict
from pgo.base import protocol
from pgo.base.checksums import verify_sha256sums

COMMAND = ["python3", "-m", "pgo", "build", "--phase", "instrumented"]
# What a factory's pgo step gives the command: which build runs it (pgo/base/protocol.py).
BUILD = {"buildername": "release-local", "buildnumber": 7}
PGO_ENV = {"PYTHONUNBUFFERED": "1", "PGO_BUILDER": "release-local", "PGO_BUILD_NUMBER": "7"}
CHECK_OUTPUT = ("== phase 4 of 7: check: check the profile reached the hot objects\n"
                "[check] 2 .gcda files, 2 of 2 build objects have data; profile 1.0.0-9934e693eb55\n")
# The parts of profile-check.json the build's summary reads.
CHECK_RECORD = {"profile_id": "1.0.0-9934e693eb55", "gcda_files": 2, "build_objects": 2,
                "build_objects_with_profile": 2,
                "quality": {"runs": 1, "threshold_rule": "sum_max/10000", "functions_run": 2, "hot_functions": 2,
                            "hot_share": 1.0, "setup_share": 0.0,
                            "largest": [{"object": "CMakeFiles/hot.dir/src/hot.c", "counter": 1_400_000,
                                         "hot_threshold": 144}]}}
OPTIMIZED_OUTPUT = ("[optimized] compile 4/4\n[optimized] profile 1.0.0-9934e693eb55 used: 97% of 120 hot "
                    "objects (in effect in 120, by their own records; hot code laid out in 96 of the 101 whose "
                    "profile has some); 3 objects without profile, 0 coverage "
                    "mismatches, 0 functions without profile\n")

BOLT_OUTPUT = ("[bolt] pass 24 of 24: engine=memory binlog=row api=nonblocking\n"
               "[bolt] mariadbd PASSED: profile matched 5712 of 48213 functions, 0% of samples stale; 3120 functions "
               "laid out anew, 2871424 bytes of hot text, taken branches 1.2G -> 0.8G\n")


class StepTest(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    def setUp(self):
        self.setup_test_reactor()
        return self.setup_test_build_step()


class PgoCommandTest(StepTest):
    def shell(self):
        return ExpectShell(workdir="repo", command=COMMAND, env={"PYTHONUNBUFFERED": "1"}, log_environ=False)

    def test_compile_progress_becomes_the_summary(self):
        self.setup_step(PgoCommand(name="instrumented", command=COMMAND, workdir="repo",
                                   env={"PYTHONUNBUFFERED": "1"}, logEnviron=False))
        step, summaries, update = self.step, [], self.step.updateSummary
        step.updateSummary = lambda: (summaries.append(step.getCurrentSummary()["step"]), update())
        self.expect_commands(self.shell().stdout("== phase 2 of 7: instrumented\n[instrumented] compile 345/504\n"
                                                 "[instrumented] compile 504/504\n").exit(0))
        self.expect_outcome(result=SUCCESS, state_string="instrumented: compile 504/504")
        done = self.run_step()
        done.addCallback(lambda _: self.assertEqual(
            [s for s in summaries if "compile" in s][:2],
            ["instrumented: compile 345/504", "instrumented: compile 504/504"]))
        return done

    def test_failed_phase_fails_the_step_with_its_error_line(self):
        self.setup_step(PgoCommand(name="instrumented", command=COMMAND, workdir="repo",
                                   env={"PYTHONUNBUFFERED": "1"}, logEnviron=False))
        self.expect_commands(self.shell().stdout("[instrumented] compile 12/504\n")
                             .stderr("ninja: build stopped: subcommand failed.\n"
                                     "pgo: error: phase 'instrumented' failed: ninja exited with status 1\n").exit(1))
        self.expect_outcome(result=FAILURE, state_string="instrumented (failure): phase 'instrumented' failed: "
                                                         "ninja exited with status 1")
        return self.run_step()

    def test_failed_command_without_an_error_line_keeps_its_progress(self):
        self.setup_step(PgoCommand(name="instrumented", command=COMMAND, workdir="repo",
                                   env={"PYTHONUNBUFFERED": "1"}, logEnviron=False))
        self.expect_commands(self.shell().stdout("[instrumented] compile 12/504\n").stderr("Killed\n").exit(137))
        self.expect_outcome(result=FAILURE, state_string="instrumented (failure): compile 12/504")
        return self.run_step()

    def test_training_passes_are_the_train_steps_progress(self):
        self.setup_step(PgoCommand(name="train", command=COMMAND, workdir="repo",
                                   env={"PYTHONUNBUFFERED": "1"}, logEnviron=False))
        self.expect_commands(self.shell().stdout(
            "[train] compile 14/14\n[train] pass 1 of 24: engine=innodb binlog=off api=text\n"
            "[train] pass 24 of 24: engine=memory binlog=row api=nonblocking\n[train] total 123456\n").exit(0))
        self.expect_outcome(result=SUCCESS, state_string="train: pass 24 of 24")
        return self.run_step()

    def phase_step(self, name):
        step = next(s for s in factories.phase_steps(SimpleNamespace(repo_on_worker="repo", archive="a"),
                                                      "on", "w") if s.name == name)
        step.set_step_arg("command", COMMAND)
        return step

    def setup_phase_step(self, name):
        self.setup_step(self.phase_step(name))
        for prop, value in BUILD.items():
            self.build.setProperty(prop, value, "build")

    def phase_shell(self):
        return ExpectShell(workdir="repo", command=COMMAND, env=PGO_ENV, log_environ=False,
                           timeout=factories.SILENCE_TIMEOUT, max_time=factories.MAX_STEP_TIME)

    def check_record(self, record, name=protocol.PROFILE_CHECK):
        """A phase's record, as the step fetches it from the work directory on the worker."""
        upload = ExpectUploadFile(workersrc=f"w/{name}", workdir="repo", blocksize=32 * 1024,
                                  maxsize=None, writer=ExpectRemoteRef(remotetransfer.StringFileWriter))
        return upload.upload_string(record).exit(0)

    def test_profile_check_figures_become_the_step_summary(self):
        """Read from the record the check wrote (profile-check.json), not from what it printed; the step's
        summary only: the build's stays one line (the dashboard shows the check)."""
        self.setup_phase_step("check")
        self.expect_commands(self.phase_shell().stdout(CHECK_OUTPUT).exit(0),
                             self.check_record(json.dumps(CHECK_RECORD)))
        summary = ("profile 1.0.0-9934e693eb55: 2 of 2 objects trained; 100% of trained functions hot "
                   "from 144, largest counter 1.4M in hot.c, 1 runs;")
        self.expect_outcome(result=SUCCESS, state_string=f"check: {summary}")
        d = self.run_step()
        d.addCallback(lambda _: self.step.getBuildResultSummary())
        d.addCallback(lambda s: self.assertNotIn("build", s))
        return d

    def test_a_profile_check_without_its_record_says_so(self):
        self.setup_phase_step("check")
        self.expect_commands(self.phase_shell().stdout(CHECK_OUTPUT).exit(0), self.check_record("[check] 2 .gcda"))
        self.expect_outcome(result=WARNINGS, state_string=f"check (warnings): w/{protocol.PROFILE_CHECK} is not "
                                                          "JSON: Expecting value: line 1 column 2 (char 1)")
        return self.run_step()

    def test_the_lto_check_names_the_rule_the_link_decides_hotness_by(self):
        lto = {**CHECK_RECORD, "quality": {**CHECK_RECORD["quality"], "threshold_rule": "LTO working set",
                                           "hot_functions": None, "hot_share": None}}
        lto["quality"]["largest"] = [{**lto["quality"]["largest"][0], "hot_threshold": None}]
        self.setup_phase_step("check")
        self.expect_commands(self.phase_shell().stdout(CHECK_OUTPUT).exit(0), self.check_record(json.dumps(lto)))
        self.expect_outcome(result=SUCCESS, state_string="check: profile 1.0.0-9934e693eb55: 2 of 2 objects trained; "
                                                         "hot from the LTO working set, largest counter 1.4M in hot.c, "
                                                         "2 trained functions, 1 runs;")
        return self.run_step()

    def test_profile_use_becomes_the_build_summary(self):
        self.setup_phase_step("optimized")
        use = {"hot_coverage": 0.97, "hot_objects": 120, "coverage_mismatch": 0, "stale": False}
        self.expect_commands(self.phase_shell().stdout(OPTIMIZED_OUTPUT).exit(0),
                             self.check_record(json.dumps(use), protocol.PROFILE_USE))
        self.expect_outcome(result=SUCCESS,
                            state_string="optimized: profile used by 97% of 120 hot objects, 0 mismatches;")
        return self.run_step()

    def test_bolts_training_is_its_progress_and_its_check_the_build_summary(self):
        self.setup_phase_step("bolt")
        self.build.setProperty("config", "minimal-lto-bolt", "test")
        check = {"passed": True, "profiled_functions": 5712, "functions": 48213, "stale_share": 0.0,
                 "hot_text_bytes": 2871424}
        self.expect_commands(self.phase_shell().stdout(BOLT_OUTPUT).exit(0),
                             self.check_record(json.dumps(check), protocol.BOLT_CHECK))
        self.expect_outcome(result=SUCCESS, state_string="bolt: BOLT passed: 5712 of 48213 functions profiled, "
                                                         "0% stale, 2871424 bytes of hot text;")
        return self.run_step()

    def test_a_test_run_with_failed_tests_warns_and_its_record_is_the_summary(self):
        self.setup_phase_step("test")
        results = {"runner": "fixture tests", "set": "release", "counts": {"passed": 1, "failed": 1, "skipped": 1},
                   "flaky": [], "seconds": 2.5}
        self.expect_commands(self.phase_shell().stdout("[test] 3 tests run, 1 failed\n").exit(0),
                             self.check_record(json.dumps(results), f"tests/release/{protocol.TEST_RESULTS}"))
        self.expect_outcome(result=WARNINGS, state_string="test (warnings): fixture tests release: 1 passed, "
                                                          "1 failed, 1 skipped, 0.0 min;")
        return self.run_step()

    def bench_step(self):
        settings = from_dict({"repo_on_worker": "repo"}, Path("/srv/master"), None)
        step = next(s for s in factories.release_factory(settings, settings.platforms[0]).steps
                    if s.kwargs.get("name") == "benchmark").buildStep()
        step.set_step_arg("command", COMMAND)
        self.setup_step(step)
        for prop, value in {**BUILD, "builddir": "/b", "benchmark": "on"}.items():
            self.build.setProperty(prop, value, "build")
        step, summaries, update = self.step, [], self.step.updateSummary
        step.updateSummary = lambda: (summaries.append(step.getCurrentSummary()["step"]), update())
        return summaries

    def bench_record(self, text):
        return ExpectUploadFile(workersrc=f"/b/bench/{protocol.BENCH_RESULT}", workdir="repo", blocksize=32 * 1024,
                                maxsize=None, writer=ExpectRemoteRef(remotetransfer.StringFileWriter)
                                ).upload_string(text).exit(0)

    def test_benchmark_pairs_are_its_progress_and_its_verdict_the_build_summary(self):
        summaries = self.bench_step()
        verdict = {"outcome": "inconclusive", "publish": True,
                   "summary": "speedup not shown: oltp_read_only 1.031 (95% CI 0.990-1.074, 20 pairs)"}
        self.expect_commands(self.phase_shell().stdout(
            "[bench] pair 7 (max 20): oltp_read_only N=1, minute 12 of 22\n"
            "[bench] oltp_read_only N=1 after 7 pairs: 1.031 (95% CI 0.990-1.074)\n"
            "[bench] verdict: INCONCLUSIVE, publish: speedup not shown: oltp_read_only 1.031 "
            "(95% CI 0.990-1.074, 20 pairs)\n").exit(0), self.bench_record(json.dumps({"verdict": verdict})))
        summary = "speedup not shown: oltp_read_only 1.031 (95% CI 0.990-1.074, 20 pairs) (inconclusive);"
        self.expect_outcome(result=SUCCESS, state_string=f"benchmark: {summary}")
        d = self.run_step()
        d.addCallback(lambda _: self.assertEqual([s for s in summaries if "pair" in s][0],
                                                 "benchmark: pair 7 (max 20): oltp_read_only N=1, minute 12 of 22"))
        d.addCallback(lambda _: self.step.getBuildResultSummary())
        d.addCallback(lambda s: self.assertEqual(s["build"], summary))
        return d

    def test_a_benchmark_that_refuses_the_build_says_why(self):
        """The gate's refusal is the command's exit status 1, without an error line: its record says why."""
        self.bench_step()
        verdict = {"outcome": "fail", "publish": False, "summary": "slower: oltp_read_only 0.95 (95% CI 0.93-0.97)"}
        self.expect_commands(self.phase_shell().stdout("[bench] verdict: FAIL, do not publish: slower\n").exit(1),
                             self.bench_record(json.dumps({"verdict": verdict})))
        self.expect_outcome(result=FAILURE, state_string="benchmark (failure): slower: oltp_read_only 0.95 "
                                                         "(95% CI 0.93-0.97) (fail);")
        return self.run_step()

    def test_a_benchmark_that_could_not_run_says_so_in_its_error_line(self):
        """... and keeps nothing for the dashboard: it wrote no record (the step looks, and finds none)."""
        self.bench_step()
        no_record = ExpectUploadFile(workersrc=f"/b/bench/{protocol.BENCH_RESULT}", workdir="repo",
                                     blocksize=32 * 1024, maxsize=None,
                                     writer=ExpectRemoteRef(remotetransfer.StringFileWriter)).exit(1)
        self.expect_commands(self.phase_shell().stderr("bench: error: sysbench not found\n").exit(3), no_record)
        self.expect_outcome(result=FAILURE, state_string="benchmark (failure): sysbench not found")
        d = self.run_step()
        d.addCallback(lambda _: self.assertNotIn("gate", self.build.getProperties()))
        return d


class VersionStepTest(StepTest):
    RECORD = f"/b/{protocol.VERSION_RECORD}"
    LATEST = ["python3", "-m", "pgo", "latest", "--config", "minimal", "--source", "debian", "--record", RECORD]

    def version_step(self, version):
        self.setup_step(factories.version_step(SimpleNamespace(repo_on_worker="repo")))
        for name, value in {"version": version, "config": "minimal", "source": "debian", "builddir": "/b",
                            **BUILD}.items():
            self.build.setProperty(name, value, "release form")

    def record(self, text):
        return ExpectUploadFile(workersrc=self.RECORD, workdir="repo", blocksize=32 * 1024, maxsize=None,
                                writer=ExpectRemoteRef(remotetransfer.StringFileWriter)).upload_string(text).exit(0)

    def test_latest_becomes_the_version_the_build_goes_on_with(self):
        """Read from the record `pgo latest --record` wrote, not from what it printed."""
        how = "the newest mariadb 10.11 in Debian's archive: 1:10.11.19-0+deb12u1"
        self.version_step("latest")
        self.expect_commands(
            ExpectShell(workdir="repo", command=self.LATEST, env=PGO_ENV, log_environ=False)
            .stdout(f"[version] latest is 10.11.19: {how}\n").exit(0),
            self.record(json.dumps(protocol.version_record("10.11.19", how))))
        self.expect_outcome(result=SUCCESS, state_string=f"version: version 10.11.19 ({how});")
        self.expect_property("version", "10.11.19")
        return self.run_step()

    def test_latest_without_its_record_keeps_the_version_unresolved(self):
        self.version_step("latest")
        self.expect_commands(
            ExpectShell(workdir="repo", command=self.LATEST, env=PGO_ENV, log_environ=False).exit(0),
            self.record("[]"))
        self.expect_outcome(result=WARNINGS, state_string=f"version (warnings): {self.RECORD} holds no JSON object")
        self.expect_property("version", "latest")
        return self.run_step()

    def test_a_version_the_master_resolved_is_kept(self):
        self.version_step("10.11.18")
        self.expect_outcome(result=SKIPPED, state_string="version (skipped)")
        self.expect_property("version", "10.11.18")
        return self.run_step()


class GiveUpOnLostWorkersTest(StepTest):
    def lost_before(self, times):
        # The harness's build 92 belongs to build request 300.
        self.build_requests = [fakedb.Build(id=500 + n, number=n, buildrequestid=300, builderid=100,
                                            masterid=fakedb.FakeDBConnector.MASTER_ID, workerid=400,
                                            results=RETRY) for n in range(times)]
        return self.master.db.insert_test_data(self.build_requests)

    def guarded(self):
        self.setup_step(GiveUpOnLostWorkers(max_lost=2))
        self.build.requests = [SimpleNamespace(id=300)]

    async def test_first_try_runs(self):
        self.guarded()
        self.expect_outcome(result=SUCCESS, state_string="first try")
        await self.run_step()

    async def test_one_lost_worker_is_retried(self):
        await self.lost_before(1)
        self.guarded()
        self.expect_outcome(result=SUCCESS, state_string="worker lost 1 times before")
        await self.run_step()

    async def test_gives_up_after_max_lost(self):
        await self.lost_before(2)
        self.guarded()
        self.expect_outcome(result=FAILURE, state_string="worker lost 2 times: giving up (failure)")
        await self.run_step()


class PublishFolderTest(StepTest):
    def staged(self, tmp):
        staging = tmp / ".incoming" / "release-local-1"
        (staging / "bintar").mkdir(parents=True)
        (staging / "bintar" / "x-1.0.0.tar.gz").write_bytes(b"tarball")
        (staging / "build-info.json").write_text("{}")
        return staging

    async def test_publishes_with_checksums(self):
        tmp = self.tmp_path()
        staging, destination = self.staged(tmp), tmp / "1.0.0" / "local"
        self.setup_step(PublishFolder(str(staging), str(destination)))
        # The package, build-info.json and the folder's page (index.html, buildmaster/publish.py).
        self.expect_outcome(result=SUCCESS, state_string="published 3 files")
        self.expect_property("published", str(destination), "publish")
        await self.run_step()
        self.assertFalse(staging.exists())
        sums = (destination / "sha256sums.txt").read_text()
        self.assertIn(f"{hashlib.sha256(b'tarball').hexdigest()}  bintar/x-1.0.0.tar.gz\n", sums)
        self.assertIn("  index.html\n", sums)
        self.assertIn('<a href="bintar/x-1.0.0.tar.gz">', (destination / "index.html").read_text())
        self.assertEqual(verify_sha256sums(destination), [])

    async def test_never_replaces_a_published_release(self):
        tmp = self.tmp_path()
        staging, destination = self.staged(tmp), tmp / "1.0.0" / "local"
        destination.mkdir(parents=True)
        (destination / "keep.txt").write_text("published earlier")
        self.setup_step(PublishFolder(str(staging), str(destination)))
        self.expect_outcome(result=FAILURE)
        await self.run_step()
        self.assertEqual((destination / "keep.txt").read_text(), "published earlier")
        self.assertEqual(sorted(p.name for p in destination.iterdir()), ["keep.txt"])

    async def test_nightly_keeps_the_newest(self):
        tmp = self.tmp_path()
        for name in ("20260101-030000-10.11.18-b1", "20260102-030000-10.11.18-b2"):
            (tmp / "nightly" / name).mkdir(parents=True)
            (tmp / "nightly" / name / "sha256sums.txt").write_text("")
        destination = tmp / "nightly" / "20260103-030000-10.11.18-b3"
        self.setup_step(PublishFolder(str(self.staged(tmp)), str(destination), keep=2))
        self.expect_outcome(result=SUCCESS, state_string="published 3 files")
        await self.run_step()
        self.assertEqual(sorted(p.name for p in (tmp / "nightly").iterdir()),
                         ["20260102-030000-10.11.18-b2", "20260103-030000-10.11.18-b3"])

    def tmp_path(self):
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        return Path(folder)
