"""pgo adopt-debs: the .debs a distribution's own packaging built with cmake/pgo.cmake and a published
profile, checked as the pipeline checks its own PGO builds, and published as a folder `pgo prove` reads.

    cd mariadb-10.11.18 && patch -p1 < patches/debian-10.11/0001-*.patch
    dch --local +pgo "PGO build"                   # the +pgo mark the label stands on
    DEB_BUILD_OPTIONS="pgo=<profile> nocheck" dpkg-buildpackage -b -uc -us 2>&1 | tee ../build.log
    pgo adopt-debs --changes ../mariadb_10.11.18-0+deb12u1+pgo1_amd64.changes --build-dir builddir \\
        --build-log ../build.log --out DIR
    pgo prove DIR

The module's own report (<build-dir>/pgo/report.json) is what the package build saw. The label stands on
the pipeline's check of the same build tree, the one `pgo build` makes of its optimised build
(pgo/core/profile.py judge_use): each object's record of its options (pgo/core/proof.py), the
compiler's profile warnings in the build log, the code laid out hot, and the hot coverage against
the same minimum. Then the packaged server must be that tree's binary (its GNU build-id) and every
.deb the one the .changes lists (its SHA-256); the folder gets buildinfo.json and sha256sums.txt as
`pgo package` writes them, made out of sight and renamed into place. The -dbgsym packages stay out:
`pgo prove` installs what a user installs.
"""

import re
import shutil
import tempfile
import time
from pathlib import Path

from pgo import PipelineError
from pgo.base import atomic
from pgo.base.checksums import sha256_file, write_sha256sums
from pgo.base.protocol import MAX_MISMATCH, MIN_HOT_COVERAGE, PACKAGE_INFO, Variant
from pgo.base.readers import read_json
from pgo.base.runner import say
from pgo.build.source import dsc_checksums
from pgo.core import profile, proof
from pgo.core.config import load, product, server_binary
from pgo.core.toolchain import gcov_binary, pgo_flags
from pgo.packaging.checked import build_id
from pgo.packaging.formats import deb
from pgo.packaging.recipes import is_elf

# What cmake/pgo.cmake leaves in the build tree's work folder (its PGO_WORK_DIR): the report of the
# build's end, the profile it compiled with, and the published profile's manifest.
MODULE_DIR = "pgo"
REPORT, PROFILE, MANIFEST = "report.json", "profile", "profile.manifest.json"
# The upstream release in a Debian version: [epoch:]upstream[+ds...]-revision.
UPSTREAM = re.compile(r"^(?:\d+:)?(\d+(?:\.\d+)+)")


def register(subparsers):
    command = subparsers.add_parser(
        "adopt-debs", help="check .debs that debian/rules built with cmake/pgo.cmake and a published profile, "
        "and publish them as a folder pgo prove reads")
    command.add_argument("--changes", required=True, help="the .changes file dpkg-buildpackage wrote")
    command.add_argument("--build-dir", required=True,
                         help="the CMake build tree of that package build (debian/rules' builddir)")
    command.add_argument("--build-log", required=True, help="that package build's whole output")
    command.add_argument("--out", required=True, help="folder to publish into (must not exist yet)")
    command.add_argument("--min-hot-coverage", type=float, default=MIN_HOT_COVERAGE,
                         help="share of hot objects that must have compiled with their profile (default "
                              "%(default)s, as pgo build)")
    command.add_argument("--max-mismatch", type=int, default=MAX_MISMATCH,
                         help="functions whose profile the compiler may have dropped (default %(default)s)")
    command.set_defaults(func=cmd_adopt)


