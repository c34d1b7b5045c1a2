"""The pipeline's phases, defined once as data.

Each phase has a name, a one-line title, the work-directory paths it reads and
writes, and a function that does the work. The CLI (`pgo build`, `pgo phase`),
the Buildbot factory (steps/factories.py) and the tests all run these same
definitions; a phase never knows which of them runs it.
"""

import os
import shutil
import time
from dataclasses import dataclass
from typing import Callable

from pgo import PipelineError, archive, lines, profile, source
from pgo.config import build_config
from pgo.runner import PhaseLog, say
from pgo.toolchain import detect, fingerprint, gcov_binary, pgo_flags
from pgo.workdir import REPO, read_json, write_json


@dataclass(frozen=True)
class Phase:
    name: str
    title: str
    run: Callable
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


class Context:
    """What a phase needs: the work directory, its settings, configuration and compiler."""

    def __init__(self, workdir, settings):
        self.workdir = workdir
        self.settings = settings
        self.config = build_config(settings.config)
        self.product = self.config.product
        self.profile = workdir.profile(settings)
        self._compiler = None

    @property
    def compiler(self):
        if self._compiler is None:
            self._compiler = detect(self.settings.cc, self.settings.cxx)
        return self._compiler


# --- the phases ---------------------------------------------------------------

def fetch_source(ctx, log):
    s = ctx.settings
    cache = ctx.workdir.cache(s)
    src, tree = source.fetch(s.source, s.version, ctx.product, cache / "src", cache, git_ref=s.git_ref, log=log)
    link = ctx.workdir.src
    if link.is_symlink():
        link.unlink()
    elif link.exists():
        shutil.rmtree(link)
    link.symlink_to(tree)
    write_json(ctx.workdir.root / "source.json",
               {"kind": src.kind, "origin": src.origin, "checksum": src.checksum, "version": s.version})
    log.note(f"source {src.origin} sha256 {src.checksum} in {tree}")


def build_variant(ctx, log, variant, comment):
    """Configure and compile one variant; the optimised one always from scratch."""
    build_dir = ctx.workdir.build(variant)
    compile_flags, link_flags = pgo_flags(variant, ctx.profile, build_dir)
    args = [
        # The shared tree's own path, the same for every build of this source.
        "cmake", "-S", ctx.workdir.src.resolve(), "-B", build_dir, "-G", "Ninja",
        f"-DCMAKE_C_COMPILER={ctx.compiler.cc}", f"-DCMAKE_CXX_COMPILER={ctx.compiler.cxx}",
        *ctx.config.cmake_args,
        *ctx.settings.cmake_extra,
        f"-DCMAKE_C_FLAGS={' '.join(compile_flags)}",
        f"-DCMAKE_CXX_FLAGS={' '.join(compile_flags)}",
        *(f"-DCMAKE_{kind}_LINKER_FLAGS={' '.join(link_flags)}" for kind in ("EXE", "SHARED", "MODULE")),
        f"-D{ctx.product.comment_variable}={comment}",
    ]
    recorded = build_dir / "pgo-configure.json"
    same = recorded.is_file() and read_json(recorded) == [str(a) for a in args]
    # The profile is no ninja dependency: an incremental optimised build would
    # keep objects optimised with an older profile.
    if variant == "optimized" or not same:
        shutil.rmtree(build_dir, ignore_errors=True)
    build_dir.mkdir(parents=True, exist_ok=True)
    log.run(args)
    write_json(recorded, [str(a) for a in args])
    log.run(["ninja", "-C", build_dir, "-j", str(os.cpu_count() or 2)])


def install(build_dir, prefix, log):
    shutil.rmtree(prefix, ignore_errors=True)
    log.run(["cmake", "--install", build_dir, "--prefix", prefix])
    if not any(prefix.glob("*")):
        raise PipelineError(f"installing {build_dir} put nothing into {prefix}")


def build_instrumented(ctx, log):
    build_variant(ctx, log, "instrumented", f"{comment_base(ctx)}, PGO-instrumented build")
    # The training runs the instrumented server from an installed tree, the
    # way users run it; its counters still go to the profile directory.
    install(ctx.workdir.build("instrumented"), ctx.workdir.install("instrumented"), log)


def train(ctx, log):
    # A profile is only valid for the source it came from: start empty.
    if ctx.profile.exists():
        stale = profile.gcda_files(ctx.profile)
        log.note(f"removing {len(stale)} stale .gcda files from {ctx.profile}")
        shutil.rmtree(ctx.profile)
    ctx.profile.mkdir(parents=True)
    shutil.rmtree(ctx.workdir.train, ignore_errors=True)
    ctx.workdir.train.mkdir(parents=True)
    values = {"repo": REPO, "work": ctx.workdir.train, "stage": ctx.workdir.install("instrumented"),
              "profile": ctx.profile, "cc": ctx.compiler.cc, "cxx": ctx.compiler.cxx}
    for step, command in enumerate(ctx.product.train, 1):
        log.note(f"training step {step} of {len(ctx.product.train)}")
        log.run([part.format(**values) for part in command], echo=True)


