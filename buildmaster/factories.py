"""Build factories: the pipeline's phases (pgo/build/phases.py) as steps, then archive, package, publish.

A release build on one worker runs every PGO phase as its own step in one work
directory, the plain baseline beside it, the test suite on both and its verdict
(a test that fails on the optimised build only stops the release), the benchmark
gate, archives the profile, and triggers one package build per format. The package builds run on
the same worker and read the release's work directory in place: the staged
tree is hundreds of megabytes, and the release build waits for them, so its
work directory (and a latent VM) stays as it is until every format is packaged.
The rpm build packages the checked build's files through MariaDB's -DRPM install
rules and CPack, from a tree configured in that work directory (pgo/packaging/formats/rpm.py).
Everything meant for the download folder goes to a staging folder on the
master, which the release's last step publishes in one rename.

The master holds the profile archive of record, and no worker sees it: a build
archives its profile in a one-entry archive of its own, which it uploads and the
master checks and stores (`pgo archive add`); a build that reuses a profile
says what it needs (`pgo archive wants`), the master picks the entry (`pgo archive
pick`) and sends it in one file with its sha256, which the worker checks before it
stores the entry in its own archive and imports it. Promote and prune run on the
master. What goes either way passes through a transfer folder of the build,
hidden in the master's archive folder, removed at the build's end.
"""

import json
from collections.abc import Callable, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from buildbot.plugins import steps as bb_steps, util
from buildbot.process.results import SKIPPED

from buildmaster import publish
from buildmaster.buildsteps import (
    DiscardStaging,
    GiveUpOnLostWorkers,
    MasterPgoCommand,
    PgoCommand,
    PublishFolder,
    RecordTestResults,
    ResolveVersion,
    pgo_factory,
)
from buildmaster.dashboard import tests_page
from buildmaster.kept import BASELINE_PROPERTY, keep
from buildmaster.workers import IMAGE_PROPERTY, REPO_PROPERTY, image_running, running_image
from pgo.base import protocol
from pgo.base.lines import (
    baseline_summary,
    bench_verdict_summary,
    bolt_check_summary,
    package_summary,
    profile_check_summary,
    profile_use_summary,
    test_result_summary,
    test_verdict_summary,
)
from pgo.base.protocol import PhaseName
from pgo.base.versions import LATEST
from pgo.bench.policy import RELEASE
from pgo.build.phases import PIPELINES

# A MariaDB compile prints progress every few seconds, but training and the
# benchmark may be silent for long stretches; a whole build takes ~40 minutes
# on 2 cores. Generous limits still end a hung step the same day.
SILENCE_TIMEOUT = 2 * 3600
MAX_STEP_TIME = 6 * 3600

# The benchmark measures servers; other products (the fixture) have none.
BENCHMARKED_PRODUCTS = ("mariadb",)


def in_workdir(name: str) -> Callable[[str, str], str]:
    return lambda root, test_set: f"{root}/{name}"


def in_test_results(name: str) -> Callable[[str, str], str]:
    return lambda root, test_set: f"{protocol.test_results(root, test_set)}/{name}"


# The phases whose result the build's summary takes from the record they wrote in the work
# directory (pgo/base/protocol.py): where, of (work directory, test set), and how.
RECORDS = {PhaseName.CHECK: (in_workdir(protocol.PROFILE_CHECK), profile_check_summary),
           PhaseName.OPTIMIZED: (in_workdir(protocol.PROFILE_USE), profile_use_summary),
           PhaseName.BOLT: (in_workdir(protocol.BOLT_CHECK), bolt_check_summary),
           PhaseName.TEST: (in_test_results(protocol.TEST_RESULTS), test_result_summary),
           # The plan has no summary: the build keeps it (buildmaster/kept.py), and its steps run by it.
           PhaseName.SOURCE: (in_workdir(protocol.PLAN), None)}
# The phases whose line goes into the build's summary too, which stays one line: the profile's use, BOLT's
# check (the test verdict, the gate and the publish step add theirs); the profile check and the test run
# stay on their steps, and the dashboard shows them.
BUILD_SUMMARY = (PhaseName.OPTIMIZED, PhaseName.BOLT)
BUILD_INFO_FILES = list(protocol.BUILD_INFO_FILES)


def on_worker(name):
    return util.Interpolate(f"%(prop:builddir)s/{name}")