def cmd_adopt(args):
    started = time.monotonic()
    changes, tree, log = Path(args.changes).resolve(), Path(args.build_dir).resolve(), Path(args.build_log)
    out = Path(args.out).resolve()
    if out.exists() or out.is_symlink():
        raise PipelineError(f"{out} already exists; packages are never overwritten (choose another --out)")
    debs, source, version = listed_debs(changes)
    name = product_of(source)
    report, manifest = module_records(tree)
    if not log.is_file():
        raise PipelineError(f"--build-log {log}: no such file (save the package build's output, e.g. with tee)")
    # The compiler that built the tree, as the module recorded it (the configure refused another than the
    # profile's).
    profile_id, gcc = manifest["profile_id"], report.get("gcc")
    if gcc != manifest["compiler"]["version"]:
        raise PipelineError(f"{tree} was built by GCC {gcc}, its profile made by GCC {manifest['compiler']['version']}")
    upstream = upstream_of(version)
    if manifest["product"] != name:
        raise PipelineError(f"{tree} was built with a profile of {manifest['product']}, the .changes is of {source}")
    if "+pgo" not in version:
        raise PipelineError(f"the packages' version {version} has no +pgo mark, which PGO packages carry (and pgo "
                            "prove asks for): give the build one, e.g. `dch --local +pgo`, and build again")
    say(f"adopting {source} {version}: {len(debs)} packages, profile {profile_id} (GCC {gcc})")
    verdict = check_use(name, tree, log.read_text(errors="replace"), gcc, args.min_hot_coverage, args.max_mismatch)
    stale = manifest["version"] != upstream
    verdict.update(profile_id=profile_id, stale=stale, trained_on=manifest["version"] if stale else None,
                   identity={"compiler": {"version": gcc}}, module_report=report)
    say(f"  profile check: {verdict['hot_with_profile']} of {verdict['hot_objects']} hot objects "
        f"({verdict['hot_coverage']:.0%}) compiled with their profile, proven from their own records "
        f"(the module said {report['with_profile']} of {report['hot_objects']}); "
        f"{verdict['functions_without_profile']} functions found no profile, "
        f"{verdict['source_moved']} were warned of as moved")
    trained_dir = manifest.get("source_dir")
    if trained_dir and verdict["functions_without_profile"]:
        say(f"  the profile was trained on the source in {trained_dir}: a function that is not public finds its "
            "profile only when the package is built from there (cmake/pgo.cmake warned at the configure)")
    if not verdict["passed"]:
        raise PipelineError("; ".join(verdict["problems"]))
    binary = server_binary(name)["binary"]
    identity = packaged_identity(debs, tree, tree / binary)
    info = {"product": name, "format": "deb", "version": upstream, "package_version": version, "release": 1,
            "pgo": "on", "profile_id": profile_id, "stale_profile": stale, "profile_use": verdict, "bolt": None,
            "source": {"kind": "debian-package-build", "origin": source, "version": version,
                       "changes": changes.name, "checksum": sha256_file(changes)},
            "compiler": {"version": gcc}, "binary": identity,
            "built_by": "debian/rules with cmake/pgo.cmake (PGO_PROFILE)",
            "packaged": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "packages": [d.name for d in debs]}

    def fill(folder):
        folder.mkdir()
        folder.chmod(0o755)
        for path in debs:
            shutil.copy2(path, folder / path.name)
        atomic.write_json(folder / PACKAGE_INFO, info)
        write_sha256sums(folder)

    out.parent.mkdir(parents=True, exist_ok=True)
    if not atomic.place(out, fill):
        raise PipelineError(f"{out} appeared meanwhile; packages are never overwritten")
    say(f"published {out} in {time.monotonic() - started:.0f} s: pgo prove {out}")


def listed_debs(changes):
    """The .debs a .changes lists, each matching its SHA-256 there (no -dbgsym), its Source and Version."""
    if not changes.is_file():
        raise PipelineError(f"--changes {changes}: no such file")
    text = changes.read_text(errors="replace")
    fields = dict(re.findall(r"^(Source|Version): *(\S+)", text, re.M))
    sums = dsc_checksums(changes)
    if not sums or len(fields) < 2:
        raise PipelineError(f"{changes} is no .changes file of a build (no Source, Version or Checksums-Sha256)")
    debs = []
    for name, digest in sorted(sums.items()):
        if not name.endswith(".deb") or "-dbgsym_" in name:
            continue
        path = changes.parent / name
        if not path.is_file():
            raise PipelineError(f"{path} is missing: {changes.name} lists it")
        if sha256_file(path) != digest:
            raise PipelineError(f"{path} does not match its SHA-256 in {changes.name}: not the package that build made")
        debs.append(path)
    if not debs:
        raise PipelineError(f"{changes} lists no .deb")
    return debs, fields["Source"], fields["Version"]


def product_of(source):
    """The product a Debian source package builds: the one whose debian_source it is, or of its name."""
    for name, spec in load().get("products", {}).items():
        if spec.get("debian_source", name) == source:
            return name
    raise PipelineError(f"source package {source} builds no product of pgo/configs.toml")


def upstream_of(version):
    match = UPSTREAM.match(version)
    if not match:
        raise PipelineError(f"cannot read the upstream release in the version {version}")
    return match.group(1)


