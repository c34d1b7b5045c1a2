"""pgo package: bintar, .rpm and .deb packages of a work directory's build.

The bintar is CPack over the checked optimised build tree (MariaDB's `make
package`), the debs are assembled from its staged install, and the rpms come
from MariaDB's own -DRPM=<target> route: the configuration built again in the
RPM layout with the same profile, its profile use checked like the release
build's. Every run proves the packaged server is a checked binary by comparing
its GNU build-id with that build tree's before anything is published. A PGO
build that did not pass its profile check is never packaged; --as-plain
packages a plain build of its configuration instead.

    pgo package --workdir W --format bintar|rpm|deb --out DIR [--as-plain]
    pgo prove DIR            install what DIR holds and run it (pgo/prove.py)
"""

import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from pgo import PipelineError, atomic, contract, debpackages, debrules
from pgo.checksums import sha256_file, write_sha256sums
from pgo.config import build_config, server_binary
from pgo.recipes import BOLT_MARK, RECIPES, STALE_MARK, changelog_line, is_elf, recipe, run
from pgo.runner import say
from pgo.toolchain import built_with_lto
from pgo.workdir import Workdir

FORMATS = ("bintar", "rpm", "deb")
BUILD_ID = re.compile(r"Build ID: ([0-9a-f]+)")


def register(subparsers):
    package = subparsers.add_parser("package", help="package a work directory's build as bintar, rpm or deb")
    package.add_argument("--workdir", required=True, help="work directory of `pgo build`")
    package.add_argument("--format", required=True, choices=FORMATS)
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


# --- what is being packaged ---------------------------------------------------

@dataclass(frozen=True)
class Build:
    """The checked build of a work directory, and the names its packages get."""
    workdir: Workdir
    info: dict
    variant: str            # "optimized" (PGO) or "plain"
    label: str              # "pgo" (with its stale and BOLT marks) or "" (plain builds carry no mark)
    release: int
    binary: Path            # the checked binary in the build tree
    build_id: str
    product: dict           # packaging/products.toml entry

    @property
    def version(self):
        return self.info["version"]

    @property
    def package_version(self):
        """'10.11.18+pgo' for a PGO build, '10.11.18' for a plain one."""
        return f"{self.version}+{self.label}" if self.label else self.version

    @property
    def tree(self):
        return self.workdir.build(self.variant)

    @property
    def binary_name(self):
        return self.binary.name


def load_build(workdir_path, release=1):
    workdir = Workdir(workdir_path)
    if not workdir.root.is_dir():
        raise PipelineError(f"work directory {workdir.root} does not exist")
    info = contract.staged_build(workdir)
    product = server_binary(info["product"])
    # The label is the check's: only a build that passed its profile check is staged as optimised, one
    # whose profile was trained on other source says so, and one BOLTed only with BOLT's passed check.
    variant = info["variant"]
    label = ("pgo" + (STALE_MARK if info["check"].get("stale") else "") + (BOLT_MARK if info.get("bolt") else "")
             if variant == "optimized" else "")
    binary = workdir.build(variant) / product["binary"]
    if not binary.is_file():
        raise PipelineError(f"the checked binary {binary} is missing: was the build tree removed?")
    staged = next((workdir.stage / path for path in product["staged_binary"]
                   if (workdir.stage / path).is_file()), workdir.stage / product["staged_binary"][0])
    binary_id = build_id(binary)
    if not staged.is_file() or build_id(staged) != binary_id:
        raise PipelineError(f"the staged {staged} is not the build tree's {binary}: rerun phase stage")
    return Build(workdir, info, variant, label, release, binary, binary_id, product)


def source_of(workdir):
    """The build's source, held in its line's shared tree while the packagers read it (CPack's
    install rules and the debs take files from the source; the rpm build compiles it)."""
    from pgo.phases import Context, source_tree
    return source_tree(Context(workdir, workdir.load_settings()))


