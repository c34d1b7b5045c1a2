"""pgo: build a MariaDB server with GCC profile-guided optimisation, one phase at a time or all at once.

    pgo build --version latest --config minimal       the whole PGO build of the newest 10.11
    pgo build --version 10.11.19 --pgo off             the plain baseline
    pgo phase train --workdir work/10.11.19-minimal    rerun one phase
    pgo test --workdir work/10.11.19-minimal --set nightly    another test set on a staged build
    pgo latest --config minimal-11.8                   which version 'latest' is
    pgo configure-check --config release --version 10.11.18    configure only: no feature missing
    pgo compare-debs --ours DIR --debian-version 1:10.11.19-0+deb12u1 --out DIR    our .debs beside Debian's
    pgo adopt-debs --changes X.changes --build-dir builddir --build-log LOG --out DIR    Debian's PGO debs, checked
    pgo baseline --candidate work --workdir work-plain    Debian's own server as the baseline, when served
    pgo gains docs/gains/measurements.toml             the gain per CPU, a table from the benchmarks listed
"""

import argparse
import json
import tempfile
from dataclasses import asdict

from pgo import PipelineError, archive_cli, bench
from pgo.archive import model as archive_model
from pgo.base import lines, protocol
from pgo.base.atomic import write_json
from pgo.base.errors import error_line, run_command
from pgo.base.protocol import DEFAULT_TEST_SET, MAX_MISMATCH, MIN_HOT_COVERAGE, PhaseName
from pgo.base.runner import say
from pgo.base.versions import LATEST, validate_request
from pgo.bench import gains
from pgo.build import baseline, bolt, builddeps, configure_check, resume, reuse, source, testrun
from pgo.build.phases import PHASES, PIPELINES, context, pipeline_name, pipeline_of, run_phases, runs
from pgo.core import contract, toolchain
from pgo.core.config import build_config, config_names, default_config
from pgo.core.contract import TestRequest
from pgo.core.workdir import Settings, Workdir, require_usable_path
from pgo.packaging import adopt, compare_debs, package, prove


def main(argv=None):
    return run_command(make_parser(), argv, "pgo")


class Parser(argparse.ArgumentParser):
    """Usage errors as one line, not argparse's usage block."""

    def error(self, message):
        self.exit(2, error_line(f"{message} (see {self.prog} --help)", self.prog) + "\n")


