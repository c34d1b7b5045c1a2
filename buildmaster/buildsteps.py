"""Custom build steps.

PgoCommand runs one `python3 -m pgo ...` command on the worker and turns what
it prints into the step's live progress (`[instrumented] compile 345/1164`,
`[bench] pair 7 (max 20): ...`; pgo/base/lines.py reads those lines, beside the code
that prints them), and the JSON record the command wrote on the worker (the
profile check, the profile use, BOLT's check, the tests' counts and verdict,
the benchmark's verdict, which version 'latest' is: pgo/base/protocol.py) into the
build's summary. The master-side steps publish a build's uploads, run the pgo
commands of the master's own profile archive (MasterPgoCommand), and stop a
build request that keeps losing its worker.
"""

import json
import subprocess
import sys
from pathlib import Path

from buildbot.interfaces import LatentWorkerCannotSubstantiate, LatentWorkerFailedToSubstantiate
from buildbot.process import buildstep, logobserver
from buildbot.process.build import Build
from buildbot.process.factory import BuildFactory
from buildbot.process.results import FAILURE, RETRY, SUCCESS, WARNINGS
from buildbot.steps.shell import ShellCommand
from buildbot.steps.worker import CompositeStepMixin
from twisted.internet import defer, threads
from twisted.python.failure import Failure

from buildmaster import publish
from buildmaster.downloads import download_url
from pgo import REPO
from pgo.base import lines, protocol
from pgo.base.errors import error_reason
from pgo.base.readers import read_json


class OutputWatcher(logobserver.LogLineObserver):
    def __init__(self, step):
        super().__init__()
        self.step = step

    def outLineReceived(self, line):
        self.step.watch(line)

    def errLineReceived(self, line):
        self.step.watch_errors(line)


class PgoCommand(CompositeStepMixin, ShellCommand):
    """A pgo CLI command.

    After the command succeeded, read_record turns the JSON record it wrote on the
    worker (the path `record`) into the step's and the build's summary; warns(record)
    says whether what the record tells is a warning (a test run with failed tests: the
    verdict step decides). With verdict_on_failure, a command that failed without an
    error line failed by the verdict it recorded (the benchmark's gate), which becomes
    the step's summary. A failed command's summary is its error line (what `./release`
    prints for it too). With keep, (property, pick), pick(record) becomes a build property too
    (buildmaster/kept.py): the plan the later steps run by, what the release dashboard shows of the build;
    from the record, never from a summary. Without read_record a record is kept only, not summed up;
    without in_build_summary its line is the step's summary only (the build's stays one line).
    """

    renderables = ["record"]

    def __init__(self, record=None, read_record=None, warns=None, verdict_on_failure=False, keep=None,
                 in_build_summary=True, **kwargs):
        kwargs.setdefault("descriptionDone", kwargs.get("name"))
        super().__init__(**kwargs)
        self.record = record
        self.read_record = read_record
        self.warns = warns
        self.verdict_on_failure = verdict_on_failure
        self.keep = keep
        self.in_build_summary = in_build_summary
        self.latest_progress = None
        self.result_line = None
        self.error = None
        self.addLogObserver("stdio", OutputWatcher(self))

    def watch(self, line):
        progress = lines.progress(line)
        if progress:
            self.latest_progress = progress
            self.updateSummary()

    def watch_errors(self, line):
        self.error = error_reason([line]) or self.error

    @defer.inlineCallbacks
    def run(self):
        result = yield super().run()
        if self.record and result == SUCCESS:
            result = yield self.take_record()
        elif self.record and result == FAILURE and self.verdict_on_failure and not self.error:
            yield self.take_record(failed=True)
        elif self.record and result == FAILURE and self.keep:
            yield self.keep_record()
        return result

    @defer.inlineCallbacks
    def fetch_record(self):
        """The command's record, read from the worker: (record, None), or (None, why it cannot be read)."""
        text = yield self.getFileContentFromWorker(self.record)
        try:
            return protocol.read_record(text, self.record), None
        except ValueError as e:
            return None, str(e)

    @defer.inlineCallbacks
    def keep_record(self):
        """What is kept of the record of a command that failed by it (the test verdict that refused the
        release names the tests): the summary stays the error line; no record, nothing kept."""
        record, _ = yield self.fetch_record()
        if record is not None:
            yield self.keep_it(record)

    @defer.inlineCallbacks
    def keep_it(self, record):
        """The build property kept of the record; a record it cannot be read from (another schema) is said
        in the step's log, and never fails the step (a build without its plan runs every step it may)."""
        name, pick = self.keep
        try:
            self.setProperty(name, pick(record), self.name)
        except (KeyError, TypeError, ValueError) as e:
            yield self.addCompleteLog("kept", f"{name} not kept: {type(e).__name__} {e}\n")

    @defer.inlineCallbacks
    def take_record(self, failed=False):
        """The command's record, read from the worker, as the summary; a step whose record
        cannot be read says so, with warnings (what it did succeeded), unless it failed."""
        record, error = yield self.fetch_record()
        if record is None:
            self.error = None if failed else error
            return WARNINGS
        self.use_record(record)
        if self.keep:
            yield self.keep_it(record)
        self.result_line = self.read_record(record) if self.read_record else None
        self.updateSummary()
        return WARNINGS if self.warns and self.warns(record) else SUCCESS

    def use_record(self, record):
        """What a step does with its command's record besides summing it up."""

    def getCurrentSummary(self):
        detail = self.result_line or self.latest_progress
        return {"step": f"{self.name}: {detail}" if detail else f"{self.name}: running"}

    def getResultSummary(self):
        summary = super().getResultSummary()
        detail = (self.results != SUCCESS and self.error) or self.result_line or self.latest_progress
        if detail:
            summary["step"] = f"{summary['step']}: {detail}"
        if self.result_line and self.results == SUCCESS and self.in_build_summary:
            summary["build"] = self.result_line
        return summary


