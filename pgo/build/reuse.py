"""Reusing an archived profile instead of training: which one (`--profile-from NAME|latest`), the
limits a build with it must meet, and the two phases between a build and the archive (import,
archive). The archive itself, its entries and how they are stored: pgo/archive/store.py.
"""

import json
import shutil
from pathlib import Path

from pgo import PipelineError
from pgo.archive.model import ARCHIVE, DAMAGE, Gone, build_root, damage, trained_by, workload_key
from pgo.archive.store import compiler_target, damage_of, entries, find, kind_of, proven_manifest, store, unpack
from pgo.base import atomic
from pgo.base.protocol import PhaseName
from pgo.base.versions import validate_version, version_key, version_line
from pgo.core import contract
from pgo.core.config import build_config
from pgo.core.toolchain import build_environment, detect, fingerprint
from pgo.core.workdir import read_json

# A reused profile from other source loses the functions whose control flow,
# lines or source path changed (GCC discards their counters) and the objects
# that are new. Allow a
# little of both by default: 1% of the profile's functions discarded, and 90%
# of the hot coverage the training build reached.
REUSE_DISCARD_SHARE = 0.01
REUSE_COVERAGE_SHARE = 0.9


def passed_over_note(problems, shown=2):
    """The refusal's note on the damaged entries `latest` passed over: the first ones in full, so
    that the one error line says what to repair even when the log of the passing-over is gone."""
    if not problems:
        return ""
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return f" (passed over {len(problems)} damaged: {'; '.join(problems[:shown])}{more})"


def latest(root, product, version, target, compiler_version, flags_fingerprint):
    """Newest compatible profile of this product line, from this version or an older one.

    A damaged entry is passed over, and named, not taken: one bad entry must not stop every
    later build that reuses profiles. Every manifest is checked against its checksum before it is
    trusted, the profile.tar.xz of each candidate, best first, until one is intact (the entry
    taken is checked in full when it is unpacked).
    """
    candidates, passed_over = [], []
    for entry in entries(root):
        try:
            m = proven_manifest(entry)
            if (kind_of(entry) != "pending" and m["product"] == product and m["line"] == version_line(version)
                    and version_key(m["version"]) <= version_key(version)
                    and not incompatibilities(m, product, target, compiler_version, flags_fingerprint)):
                candidates.append(((workload_key(m), version_key(m["version"]), m["created"]), entry, m))
        except Gone:
            continue
        except DAMAGE as e:
            passed_over.append(damage(entry, e))
    # A newer training workload first: it was changed because the older one missed code that
    # matters (docs/training-limit-11.8.6-minimal-11.8/), which a newer release does not make up for.
    candidates.sort(key=lambda c: c[0], reverse=True)
    chosen, damaged = None, 0
    for candidate in candidates:
        _, entry, _ = candidate
        try:
            problem = damage_of(entry, (ARCHIVE,))
        except Gone:
            continue
        if not problem:
            chosen = candidate
            break
        passed_over.append(problem)
        damaged += 1
    for problem in passed_over:
        print(f"[import] passed over a damaged entry: {problem} (see `pgo archive verify`)", flush=True)
    if not chosen:
        raise PipelineError(f"no archived profile in {root} fits {product} {version_line(version)}.x up to "
                            f"{version} built by GCC {compiler_version} for {target} with flags "
                            f"{flags_fingerprint}" + passed_over_note(passed_over))
    (workload, *newest), entry, m = chosen
    print(f"[import] latest is {entry.name}: {m['product']} {m['version']}, trained by {trained_by(m)}; the "
          f"newest training workload, then the newest version, of {len(candidates) - damaged} compatible profiles",
          flush=True)
    for (their_workload, *their_newest), other, theirs in candidates:
        if their_workload < workload and their_newest > newest:
            print(f"[import] passed over {other.name} ({theirs['product']} {theirs['version']}): trained by "
                  f"{trained_by(theirs)}, older than the chosen one's", flush=True)
    return entry


def incompatibilities(manifest, product, target, compiler_version, flags_fingerprint):
    """What differs between a profile and a build in ways that make the profile useless or wrong."""
    theirs = (manifest["product"], manifest["compiler"]["target"], manifest["compiler"]["version"],
              manifest["flags_fingerprint"])
    ours = (product, target, compiler_version, flags_fingerprint)
    names = ("product", "target platform", "compiler version (GCC)", "flags fingerprint")
    return [f"{name}: profile {a}, this build {b}" for name, a, b in zip(names, theirs, ours) if a != b]


WANTS_FORMAT = 1
# What `--profile-from` matches an archived profile on (latest, incompatibilities): a reuse build's wants.
WANTED = ("profile", "product", "version", "target", "compiler_version", "flags_fingerprint")


def wanted(*, config, cc, cxx, version, profile_from):
    """What a build of config by this compiler needs of the archive, to reuse profile_from (an entry or
    'latest'): what plan_reuse matches on, written down so that another machine (the master) can pick."""
    build = build_config(config)
    compiler = detect(cc, cxx)
    return {"format": WANTS_FORMAT, "profile": profile_from, "product": build.product.name, "version": version,
            "line": version_line(version), "target": compiler_target(compiler.cc),
            "compiler_version": compiler.version, "flags_fingerprint": fingerprint(build, build_environment())}


