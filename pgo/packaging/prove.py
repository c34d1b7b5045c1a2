"""pgo prove: install a published package folder and run what it installed.

    pgo prove DIR [--replace-distribution] [--piuparts | --piuparts-only] [--upgrade-from OLDER]

First the folder itself: sha256sums.txt lists every file and matches, and the
label stands on the binary's own profile check. Then by format (buildinfo.json
says which), each format's `prove` (pgo/packaging/formats/<format>.py):
  bintar  unpack anywhere, create a datadir with its own install script, start
          the server on a private socket, query it, shut it down; then the
          product's smoke test set (mtr) from the tarball's own test suite
  rpm     rpm -qp metadata, file list and requirements; rpmlint without errors;
          the payload extracted with rpm2cpio | cpio runs as the bintar does,
          then the smoke test set from the test package's suite there
  deb     lintian without errors; with --piuparts, Debian's piuparts (pgo/packaging/piuparts.py):
          install, remove and purge (no file left, no maintainer script failing),
          the upgrade from the distribution's packages of the same names where
          its archive serves them (and OLDER's, a folder of an earlier release),
          and apt's refusal to put the distribution's older version back over
          ours without --allow-downgrades (--piuparts-only: that alone, then
          stop); then installed with apt into a clean chroot made by mmdebstrap
          (never into this host; --replace-distribution: over the distribution's
          packages installed first, refused if apt would remove any of them),
          the server started there, queried, stopped;
          then the smoke test set from the installed test package, in the
          chroot, as nobody
The run itself is packaging/smoke/<product>.sh; its `version_comment:` line must
carry the build's mark: the profile id for PGO packages, "plain build" otherwise.
"""

from pathlib import Path

from pgo import PipelineError
from pgo.base import platforms
from pgo.base.checksums import SUMS, verify_sha256sums
from pgo.base.formats import NAMES
from pgo.base.protocol import PACKAGE_INFO
from pgo.base.runner import say
from pgo.core.workdir import read_json
from pgo.packaging import debpackages, formats
from pgo.packaging.recipes import BOLT_MARK, STALE_MARK


def register(subparsers):
    prove = subparsers.add_parser("prove", help="install a package folder's packages and run them")
    prove.add_argument("folder", help="a folder published by `pgo package`")
    prove.add_argument("--platform", help="deb: the platform (pgo/platforms.toml) the debs are for: its Debian "
                                          "release is the chroot's and piuparts', its version suffix the deb "
                                          "recipe's (default: this machine's, or $PGO_PLATFORM)")
    prove.add_argument("--distribution", help="Debian release of the deb chroot and of piuparts (default: the "
                                              "platform's codename)")
    prove.add_argument("--mirror", help="Debian mirror for the chroot and piuparts (default: deb.debian.org)")
    prove.add_argument("--replace-distribution", action="store_true",
                       help="deb: in the chroot, first install the distribution's packages of the set's names, "
                            "the recipe's distribution_packages and --upgrade-from's set, then ours over them "
                            "with apt; refused if apt would remove any of them")
    prove.add_argument("--piuparts", action="store_true",
                       help="deb: also run Debian's piuparts (install, upgrade from the distribution's packages "
                            "of the same names, remove, purge) and prove that apt refuses the distribution's older "
                            "version over ours without --allow-downgrades. Not the default: it installs the set "
                            "twice more and purges it (minutes for MariaDB's set), from a base chroot in the cache")
    prove.add_argument("--piuparts-only", action="store_true",
                       help="deb: the folder's checks, lintian and --piuparts, without the chroot's run of the "
                            "packages (a folder whose chroot proof passed; piuparts again after a packaging fix)")
    prove.add_argument("--upgrade-from", metavar="OLDER",
                       help="with --piuparts or --replace-distribution: a deb folder `pgo package` published of an "
                            "earlier release, or a folder of the distribution's own debs of an earlier version, "
                            "served beside the archive: piuparts upgrades from it (the archive's versions newer "
                            "than ours set aside), and --replace-distribution installs it first")
    prove.add_argument("--cache", help="download cache, for piuparts' base chroot (default: ~/.cache/pgo)")
    prove.set_defaults(func=cmd_prove)


def cmd_prove(args):
    folder = Path(args.folder).resolve()
    info = load_buildinfo(folder)
    check_label(info)
    args.piuparts = args.piuparts or args.piuparts_only
    if args.piuparts and info["format"] != "deb":
        raise PipelineError(f"--piuparts proves debs; {folder.name} holds {info['format']} packages")
    if args.replace_distribution and info["format"] != "deb":
        raise PipelineError(f"--replace-distribution replaces the distribution's debs; {folder.name} holds "
                            f"{info['format']} packages")
    if args.replace_distribution and args.piuparts_only:
        raise PipelineError("--piuparts-only skips the chroot --replace-distribution installs into: drop one of them")
    if args.upgrade_from and not (args.piuparts or args.replace_distribution):
        raise PipelineError("--upgrade-from is the older set of --piuparts' upgrade test or of "
                            "--replace-distribution: add one of them")
    # An unknown platform is refused before any work; a machine of no platform only where debs need one.
    args.platform = platforms.platform(args.platform) if args.platform else None
    say(f"proving {folder.name}: {info['product']} {info['package_version']} {info['format']}, "
        f"{'PGO profile ' + info['profile_id'] if info['profile_id'] else 'plain build'}")
    if args.upgrade_from:
        check_older(Path(args.upgrade_from).resolve(), info)
    comment = formats.module(info["format"]).prove(folder, info, args)
    if args.piuparts_only:
        say("proof passed: lintian and piuparts (--piuparts-only: the packages were not run, no version comment)")
        return
    check_mark(comment, info)
    say(f"proof passed: version comment '{comment}'")