def build_id(path):
    try:
        notes = subprocess.run(["readelf", "-n", str(path)], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise PipelineError(f"cannot read the ELF notes of {path}: {e}") from e
    match = BUILD_ID.search(notes)
    if not match:
        raise PipelineError(f"{path} has no GNU build-id, so its identity cannot be checked "
                            "(link with --build-id)")
    return match.group(1)


# --- publishing ---------------------------------------------------------------

def cmd_package(args):
    workdir = Workdir(args.workdir)
    if not workdir.root.is_dir():
        raise PipelineError(f"work directory {workdir.root} does not exist")
    # The rpm build writes into the work directory, and a phase run meanwhile would change what is packaged.
    with workdir.locked():
        publish(args)


def publish(args):
    build = plain_build(args.workdir, args.release) if args.as_plain else load_build(args.workdir, args.release)
    out = Path(args.out).resolve()
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
        with tempfile.TemporaryDirectory(prefix="pgo-package-") as scratch, source_of(build.workdir):
            # A maker returns the build it packaged: this one, or the format's own rebuild.
            packaged, packages = MAKERS[args.format](build, folder, Path(scratch))
        identity = check_identity(packaged, args.format, packages)
        write_buildinfo(packaged, args.format, folder, packages, identity)
        write_sha256sums(folder)

    # Made hidden next to DIR and renamed at the end: DIR is complete or absent.
    if not atomic.place(out, fill):
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
    into.mkdir(parents=True)
    if fmt == "bintar":
        return extract_from_tar(tarfile.open(package, "r:*"), name, into)
    if fmt == "deb":
        stream = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(package)], stdout=subprocess.PIPE)
        try:
            return extract_from_tar(tarfile.open(fileobj=stream.stdout, mode="r|"), name, into)
        finally:
            stream.stdout.close()
            stream.wait()
    listing = run(["rpm", "-qpl", package]).splitlines()
    wanted = [f".{p}" for p in listing if Path(p).name == name]
    if wanted:
        cpio = f"rpm2cpio {shquote(package)} | cpio -idm --quiet {' '.join(map(shquote, wanted))}"
        run(["sh", "-c", cpio], cwd=into)
    return [into / w for w in wanted if (into / w).is_file() and not (into / w).is_symlink()]


def extract_from_tar(archive, name, into):
    found = []
    with archive:
        for member in archive:
            if member.isfile() and Path(member.name).name == name:
                target = into / str(len(found))
                with archive.extractfile(member) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                found.append(target)
    return found


def shquote(value):
    return "'" + str(value).replace("'", "'\\''") + "'"


# --- bintar: MariaDB's `make package` -----------------------------------------

def cpack_setting(tree, name):
    config = tree / "CPackConfig.cmake"
    if not config.is_file():
        raise PipelineError(f"{config} is missing: the build tree has no CPack configuration")
    text = config.read_text()
    match = re.search(rf'^set\({name} "([^"]*)"\)', text, re.M)
    if not match:
        raise PipelineError(f"{tree}/CPackConfig.cmake sets no {name}: the project has no CPack configuration")
    return match.group(1)


def cpack(build, generator, scratch, settings, env=None):
    """Run the build tree's own CPack configuration, without rebuilding anything.

    `make package` would first run the build; the build is the pipeline's
    checked phase, and the identity check proves it was not redone.
    """
    args = ["cpack", "--config", build.tree / "CPackConfig.cmake", "-G", generator, "-B", scratch]
    if built_with_lto(build.info["flags"]):
        # The static libraries' LTO bytecode only this GCC can read: packages carry their machine code.
        settings = {**settings, "CPACK_PRE_BUILD_SCRIPTS": RECIPES / "strip-lto-bytecode.cmake"}
    for key, value in settings.items():
        args += ["-D", f"{key}={value}"]
    run(args, env=env)


def make_bintar(build, folder, scratch):
    configured = cpack_setting(build.tree, "CPACK_PACKAGE_FILE_NAME")
    marker = f"-{build.version}-"
    if marker not in configured:
        raise PipelineError(f"the bintar name {configured} does not contain the version {build.version}")
    name = configured.replace(marker, f"-{build.package_version}-", 1)
    cpack(build, "TGZ", scratch, {"CPACK_PACKAGE_FILE_NAME": name})
    tarball = scratch / f"{name}.tar.gz"
    if not tarball.is_file():
        raise PipelineError(f"cpack made no {tarball.name}")
    return build, [Path(shutil.move(tarball, folder / tarball.name))]


# --- rpm: MariaDB's -DRPM=<target> build, with the checked build's profile ---