BUILDER_FOLDER = util.Interpolate("%(prop:builddir)s")
WORK = on_worker("work")
PLAIN = on_worker("work-plain")
BENCH = on_worker("bench")
BENCH_RESULT = on_worker(f"bench/{protocol.BENCH_RESULT}")
RELEASE_PROFILE = on_worker("release-profile")
# The build's own profile archive (the entry it trained, to upload, or the one the master sent), what a
# reusing build needs, and the file the master sent: in the builder's folder, removed by clean_step (a
# release's by resume_step, unless it resumes).
BUILD_ARCHIVE_FILES = ("profile-archive", "profile-wants.json", "sent-profile.tar")
WORKER_ARCHIVE, WANTS, SENT_PROFILE = map(on_worker, BUILD_ARCHIVE_FILES)
# Set by the master's store (add) or pick: the entry of the master's archive the build's profile is,
# and the sha256 of the file the master sent.
ENTRY_PROPERTY = "profile_entry"
SHA256_PROPERTY = "profile_sha256"
TRANSFERS = ".transfers"
PACKAGES = on_worker("packages")
VERSION_RECORD = on_worker(protocol.VERSION_RECORD)
TEST_SET = util.Property("tests", protocol.DEFAULT_TEST_SET)
# Every pgo command: its output unbuffered, and which build ran it (an archived profile's manifest).
PGO_ENV = protocol.step_environment(util.Property("buildername"), util.Interpolate("%(prop:buildnumber)s"))


def test_results(workdir_name):
    """The test phase's results of the build's test set (pgo/build/testrun.py): what is published of them."""
    return util.Transform(lambda builddir, test_set: protocol.test_results(f"{builddir}/{workdir_name}", test_set),
                          util.Property("builddir"), TEST_SET)


def release_builder_name(platform):
    return f"release-{platform.name}"


def package_builder_name(platform, package_format):
    return f"package-{platform.name}-{package_format}"


def nightly_builder_name(platform):
    return f"nightly-{platform.name}"


def staging(settings, below=""):
    """The build's staging folder on the master (package builds get it as a property)."""
    folder = publish.staging_dir(settings.downloads, "%(prop:buildername)s-%(prop:buildnumber)s")
    return util.Interpolate(str(folder / below) if below else str(folder))


def transfers(settings, name=""):
    """The build's transfer folder on the master (or a file in it): hidden in the archive's folder, where
    list, verify and prune look for no entry, and on the archive's file system."""
    folder = Path(settings.archive) / TRANSFERS / "%(prop:buildername)s-%(prop:buildnumber)s"
    return util.Interpolate(str(folder / name) if name else str(folder))


def repo_on_worker(settings):
    """The checkout on the build's worker: a container worker says where (its property), others are
    where the settings say."""
    return util.Property(REPO_PROPERTY, default=settings.repo_on_worker)


def pgo_step(settings, name, args, **kwargs):
    kwargs.setdefault("haltOnFailure", True)
    # A command reaches the worker through Perspective Broker, which sends plain strings only: a phase's
    # name (PhaseName, a str subclass) as its value.
    args = [str(arg) if isinstance(arg, Enum) else arg for arg in args]
    return PgoCommand(name=str(name), command=["python3", "-m", "pgo", *args], workdir=repo_on_worker(settings),
                      env=PGO_ENV, timeout=SILENCE_TIMEOUT, maxTime=MAX_STEP_TIME, logEnviron=False, **kwargs)


def result_reading(name, workdir):
    """How a phase's step reads its result: the record it wrote in workdir, if it writes one."""
    if name not in RECORDS:
        return {}
    where, read_record = RECORDS[name]
    return {"record": util.Transform(where, workdir, TEST_SET), "read_record": read_record,
            "warns": failed_tests if name == "test" else None, "in_build_summary": name in BUILD_SUMMARY}


def failed_tests(results: Mapping[str, Any]) -> bool:
    """A test run that completed with failed tests: warnings on its step, the verdict step decides."""
    return results["counts"]["failed"] > 0