class ResolveVersion(PgoCommand):
    """`pgo latest --record R`: the build's version property becomes the version 'latest' is now."""

    def __init__(self, **kwargs):
        super().__init__(read_record=lambda r: f"version {r['version']} ({r['how']});", **kwargs)

    def use_record(self, record):
        self.setProperty("version", record["version"], "version step")


class GiveUpOnLostWorkers(buildstep.BuildStep):
    """Fail a build request whose earlier builds lost their worker max_lost times.

    Buildbot retries a build whose worker went away, without limit; a VM that
    dies in every build would otherwise be retried forever.
    """

    name = "worker-lost-guard"

    def __init__(self, max_lost, **kwargs):
        kwargs.setdefault("haltOnFailure", True)
        super().__init__(**kwargs)
        self.max_lost = max_lost

    @defer.inlineCallbacks
    def run(self):
        lost = 0
        for request in self.build.requests:
            builds = yield self.master.data.get(("buildrequests", request.id, "builds"))
            lost += sum(1 for b in builds if b["results"] == RETRY)
        if lost >= self.max_lost:
            self.descriptionDone = f"worker lost {lost} times: giving up"
            return FAILURE
        self.descriptionDone = f"worker lost {lost} times before" if lost else "first try"
        return SUCCESS


class PgoBuild(Build):
    """A build that says in one line why its worker did not start (buildmaster/workers.py, BoundedStart):
    the summary of its worker_preparation step and of the build, instead of Buildbot's "error while
    worker_prepare" and "worker not available"."""

    start_failure = None

    @defer.inlineCallbacks
    def buildPreparationFailure(self, why, state_string):
        yield super().buildPreparationFailure(why, state_string)
        if not self.stopped and isinstance(why, Failure) and why.check(LatentWorkerFailedToSubstantiate,
                                                                        LatentWorkerCannotSubstantiate):
            self.start_failure = lines.first_line(why.value) or None
            if self.start_failure:
                yield self.master.data.updates.setStepStateString(self._preparation_step.stepid, self.start_failure)

    def buildFinished(self, text, results):
        return super().buildFinished([self.start_failure] if self.start_failure else text, results)


def pgo_factory():
    """A build factory of this pipeline: its builds are PgoBuilds."""
    f = BuildFactory()
    f.buildClass = PgoBuild
    return f


class PublishFolder(buildstep.BuildStep):
    """Publish the build's staging folder on the master as `destination`, atomically.

    With served, (the downloads folder, its URL), the step links the published
    folder and each package in it. With keep, destination is a nightly: only
    the newest `keep` nightlies stay.
    """

    name = "publish"
    renderables = ["staging", "destination"]

    def __init__(self, staging, destination, served=None, keep=None, **kwargs):
        kwargs.setdefault("haltOnFailure", True)
        super().__init__(**kwargs)
        self.staging = staging
        self.destination = destination
        self.served = served
        self.keep = keep

    @defer.inlineCallbacks
    def run(self):
        try:
            count = yield threads.deferToThread(publish.publish, self.staging, self.destination)
        except (publish.PublishError, OSError) as e:
            yield self.addCompleteLog("error", f"{e}\n")
            self.descriptionDone = f"not published: {e}"
            return FAILURE
        lines = [f"published {count} files to {self.destination}"]
        if self.keep:
            pruned = yield threads.deferToThread(publish.prune_nightlies, Path(self.destination).parent, self.keep)
            lines += [f"removed old nightly {name}" for name in pruned]
        yield self.addCompleteLog("published", "\n".join(lines) + "\n")
        self.setProperty("published", str(self.destination), "publish")
        if self.served:
            yield threads.deferToThread(publish.write_downloads_index, self.served[0])
            yield self.link_packages(download_url(*self.served, self.destination) + "/")
        self.descriptionDone = f"published {count} files"
        return SUCCESS

    @defer.inlineCallbacks
    def link_packages(self, url):
        self.setProperty("published_url", url, "publish")
        yield self.addURL("download folder", url)
        packages = yield threads.deferToThread(publish.packages, self.destination)
        self.setProperty("packages", packages, "publish")
        for package in packages:
            yield self.addURL(package, url + package)
        if (Path(self.destination) / publish.REPORT_PAGE).is_file():
            yield self.addURL("benchmark report", url + publish.REPORT_PAGE)
        reports = yield threads.deferToThread(publish.test_reports, self.destination)
        for report in reports:
            build = report.split("/")[1]
            yield self.addURL(f"test results, {'optimised' if build == 'pgo' else build} build (JUnit)", url + report)

    def getResultSummary(self):
        summary = super().getResultSummary()
        if self.results == SUCCESS:
            where = download_url(*self.served, self.destination) + "/" if self.served else self.destination
            summary["build"] = f"published to {where}"
        return summary