# What the proof reads of buildinfo.json (pgo/packaging/package.py writes it), and the types it reads.
READS = {"product": str, "format": str, "version": str, "package_version": str, "release": int,
         "profile_id": (str, type(None)), "profile_use": (dict, type(None)), "bolt": (dict, type(None)),
         "compiler": dict, "binary": dict}


def load_buildinfo(folder):
    """A published folder's buildinfo.json, once its checksums match, with every field the proof reads."""
    path = folder / PACKAGE_INFO
    if not path.is_file():
        raise PipelineError(f"{folder} has no buildinfo.json: it is not a folder `pgo package` published")
    check_checksums(folder)
    info = read_json(path)
    if isinstance(info, dict):
        info.setdefault("profile_use", None)    # a folder of a pgo before profile checks were recorded
        info.setdefault("bolt", None)           # or before BOLT
    wrong = [key for key, kind in READS.items() if not isinstance(info, dict) or key not in info
             or not isinstance(info[key], kind)]
    if not wrong:
        wrong = [name for name, ok in (("format", info["format"] in NAMES),
                                       ("compiler.version", "version" in info["compiler"]),
                                       ("binary.name", "name" in info["binary"])) if not ok]
    if wrong:
        raise PipelineError(f"{path} is not one `pgo package` wrote: {', '.join(wrong)} missing or wrong")
    return info


def check_checksums(folder):
    if not (folder / SUMS).is_file():
        raise PipelineError(f"{folder} has no {SUMS}")
    bad = verify_sha256sums(folder)
    if bad:
        raise PipelineError(f"checksum mismatch: {', '.join(bad)}")
    say(f"  {SUMS}: every file matches")


def check_label(info):
    """A PGO label stands only on the packaged binary's own passed profile check."""
    check = info.get("profile_use")
    pgo_named = info["profile_id"] or "+pgo" in info["package_version"]
    if not pgo_named:
        return
    if not check or not check.get("passed"):
        raise PipelineError(f"{info['package_version']} is labelled PGO, but its binary did not pass a profile check")
    theirs = (check.get("profile_id"), check.get("identity", {}).get("compiler", {}).get("version"))
    ours = (info["profile_id"], info["compiler"]["version"])
    if theirs != ours:
        raise PipelineError(f"{info['package_version']} is labelled profile {ours[0]}, GCC {ours[1]}, but its "
                            f"binary's profile check says profile {theirs[0]}, GCC {theirs[1]}")
    stale, marked = bool(check.get("stale")), STALE_MARK in info["package_version"]
    if stale and not marked:
        raise PipelineError(f"{info['package_version']} has no stale mark ({STALE_MARK}), but its binary's profile "
                            f"check says its profile was trained on other source")
    if marked and not stale:
        raise PipelineError(f"{info['package_version']} is marked stale, but its binary's profile check says its "
                            "profile was trained on this very source")
    bolted, bolt_marked = bool((info["bolt"] or {}).get("passed")), info["package_version"].endswith(BOLT_MARK)
    if bolt_marked != bolted:
        raise PipelineError(f"{info['package_version']} {'is' if bolt_marked else 'is not'} marked BOLT ({BOLT_MARK}), "
                            f"but its binary {'has no passed' if bolt_marked else 'has a passed'} BOLT check")
    say(f"  label: {'stale ' if stale else ''}profile {check['profile_id']} used by {check['hot_coverage']:.0%} of "
        f"the hot objects, GCC {theirs[1]} (the binary's own profile check)"
        + (f"; BOLT: {info['bolt']['profiled_functions']} functions profiled (its own check)" if bolted else ""))


def check_mark(comment, info):
    if info["profile_id"]:
        mark = "PGO+BOLT build" if info["bolt"] else "PGO build"
        if mark not in comment or info["profile_id"] not in comment:
            raise PipelineError(f"version comment '{comment}' lacks the mark '{mark}' with profile "
                                f"{info['profile_id']}")
        stale = bool((info["profile_use"] or {}).get("stale"))
        if stale != (f"stale profile {info['profile_id']}" in comment):
            raise PipelineError(f"version comment '{comment}' {'lacks' if stale else 'has'} the mark of a stale "
                                f"profile, but the binary's profile check says its profile is "
                                f"{'stale' if stale else 'of this very source'}")
    elif "PGO" in comment.replace("no PGO", "") or "plain build" not in comment:
        raise PipelineError(f"version comment '{comment}' of a plain package does not say 'plain build'")


def check_older(older, info):
    """--upgrade-from: a deb folder `pgo package` published of the same product, its checksums matching;
    or a folder of the distribution's own debs (as its pool serves them: no buildinfo.json). That they
    are older than ours the deb proof checks, once it has read our debs' version."""
    if not older.is_dir():
        raise PipelineError(f"--upgrade-from {older}: no such folder")
    if not (older / PACKAGE_INFO).is_file():
        debs = sorted(older.glob("*.deb"))
        if not debs:
            raise PipelineError(f"--upgrade-from {older} holds no .deb files")
        versions = sorted({debpackages.control_field(deb, "Version") for deb in debs})
        say(f"  the older set (--upgrade-from): {older.name}/, {len(debs)} debs of version {', '.join(versions)} "
            "(the distribution's own: no buildinfo.json, no checksums of ours)")
        return
    theirs = load_buildinfo(older)
    if (theirs["format"], theirs["product"]) != ("deb", info["product"]):
        raise PipelineError(f"--upgrade-from {older} holds {theirs['product']} {theirs['format']} packages, not "
                            f"{info['product']} debs")
    say(f"  the older set (--upgrade-from): {older.name}/, {theirs['product']} {theirs['package_version']}-"
        f"{theirs['release']} debs, {'profile ' + theirs['profile_id'] if theirs['profile_id'] else 'plain build'}")