def phase_steps(settings, pgo, workdir, prefix="", archive_kind="release", resume=False, **kwargs):
    """One step per phase of the pipeline, each with its own log.

    A PGO build trains its profile, or with the property profile=NAME|latest
    reuses an archived one (pipeline "reuse"): the union of both pipelines'
    phases, each step run only when its pipeline is the build's; the bolt
    step only for a configuration with `bolt = true` (pgo/build/phases.py runs).
    resume: a phase the work directory finished (in the interrupted build this
    one resumes, resume_step) is not run again.
    """
    common = ["build", "--version", util.Property("version"), "--config", util.Property("config"),
              "--source", util.Property("source"), "--pgo", pgo, "--workdir", workdir, "--tests", TEST_SET,
              *(["--resume"] if resume else [])]
    if pgo == "off":
        return [pgo_step(settings, prefix + name, [*common, "--phase", name], **result_reading(name, workdir),
                         **keep(prefix + name), **kwargs) for name in PIPELINES["off"]]
    # The build's own archive, never the master's: the entry the master picked is in it.
    common += ["--archive", WORKER_ARCHIVE, "--archive-kind", archive_kind, util.Transform(
        lambda profile, entry: ["--profile-from", entry] if reusing(profile) else [],
        util.Property("profile", "train"), util.Property(ENTRY_PROPERTY, ""))]
    order = [*PIPELINES["on"]]
    order.insert(order.index(PhaseName.OPTIMIZED), PhaseName.IMPORT)
    steps = profile_from_master(settings)
    for name in order:
        wanted = [pipeline for pipeline in ("on", "reuse") if name in PIPELINES[pipeline]]
        steps.append(pgo_step(settings, prefix + name, [*common, "--phase", name], **result_reading(name, workdir),
                              **keep(prefix + name), **kwargs,
                              doStepIf=lambda step, name=name, wanted=wanted: build_pipeline(step) in wanted
                              and configured(name, step)))
        if name == "archive":
            steps += profile_to_master(settings)
    return steps


def when_pipeline(pipeline):
    """The steps of one pipeline only (a trained build's or a reusing one's), hidden in the other's builds."""
    return {"doStepIf": lambda step: build_pipeline(step) == pipeline,
            "hideStepIf": lambda results, step: results == SKIPPED}


def profile_to_master(settings):
    """The profile the archive phase stored in the build's own archive goes to the master's, checked there."""
    stored = transfers(settings, "stored.json")
    return [bb_steps.DirectoryUpload(name="upload-profile-archive", workersrc=WORKER_ARCHIVE,
                                     masterdest=transfers(settings, "upload"), haltOnFailure=True,
                                     **when_pipeline("on")),
            MasterPgoCommand(name="store-profile", command=[
                "archive", "add", "--from", transfers(settings, "upload"), "--archive", settings.archive,
                "--record", stored], record=stored, sets={ENTRY_PROPERTY: "entry"}, **when_pipeline("on"))]


def profile_from_master(settings):
    """A reusing build's profile: the master picks it by what the worker needs and sends it, with its sha256,
    which the worker checks before the entry goes into its own archive (and so before the import)."""
    wants, picked, sent = (transfers(settings, name) for name in ("wants.json", "picked.json", "profile.tar"))
    return [pgo_step(settings, "profile-wants", [
                "archive", "wants", "--config", util.Property("config"), "--version", util.Property("version"),
                "--profile", util.Property("profile"), "--out", WANTS], **when_pipeline("reuse")),
            bb_steps.FileUpload(name="upload-profile-wants", workersrc=WANTS, masterdest=wants, haltOnFailure=True,
                                **when_pipeline("reuse")),
            MasterPgoCommand(name="pick-profile", command=[
                "archive", "pick", "--wants", wants, "--archive", settings.archive, "--out", sent,
                "--record", picked], record=picked, sets={ENTRY_PROPERTY: "entry", SHA256_PROPERTY: "sha256"},
                **when_pipeline("reuse")),
            bb_steps.FileDownload(name="download-profile", mastersrc=sent, workerdest=SENT_PROFILE,
                                  haltOnFailure=True, **when_pipeline("reuse")),
            pgo_step(settings, "receive-profile", [
                "archive", "add", "--from", SENT_PROFILE, "--sha256", util.Property(SHA256_PROPERTY),
                "--archive", WORKER_ARCHIVE], **when_pipeline("reuse"))]


def archive_upkeep(settings):
    """The master's archive pruned (pending profiles of releases never published, old nightlies: a failed
    prune only warns, the build is done), and the build's transfer folder removed, whatever became of it."""
    return [MasterPgoCommand(name="prune-profiles", command=["archive", "prune", "--archive", settings.archive],
                             haltOnFailure=False, flunkOnFailure=False, warnOnFailure=True),
            DiscardStaging(transfers(settings), name="discard-transfers")]