def make_rpm(build, folder, scratch):
    """The rpm set the way MariaDB's release builds make it: the configuration
    built again with -DRPM=<target> (cmake/cpack_rpm.cmake: distribution layout,
    one rpm per component group), optimised with the same profile, its profile
    use checked like the release build's, then packaged by its own CPack setup."""
    spec = recipe("rpm", build)
    rebuilt = rebuild(build, "rpm", [f"-DRPM={spec['target']}"])
    settings = {
        **spec.get("cpack", {}),
        "CPACK_RPM_PACKAGE_VERSION": rebuilt.package_version,
        "CPACK_RPM_PACKAGE_RELEASE": str(rebuilt.release),
        "CPACK_RPM_FILE_NAME": "RPM-DEFAULT",
        "CPACK_RPM_CHANGELOG_FILE": write_rpm_changelog(rebuilt, spec, scratch / "changelog"),
    }
    if rebuilt.info.get("bolt"):
        # CPack's strip is binutils' strip on every binary, which breaks a BOLTed one: rpmbuild's strip
        # (%__strip below) strips the others and leaves it as BOLT wrote it.
        settings["CPACK_STRIP_FILES"] = "OFF"
    # rpmbuild macros CPack has no setting for, through rpmbuild's ~/.rpmmacros
    # (the project's CPACK_RPM_SPEC_MORE_DEFINE is MariaDB's own).
    home = scratch / "home"
    home.mkdir()
    (home / ".rpmmacros").write_text(f"%packager {spec['packager']}\n%_build_id_links none\n"
                                     f"%__strip {RECIPES / 'strip-unless-bolted.sh'}\n")
    cpack(rebuilt, "RPM", scratch / "cpack", settings, env={"HOME": str(home)})
    rpms = sorted((scratch / "cpack").glob("*.rpm"))
    if not rpms:
        raise PipelineError("cpack made no rpm files")
    return rebuilt, [Path(shutil.move(rpm, folder / rpm.name)) for rpm in rpms]


def rebuild(build, fmt, cmake_extra):
    """The checked build's configuration built again with a format's CMake options.

    A PGO build reuses its own archived profile (the reuse pipeline: one
    compile, no training), with the limits any reuse has; a plain build stays
    plain. It lives in the work directory's package-<format>/ and resumes there.
    """
    from pgo import archive, reuse
    settings = replace(build.workdir.load_settings(), cmake_extra=tuple(cmake_extra), profile_dir=None)
    if build.label:
        entry = archive.archived_entry(build.workdir, "packaged")
        manifest = archive.find(archive.root_of(settings.archive), entry).manifest()
        max_mismatch, min_coverage = reuse.reuse_limits(manifest)
        settings = replace(settings, profile_from=entry, max_mismatch=max_mismatch, min_hot_coverage=min_coverage)
    return build_nested(build.workdir.root / f"package-{fmt}", settings, f"{fmt} build ({' '.join(cmake_extra)})",
                        build.release)


def plain_build(workdir_path, release):
    """The work directory's configuration built without a profile, whatever its own build's check said.

    Never the work directory's own optimised binary: that one says "PGO build"
    in its version comment, and its label could only be wrong.
    """
    settings = replace(Workdir(workdir_path).load_settings(), pgo="off", profile_from=None, profile_dir=None)
    return build_nested(Workdir(workdir_path).root / "package-plain", settings, "plain build", release)


def build_nested(root, settings, what, release):
    """Run a pipeline in a work directory's sub-folder, resuming there; return its staged build.

    Without the test phase: the suite ran on the release's own build, and `pgo prove` runs its
    smoke set on what these packages install.
    """
    from pgo.phases import Context, pipeline_of, run_phases
    settings = replace(settings, tests="off")
    nested = Workdir(root)
    fresh = nested.settings_file.is_file() and nested.load_settings() != settings
    nested.save_settings(settings, fresh=fresh)
    pipeline = pipeline_of(settings)
    done = nested.state()["done"]
    say(f"building the {what} in {nested.root}"
        + (f"; resuming after {', '.join(p for p in pipeline if p in done)}" if done else ""))
    run_phases(Context(nested, settings), pipeline, [p for p in pipeline if p not in done])
    return load_build(nested.root, release)


def write_rpm_changelog(build, spec, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    day = time.strftime("%a %b %d %Y")
    path.write_text(f"* {day} {spec['packager']} - {build.package_version}-{build.release}\n"
                    f"- {changelog_line(build)}\n")
    return path


# --- deb: the source package's debian/rules on the build tree, or assembled from the staged tree

def make_deb(build, folder, scratch):
    """A configuration with `debian_rules = true` packages through its Debian source package's own
    debian/rules (pgo/debrules.py); the others through the hand-written split (pgo/debpackages.py)."""
    spec = recipe("deb", build)
    if build_config(build.info["config"]).debian_rules:
        return build, debrules.make(build, spec, folder, scratch)
    return build, debpackages.make(build, spec, folder, scratch)


MAKERS = {"bintar": make_bintar, "rpm": make_rpm, "deb": make_deb}