def read_wants(path):
    """A reuse build's wants as `pgo archive wants` wrote them, or an error that says what is wrong."""
    try:
        wants = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise PipelineError(f"cannot read the wants {path}: {e.strerror if isinstance(e, OSError) else e}") from e
    missing = [key for key in WANTED if not isinstance(wants, dict) or not isinstance(wants.get(key), str)]
    if missing:
        raise PipelineError(f"{path} is no reuse build's wants (`pgo archive wants`): it lacks {', '.join(missing)}")
    validate_version(wants["version"])
    return wants


def chosen(root, wants):
    """The archived profile a build with these wants reuses: the entry named, or the latest that fits."""
    build = (wants["product"], wants["target"], wants["compiler_version"], wants["flags_fingerprint"])
    if wants["profile"] == "latest":
        entry = latest(root, build[0], wants["version"], *build[1:])
    else:
        entry = find(root, wants["profile"])
    differs = incompatibilities(entry.manifest(), *build)
    if differs:
        raise PipelineError(f"archived profile {entry.name} does not fit this build: {'; '.join(differs)}")
    return entry


def plan_reuse(root, *, config, cc, cxx, version, profile_from, accept_stale, max_mismatch, min_hot_coverage):
    """Choose the archived profile for a build and its limits, before anything is built: the limits
    the profile sets, unless max_mismatch / min_hot_coverage (not None) say otherwise.

    Returns (entry name, max discarded functions, min hot coverage).
    """
    entry = chosen(root, wanted(config=config, cc=cc, cxx=cxx, version=version, profile_from=profile_from))
    max_discarded, min_coverage = reuse_limits(entry.manifest(), accept_stale)
    if max_mismatch is not None:
        max_discarded = max_mismatch
    if min_hot_coverage is not None:
        min_coverage = min_hot_coverage
    return entry.name, max_discarded, min_coverage


def reuse_limits(manifest, accept_stale=False):
    """(max discarded functions, min hot coverage) of a build that reuses this archived profile."""
    if accept_stale:
        # Stale is accepted, a build without any profile is not.
        return manifest["functions"], 0.001
    return (int(manifest["functions"] * REUSE_DISCARD_SHARE),
            round(manifest["optimized"]["hot_coverage"] * REUSE_COVERAGE_SHARE, 3))


def import_profile(ctx, log):
    """The reuse pipeline's phase: unpack the archived profile, check it fits, say how stale it is."""
    s = ctx.settings
    entry = find(build_root(s), s.profile_from)
    manifest = entry.manifest()
    differs = incompatibilities(manifest, ctx.product.name, compiler_target(ctx.compiler.cc),
                                ctx.compiler.version, fingerprint(ctx.config, ctx.environment))
    if differs:
        raise PipelineError(f"archived profile {entry.name} does not fit this build: {'; '.join(differs)}")
    # Whatever the profile directory held is no longer this build's profile, whether the import succeeds or not.
    shutil.rmtree(ctx.profile, ignore_errors=True)
    atomic.place(ctx.profile, lambda unpacking: unpack(entry, unpacking))
    source = read_json(ctx.workdir.root / contract.SOURCE_RECORD)
    stale = manifest["source"]["checksum"] != source["checksum"]
    figures = dict(manifest["profile_check"], profile_id=manifest["profile_id"], training=manifest["training"],
                   reused={"entry": entry.name, "version": manifest["version"], "created": manifest["created"],
                           "source_checksum": manifest["source"]["checksum"], "stale": stale,
                           "max_discarded_functions": s.max_mismatch, "min_hot_coverage": s.min_hot_coverage})
    contract.write(ctx, PhaseName.IMPORT, contract.PROFILE_CHECK, figures)
    lines = [f"profile {manifest['profile_id']} from the archive ({entry.name}, {len(manifest['files'])} .gcda files, "
             f"{manifest['functions']} functions), trained by {trained_by(manifest)}"]
    if stale:
        lines.append(f"stale: trained on {manifest['product']} {manifest['version']} source "
                     f"{manifest['source']['checksum'][:12]}, this is {s.version} source {source['checksum'][:12]}")
    else:
        lines.append("trained on this very source")
    lines.append(f"limits: at most {s.max_mismatch} functions with a discarded profile, at least "
                 f"{s.min_hot_coverage:.0%} hot coverage (the training build had "
                 f"{manifest['optimized']['hot_coverage']:.0%})")
    for line in lines:
        log.note(line)
        print(f"[import] {line}", flush=True)


def archive_phase(ctx, log):
    """The trained pipeline's phase: keep the profile the optimised build just proved usable."""
    entry = store(ctx.workdir, build_root(ctx.settings), unpublished_kind(ctx.settings),
                  out=lambda line: (log.note(line), print(f"[archive] {line}", flush=True)))
    contract.write(ctx, PhaseName.ARCHIVE, contract.ARCHIVE_RECORD,
                   {"root": str(entry.root), "entry": entry.name, "kind": kind_of(entry)})


def unpublished_kind(settings):
    """The kind a build's profile is archived as: a release's is pending until the release is published
    (after the benchmark gate; `promote`), so that a refused release never becomes `--profile-from latest`."""
    return "pending" if settings.archive_kind == "release" else settings.archive_kind