def test_verdict_step(settings, baseline):
    """Refuse the release when the optimised build fails a test that the baseline passes: the plain build,
    or the distribution's packages (pgo/build/testrun.py distribution_rerun).

    baseline(props): whether the build has a baseline to compare with; without it every failure counts.
    """
    @util.renderer
    def compared_with(props):
        return ["--baseline", f"{props.getProperty('builddir')}/work-plain"] if baseline(props) else []

    verdict = util.Transform(in_test_results(protocol.TEST_VERDICT), WORK, TEST_SET)
    return pgo_step(settings, "test-verdict", ["test-verdict", "--candidate", WORK, "--set", TEST_SET, compared_with],
                    record=verdict, read_record=test_verdict_summary, **keep("test-verdict"))


def upload_test_results(settings, workdir_name, build_name, **kwargs):
    """The test set's JUnit file, results and skip list, published beside the packages; each test's outcome
    in Buildbot's own store too (the build page's test results, a test's history across builds)."""
    return [bb_steps.MultipleFileUpload(name=f"upload-tests-{build_name}", workdir=test_results(workdir_name),
                                        workersrcs=list(protocol.TEST_REPORTS),
                                        masterdest=staging(settings, f"tests/{build_name}"),
                                        haltOnFailure=True, **kwargs),
            RecordTestResults(staging(settings, f"tests/{build_name}/{protocol.TEST_RESULTS}"),
                              "optimised" if build_name == "pgo" else build_name,
                              page=lambda buildid: tests_page(settings.url, buildid),
                              name=f"test-results-{build_name}", **kwargs)]


def version_step(settings):
    """'latest' the master could not resolve (the nightly's, or a source only the worker sees):
    the worker resolves it once, before any phase, and the build goes on with that version."""
    return ResolveVersion(name="version", command=[
        "python3", "-m", "pgo", "latest", "--config", util.Property("config"), "--source", util.Property("source"),
        "--record", VERSION_RECORD], record=VERSION_RECORD,
        workdir=repo_on_worker(settings), env=PGO_ENV, logEnviron=False, haltOnFailure=True,
        doStepIf=lambda step: step.getProperty("version") == LATEST,
        hideStepIf=lambda results, step: results == SKIPPED)


def reusing(profile):
    return bool(profile) and profile != "train"


def build_pipeline(step):
    return "reuse" if reusing(step.getProperty("profile", "train")) else "on"


def plan(step):
    """The build's plan: its configuration resolved once on the worker by the source phase (protocol.PLAN),
    kept by the source step (buildmaster/kept.py); None before it, or when it could not be read."""
    return step.getProperty("plan")


def configured(name, step):
    """Whether the build's configuration runs a phase of its pipeline, by its plan: the bolt phase only
    with `bolt = true`; the other phases do not ask it. Without a plan the step runs, and the worker
    refuses a phase its build does not run: loudly, never skipped by a guess."""
    return name != "bolt" or plan(step) is None or name in plan(step)["phases"]


# A release's work that an interrupted build of the same request leaves for the next (pgo/build/resume.py), and what
# every release makes anew.
RESUMABLE = ("work", "work-plain", *BUILD_ARCHIVE_FILES)
NOT_RESUMED = ("bench", "release-profile")


@util.renderer
def release_request(props):
    """The master's side of a release's request (pgo/build/resume.py): what decides its work."""
    return json.dumps({"version": props.getProperty("version"), "config": props.getProperty("config"),
                       "source": props.getProperty("source"), "profile": props.getProperty("profile", "train"),
                       "tests": props.getProperty("tests", protocol.DEFAULT_TEST_SET),
                       "baseline": props.getProperty("baseline", "auto"),
                       "image": image_running(props)}, sort_keys=True)


def resume_step(settings):
    """Keep the work of an interrupted build of the same request (a lost worker, `./release stop`), else
    start clean."""
    return pgo_step(settings, "resume", ["resume", "--folder", BUILDER_FOLDER,
                                         "--request", release_request, "--keep", *RESUMABLE,
                                         "--clean", *NOT_RESUMED])


def forget_request_step(settings):
    """The build ended (any result: run after a failure or a cancel too), so the next one starts clean; an
    interrupted build never gets here (no worker to run it on), and the next resumes it."""
    return pgo_step(settings, "forget-request", ["resume", "--folder", BUILDER_FOLDER,
                                                 "--forget"], alwaysRun=True, haltOnFailure=False,
                    flunkOnFailure=False, warnOnFailure=True)