def make_parser():
    parser = Parser(prog="pgo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(metavar="command", parser_class=Parser)
    config_help = "named configuration from pgo/configs.toml (default: its `default`, %(default)s)"
    default = default_config()

    build = sub.add_parser("build", help="run the pipeline (resumes where a previous run stopped)")
    build.add_argument("--version", required=True, type=checked(validate_request),
                       help="server version, e.g. 10.11.19, or 'latest': the newest of the configuration's "
                       "line that the source has")
    build.add_argument("--config", default=default, help=config_help)
    build.add_argument("--pgo", choices=("on", "off"), default="on",
                       help="off: the same configuration without a profile (the benchmark's baseline)")
    build.add_argument("--source", default="debian",
                       help="'debian' (default: Debian's source package), a tarball, a directory, or a git URL")
    build.add_argument("--git-ref", help="tag or commit for a git source (default: <product>-<version>)")
    build.add_argument("--workdir", help="work directory (default: work/<version>-<config>[-plain])")
    build.add_argument("--profile-dir", help="where the instrumented build writes its profile "
                       "(default: <workdir>/profile)")
    build.add_argument("--cache", help="download cache (default: ~/.cache/pgo)")
    toolchain.add_compiler_arguments(build)
    build.add_argument("--max-mismatch", type=checked(count),
                       help="functions whose profile the optimising compiler may discard (coverage-mismatch); "
                       f"default {MAX_MISMATCH}, or 1%% of the profile's functions with --profile-from")
    build.add_argument("--min-hot-coverage", type=checked(share),
                       help=f"share of hot objects that must get a profile; default {MIN_HOT_COVERAGE}, or 90%% of the "
                       "training build's share with --profile-from")
    build.add_argument("--archive", help="profile archive the build stores into and reuses from "
                       "(default: $PGO_ARCHIVE or ~/.local/share/pgo/profiles)")
    build.add_argument("--archive-kind", choices=archive_model.BUILD_KINDS, default="release",
                       help="how the profile is archived: release (kept; pending until `pgo archive promote` "
                       "after publishing) or nightly (pruned)")
    build.add_argument("--profile-from", metavar="NAME|latest",
                       help="take the profile from the archive instead of training: an entry name or "
                       "profile id, or 'latest' for this product line, compiler and flags")
    build.add_argument("--accept-stale", action="store_true",
                       help="with --profile-from: build even when the profile fits the source below the limits")
    build.add_argument("--tests", default=DEFAULT_TEST_SET, metavar="SET|off",
                       help="the test set the test phase runs on the staged build (configs.toml: release, "
                       "nightly, smoke), or off (default: %(default)s)")
    build.add_argument("--phase", action="append", choices=sorted(map(str, PHASES)),
                       help="run only this phase (repeatable); its inputs must exist")
    build.add_argument("--resume", action="store_true",
                       help="with --phase: not when the work directory finished it already (a build resuming after "
                       "an interruption, pgo resume)")
    build.add_argument("--fresh", action="store_true", help="forget earlier runs in the work directory")
    build.set_defaults(func=cmd_build)

    phase = sub.add_parser("phase", help="rerun one phase of an existing work directory")
    phase.add_argument("name", choices=sorted(map(str, PHASES)))
    phase.add_argument("--workdir", required=True)
    phase.set_defaults(func=cmd_phase)

    test = sub.add_parser("test", help="run a test set on a work directory's staged build (its test phase)")
    test.add_argument("--workdir", required=True)
    test.add_argument("--set", help="test set (default: the work directory's, from pgo build --tests)")
    test.add_argument("--time-limit", type=checked(minutes), metavar="MINUTES",
                      help="stop the run past this (default: the set's budget)")
    test.add_argument("--vardir", help="folder for the runner's servers and logs (default: in the work "
                      "directory; a tmpfs such as /dev/shm is faster)")
    test.set_defaults(func=cmd_test)

    verdict = sub.add_parser("test-verdict", help="refuse an optimised build that fails a test its plain build "
                             "passes")
    verdict.add_argument("--candidate", required=True, help="the optimised build's work directory")
    verdict.add_argument("--baseline", help="the plain build's work directory, or the distribution's packages "
                         "`pgo baseline` unpacked (the failed tests run again on them); without it every failure "
                         "counts")
    verdict.add_argument("--set", help="test set (default: the candidate's)")
    verdict.add_argument("--max-environment-failures", type=checked(count), metavar="N",
                         help="tests that may fail on both builds (default: the set's)")
    verdict.set_defaults(func=cmd_test_verdict)

    phases = sub.add_parser("phases", help="list the phases of a pipeline")
    phases.add_argument("--pgo", choices=sorted(PIPELINES), default="on")
    phases.add_argument("--config", default=default, help=f"{config_help}; bolt = true adds the bolt phase")
    phases.add_argument("--json", action="store_true")
    phases.add_argument("--files", action="store_true",
                        help="the work directory's contract: every path, who writes and reads it, what it carries")
    phases.set_defaults(func=cmd_phases)

    latest = sub.add_parser("latest", help="the newest version of a configuration's line that a source has")
    latest.add_argument("--config", default=default, help=config_help)
    latest.add_argument("--source", default="debian", help="as for pgo build")
    latest.add_argument("--record", metavar="FILE",
                        help="also write the version and how it was found to FILE, as JSON (what the Buildbot "
                        "step reads)")
    latest.set_defaults(func=cmd_latest)

    configs = sub.add_parser("configs", help="list the named configurations")
    configs.set_defaults(func=lambda args: print("\n".join(config_names())))
    archive_cli.register(sub)
    resume.register(sub)
    baseline.register(sub)
    bench.register(sub)
    gains.register(sub)
    builddeps.register(sub)
    compare_debs.register(sub)
    configure_check.register(sub)
    package.register(sub)
    prove.register(sub)
    adopt.register(sub)
    return parser


def checked(validate):
    def convert(value):
        try:
            return validate(value)
        except PipelineError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return convert


def count(text):
    if not (text.isascii() and text.isdigit()):
        raise PipelineError(f"expected a number of functions, 0 or more, not {text!r}")
    return int(text)


def number(text):
    """A decimal number, or None for text that is none."""
    try:
        return float(text)
    except ValueError:
        return None


def minutes(text):
    value = number(text)
    if value is None or not 0 < value < 10000:
        raise PipelineError(f"expected minutes above 0, not {text!r}")
    return value


def share(text):
    """A share of the hot objects a PGO build must cover: above 0 (a build that used no profile is no PGO
    build), at most 1."""
    value = number(text)
    if value is None or not 0 < value <= 1:
        raise PipelineError(f"expected a share above 0 and at most 1 (0.3 is 30%), not {text!r}")
    return value

def resolved(requested, config, spec, git_ref):
    """The version to build; for 'latest', says which it is."""
    version, how = source.resolve_version(requested, spec, build_config(config), git_ref=git_ref)
    if requested == LATEST:
        print(lines.latest_version(version, how), flush=True)
    return version


def cmd_latest(args):
    version, how = source.resolve_version(LATEST, args.source, build_config(args.config))
    print(lines.latest_version(version, how), flush=True)
    if args.record:
        write_json(args.record, protocol.version_record(version, how))


def cmd_build(args):
    args.version = resolved(args.version, args.config, args.source, args.git_ref)
    archive_root = archive_model.root_of(args.archive)
    if args.profile_from and args.pgo == "off":
        raise PipelineError("--profile-from needs a PGO build; drop --pgo off")
    if args.accept_stale and not args.profile_from:
        raise PipelineError("--accept-stale applies only to a build with --profile-from")
    if args.git_ref and source.kind_of(args.source) != "git":
        # Taken as it is, the build would be of whatever the source holds, not of that ref.
        raise PipelineError(f"--git-ref applies only to a git URL --source, not to {args.source!r}")
    if args.resume and not args.phase:
        raise PipelineError("--resume applies to --phase: a build without --phase resumes after its last "
                            "finished phase already")
    if args.resume and args.fresh:
        raise PipelineError("--resume and --fresh contradict each other: --fresh forgets the finished phases")
    if args.profile_from:
        profile_from, max_mismatch, min_hot_coverage = reuse.plan_reuse(
            archive_root, config=args.config, cc=args.cc, cxx=args.cxx, version=args.version,
            profile_from=args.profile_from, accept_stale=args.accept_stale, max_mismatch=args.max_mismatch,
            min_hot_coverage=args.min_hot_coverage)
    else:
        profile_from = None
        max_mismatch = MAX_MISMATCH if args.max_mismatch is None else args.max_mismatch
        min_hot_coverage = MIN_HOT_COVERAGE if args.min_hot_coverage is None else args.min_hot_coverage
    settings = Settings(version=args.version, config=args.config, pgo=args.pgo, source=args.source,
                        git_ref=args.git_ref, cc=args.cc, cxx=args.cxx, profile_dir=args.profile_dir,
                        cache=args.cache, max_mismatch=max_mismatch, min_hot_coverage=min_hot_coverage,
                        archive=str(archive_root), archive_kind=args.archive_kind,
                        profile_from=profile_from, tests=args.tests)
    suffix = "" if args.pgo == "on" else "-plain"
    workdir = Workdir(args.workdir or f"work/{args.version}-{args.config}{suffix}")
    ctx = context(workdir, settings)          # validates the configuration
    ctx.compiler                              # noqa: B018 and the compiler, before anything is written
    ctx.environment                           # noqa: B018 and the environment
    if ctx.config.bolt and args.pgo == "on":
        bolt.tools()                          # and BOLT, which runs after the long builds
    for path, option in ((workdir.root, "--workdir"), (ctx.profile, "--profile-dir"),
                         (workdir.cache(settings), "--cache")):
        require_usable_path(path, option)
    if args.pgo == "on":
        check_writable(ctx.profile)
    with workdir.locked():
        workdir.save_settings(settings, fresh=args.fresh)
        run_pipeline(args, workdir, ctx, settings)


def run_pipeline(args, workdir, ctx, settings):
    pipeline = pipeline_of(settings, ctx.config)
    if args.phase:
        unknown = [p for p in args.phase if p not in pipeline]
        if unknown:
            raise PipelineError(f"phase {unknown[0]} is not part of a {pipeline_name(settings)} build")
        todo = [p for p in pipeline if p in args.phase]
        if args.resume:
            done = workdir.state()["done"]
            for name in [p for p in todo if p in done]:
                say(f"{name}: finished at {done[name].get('finished', '?')} by the interrupted build this one "
                    "resumes: not run again")
            todo = [p for p in todo if p not in done]
    else:
        done = workdir.state()["done"]
        todo = [p for p in pipeline if p not in done]
        skipped = [p for p in pipeline if p in done]
        if skipped:
            say(f"resuming in {workdir.root}: {', '.join(skipped)} already done")
    run_phases(ctx, pipeline, todo)
    if not args.phase:
        print_summary(workdir, pipeline)
        say(f"staged tree: {workdir.stage}")


def cmd_phase(args):
    workdir = Workdir(args.workdir)
    settings = workdir.load_settings()
    ctx = context(workdir, settings)
    pipeline = pipeline_of(settings, ctx.config)
    if args.name not in pipeline:
        raise PipelineError(f"phase {args.name} is not part of a {pipeline_name(settings)} build"
                            + (" with --tests off" if args.name == "test" else ""))
    with workdir.locked():
        run_phases(ctx, pipeline, [args.name])


def cmd_test(args):
    workdir = Workdir(args.workdir)
    settings = workdir.load_settings()
    chosen = testrun.chosen_set(context(workdir, settings).product, settings, args.set)
    ctx = context(workdir, settings, TestRequest(chosen.name, args.time_limit, args.vardir))
    testrun.plan(ctx)     # refuse before the phase forgets the earlier run
    # The whole pipeline, test phase included, even for a work directory built with --tests off.
    with workdir.locked():
        run_phases(ctx, PIPELINES[pipeline_name(settings)], ["test"])


def cmd_test_verdict(args):
    baseline = Workdir(args.baseline) if args.baseline else None
    testrun.judge(Workdir(args.candidate), baseline, args.set, args.max_environment_failures)


def cmd_phases(args):
    if args.files:
        print_contract(args.json)
        return
    config = build_config(args.config)
    pipeline = tuple(name for name in PIPELINES[args.pgo] if runs(name, config))
    rows = [{"name": name, "title": PHASES[name].title,
             "inputs": [path for path in PHASES[name].inputs if contract.maker(pipeline, name, path)],
             "outputs": list(PHASES[name].outputs)} for name in pipeline]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(f"{row['name']:<13} {row['title']}")


def print_contract(as_json):
    rows = [asdict(item) for item in contract.ITEMS]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    for row in rows:
        print(f"{row['path']}\n  written by {', '.join(row['written_by'])}; read by {', '.join(row['read_by'])}\n"
              f"  {row['carries']}")


def check_writable(path):
    """Fail before building when the profile could not be written (root passes os.access; try it)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        raise PipelineError(f"profile directory {path} is not writable: {e.strerror}") from None


def cost(record):
    """', CPU 1234 s, largest process 2345 MiB': what a phase's commands cost (none ran: nothing)."""
    if "peak_rss_mib" not in record:
        return ""
    return f", CPU {record['cpu_seconds']:.0f} s, largest process {record['peak_rss_mib']} MiB"


def print_summary(workdir, pipeline):
    done = workdir.state()["done"]
    total = sum(done[p]["seconds"] for p in pipeline if p in done)
    say("timing summary:")
    for name in pipeline:
        if name in done:
            say(f"  {name:<13} {done[name]['seconds']:8.0f} s{cost(done[name])}")
    say(f"  {'total':<13} {total:8.0f} s")
    one_build = done.get(PhaseName.OPTIMIZED, done.get(PhaseName.PLAIN))
    if one_build and one_build["seconds"] > 0 and PhaseName.OPTIMIZED in done:
        say(f"  whole PGO build / one build (the optimised compile): {total / one_build['seconds']:.2f}x")
