"""The work directory's contract: every path in it, which phase writes and reads it, the identity it carries.

A `+pgo` label is only as good as the chain behind it: the source the profile
was trained on, the compiler that wrote and reads the .gcda files, the flags,
the profile itself. So each phase records in state.json, beside "done", the
identity of what it made; before a phase runs, every phase that made one of its
inputs must be recorded as done, and with the identity the phase is about to
use, or it refuses and names the difference. A phase that fails is recorded as
failed, so nothing takes over what it left behind; a phase that runs again
first removes every later phase's outputs, files included.

Build trees carry a token, new for every build: the optimised build's profile
check, the staged tree and the packages name it, so a label can only come from
the check of the very tree that holds the binary.
"""

import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pgo import PipelineError
from pgo.base.atomic import write_json
from pgo.base.checksums import sha256_file

# The work directory's names are the protocol's (the master reads some of them): pgo/base/protocol.py.
from pgo.base.protocol import (
    ARCHIVE_RECORD,
    BASELINE_RECORD,
    BINTAR_TREE,
    BOLT_CHECK,
    BOLT_OUTPUTS,
    BUILD_INFO,
    OPTIMIZED_OUTPUTS,
    PACKAGE_INFO,
    PLAIN_OUTPUTS,
    PLAN,
    PROFILE,
    PROFILE_CHECK,
    PROFILE_USE,
    RPM_TREE,
    SETTINGS,
    SOURCE_RECORD,
    STAGE,
    STAGE_OUTPUTS,
    STATE,
    TESTS,
    TRAINING_COUNTS,
    PhaseName,
    Variant,
)
from pgo.core import profile
from pgo.core.config import BuildConfig, Product, from_record
from pgo.core.toolchain import Compiler, fingerprint
from pgo.core.workdir import Settings, Workdir, read_json

BUILD_TOKEN = "pgo-build-token"


@dataclass(frozen=True)
class TestRequest:
    """What `pgo test` asks of the test phase beyond the work directory's settings: another test set,
    a time limit, another vardir (None: the settings' set, the set's own limit, the work directory's)."""

    set_name: str | None = None
    minutes: float | None = None
    vardir: str | None = None


# A build's own test run: what the settings say.
NO_TEST_REQUEST = TestRequest()


