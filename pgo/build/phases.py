"""The pipeline's phases, defined once as data.

Each phase has a name, a one-line title, a function that does the work, and the
work-directory paths it reads and writes (pgo/core/contract.py names them). The CLI
(`pgo build`, `pgo phase`), the Buildbot factory (buildmaster/factories.py) and the
tests all run these same definitions; a phase never knows which of them runs it.
"""

import os
import re
import shutil
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from pgo import REPO, PipelineError
from pgo.base import atomic, lines
from pgo.base.atomic import write_json
from pgo.base.checksums import sha256_file
from pgo.base.protocol import CONFIGURE_RECORD, DEFAULT_TEST_SET, PhaseName, Variant
from pgo.base.runner import MAKE_PROGRESS, NINJA_PROGRESS, PhaseLog, say
from pgo.build import bolt, reuse, source, testrun
from pgo.core import contract, profile, proof
from pgo.core.config import BuildConfig, Product, build_config, server_binary
from pgo.core.toolchain import (
    SERVER_LTO_LINK,
    Compiler,
    build_environment,
    config_flags,
    detect,
    gcov_binary,
    lto_tools,
)
from pgo.core.workdir import Settings, Workdir, read_json


@dataclass(frozen=True)
class Phase:
    name: str
    title: str
    run: Callable

    @property
    def inputs(self):
        return contract.inputs(self.name)

    @property
    def outputs(self):
        return contract.outputs(self.name)


@dataclass(frozen=True)
class Context:
    """What a phase needs: the work directory, its settings, configuration and compiler (contract.PhaseContext
    is its interface for the layers below). Made by `context` only."""

    workdir: Workdir
    settings: Settings
    config: BuildConfig
    profile: Path
    tests: contract.TestRequest = contract.NO_TEST_REQUEST

    @property
    def product(self) -> Product:
        return self.config.product

    @cached_property
    def compiler(self) -> Compiler:
        return detect(self.settings.cc, self.settings.cxx)

    @cached_property
    def environment(self) -> dict[str, Any]:
        """The environment variables this command's builds depend on (pgo/core/toolchain.py)."""
        return build_environment()


def context(workdir: Workdir, settings: Settings, tests: contract.TestRequest = contract.NO_TEST_REQUEST) -> Context:
    """The one place a Context is made: the configuration resolved (an unknown one refused), the test set
    the settings name checked."""
    config = build_config(settings.config)
    if settings.tests != "off":
        testrun.test_suite(config.product).test_set(settings.tests)
    return Context(workdir, settings, config, workdir.profile(settings), tests)


# --- the phases ---------------------------------------------------------------

def fetch_source(ctx, log):
    s = ctx.settings
    cache = ctx.workdir.cache(s)
    src, tree = source.fetch(s.source, s.version, ctx.product, cache / "src", cache, git_ref=s.git_ref,
                             suite=ctx.config.debian_suite, log=log, patched=ctx.config.debian_patches)
    link_source(ctx.workdir, tree)
    write_json(ctx.workdir.root / contract.SOURCE_RECORD,
               {"kind": src.kind, "origin": src.origin, "checksum": src.checksum, "version": s.version})
    write_json(ctx.workdir.root / contract.PLAN, plan(s, ctx.config))
    log.note(f"source {src.origin} sha256 {src.checksum} in {tree}")


@contextmanager
def source_tree(ctx, log=None):
    """The work directory's source in its line's shared tree, held for the block (pgo/build/source.py)."""
    s = ctx.settings
    cache = ctx.workdir.cache(s)
    record = read_json(ctx.workdir.root / contract.SOURCE_RECORD)
    with source.held(record, s.source, s.version, ctx.product, cache / "src", cache, git_ref=s.git_ref,
                     suite=ctx.config.debian_suite, log=log, patched=ctx.config.debian_patches) as tree:
        if ctx.workdir.src.resolve() != tree:     # a work directory of an older layout
            link_source(ctx.workdir, tree)
        yield tree