def module_records(tree):
    """cmake/pgo.cmake's report of the build and the published profile's manifest, from the build tree."""
    work = tree / MODULE_DIR
    if not (work / REPORT).is_file():
        raise PipelineError(f"{tree} has no {MODULE_DIR}/{REPORT}: not a build tree of cmake/pgo.cmake that "
                            "finished (was the package built with DEB_BUILD_OPTIONS=pgo=<profile>?)")
    report = read_json(work / REPORT, "cmake/pgo.cmake's report")
    if not (work / MANIFEST).is_file():
        raise PipelineError(f"{tree} was not built with a published profile ({MODULE_DIR}/{MANIFEST} is missing; "
                            "pgo=train trains its own, which no archive holds): adopt-debs proves builds with "
                            "a profile the pipeline published")
    manifest = read_json(work / MANIFEST, "the profile's manifest")
    missing = [key for key in ("profile_id", "product", "version") if not isinstance(manifest.get(key), str)]
    if missing or not isinstance(manifest.get("compiler"), dict) or "version" not in manifest["compiler"]:
        raise PipelineError(f"{work / MANIFEST} is no manifest of a published profile")
    return report, manifest


def check_use(name, tree, log_text, gcc, min_hot_coverage, max_mismatch):
    """The verdict `pgo build` gives its own optimised build (pgo/core/profile.py judge_use), of this tree;
    gcc: the version that built it. cmake/pgo.cmake compiles with the pipeline's own profile flags (its
    configure refuses a profile used with others)."""
    hot_dirs = product(name).hot_dirs
    profile_dir = tree / MODULE_DIR / PROFILE
    objects = profile.compiled_objects(tree)
    flags = pgo_flags(Variant.OPTIMIZED, profile_dir, tree)[0]
    records = proof.prove(tree, Variant.OPTIMIZED, flags, profile_dir, hot_dirs)
    # The package build compiles the source in another folder than the training did, so GCC warns for
    # every function that its "source locations ... have changed" (the checksum of its lines holds the
    # file's path). It still reads the counters then (GCC 12 coverage.cc get_coverage_counts returns them
    # after that warning; a source moved to another folder compiled to the same code as in place): those
    # warnings are counted, not taken for a dropped profile. Whether the compiles read the profile the
    # code itself shows (the traces below: hot code laid out in .text.hot), as for the pipeline's builds.
    warnings = profile.compiler_warnings(log_text, hot_dirs, source_root(tree), objects, moved_keeps_profile=True)
    traces = proof.traces(tree, profile_dir, profile.hot_only(objects, hot_dirs), gcov_binary("gcov-dump", gcc))
    return profile.judge_use(warnings, records, traces, profile_dir, tree, hot_dirs, max_mismatch, min_hot_coverage)


def source_root(tree):
    """The source tree a CMake build tree was configured from (its CMakeCache.txt)."""
    cache = tree / "CMakeCache.txt"
    found = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", cache.read_text(errors="replace"), re.M) \
        if cache.is_file() else None
    if not found:
        raise PipelineError(f"{tree} has no CMakeCache.txt naming its source: not a CMake build tree")
    return Path(found.group(1))


def packaged_identity(debs, tree, binary):
    """The server binary in the packages is the build tree's (its GNU build-id; stripped, it keeps it)."""
    if not binary.is_file():
        raise PipelineError(f"the build tree has no {binary}: not the tree that made these packages")
    ours, found = build_id(binary), []
    with tempfile.TemporaryDirectory(prefix="pgo-adopt-") as tmp:
        for number, package in enumerate(debs):
            into = Path(tmp) / str(number)
            into.mkdir()
            found += [(package.name, build_id(copy)) for copy in deb.extract(package, binary.name, into)
                      if is_elf(copy)]
    if not found:
        raise PipelineError(f"no package holds {binary.name}")
    wrong = [f"{name} ({bid})" for name, bid in found if bid != ours]
    if wrong:
        raise PipelineError(f"the packaged {binary.name} is not the build tree's {binary} (build-id {ours}): "
                            f"{', '.join(wrong)}")
    say(f"  {binary.name} in {', '.join(n for n, _ in found)}: build-id {ours} = the checked build tree's")
    return {"name": binary.name, "build_id": ours, "build_tree_path": str(binary.relative_to(tree)),
            "variant": "optimized"}