class PhaseContext(Protocol):
    """What a phase and the parts it calls read of the build they run in; pgo/build/phases.py makes it (its
    `context`, the one place), the layers below take it by this interface."""

    @property
    def workdir(self) -> Workdir: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def config(self) -> BuildConfig: ...
    @property
    def product(self) -> Product: ...
    @property
    def profile(self) -> Path: ...
    @property
    def tests(self) -> TestRequest: ...
    @property
    def compiler(self) -> Compiler: ...
    @property
    def environment(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Item:
    path: str
    written_by: tuple[str, ...]
    read_by: tuple[str, ...]
    carries: str

    def __post_init__(self):
        # A phase by its name (a misspelt one would silently guard nothing), or a command.
        for who in (*self.written_by, *self.read_by):
            if who not in list(PhaseName) and who not in WHOLE and not who.startswith("pgo "):
                raise ValueError(f"contract item {self.path}: {who!r} is neither a phase nor a command")


WHOLE = ("every phase", "the master")

# Commands (`pgo build`, `pgo package`) appear beside the phases: they read and write the contract too.
ITEMS = (
    Item(SETTINGS, ("pgo build",), ("every phase", "pgo package", "pgo archive store", "pgo archive promote"),
         "the options the work directory was set up with; other options are refused"),
    Item(STATE, ("every phase",), ("every phase", "pgo package", "pgo archive store"),
         "per phase: done (with the identity of what it made) or failed (with the reason)"),
    Item("src", ("source",), ("instrumented", "optimized", "bolt", "plain", "stage", "pgo package"),
         "link to the product line's shared source tree, held by each reader while it runs (pgo/build/source.py)"),
    Item(SOURCE_RECORD, ("source",), ("import", "archive", "stage"), "source checksum, kind, origin, version"),
    Item(PLAN, ("source",), ("the master", "pgo package", "pgo archive store", "pgo test-verdict"),
         "the configuration resolved once, whole, and the phases the build runs (the master's steps run or "
         "skip by it; the commands acting on the build's results read its configuration here)"),
    Item("build/pgo", ("instrumented", "optimized", "bolt"), ("check", "bolt", "stage"),
         "the instrumented, then the optimised build tree; its build token; with bolt, its server binary "
         "BOLTed, the linked one kept beside it (<name>.pre-bolt)"),
    Item("build/instrumented-install", ("instrumented",), ("train",), "the instrumented server the training runs"),
    Item(PROFILE, ("train", "import"), ("check", "optimized", "archive"), "the .gcda set; profile id = its checksum"),
    Item("train", ("train",), ("check",),
         "the training's work folder: its report (archived with the profile) and the setup's counters"),
    Item(PROFILE_CHECK, ("check", "import"), ("optimized", "archive"),
         "profile id and the profile's figures, with the check's identity"),
    Item(TRAINING_COUNTS, ("check",), ("pgo bench --training-counts",),
         "how often the training entered each function, by name (pgo/core/profile.py function_entries), "
         "with the check's identity; not written for an imported profile (no notes)"),
    Item(PROFILE_USE, ("optimized",), ("bolt", "archive", "stage", "pgo package"),
         "the optimised build's profile check: passed or not, the hot objects whose own record of their "
         "options shows the profile in effect, hot coverage, warnings, whether the profile is stale, with its "
         "identity (profile id, compiler, build environment) and the build token of the tree it checked"),
    Item("bolt", ("bolt",), (),
         "BOLT's work folder: the optimised build installed with its server binary instrumented by BOLT, the "
         "training's work folder, its profiles (.fdata, one per process) merged, and the BOLTed binary"),
    Item(BOLT_CHECK, ("bolt",), ("stage", "pgo package"),
         "BOLT's check of the binary it rewrote: passed or not, the profile's functions that matched and did not, "
         "the code it moved, the BOLTed binary's checksum and the build token of its tree, with its identity"),
    Item(OPTIMIZED_OUTPUTS, ("optimized",), ("bolt", "stage", "pgo package"),
         "every ELF file and static archive of the optimised build tree its check proved, by checksum: what bolt "
         "reads, stage installs and the packagers take must still be it"),
    Item(BOLT_OUTPUTS, ("bolt",), ("stage", "pgo package"),
         "the same of the tree with the BOLTed binary in it"),
    Item(ARCHIVE_RECORD, ("archive",), ("pgo package", "pgo archive promote"),
         "the archive entry of the profile, and its kind when stored"),
    Item("build/plain", ("plain",), ("stage",), "the plain build tree; its build token"),
    Item(PLAIN_OUTPUTS, ("plain",), ("stage", "pgo package"),
         "every ELF file and static archive of the plain build tree its check proved, by checksum"),
    Item(STAGE, ("stage",), ("test", "pgo package"), "the installed tree the packagers take"),
    Item(STAGE_OUTPUTS, ("stage",), ("test", "pgo package"),
         "every ELF file and static archive stage installed, by checksum: what the tests run and the packagers "
         "take must still be it"),
    Item(BUILD_INFO, ("stage",), ("test", "pgo package"),
         "the staged build: its identity, build token and profile check, copied from the build that made it"),
    Item(TESTS, ("test",), ("pgo test-verdict",),
         "per test set: results.json (counts, each failed test with its first error line, the flaky ones, the "
         "staged build's token), junit.xml (the runner's report), the skip list used and the runner's vardir"),
    Item(RPM_TREE, ("pgo package",), ("pgo package",),
         "the rpm format's tree: configured with the checked build tree's CMake command plus -DRPM=<target>, never "
         "compiled, the build tree's other files hard-linked in, and the recipe's layout file; made again each time"),
    Item(BINTAR_TREE, ("pgo package",), ("pgo package",),
         "the bintar's tree of a build whose layout installs to absolute paths (Debian's): configured with the "
         "checked build tree's CMake command plus the bintar recipe's standalone layout, never compiled, the build "
         "tree's other files hard-linked in; made again each time"),
    Item(BASELINE_RECORD, ("pgo baseline",), ("the master", "pgo test-verdict"),
         "in a release's baseline work directory: whether the baseline is the distribution's packages (which, their "
         "checksums, the server's version) or the plain build (and why); with the distribution's, `debs/` holds the "
         "packages and `stage` their files, and no phase runs there"),
    Item(PACKAGE_INFO, ("pgo package",), ("pgo prove",),
         "in a published folder, not the work directory: build-info.json's identity and check, and the packages"),
)

# The identity fields a phase's output depends on, and so records and compares.
SOURCE_ID, COMPILER_ID, FLAGS_ID, PROFILE_ID = "source_checksum", "compiler", "flags_fingerprint", "profile_id"
# The environment variables that change a build's code (pgo/core/toolchain.py build_environment): part of
# the flags fingerprint too, and named here, before it, so that a refusal says which one changed.
ENVIRONMENT_ID = "build_environment"
CARRIES = {
    PhaseName.SOURCE: (SOURCE_ID,),
    PhaseName.INSTRUMENTED: (SOURCE_ID, COMPILER_ID, ENVIRONMENT_ID, FLAGS_ID),
    PhaseName.TRAIN: (SOURCE_ID, COMPILER_ID, ENVIRONMENT_ID, FLAGS_ID, PROFILE_ID),
    PhaseName.CHECK: (SOURCE_ID, COMPILER_ID, ENVIRONMENT_ID, FLAGS_ID, PROFILE_ID),
    PhaseName.IMPORT: (SOURCE_ID, COMPILER_ID, ENVIRONMENT_ID, FLAGS_ID, PROFILE_ID),
    PhaseName.OPTIMIZED: (SOURCE_ID, COMPILER_ID, ENVIRONMENT_ID, FLAGS_ID, PROFILE_ID),
    # BOLT rewrites the optimised build's binary: the same identity.
    PhaseName.BOLT: (SOURCE_ID, COMPILER_ID, ENVIRONMENT_ID, FLAGS_ID, PROFILE_ID),
    PhaseName.ARCHIVE: (PROFILE_ID,),
    PhaseName.PLAIN: (SOURCE_ID, COMPILER_ID, ENVIRONMENT_ID, FLAGS_ID),
    # Stage only installs: the identity of what it staged is its build's (build-info.json).
    PhaseName.STAGE: (SOURCE_ID,),
    # The tests name the staged build by its token (results.json).
    PhaseName.TEST: (SOURCE_ID,),
}
# The phases that make a build tree, and the variant each makes.
BUILDS = {PhaseName(variant): variant for variant in Variant}


def inputs(phase):
    return tuple(item.path for item in ITEMS if phase in item.read_by)


def outputs(phase):
    return tuple(item.path for item in ITEMS if phase in item.written_by)


def location(workdir, settings, path):
    return workdir.profile(settings) if path == PROFILE else workdir.root / path


# --- identity -------------------------------------------------------------------

def identity(ctx: PhaseContext, fields):
    return {field: current(ctx, field) for field in fields}


def current(ctx: PhaseContext, field):
    if field == SOURCE_ID:
        record = ctx.workdir.root / SOURCE_RECORD
        return read_json(record)["checksum"] if record.is_file() else None
    if field == COMPILER_ID:
        return ctx.compiler.identity()
    if field == ENVIRONMENT_ID:
        return ctx.environment
    if field == FLAGS_ID:
        return fingerprint(ctx.config, ctx.environment)
    if field == PROFILE_ID:
        return profile_id(ctx.workdir, ctx.settings) if profile.gcda_files(ctx.profile) else None
    raise ValueError(field)


def resolved_config(workdir: Workdir) -> BuildConfig:
    """The configuration the work directory's build resolved once, at its source phase (PLAN): what a
    command acting on its results (`pgo package`, `pgo archive`, `pgo test-verdict`) goes by, whatever
    pgo/configs.toml says now."""
    path = workdir.root / PLAN
    if not path.is_file():
        raise PipelineError(f"{workdir.root} has no {PLAN}: its build never ran phase source (run `pgo build`)")
    try:
        return from_record(read_json(path)["resolved"])
    except (KeyError, PipelineError) as e:
        raise PipelineError(f"{path} is not a plan of this pgo ({e}): run phase source again") from None


def profile_id(workdir, settings):
    """The id of a work directory's profile, named after the version it was trained on: a reused
    profile's is its archive entry's (the entry's name ends in it), whatever version is built with it."""
    trained = profile.trained_version(settings.profile_from) if settings.profile_from else settings.version
    return profile.profile_id(workdir.profile(settings), trained)


def describe(field, value):
    if field == COMPILER_ID and value:
        return f"{value['path']} (GCC {value['version']})"
    if field == ENVIRONMENT_ID:
        return "; ".join(f"{name}={setting}" for name, setting in value.items()) or "none"
    return str(value)


# --- before, during and after a phase -------------------------------------------

def maker(pipeline, phase, path):
    """The phase of this pipeline that last writes `path` before `phase` runs (None: not this pipeline's)."""
    earlier = pipeline[:pipeline.index(phase)]
    return next((name for name in reversed(earlier) if path in outputs(name)), None)


def require(ctx: PhaseContext, pipeline, phase):
    """Refuse to run `phase` unless every input's maker succeeded, with the identity `phase` would use."""
    state = ctx.workdir.state()
    makers = []
    for path in inputs(phase):
        made_by = maker(pipeline, phase, path)
        if made_by is None:
            continue
        record = state["done"].get(made_by)
        if record is None:
            failure = state["failed"].get(made_by)
            why = f", but its last run failed ({failure['error']})" if failure else ""
            raise PipelineError(f"phase {phase} needs {path} from phase {made_by}{why}: "
                                f"run phase {made_by} first")
        if not location(ctx.workdir, ctx.settings, path).exists():
            raise PipelineError(f"phase {phase} needs {path}, which phase {made_by} made but is gone: "
                                f"run phase {made_by} again")
        makers.append((made_by, record))
    for made_by, record in makers:
        for field in CARRIES[phase]:
            if field not in record.get("identity", {}):
                continue
            now, then = current(ctx, field), record["identity"][field]
            if now != then:
                raise PipelineError(f"phase {phase} would use {field.replace('_', ' ')} {describe(field, now)}, "
                                    f"but phase {made_by} made its input with {describe(field, then)}: "
                                    f"{REMEDY[field].format(phase=made_by)}")


REMEDY = {
    SOURCE_ID: "run phase source again and the phases after it",
    COMPILER_ID: "put that compiler first on PATH again, or rebuild with this one from the instrumented phase",
    ENVIRONMENT_ID: "set the environment back to what phase {phase} ran in, or run the pipeline again with --fresh",
    FLAGS_ID: "the configuration changed: run the pipeline again with --fresh",
    PROFILE_ID: "the profile directory changed since: run phase {phase} again",
}


def invalidate(ctx, pipeline, phase):
    """Before `phase` runs: it and every later phase stop being done; their outputs go.

    A later phase's output that an earlier phase also makes (the build tree the
    instrumented and the optimised build share) stays: it is still that phase's.
    The phase's own directories stay for it to reuse or replace; its own records go,
    so a failure leaves none of them behind.
    """
    later = pipeline[pipeline.index(phase) + 1:]
    kept = {path for name in pipeline[:pipeline.index(phase)] for path in outputs(name)}
    ctx.workdir.forget([phase, *later])
    doomed = [p for name in later for p in outputs(name) if p not in kept]
    doomed += [p for p in outputs(phase) if p.endswith(".json")]
    for path in doomed:
        remove(location(ctx.workdir, ctx.settings, path))


def remove(path):
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def succeeded(ctx, phase, seconds, usage=None):
    """Record `phase` as done, with its identity and what it cost (pgo/base/runner.py PhaseLog.usage)."""
    ctx.workdir.mark_done(phase, seconds, dict(stamp(ctx, phase), **(usage or {})))


def write(ctx, phase, name, data):
    """A phase's JSON record, stamped like its state."""
    write_json(ctx.workdir.root / name, dict(data, **stamp(ctx, phase)))


def stamp(ctx, phase):
    """The identity a phase made its output with, and the token of the build tree it made."""
    made = {"identity": identity(ctx, CARRIES[phase])}
    if phase in BUILDS:
        made["build_token"] = build_token(ctx.workdir.build(BUILDS[phase]))
    return made


# --- build tokens ---------------------------------------------------------------

def new_build_token(build_dir):
    """Before compiling: this tree's build is a new one, whatever checks named the old one."""
    write_json(build_dir / BUILD_TOKEN, uuid.uuid4().hex)


def build_token(build_dir):
    path = build_dir / BUILD_TOKEN
    return read_json(path) if path.is_file() else None


# --- the proven outputs ---------------------------------------------------------

# The files a phase's proof or install vouches for, per phase; a tree changed after it (rebuilt with
# other flags, a binary copied over) is named before anything installs, tests or ships it.
PROVEN_OUTPUTS = {PhaseName.OPTIMIZED: OPTIMIZED_OUTPUTS, PhaseName.PLAIN: PLAIN_OUTPUTS,
                  PhaseName.BOLT: BOLT_OUTPUTS, PhaseName.STAGE: STAGE_OUTPUTS}
ELF_MAGIC, AR_MAGIC = b"\x7fELF", b"!<arch>\n"


def compiled_outputs(tree):
    """{path relative to tree: sha256} of every ELF file and static archive in it, links not followed:
    what a compile or a link makes."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames.sort()
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                head = f.read(len(AR_MAGIC))
            if head.startswith(ELF_MAGIC) or head == AR_MAGIC:
                found[os.path.relpath(path, tree)] = sha256_file(path)
    return found


def record_outputs(ctx, phase, tree):
    """Record what `phase` proved or installed in tree (PROVEN_OUTPUTS)."""
    write(ctx, phase, PROVEN_OUTPUTS[phase], {"tree": tree.name, "files": compiled_outputs(tree)})


def require_outputs(workdir, phase, tree, remedy, renamed=None):
    """Refuse unless tree holds exactly what `phase` recorded (record_outputs). renamed: {path now: path
    recorded} for a file a later phase kept under another name (the linked binary BOLT keeps beside its own)."""
    record = workdir.root / PROVEN_OUTPUTS[phase]
    if not record.is_file():
        raise PipelineError(f"{workdir.root} has no {record.name}: what phase {phase} made in {tree} is not on "
                            f"record, so nothing proves it is what the phase checked: {remedy}")
    proven = read_json(record)["files"]
    now = compiled_outputs(tree)
    for kept, recorded in (renamed or {}).items():
        if kept in now:
            now[recorded] = now.pop(kept)
    changed = sorted(p for p in proven.keys() | now.keys() if proven.get(p) != now.get(p))
    if changed:
        first = changed[0]
        how = "is new" if first not in proven else "is gone" if first not in now else "changed"
        raise PipelineError(f"{tree / first} {how} since phase {phase} {'installed' if phase == 'stage' else 'proved'} "
                            f"the tree ({len(changed)} of its {len(proven)} compiled files differ): {remedy}")


# --- what the commands after the pipeline rely on -------------------------------

def staged_build(workdir):
    """build-info.json of a staged build, proven to describe the build tree and its passed check."""
    failure = workdir.state()["failed"].get(PhaseName.OPTIMIZED)
    if failure:
        raise PipelineError(f"the optimised build in {workdir.root} failed ({failure['error']}): it is never "
                            "packaged as PGO; `pgo package --as-plain` packages a plain build of its configuration")
    info_file = workdir.root / BUILD_INFO
    if not info_file.is_file():
        raise PipelineError(f"{info_file} is missing: the work directory's build is not staged "
                            "(run `pgo build` to its end first)")
    info = read_json(info_file)
    variant = info.get("variant")
    if variant not in (Variant.OPTIMIZED, Variant.PLAIN):
        raise PipelineError(f"{info_file} names no build variant: stage it again (pgo phase stage)")
    done = workdir.state()["done"]
    for phase in (variant, PhaseName.STAGE):
        if phase not in done:
            raise PipelineError(f"phase {phase} of {workdir.root} has not succeeded since its last run: "
                                "nothing there may be packaged")
    tree_token = build_token(workdir.build(variant))
    if not tree_token or info.get("build_token") != tree_token or done[variant].get("build_token") != tree_token:
        raise PipelineError(f"the staged build is not the {variant} build now in {workdir.build(variant)}: "
                            "rerun phase stage")
    if variant == Variant.OPTIMIZED:
        check = info.get("check") or {}
        check_file = workdir.root / PROFILE_USE
        if not check_file.is_file() or read_json(check_file) != check:
            raise PipelineError(f"{workdir.root} has no profile-use.json of the staged build: its profile use "
                                "is not proven, so it must not be packaged as PGO (rerun phase optimized)")
        if not check.get("passed") or check.get("build_token") != tree_token:
            raise PipelineError(f"the optimised build in {workdir.root} did not pass its profile check: it is "
                                "never packaged as PGO; `pgo package --as-plain` packages a plain build of it")
        if info.get("bolt") is not None and checked_bolt(workdir, workdir.build(variant)) != info["bolt"]:
            raise PipelineError(f"the staged build's BOLT check is not {workdir.root / BOLT_CHECK}: rerun phase stage")
    proven = "bolt" if info.get("bolt") is not None else variant
    require_outputs(workdir, proven, workdir.build(variant), f"run phase {variant} again, then the phases after it")
    require_outputs(workdir, "stage", workdir.stage, "rerun phase stage")
    return info


def checked_bolt(workdir, tree):
    """bolt.json of the BOLTed binary now in tree, proven: it passed, and is of this very tree (its build
    token) and binary (its checksum). Else an error that says why it is not."""
    path = workdir.root / BOLT_CHECK
    if not path.is_file():
        raise PipelineError(f"{workdir.root} has no {BOLT_CHECK}: the BOLTed binary is not proven (run phase bolt)")
    check = read_json(path)
    if not check.get("passed"):
        raise PipelineError(f"the BOLTed binary did not pass its check: {'; '.join(check.get('problems', []))}")
    binary = tree / check["binary"]
    if (check.get("build_token") != build_token(tree) or not binary.is_file()
            or sha256_file(binary) != check["sha256"]):
        raise PipelineError(f"{binary} is not the binary phase bolt made and checked: run phase bolt again")
    return check


def proven_profile(workdir, settings, use):
    """The id of a work directory's profile, proven: the phase that made it (the training's check, or the
    import of a reused one) and the optimised build succeeded with it, and it is still there. Else an
    error that says the profile is not `use`d (archived, promoted)."""
    done = workdir.state()["done"]
    for phase in (PhaseName.IMPORT if settings.profile_from else PhaseName.CHECK, PhaseName.OPTIMIZED):
        if phase not in done:
            raise PipelineError(f"phase {phase} of {workdir.root} has not succeeded since its last run: "
                                f"its profile is not proven, so it is not {use}")
    now = profile_id(workdir, settings)
    used = done[PhaseName.OPTIMIZED]["identity"][PROFILE_ID]
    if now != used:
        raise PipelineError(f"the profile in {workdir.profile(settings)} is {now}, but the optimised build used "
                            f"{used}: rerun the check and optimized phases first")
    return now