def clean_step(*names):
    return bb_steps.ShellCommand(name="clean", descriptionDone="clean", command=["rm", "-rf", *names],
                                 workdir=BUILDER_FOLDER, haltOnFailure=True,
                                 logEnviron=False)


def benchmark_wanted(step):
    """'auto': gate the releases of products the benchmark can measure."""
    choice = step.getProperty("benchmark", "auto")
    if choice == "auto":     # by the plan; without one the gate runs, and fails a product it cannot measure
        return plan(step) is None or plan(step)["product"] in BENCHMARKED_PRODUCTS
    return choice == "on"


def plain_wanted(step):
    """Whether the release makes its plain build: a gated release whose baseline is not the distribution's
    packages (the baseline step's record, kept as a property; without it, the plain build)."""
    chosen = step.getProperty(BASELINE_PROPERTY) or {}
    return benchmark_wanted(step) and chosen.get("kind") != "distribution"


def baseline_step(settings):
    return pgo_step(settings, "baseline", [
        "baseline", "--candidate", WORK, "--workdir", PLAIN, "--choice", util.Property("baseline", "auto")],
        record=on_worker(f"work-plain/{protocol.BASELINE_RECORD}"), read_record=baseline_summary,
        doStepIf=benchmark_wanted, **keep("baseline"))


def wanted_formats(platform, props):
    chosen = props.getProperty("formats") or []
    return [f for f in platform.formats if f in chosen]


class TriggerPackages(bb_steps.Trigger):
    """Trigger the package builds of the formats the release asked for (property `formats`)."""

    def __init__(self, platform, **kwargs):
        self.platform = platform
        super().__init__(schedulerNames=[package_builder_name(platform, f) for f in platform.formats], **kwargs)

    def getSchedulersAndProperties(self):
        wanted = {package_builder_name(self.platform, f) for f in wanted_formats(self.platform, self)}
        return [s for s in super().getSchedulersAndProperties() if s["sched_name"] in wanted]


def gate_options(settings):
    """The release policy, with what the master settings override."""
    options = ["--policy", RELEASE.name]
    if settings.min_speedup is not None:
        options += ["--min-speedup", str(settings.min_speedup)]
    if settings.inconclusive is not None:
        options += ["--inconclusive", settings.inconclusive]
    return options


def release_factory(settings, platform):
    staged = staging(settings)
    f = pgo_factory()
    f.addStep(GiveUpOnLostWorkers(settings.max_lost_workers))
    f.addStep(resume_step(settings))
    f.addStep(version_step(settings))
    f.addSteps(phase_steps(settings, "on", WORK, resume=True))
    # The benchmark's baseline: the distribution's own packages of the source the release built, when the
    # configuration builds as the distribution does and its archive serves them (the server users would
    # otherwise install), else the plain build (pgo/build/baseline.py).
    f.addStep(baseline_step(settings))
    # The plain build is then the benchmark's baseline and the tests': a test failing on both is the
    # machine's doing, one failing on the optimised build only the profile's or LTO's.
    f.addSteps(phase_steps(settings, "off", PLAIN, prefix="baseline-", resume=True, doStepIf=plain_wanted))
    # The test results first (to the staging folder, published only with the release; into Buildbot's store):
    # a refused release's too.
    f.addSteps(upload_test_results(settings, "work", "pgo"))
    f.addSteps(upload_test_results(settings, "work-plain", "plain", doStepIf=plain_wanted))
    # Against the plain build's test run, or the failed tests run again on the distribution's packages.
    f.addStep(test_verdict_step(settings, baseline=benchmark_wanted))
    f.addStep(pgo_step(settings, "benchmark", [
        "bench", "--baseline", on_worker(protocol.staged("work-plain")),
        "--candidate", on_worker(protocol.staged("work")),
        "--out", BENCH, *settings.bench_options, *gate_options(settings)],
        record=BENCH_RESULT, read_record=bench_verdict_summary, verdict_on_failure=True, doStepIf=benchmark_wanted,
        **keep("benchmark")))
    # The archive phase stored the profile for later builds (--profile-from); the
    # release's own one-entry archive is published with its packages, or not at all.
    f.addStep(pgo_step(settings, "release-profile",
                       ["archive", "store", "--workdir", WORK, "--archive", RELEASE_PROFILE, "--kind", "release"]))
    f.addStep(bb_steps.DirectoryUpload(name="upload-profile", workersrc=RELEASE_PROFILE,
                                       masterdest=staging(settings, "profile-archive"),
                                       haltOnFailure=True))
    f.addStep(bb_steps.DirectoryUpload(name="upload-benchmark", workersrc=BENCH,
                                       masterdest=staging(settings, "benchmark"),
                                       doStepIf=benchmark_wanted, haltOnFailure=True))
    f.addStep(bb_steps.FileUpload(name="upload-baseline", workersrc=on_worker(f"work-plain/{protocol.BASELINE_RECORD}"),
                                  masterdest=staging(settings, protocol.BASELINE_RECORD),
                                  doStepIf=benchmark_wanted, haltOnFailure=True))
    f.addStep(bb_steps.MultipleFileUpload(name="upload-build-info", workdir=WORK, workersrcs=BUILD_INFO_FILES,
                                          masterdest=staged, haltOnFailure=True))
    f.addStep(TriggerPackages(platform, name="packages", waitForFinish=True, haltOnFailure=True,
                              doStepIf=lambda step: bool(wanted_formats(platform, step)),
                              set_properties={"pgo_workdir": WORK, "staging": staged,
                                              "release_worker": util.Property("workername"),
                                              IMAGE_PROPERTY: running_image}))
    published = util.Transform(lambda version: str(publish.release_dir(settings.downloads, version, platform.name)),
                               util.Property("version"))
    f.addStep(PublishFolder(staged, published, served=(settings.downloads, settings.downloads_url)))
    # The archive phase stored the profile as pending: only a published release's
    # profile becomes a release profile, which later builds take as `latest`.
    f.addStep(MasterPgoCommand(name="promote-profile", command=[
        "archive", "promote", util.Property(ENTRY_PROPERTY), "--archive", settings.archive, "--kind", "release"]))
    f.addStep(DiscardStaging(staged))
    f.addSteps(archive_upkeep(settings))
    f.addStep(forget_request_step(settings))
    return f


