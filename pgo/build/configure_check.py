"""`pgo configure-check`: configure a configuration's builds without compiling, and judge CMake's feature summary.

CMake silently builds less when a library is missing: a plugin is listed under "The following
features have been disabled", or, when its CMakeLists returns before adding it (MariaDB's OQGraph
without Judy, GSSAPI without Kerberos), not listed at all. A configuration names the features it
builds without (`features_off`) and those it must build (`features_required`, pgo/configs.toml);
this check configures each distinct build of it (the optimised build's options, and a reduced
variant's) from the line's shared source tree into a scratch folder of its work directory, exactly
as the build phases would (pgo/build/phases.py configure_command), and fails with one line naming every
feature that is off without being allowed to be, or required and not built. About 45 seconds for a
MariaDB configure on one core; nothing is compiled.
"""

import re
import shutil

from pgo import PipelineError
from pgo.base import lines
from pgo.base.atomic import write_json
from pgo.base.protocol import Variant
from pgo.base.runner import PhaseLog, say
from pgo.base.versions import LATEST, validate_request
from pgo.build import source
from pgo.build.phases import comment_base, configure_command, context, run_phases, source_tree
from pgo.core import toolchain
from pgo.core.config import build_config, default_config
from pgo.core.toolchain import VARIANTS
from pgo.core.workdir import Settings, Workdir, require_usable_path

RECORD = "configure-check.json"
SCRATCH = "configure-check"
# FEATURE_SUMMARY's headings (CMake 3.25), e.g. "-- The following features have been disabled:",
# and its items, " * NAME, description" (a package's: " * Judy").
HEADING = re.compile(r"^(?:-- )?The following (.+?):\s*$")
ITEM = re.compile(r"^ \* ([^,\s]+)")
ENABLED, DISABLED = "features have been enabled", "features have been disabled"


def feature_summary(text):
    """{heading: [names]} of every feature summary in a configure's output (the last one wins)."""
    sections, current = {}, None
    for line in text.splitlines():
        heading = HEADING.match(line)
        if heading:
            current = sections[heading.group(1)] = []
            continue
        item = ITEM.match(line)
        if item and current is not None:
            current.append(item.group(1))
        elif line.strip() and not line.startswith("   "):
            current = None
    return sections


def judge(summary, allowed_off, features_required):
    """What a feature summary lacks for a build that may go without a feature allowed_off(feature) says
    it may, and must build features_required: {"enabled", "disabled", "unexpected_off", "missing",
    "packages_not_found"}."""
    enabled, disabled = summary.get(ENABLED, []), summary.get(DISABLED, [])
    not_found = sorted({name for heading, names in summary.items() if "not been found" in heading for name in names})
    return {"enabled": enabled, "disabled": disabled,
            "unexpected_off": [f for f in disabled if not allowed_off(f)],
            "missing": [f for f in features_required if f not in enabled and f not in disabled],
            "packages_not_found": not_found}


def variants_to_check(config):
    """The configuration's distinct builds: the optimised one (all options), and each reduced variant
    whose options differ from it (one for the instrumented and plain builds, which share them)."""
    chosen, seen = [], set()
    for variant in (Variant.OPTIMIZED, Variant.INSTRUMENTED, Variant.PLAIN):
        options = config.variant_cmake_args(variant)
        if options not in seen:
            seen.add(options)
            chosen.append(variant)
    return chosen


def verdict_line(config_name, version, variant, result):
    """The one line a failed check ends with, naming what is missing and what CMake did not find."""
    problems = []
    if result["unexpected_off"]:
        problems.append(f"disabled {', '.join(result['unexpected_off'])}")
    if result["missing"]:
        problems.append(f"not configured at all {', '.join(result['missing'])}")
    found = (f" (CMake did not find: {', '.join(result['packages_not_found'])})"
             if result["packages_not_found"] else "")
    return (f"configuration '{config_name}' ({variant} build) of {version} would build without what it requires: "
            f"{'; '.join(problems)}{found}; install the build dependencies (tools/install-deps.sh build)")


def check(workdir, settings, variants=None):
    """Run the source phase, then configure each build into a scratch folder; write RECORD; raise
    PipelineError with one line when a build lacks a feature."""
    ctx = context(workdir, settings)
    run_phases(ctx, ("source",), ("source",))
    scratch = workdir.root / SCRATCH
    results = {}
    with source_tree(ctx):
        for variant in variants or variants_to_check(ctx.config):
            build_dir = scratch / variant
            shutil.rmtree(build_dir, ignore_errors=True)
            build_dir.mkdir(parents=True)
            log = PhaseLog(workdir.logs / f"configure-check-{variant}.log", "configure-check")
            try:
                say(f"== configure-check: {ctx.config.name} ({variant} build), configure only")
                log.run(configure_command(ctx, variant, build_dir, f"{comment_base(ctx)}, configure-only check"))
            finally:
                log.close()
            off, required = ctx.config.variant_features(variant)
            results[variant] = dict(judge(feature_summary(log.path.read_text(errors="replace")), off, required),
                                    log=str(log.path))
            if not results[variant]["enabled"]:
                raise PipelineError(f"configure of {ctx.config.name} ({variant} build) printed no feature summary "
                                    f"(log: {log.path})")
    write_json(workdir.root / RECORD, {"config": ctx.config.name, "version": settings.version, "builds": results})
    for variant, result in results.items():
        if result["unexpected_off"] or result["missing"]:
            raise PipelineError(verdict_line(ctx.config.name, settings.version, variant, result))
        say(lines.tagged("configure-check", f"{ctx.config.name} ({variant} build): {len(result['enabled'])} features "
                         f"enabled, off as configured: {', '.join(result['disabled']) or 'none'}"))
    shutil.rmtree(scratch, ignore_errors=True)
    return results


def register(subparsers):
    command = subparsers.add_parser(
        "configure-check", help="configure a configuration's builds without compiling; fail with one line when "
        "CMake would build without a feature the configuration requires")
    command.add_argument("--version", required=True, help="server version, e.g. 10.11.18, or 'latest'")
    command.add_argument("--config", default=default_config(), help="named configuration (default: %(default)s)")
    command.add_argument("--source", default="debian", help="as for pgo build")
    command.add_argument("--git-ref", help="as for pgo build")
    command.add_argument("--variant", action="append", choices=VARIANTS,
                         help="the build to configure (repeatable; default: each distinct one: the optimised "
                         "build, and a reduced variant's options)")
    command.add_argument("--workdir", help="work directory (default: work/configure-check-<version>-<config>)")
    command.add_argument("--cache", help="download cache (default: ~/.cache/pgo)")
    # As pgo build's: CMake's checks depend on the compiler (a worker image's CC, gcc-14 on debian-13).
    toolchain.add_compiler_arguments(command)
    command.set_defaults(func=cmd_configure_check)


def cmd_configure_check(args):
    validate_request(args.version)
    version = args.version
    if version == LATEST:
        version, how = source.resolve_version(LATEST, args.source, build_config(args.config), git_ref=args.git_ref)
        say(lines.latest_version(version, how))
    build_config(args.config).require_version(version)
    workdir = Workdir(require_usable_path(args.workdir or f"work/configure-check-{version}-{args.config}",
                                          "--workdir"))
    settings = Settings(version=version, config=args.config, pgo="on", source=args.source, git_ref=args.git_ref,
                        cache=args.cache, tests="off", cc=args.cc, cxx=args.cxx)
    with workdir.locked():
        workdir.save_settings(settings, fresh=True)
        check(workdir, settings, args.variant)