class RecordTestResults(buildstep.BuildStep):
    """A test run's per-test outcomes (the results.json it uploaded to the staging folder) in Buildbot's own
    test-result store: the data API keeps each test's history across builds (a flaky test, a test that fails
    on the optimised build only), which the dashboard's pages show (Buildbot's UI has no view of it). A test passed if
    an attempt passed (pgo/build/testrun.py summarise); skipped tests have no result. A run without its record
    only warns: the verdict step decided already. page(buildid): the address of the build's test results
    page (buildmaster/dashboard.py), linked from the step."""

    renderables = ["results"]

    def __init__(self, results, build, page=None, **kwargs):
        kwargs.setdefault("haltOnFailure", False)
        kwargs.setdefault("flunkOnFailure", False)
        kwargs.setdefault("warnOnFailure", True)
        super().__init__(**kwargs)
        self.results = results
        self.build_label = build
        self.page = page

    @defer.inlineCallbacks
    def run(self):
        try:
            record = yield threads.deferToThread(read_json, self.results, "the test results", ValueError)
            outcomes = record["outcomes"]
            title = f"{record['runner']} {record['set']}, {self.build_label} build"
        except (ValueError, KeyError, TypeError) as e:
            self.descriptionDone = lines.first_line(e) or "no test results"
            return WARNINGS
        setid = yield self.addTestResultSet(title, "pass_fail", "boolean")
        counts = {"passed": 0, "failed": 0}
        for name, outcome in sorted(outcomes.items()):
            if outcome in counts:
                counts[outcome] += 1
                self.addTestResult(setid, "1" if outcome == "passed" else "0", test_name=name)
        self.descriptionDone = f"{title}: {counts['passed']} passed, {counts['failed']} failed"
        if self.page:
            yield self.addURL("test results", self.page(self.build.buildid))
        return SUCCESS


class DiscardStaging(buildstep.BuildStep):
    """Remove what a failed build uploaded, so that nothing of it is ever published."""

    name = "discard-staging"
    renderables = ["staging"]

    def __init__(self, staging, **kwargs):
        kwargs.setdefault("alwaysRun", True)
        kwargs.setdefault("hideStepIf", True)
        super().__init__(**kwargs)
        self.staging = staging

    @defer.inlineCallbacks
    def run(self):
        yield threads.deferToThread(publish.discard, self.staging)
        return SUCCESS


class MasterPgoCommand(buildstep.BuildStep):
    """A pgo command run on the master, on the master's own files: its profile archive, the archive of
    record, which no worker sees. What a worker uploaded is checked and stored there, the profile a
    reuse build asked for is picked there, and promoted and pruned there.

    The master's checkout runs it (the pgo CLI needs only the standard library). With `record` (a
    path on the master) and `sets` ({build property: the record's key}), what the command
    recorded becomes build properties. A failed command's summary is its error line.
    """

    renderables = ["command", "record"]

    def __init__(self, command, record=None, sets=None, **kwargs):
        kwargs.setdefault("haltOnFailure", True)
        kwargs.setdefault("descriptionDone", kwargs.get("name"))
        super().__init__(**kwargs)
        self.command = command
        self.record = record
        self.sets = sets or {}
        self.error = None

    @defer.inlineCallbacks
    def run(self):
        log = yield self.addLog("stdio")
        command = [sys.executable, "-m", "pgo", *map(str, self.command)]
        yield log.addHeader(" ".join(command) + "\n")
        done = yield threads.deferToThread(subprocess.run, command, cwd=REPO, capture_output=True, text=True)
        if done.stdout:
            yield log.addStdout(done.stdout)
        if done.stderr:
            yield log.addStderr(done.stderr)
        yield log.finish()
        if done.returncode != 0:
            self.error = error_reason(done.stderr.splitlines()) or f"exit status {done.returncode}"
            return FAILURE
        if self.record:
            try:
                record = json.loads(Path(self.record).read_text())
                for name, key in self.sets.items():
                    self.setProperty(name, record[key], self.name)
            except (OSError, ValueError, KeyError, TypeError) as e:
                self.error = f"cannot read the record {self.record}: {e}"
                return FAILURE
        return SUCCESS

    def getResultSummary(self):
        summary = super().getResultSummary()
        if self.results != SUCCESS and self.error:
            summary["step"] = f"{summary['step']}: {self.error}"
        return summary