def package_factory(settings, package_format):
    f = pgo_factory()
    f.addStep(GiveUpOnLostWorkers(settings.max_lost_workers))
    f.addStep(clean_step("packages"))
    f.addStep(pgo_step(settings, f"package-{package_format}", [
        "package", "--workdir", util.Property("pgo_workdir"), "--format", package_format, "--out", PACKAGES],
        record=on_worker(f"packages/{protocol.PACKAGE_INFO}"), read_record=package_summary))
    # Each format's folder has its own buildinfo.json and sha256sums.txt.
    f.addStep(bb_steps.DirectoryUpload(name="upload-packages", workersrc=PACKAGES,
                                       masterdest=util.Interpolate(f"%(prop:staging)s/{package_format}"),
                                       haltOnFailure=True))
    return f


def nightly_factory(settings):
    staged = staging(settings)

    @util.renderer
    def destination(props):
        name = publish.nightly_name(props.getProperty("version"), props.getProperty("buildnumber"))
        return str(settings.downloads / "nightly" / name)

    f = pgo_factory()
    f.addStep(GiveUpOnLostWorkers(settings.max_lost_workers))
    f.addStep(clean_step("work", "packages", *BUILD_ARCHIVE_FILES))
    f.addStep(version_step(settings))
    f.addSteps(phase_steps(settings, "on", WORK, archive_kind="nightly"))
    f.addSteps(upload_test_results(settings, "work", "pgo"))
    f.addStep(test_verdict_step(settings, baseline=lambda props: False))
    f.addStep(pgo_step(settings, "package-bintar",
                       ["package", "--workdir", WORK, "--format", "bintar", "--out", PACKAGES],
                       record=on_worker(f"packages/{protocol.PACKAGE_INFO}"), read_record=package_summary))
    f.addStep(bb_steps.DirectoryUpload(name="upload-tarball", workersrc=PACKAGES,
                                       masterdest=staging(settings, "bintar"), haltOnFailure=True))
    f.addStep(bb_steps.MultipleFileUpload(name="upload-build-info", workdir=WORK, workersrcs=BUILD_INFO_FILES,
                                          masterdest=staged, haltOnFailure=True))
    f.addStep(PublishFolder(staged, destination, served=(settings.downloads, settings.downloads_url),
                            keep=settings.nightly.keep))
    f.addStep(DiscardStaging(staged))
    f.addSteps(archive_upkeep(settings))
    return f