def link_source(workdir, tree):
    link = workdir.src
    if link.is_symlink():
        link.unlink()
    elif link.exists():
        shutil.rmtree(link)
    link.symlink_to(tree)


def reads_source(name):
    return "src" in PHASES[name].inputs


def build_variant(ctx, log, variant, comment):
    """Configure and compile one variant; the optimised one always from scratch."""
    build_dir = ctx.workdir.build(variant)
    args = configure_command(ctx, variant, build_dir, comment)
    # CMake reads a compiler launcher from the environment at a tree's first configure only: a tree
    # configured in another environment is configured again.
    configured = [str(a) for a in args] + [f"{name}={value}" for name, value in ctx.environment.items()]
    recorded = build_dir / CONFIGURE_RECORD
    same = recorded.is_file() and read_json(recorded) == configured
    # The profile is no ninja dependency: an incremental optimised build would
    # keep objects optimised with an older profile.
    if variant == Variant.OPTIMIZED or not same:
        shutil.rmtree(build_dir, ignore_errors=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    contract.new_build_token(build_dir)
    log.run(args)
    write_json(recorded, configured)
    tool, progress = BUILD_TOOLS[ctx.config.generator]
    log.run([part.format(tree=build_dir, jobs=os.cpu_count() or 2) for part in tool], progress=progress)


# How a tree of each generator is built, and its progress lines (pgo/base/runner.py). make's output is
# grouped per target (--output-sync): a compiler's warnings then follow the line that names its
# object, as Ninja prints them (pgo/core/profile.py warned_objects).
BUILD_TOOLS = {
    "Ninja": (("ninja", "-C", "{tree}", "-j", "{jobs}"), NINJA_PROGRESS),
    "Unix Makefiles": (("make", "-C", "{tree}", "-j{jobs}", "--output-sync=target"), MAKE_PROGRESS),
}


def configure_command(ctx, variant, build_dir, comment, extra=()):
    """The CMake command that configures one variant of the configuration in build_dir (and extra options)."""
    compile_flags, link_flags = config_flags(variant, ctx.config, ctx.profile, build_dir, ctx.workdir.src.resolve())
    # CMake puts these strings into the compile commands the shell runs: quote each
    # flag, so that a work directory with a space in its path builds too.
    compile_flags, link_flags = shell_words(compile_flags), shell_words(link_flags)
    return [
        # The shared tree's own path, the same for every build of this source.
        "cmake", "-S", ctx.workdir.src.resolve(), "-B", build_dir, "-G", ctx.config.generator,
        f"-DCMAKE_C_COMPILER={ctx.compiler.cc}", f"-DCMAKE_CXX_COMPILER={ctx.compiler.cxx}",
        *ctx.config.variant_cmake_args(variant),
        *ctx.settings.cmake_extra,
        *(lto_tools(ctx.compiler) if ctx.config.lto_in(variant) else ()),
        *(server_lto_link(ctx.product.name) if ctx.config.lto_server and ctx.config.lto_in(variant) else ()),
        f"-DCMAKE_C_FLAGS={compile_flags}",
        f"-DCMAKE_CXX_FLAGS={compile_flags}",
        *(f"-DCMAKE_{kind}_LINKER_FLAGS={link_flags}" for kind in ("EXE", "SHARED", "MODULE")),
        f"-D{ctx.product.comment_variable}={comment}",
        # The commands CMake generated, without a launcher: the optimisation level each object asks
        # for, which its own record must show (pgo/core/proof.py).
        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        *extra,
    ]


def server_lto_link(product_name):
    """The CMake option that links the product's server binary alone with LTO (`lto = "server"`): its own
    link flags, which come after the NO_LTO_LINK of every link (MariaDB's WITH_MYSQLD_LDFLAGS)."""
    return [f"-D{server_binary(product_name)['link_flags_variable']}={SERVER_LTO_LINK}"]


def prove_variant(ctx, log, variant):
    """Each object's own record of the options it was compiled with, judged for its variant (pgo/core/proof.py)."""
    build_dir = ctx.workdir.build(variant)
    flags = config_flags(variant, ctx.config, ctx.profile, build_dir, ctx.workdir.src.resolve())[0]
    records = proof.prove(build_dir, variant, flags, ctx.profile, ctx.product.hot_dirs)
    log.note(f"read the options that {records['recorded']} of {records['objects']} objects recorded, "
             f"in {records['seconds']} s")
    return records


def shell_words(flags):
    """Flags as one CMake flags string; double quotes, which CMake keeps through try_compile too."""
    return " ".join(f'"{flag}"' if " " in flag else flag for flag in flags)


def install(build_dir, prefix, log):
    shutil.rmtree(prefix, ignore_errors=True)
    if absolute_destinations(build_dir):
        # A layout that installs files to absolute paths (MariaDB's DEB layout: /etc/mysql,
        # /lib/systemd), which --prefix does not move: they would land in this machine's /etc. DESTDIR
        # moves every file: under it, prefix / keeps the relative layout --prefix gives, and puts the
        # absolute files beside it (etc/mysql/...).
        log.run(["cmake", "--install", build_dir, "--prefix", "/"], env={"DESTDIR": str(prefix)})
    else:
        log.run(["cmake", "--install", build_dir, "--prefix", prefix])
    if not any(prefix.glob("*")):
        raise PipelineError(f"installing {build_dir} put nothing into {prefix}")


# What CMake writes into a tree's install scripts for a destination that is an absolute path (a
# relative one is written as "${CMAKE_INSTALL_PREFIX}/...").
ABSOLUTE_DESTINATION = re.compile(r'file\(INSTALL DESTINATION "(/[^"]*)"')


def absolute_destinations(build_dir):
    """The absolute folders a build tree installs files to, sorted (none: an empty list)."""
    return sorted({folder for script in Path(build_dir).rglob("cmake_install.cmake")
                   for folder in ABSOLUTE_DESTINATION.findall(script.read_text(errors="replace"))})


def build_instrumented(ctx, log):
    build_variant(ctx, log, Variant.INSTRUMENTED, f"{comment_base(ctx)}, PGO-instrumented build")
    # The training runs the instrumented server from an installed tree, the
    # way users run it; its counters still go to the profile directory.
    install(ctx.workdir.build(Variant.INSTRUMENTED), ctx.workdir.install(Variant.INSTRUMENTED), log)


def train(ctx, log):
    # A profile is only valid for the source it came from: start empty.
    if ctx.profile.exists():
        stale = profile.gcda_files(ctx.profile)
        log.note(f"removing {len(stale)} stale .gcda files from {ctx.profile}")
        shutil.rmtree(ctx.profile)
    ctx.profile.mkdir(parents=True)
    shutil.rmtree(ctx.workdir.train, ignore_errors=True)
    ctx.workdir.train.mkdir(parents=True)
    run_training(ctx, log, ctx.workdir.install(Variant.INSTRUMENTED), ctx.workdir.train, ctx.profile)


def run_training(ctx, log, stage, work, counters):
    """The product's training workload (configs.toml `train`) against the build installed in stage;
    the instrumented programs it builds itself (profile_load) write their counters into counters."""
    values = {"repo": REPO, "work": work, "stage": stage, "profile": counters,
              "cc": ctx.compiler.cc, "cxx": ctx.compiler.cxx}
    # The report and the setup's counters, by the names the check reads them by (configs.toml, once).
    for name, value in (("report", ctx.product.train_report), ("setup_counters", ctx.product.setup_counters)):
        if value:
            values[name] = work / value
    for step, command in enumerate(ctx.product.train, 1):
        log.note(f"training step {step} of {len(ctx.product.train)}")
        log.run([part.format(**values) for part in command], echo=True)


def check_profile(ctx, log):
    setup = ctx.workdir.train / ctx.product.setup_counters if ctx.product.setup_counters else None
    gcov_dump = gcov_binary("gcov-dump", ctx.compiler.version)
    figures = profile.check(ctx.profile, ctx.workdir.build(Variant.INSTRUMENTED), ctx.product.hot_dirs,
                            ctx.settings.version, gcov_dump,
                            setup_dir=setup if setup and setup.is_dir() else None, lto=ctx.config.lto,
                            trained_dirs=ctx.config.trained_dirs)
    if ctx.product.train_report:
        report = ctx.workdir.train / ctx.product.train_report
        figures["training"] = read_json(report) if report.is_file() else None
    contract.write(ctx, PhaseName.CHECK, contract.PROFILE_CHECK, figures)
    # Which functions the training ran and how often, for pgo bench --training-counts.
    counts = profile.function_entries(ctx.profile, ctx.workdir.build(Variant.INSTRUMENTED),
                                      gcov_binary("gcov", ctx.compiler.version), gcov_dump)
    if counts["objects"]:
        contract.write(ctx, PhaseName.CHECK, contract.TRAINING_COUNTS, counts)
        unread = f", {counts['unread']} unread (not their notes' data)" if counts["unread"] else ""
        told = (f"training counts: {len(counts['functions'])} functions entered, from {counts['objects']} "
                f"objects{unread} ({contract.TRAINING_COUNTS})")
    else:
        # The optimised build replaces the shared tree, notes and all: a check run again after
        # it has no notes, and an empty file would read as "the training entered nothing".
        told = ("training counts: not taken, the instrumented build's notes (.gcno) are gone; "
                "run the instrumented phase again for them")
    for line in [*describe_check(figures), told]:
        log.note(line)
        print(lines.tagged(PhaseName.CHECK, line), flush=True)


def describe_check(figures):
    yield lines.profile_check(figures)
    for directory, hot in [*figures["hot_dirs"].items(), *figures.get("trained_dirs", {}).items()]:
        yield (f"  {directory}: {hot['with_profile']} of {hot['objects']} objects ({hot['share']:.0%}), "
               f"{hot['functions_run']} of their {hot['functions']} functions ran")
    if "quality" in figures:
        yield lines.profile_quality(figures["quality"])


def build_optimized(ctx, log):
    check = read_json(ctx.workdir.root / contract.PROFILE_CHECK)
    profile_id, stale = check["profile_id"], stale_origin(check)
    # With BOLT the binary is compiled saying so before BOLT rewrites it: only a passed BOLT check
    # stages it (stage()), so the label still reaches no one without its proof.
    kind = "PGO+BOLT build" if ctx.config.bolt else "PGO build"
    build_variant(ctx, log, Variant.OPTIMIZED, f"{comment_base(ctx)}, {kind}, {profile_mark(profile_id, stale)}")
    build_dir = ctx.workdir.build(Variant.OPTIMIZED)
    warnings = profile.compiler_warnings(log.path.read_text(errors="replace"), ctx.product.hot_dirs,
                                         ctx.workdir.src.resolve(), profile.compiled_objects(build_dir))
    records = prove_variant(ctx, log, Variant.OPTIMIZED)
    traces = proof.traces(build_dir, ctx.profile, profile.hot_only(profile.compiled_objects(build_dir),
                                                                  ctx.product.hot_dirs),
                          gcov_binary("gcov-dump", ctx.compiler.version))
    verdict = profile.judge_use(warnings, records, traces, ctx.profile, build_dir, ctx.product.hot_dirs,
                                ctx.settings.max_mismatch, ctx.settings.min_hot_coverage)
    verdict.update(profile_id=profile_id, stale=stale is not None, trained_on=stale)
    # The hot objects the instrumented build compiled, the only ones a profile can reach: a reduced
    # instrumented build leaves out what the training never runs (release-11.8: the embedded server's
    # InnoDB, Galera's provider), and those count among the hot objects all the same.
    verdict["hot_instrumented"] = sum(hot["objects"] for hot in check["hot_dirs"].values())
    if ctx.config.lto:
        # The label follows the proof here too: an LTO configuration's server binary is an LTO link's.
        binary = server_binary(ctx.product.name)["binary"]
        verdict["link_time_optimised"] = proof.link_time_optimised(build_dir / binary)
        if not verdict["link_time_optimised"]:
            verdict["problems"].append(f"{binary} is not link-time optimised: it holds no record of an LTO "
                                       "link's compiles (GNU GIMPLE ... -fltrans)")
            verdict["passed"] = False
    # Written whether it passed or not: the verdict belongs to this tree (its build token).
    contract.write(ctx, PhaseName.OPTIMIZED, contract.PROFILE_USE, verdict)
    print(lines.profile_use(profile_id, verdict), flush=True)
    if not verdict["passed"]:
        raise PipelineError("; ".join(verdict["problems"]))
    contract.record_outputs(ctx, PhaseName.OPTIMIZED, build_dir)


def bolt_binary(ctx, log):
    """BOLT the optimised build's server binary from a profile of that binary, trained by the product's
    own training (pgo/build/bolt.py); check BOLT's report; put the BOLTed binary in its place in the tree."""
    tools = bolt.tools()
    tree = ctx.workdir.build(Variant.OPTIMIZED)
    paths = server_binary(ctx.product.name)
    binary = tree / paths["binary"]
    linked = bolt.original(binary)
    # BOLT's input is the linked binary the optimised build's check proved, kept beside the BOLTed one.
    contract.require_outputs(ctx.workdir, PhaseName.OPTIMIZED, tree, "run phase optimized again",
                             renamed={str(linked.relative_to(tree)): paths["binary"]})
    folder = ctx.workdir.bolt
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # The training runs the optimised build installed, as it ran the instrumented one, with BOLT's
    # instrumented copy of the server binary in place of its own.
    installed = folder / "install"
    install(tree, installed, log)
    staged = next((installed / path for path in paths["staged_binary"] if (installed / path).is_file()), None)
    if staged is None:
        raise PipelineError(f"installing {tree} put no {' or '.join(paths['staged_binary'])} into {installed}")
    for name in ("fdata", "train"):
        (folder / name).mkdir()
    bolt.instrument(tools, linked, staged, folder / "fdata" / "profile", log)
    # The training's own instrumented helpers (profile_load) count into a folder of their own,
    # never into the build's profile.
    run_training(ctx, log, installed, folder / "train", folder / "training-counters")
    written = sorted((folder / "fdata").glob("profile.*.fdata"))
    if not written:
        raise PipelineError(f"the training wrote no BOLT profile (no .fdata in {folder / 'fdata'}): it did not run "
                            f"{staged}, or that did not exit cleanly")
    merged = folder / "profile.fdata"
    bolt.merge(tools, written, merged, log)
    output = folder / binary.name
    figures = bolt.optimize(tools, linked, merged, output, log)
    check = bolt.judge(figures, binary.name, output)
    check.update(binary=paths["binary"], sha256=sha256_file(output), build_token=contract.build_token(tree),
                 fdata_files=len(written), bolt=tools.identity(), options=list(bolt.OPTIMIZE))
    # Written whether it passed or not, as the profile check is: stage reads the verdict.
    contract.write(ctx, PhaseName.BOLT, contract.BOLT_CHECK, check)
    print(lines.bolt_check(check), flush=True)
    if not check["passed"]:
        raise PipelineError("; ".join(check["problems"]))
    atomic.copy(output, binary)
    contract.record_outputs(ctx, PhaseName.BOLT, tree)


def stale_origin(check):
    """What a reused profile was trained on, when that is other source than this build's
    ({"version", "source_checksum"}); None for a profile of this very source."""
    reused = check.get("reused") or {}
    return {"version": reused["version"], "source_checksum": reused["source_checksum"]} if reused.get("stale") else None


def profile_mark(profile_id, stale):
    """How the optimised binary names its profile (@@version_comment): a stale one says so."""
    if stale is None:
        return f"profile {profile_id}"
    return f"stale profile {profile_id} (trained on {stale['version']} source {stale['source_checksum'][:12]})"


def build_plain(ctx, log):
    build_variant(ctx, log, Variant.PLAIN, f"{comment_base(ctx)}, plain build (no PGO)")
    # The baseline a PGO build is measured against: no profile option may reach it either.
    records = prove_variant(ctx, log, Variant.PLAIN)
    if records["faults"]:
        first = records["first_fault"]
        raise PipelineError(f"the plain build's object {first}.o was not compiled as a build without profile of "
                            f"this configuration: {', '.join(records['faults'][first])} (its own record of its "
                            f"options; {len(records['faults'])} of {records['objects']} objects)")
    contract.record_outputs(ctx, PhaseName.PLAIN, ctx.workdir.build(Variant.PLAIN))


def stage(ctx, log):
    """Install the build whose check passed; record its identity, taken from that check."""
    variant = Variant.OPTIMIZED if ctx.settings.pgo == "on" else Variant.PLAIN
    build_dir = ctx.workdir.build(variant)
    built = ctx.workdir.state()["done"][variant]
    check = read_json(ctx.workdir.root / contract.PROFILE_USE) if variant == Variant.OPTIMIZED else None
    token = contract.build_token(build_dir)
    if token is None or built["build_token"] != token or (check and check["build_token"] != token):
        raise PipelineError(f"{build_dir} is not the tree phase {variant} built and checked: run phase {variant} again")
    if check and not check["passed"]:
        raise PipelineError(f"the optimised build did not pass its profile check: {'; '.join(check['problems'])}")
    bolt_check = contract.checked_bolt(ctx.workdir, build_dir) if check and ctx.config.bolt else None
    contract.require_outputs(ctx.workdir, PhaseName.BOLT if bolt_check else variant, build_dir,
                             f"run phase {variant} again, then the phases after it")
    install(build_dir, ctx.workdir.stage, log)
    link_staged_plugins(ctx.product.stage_links, ctx.workdir.stage, log)
    contract.record_outputs(ctx, PhaseName.STAGE, ctx.workdir.stage)
    identity = check["identity"] if check else built["identity"]
    write_json(ctx.workdir.root / contract.BUILD_INFO, {
        "product": ctx.product.name,
        "version": ctx.settings.version,
        "config": ctx.config.name,
        "pgo": ctx.settings.pgo,
        "variant": variant,
        "build_token": token,
        "identity": identity,
        "check": check,
        "profile_id": check["profile_id"] if check else None,
        "stale_profile": bool(check and check.get("stale")),
        # The BOLTed binary's passed check (bolt.json), or None: not BOLTed.
        "bolt": bolt_check,
        "source": read_json(ctx.workdir.root / contract.SOURCE_RECORD),
        "compiler": identity[contract.COMPILER_ID],
        "cmake_args": [*ctx.config.variant_cmake_args(variant), *ctx.settings.cmake_extra],
        "flags": config_flags(variant, ctx.config)[0],
        "flags_fingerprint": identity[contract.FLAGS_ID],
        "stage": str(ctx.workdir.stage),
    })


def link_staged_plugins(links, stage, log):
    """Link plugins into the folders where the distribution's install step puts them too
    ([products.X.stage_links]), relative, so the staged tree can move; a plugin this build lacks is
    left out, one already there is kept."""
    if not links:
        return
    source = stage / links["from"]
    for folder in sorted(stage.glob(links["into"])):
        for name in links["names"]:
            link = folder / name
            if (source / name).is_file() and not link.exists():
                link.symlink_to(os.path.relpath(source / name, folder))
                log.note(f"linked {link.relative_to(stage)} -> {links['from']}/{name}")


def run_tests(ctx, log):
    contract.require_outputs(ctx.workdir, PhaseName.STAGE, ctx.workdir.stage, "rerun phase stage")
    testrun.run_tests(ctx, log)


def comment_base(ctx):
    return f"{ctx.product.name} {ctx.settings.version} {ctx.config.name}"


PHASES = {p.name: p for p in (
    Phase(PhaseName.SOURCE, "get, verify and unpack the source", fetch_source),
    Phase(PhaseName.INSTRUMENTED, "configure + build with -fprofile-generate, install for training",
          build_instrumented),
    Phase(PhaseName.TRAIN, "run the training workload against the instrumented server", train),
    Phase(PhaseName.CHECK, "check the profile reached the hot objects", check_profile),
    Phase(PhaseName.OPTIMIZED, "configure + build with -fprofile-use, prove from its objects it was in effect",
          build_optimized),
    Phase(PhaseName.BOLT, "BOLT the server binary from a profile of it, check BOLT's report", bolt_binary),
    Phase(PhaseName.ARCHIVE, "store the profile in the profile archive, with its manifest", reuse.archive_phase),
    Phase(PhaseName.IMPORT, "take the profile from the archive, check it fits this build", reuse.import_profile),
    Phase(PhaseName.PLAIN, "configure + build without a profile (the baseline)", build_plain),
    Phase(PhaseName.STAGE, "install the build into the staging tree for the packagers", stage),
    Phase(PhaseName.TEST, "run the product's own test suite (mtr) on the staged build", run_tests),
)}

PIPELINES = {
    "on": (PhaseName.SOURCE, PhaseName.INSTRUMENTED, PhaseName.TRAIN, PhaseName.CHECK, PhaseName.OPTIMIZED,
           PhaseName.BOLT, PhaseName.ARCHIVE, PhaseName.STAGE, PhaseName.TEST),
    "off": (PhaseName.SOURCE, PhaseName.PLAIN, PhaseName.STAGE, PhaseName.TEST),
    # An archived profile instead of training: one build instead of two (BOLT's profile is the
    # binary's own, so it is trained in every build that BOLTs).
    "reuse": (PhaseName.SOURCE, PhaseName.IMPORT, PhaseName.OPTIMIZED, PhaseName.BOLT, PhaseName.STAGE,
              PhaseName.TEST),
}


def pipeline_name(settings):
    return "reuse" if settings.profile_from else settings.pgo


def runs(phase, config, tests=DEFAULT_TEST_SET):
    """Whether a build runs a phase of its pipeline: the tests unless they are off, BOLT only for a
    configuration with `bolt = true`."""
    return (phase != PhaseName.TEST or tests != "off") and (phase != PhaseName.BOLT or config.bolt)


def plan(settings, config):
    """The build's configuration resolved once (contract.PLAN): what the master's steps decide by."""
    return {"config": settings.config, "product": config.product.name, "line": config.line, "pgo": settings.pgo,
            "pipeline": pipeline_name(settings), "phases": list(pipeline_of(settings, config)),
            "resolved": config.record()}


def pipeline_of(settings, config):
    """The phases a work directory's build runs: its pipeline, as its settings and configuration choose."""
    return tuple(p for p in PIPELINES[pipeline_name(settings)] if runs(p, config, settings.tests))


def run_phases(ctx, pipeline, todo):
    workdir = ctx.workdir
    for name in todo:
        phase = PHASES[name]
        contract.require(ctx, pipeline, name)
        step = pipeline.index(name) + 1
        say(f"== phase {step} of {len(pipeline)}: {name}: {phase.title}")
        contract.invalidate(ctx, pipeline, name)
        log = PhaseLog(workdir.logs / f"{name}.log", name)
        started = time.monotonic()
        try:
            with source_tree(ctx, log) if reads_source(name) else nullcontext():
                phase.run(ctx, log)
        except BaseException as e:
            workdir.mark_failed(name, str(e).splitlines()[0] if str(e) else type(e).__name__)
            raise
        finally:
            log.close()
        seconds = time.monotonic() - started
        contract.succeeded(ctx, name, seconds, log.usage())
        say(f"== phase {name} done in {seconds:.0f} s (log: {log.path})")