def check_profile(ctx, log):
    figures = profile.check(ctx.profile, ctx.workdir.build("instrumented"), ctx.product.hot_dirs,
                            ctx.settings.version, gcov_binary("gcov-dump", ctx.compiler.version))
    if ctx.product.train_report:
        report = ctx.workdir.train / ctx.product.train_report
        figures["training"] = read_json(report) if report.is_file() else None
    write_json(ctx.workdir.root / "profile-check.json", figures)
    for line in describe_check(figures):
        log.note(line)
        print(lines.tagged("check", line), flush=True)


def describe_check(figures):
    yield lines.profile_check(figures)
    for directory, hot in figures["hot_dirs"].items():
        yield (f"  {directory}: {hot['with_profile']} of {hot['objects']} objects ({hot['share']:.0%}), "
               f"{hot['functions_run']} of their {hot['functions']} functions ran")


def build_optimized(ctx, log):
    figures = read_json(ctx.workdir.root / "profile-check.json")
    profile_id = figures["profile_id"]
    build_variant(ctx, log, "optimized", f"{comment_base(ctx)}, PGO build, profile {profile_id}")
    warnings = profile.compiler_warnings(log.path.read_text(errors="replace"), ctx.product.hot_dirs)
    verdict = profile.judge_use(warnings, ctx.workdir.build("optimized"), ctx.product.hot_dirs,
                                ctx.settings.max_mismatch, ctx.settings.min_hot_coverage)
    verdict["profile_id"] = profile_id
    write_json(ctx.workdir.root / "profile-use.json", verdict)
    print(lines.profile_use(profile_id, verdict), flush=True)


def build_plain(ctx, log):
    build_variant(ctx, log, "plain", f"{comment_base(ctx)}, plain build (no PGO)")


def stage(ctx, log):
    variant = "optimized" if ctx.settings.pgo == "on" else "plain"
    install(ctx.workdir.build(variant), ctx.workdir.stage, log)
    use = read_json(ctx.workdir.root / "profile-use.json") if variant == "optimized" else None
    write_json(ctx.workdir.root / "build-info.json", {
        "product": ctx.product.name,
        "version": ctx.settings.version,
        "config": ctx.config.name,
        "pgo": ctx.settings.pgo,
        "profile_id": use["profile_id"] if use else None,
        "source": read_json(ctx.workdir.root / "source.json"),
        "compiler": {"cc": ctx.compiler.cc, "version": ctx.compiler.version, "banner": ctx.compiler.banner},
        "cmake_args": [*ctx.config.cmake_args, *ctx.settings.cmake_extra],
        "flags": pgo_flags(variant, "PROFILE_DIR", "BUILD_DIR")[0],
        "flags_fingerprint": fingerprint(ctx.config.cmake_args),
        "stage": str(ctx.workdir.stage),
    })


def comment_base(ctx):
    return f"{ctx.product.name} {ctx.settings.version} {ctx.config.name}"


PHASES = {p.name: p for p in (
    Phase("source", "get, verify and unpack the source", fetch_source, (), ("src", "source.json")),
    Phase("instrumented", "configure + build with -fprofile-generate, install for training",
          build_instrumented, ("src",), ("build/pgo", "build/instrumented-install")),
    Phase("train", "run the training workload against the instrumented server",
          train, ("build/instrumented-install",), ("profile",)),
    Phase("check", "check the profile reached the hot objects",
          check_profile, ("profile", "build/pgo"), ("profile-check.json",)),
    Phase("optimized", "configure + build with -fprofile-use, count profile warnings",
          build_optimized, ("src", "profile", "profile-check.json"), ("build/pgo", "profile-use.json")),
    Phase("archive", "store the profile in the profile archive, with its manifest",
          archive.archive_phase, ("profile", "profile-check.json", "profile-use.json"), ("archive.json",)),
    Phase("import", "take the profile from the archive, check it fits this build",
          archive.import_profile, ("source.json",), ("profile", "profile-check.json")),
    Phase("plain", "configure + build without a profile (the baseline)",
          build_plain, ("src",), ("build/plain",)),
    Phase("stage", "install the build into the staging tree for the packagers",
          stage, ("src",), ("stage", "build-info.json")),
)}

PIPELINES = {
    "on": ("source", "instrumented", "train", "check", "optimized", "archive", "stage"),
    "off": ("source", "plain", "stage"),
    # An archived profile instead of training: one build instead of two.
    "reuse": ("source", "import", "optimized", "stage"),
}


def pipeline_name(settings):
    return "reuse" if settings.profile_from else settings.pgo


def run_phases(ctx, pipeline, todo):
    workdir = ctx.workdir
    for name in todo:
        phase = PHASES[name]
        for needed in phase.inputs:
            path = ctx.profile if needed == "profile" else workdir.root / needed
            if not path.exists():
                maker = next(p for p in pipeline if needed in PHASES[p].outputs)
                raise PipelineError(f"phase {name} needs {needed}: run phase {maker} first")
        step = pipeline.index(name) + 1
        say(f"== phase {step} of {len(pipeline)}: {name}: {phase.title}")
        log = PhaseLog(workdir.logs / f"{name}.log", name)
        later = pipeline[step:]
        workdir.forget([name, *later])
        started = time.monotonic()
        try:
            phase.run(ctx, log)
        finally:
            log.close()
        seconds = time.monotonic() - started
        workdir.mark_done(name, seconds, later)
        say(f"== phase {name} done in {seconds:.0f} s (log: {log.path})")
