"""pgo package: bintar, .rpm and .deb packages of a work directory's build.

Each format's module makes them (pgo/packaging/formats/<format>.py): the bintar is
CPack over the checked optimised build tree (MariaDB's `make package`), the debs
come through the source package's debian/rules or are assembled from its staged
install, and the rpms from MariaDB's own -DRPM=<target> route (its install rules
and CPack) over a tree configured in the RPM layout that holds the checked
build's files. Every run proves the packaged server is a checked binary by
comparing its GNU build-id with that build tree's before anything is published. A
PGO build that did not pass its profile check is never packaged; --as-plain
packages a plain build of its configuration instead.

    pgo package --workdir W --format bintar|rpm|deb --out DIR [--as-plain]
    pgo prove DIR            install what DIR holds and run it (pgo/packaging/prove.py)
"""

import errno
import os
import shutil
import tempfile
import time
from pathlib import Path

from pgo import PipelineError
from pgo.base import atomic
from pgo.base.checksums import sha256_file, write_sha256sums
from pgo.base.formats import NAMES
from pgo.base.runner import say
from pgo.core import contract
from pgo.core.workdir import Workdir
from pgo.packaging import formats
from pgo.packaging.checked import build_id, load_build, plain_build, source_of
from pgo.packaging.recipes import is_elf

NO_SPACE = os.strerror(errno.ENOSPC)      # "No space left on device", as every tool says it


def register(subparsers):
    package = subparsers.add_parser("package", help="package a work directory's build as bintar, rpm or deb")
    package.add_argument("--workdir", required=True, help="work directory of `pgo build`")
    package.add_argument("--format", required=True, choices=NAMES)
    package.add_argument("--out", required=True, help="folder to publish into (must not exist yet)")
    package.add_argument("--release", type=release_number, default=1,
                         help="package release number: deb revision, rpm Release (default 1)")
    package.add_argument("--as-plain", action="store_true",
                         help="package a plain build (no profile) of the work directory's configuration, "
                         "built in its package-plain/: what a PGO build that failed its profile check may ship as")
    package.set_defaults(func=cmd_package)


def release_number(text):
    if not text.isdigit() or int(text) < 1:
        raise ValueError(text)
    return int(text)


# --- publishing ---------------------------------------------------------------

def cmd_package(args):
    workdir = Workdir(args.workdir)
    workdir.require()
    # The rpm tree is made in the work directory, and a phase run meanwhile would change what is packaged.
    with workdir.locked():
        publish(args)


def publish(args):
    build = plain_build(args.workdir, args.release) if args.as_plain else load_build(args.workdir, args.release)
    given = Path(args.out)
    if given.is_symlink() and not given.exists():
        # resolve() would follow it, and the packages would land wherever the link points.
        raise PipelineError(f"--out {given} is a symbolic link to {os.readlink(given)}, which does not exist: "
                            "name the folder to publish into itself")
    out = given.resolve()
    if out.exists():
        raise PipelineError(f"{out} already exists; packages are never overwritten (choose another --out)")
    out.parent.mkdir(parents=True, exist_ok=True)
    what = f"{build.info['product']} {build.package_version}"
    say(f"packaging {what} ({'PGO, profile ' + build.info['profile_id'] if build.label else 'plain build'}) "
        f"as {args.format}")
    started = time.monotonic()

    def fill(folder):
        folder.mkdir()
        folder.chmod(0o755)
        # The makers' scratch lies beside --out, hidden and named after this process: on the filesystem
        # that must hold the packages (a full one is found there, not in /tmp), and swept by the next
        # run when a killed one leaves it.
        with atomic.scratch(out.with_name(f"{out.name}-scratch")) as scratch, source_of(build.workdir):
            # A format's maker returns the build it packaged (an --as-plain one is package-plain/'s).
            packaged, packages = formats.module(args.format).make(build, folder, scratch)
        identity = check_identity(packaged, args.format, packages)
        write_buildinfo(packaged, args.format, folder, packages, identity)
        write_sha256sums(folder)

    # Made hidden next to DIR and renamed at the end: DIR is complete or absent.
    try:
        placed = atomic.place(out, fill)
    except (PipelineError, OSError) as e:
        if getattr(e, "errno", None) != errno.ENOSPC and NO_SPACE not in str(e):
            raise
        # Whichever tool filled the disk (dpkg-deb, CPack, a copy), it is the folder of --out that is full:
        # its scratch and the packages lie there.
        raise PipelineError(f"no space left for the packages on the filesystem of --out {out} "
                            f"({shutil.disk_usage(out.parent).free // 1024} KiB free): free some, or choose "
                            "another --out; nothing was published") from None
    if not placed:
        raise PipelineError(f"{out} appeared while packaging; packages are never overwritten")
    for path in sorted(out.iterdir()):
        say(f"  {path.name}  {path.stat().st_size / 1e6:.1f} MB")
    say(f"published {out} in {time.monotonic() - started:.0f} s")


def write_buildinfo(build, fmt, folder, packages, identity):
    info = build.info
    state = build.workdir.state()["done"]
    atomic.write_json(folder / contract.PACKAGE_INFO, {
        "product": info["product"],
        "format": fmt,
        "version": info["version"],
        "package_version": build.package_version,
        "release": build.release,
        "pgo": info["pgo"],
        "profile_id": info["profile_id"],
        "stale_profile": bool((info["check"] or {}).get("stale")),
        # The binary's own profile check (pgo prove reads the label from it), and its BOLT check.
        "profile_use": info["check"],
        "bolt": info.get("bolt"),
        "identity": info["identity"],
        "source": {k: info["source"][k] for k in ("version", "checksum", "kind", "origin")},
        "compiler": info["compiler"],
        "config": info["config"],
        "cmake_args": info["cmake_args"],
        "flags": info["flags"],
        "flags_fingerprint": info["flags_fingerprint"],
        "built": state.get(build.variant, {}).get("finished"),
        "packaged": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "binary": identity,
        "packages": [p.name for p in packages],
    })


# --- the packaged binary is the checked one -----------------------------------

def check_identity(build, fmt, packages):
    """Find the server binary in the packages and require the checked build-id."""
    found = []
    with tempfile.TemporaryDirectory(prefix="pgo-identity-") as tmp:
        for package in packages:
            for copy in extract_named(fmt, package, build.binary_name, Path(tmp) / package.name):
                # Not a file of the same name that is no program (the fixture deb's lintian overrides).
                if is_elf(copy):
                    found.append((package.name, build_id(copy)))
    if not found:
        raise PipelineError(f"no package holds {build.binary_name}: the recipe lost the server")
    wrong = [f"{name} ({bid})" for name, bid in found if bid != build.build_id]
    if wrong:
        raise PipelineError(f"the packaged {build.binary_name} is not the checked binary {build.binary} "
                            f"(build-id {build.build_id}): {', '.join(wrong)}")
    say(f"  {build.binary_name} in {', '.join(n for n, _ in found)}: build-id {build.build_id} "
        f"= the checked {build.variant} build's")
    return {"name": build.binary_name, "build_tree_path": str(build.binary.relative_to(build.tree)),
            "build_id": build.build_id, "sha256_in_build_tree": sha256_file(build.binary),
            "variant": build.variant}


def extract_named(fmt, package, name, into):
    """Extract the regular files called `name` from a package; return their paths."""
    extract = formats.module(fmt).extract
    into.mkdir(parents=True)
    return extract(package, name, into)
