"""pgo package: bintar, .rpm and .deb packages of a work directory's build.

The bintar is CPack over the checked optimised build tree (MariaDB's `make
package`), the debs are assembled from its staged install, and the rpms come
from MariaDB's own -DRPM=<target> route (its install rules and CPack) over a
tree configured in the RPM layout that holds the checked build's files. Every
run proves the packaged server is a checked binary by comparing its GNU
build-id with that build tree's before anything is published. A PGO build that
did not pass its profile check is never packaged; --as-plain packages a plain
build of its configuration instead.

    pgo package --workdir W --format bintar|rpm|deb --out DIR [--as-plain]
    pgo prove DIR            install what DIR holds and run it (pgo/packaging/prove.py)
"""

import errno
import fnmatch
import os
import re
import shlex
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from pgo import PipelineError
from pgo.base import atomic, process, protocol
from pgo.base.checksums import sha256_file, write_sha256sums
from pgo.base.formats import NAMES, Format, parse
from pgo.base.protocol import Variant
from pgo.base.readers import read_json
from pgo.base.runner import say
from pgo.build.phases import absolute_destinations, configure_command, context, pipeline_of, run_phases, source_tree
from pgo.core import contract
from pgo.core.config import BuildConfig, server_binary
from pgo.core.toolchain import built_with_lto
from pgo.core.workdir import Workdir
from pgo.packaging import debpackages, debrules
from pgo.packaging.recipes import (
    BOLT_MARK,
    RECIPES,
    STALE_MARK,
    changelog_line,
    is_elf,
    recipe,
    run,
    unmet_set_requirements,
)

NO_SPACE = os.strerror(errno.ENOSPC)      # "No space left on device", as every tool says it
BUILD_ID = re.compile(r"Build ID: ([0-9a-f]+)")


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


# --- what is being packaged ---------------------------------------------------

@dataclass(frozen=True)
class Build:
    """The checked build of a work directory, and the names its packages get."""
    workdir: Workdir
    info: dict
    variant: Variant        # optimized (PGO) or plain
    label: str              # "pgo" (with its stale and BOLT marks) or "" (plain builds carry no mark)
    release: int
    binary: Path            # the checked binary in the build tree
    build_id: str
    product: dict           # packaging/products.toml entry
    config: BuildConfig     # as the build resolved it (its plan)

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
    workdir.require()
    info = contract.staged_build(workdir)
    product = server_binary(info["product"])
    # The label is the check's: only a build that passed its profile check is staged as optimised, one
    # whose profile was trained on other source says so, and one BOLTed only with BOLT's passed check.
    variant = Variant(info["variant"])
    label = ("pgo" + (STALE_MARK if info["check"].get("stale") else "") + (BOLT_MARK if info.get("bolt") else "")
             if variant == Variant.OPTIMIZED else "")
    binary = workdir.build(variant) / product["binary"]
    if not binary.is_file():
        raise PipelineError(f"the checked binary {binary} is missing: was the build tree removed?")
    staged = next((workdir.stage / path for path in product["staged_binary"]
                   if (workdir.stage / path).is_file()), workdir.stage / product["staged_binary"][0])
    binary_id = build_id(binary)
    if not staged.is_file() or build_id(staged) != binary_id:
        raise PipelineError(f"the staged {staged} is not the build tree's {binary}: rerun phase stage")
    return Build(workdir, info, variant, label, release, binary, binary_id, product, contract.resolved_config(workdir))


def source_of(workdir):
    """The build's source, held in its line's shared tree while the packagers read it (CPack's
    install rules and the debs take files from the source; the rpm tree configures from it)."""
    return source_tree(context(workdir, workdir.load_settings()))


def build_id(path):
    done = process.run(["readelf", "-n", path])
    if done.returncode != 0:
        raise PipelineError(f"cannot read the ELF notes of {path}: {process.last_lines(done, 1)}")
    match = BUILD_ID.search(done.stdout)
    if not match:
        raise PipelineError(f"{path} has no GNU build-id, so its identity cannot be checked "
                            "(link with --build-id)")
    return match.group(1)


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
            # A maker returns the build it packaged (an --as-plain one is package-plain/'s).
            packaged, packages = MAKERS[parse(args.format)](build, folder, scratch)
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
    extract = EXTRACTORS[parse(fmt)]
    into.mkdir(parents=True)
    return extract(package, name, into)


def extract_from_bintar(package, name, into):
    return extract_from_tar(tarfile.open(package, "r:*"), name, into)


def extract_from_deb(package, name, into):
    stream = process.start(["dpkg-deb", "--fsys-tarfile", package], stdout=process.PIPE)
    try:
        return extract_from_tar(tarfile.open(fileobj=stream.stdout, mode="r|"), name, into)
    finally:
        stream.stdout.close()
        stream.wait()


def extract_from_rpm(package, name, into):
    listing = run(["rpm", "-qpl", package]).splitlines()
    wanted = [f".{p}" for p in listing if Path(p).name == name]
    if wanted:
        cpio = f"rpm2cpio {shquote(package)} | cpio -idm --quiet {' '.join(map(shquote, wanted))}"
        run(["sh", "-c", cpio], cwd=into)
    return [into / w for w in wanted if (into / w).is_file() and not (into / w).is_symlink()]


# Each format's way to take one file out of its package (the binary the proof compares), per pgo/base/formats.py.
EXTRACTORS = {Format.BINTAR: extract_from_bintar, Format.DEB: extract_from_deb, Format.RPM: extract_from_rpm}


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


def cpack(build, generator, scratch, settings, env=None, tree=None):
    """Run the build tree's own CPack configuration, without rebuilding anything.

    `make package` would first run the build; the build is the pipeline's
    checked phase, and the identity check proves it was not redone.
    """
    args = ["cpack", "--config", (tree or build.tree) / "CPackConfig.cmake", "-G", generator, "-B", scratch]
    if built_with_lto(build.info["flags"]):
        # The static libraries' LTO bytecode only this GCC can read: packages carry their machine code.
        settings = {**settings, "CPACK_PRE_BUILD_SCRIPTS": RECIPES / "strip-lto-bytecode.cmake"}
    for key, value in settings.items():
        args += ["-D", f"{key}={value}"]
    run(args, env=env)


def make_bintar(build, folder, scratch):
    """CPack TGZ over the checked build tree; over a standalone-layout tree holding its files when the
    build's own layout installs to absolute paths (Debian's: /etc/mysql, /lib/systemd), which CPack's
    archive generators would write into this machine's root, as root, and leave out of the tarball."""
    tree = build.tree
    absolute = absolute_destinations(tree)
    if absolute:
        if not (RECIPES / "bintar" / f"{build.info['product']}.toml").is_file():
            raise PipelineError(f"no bintar of configuration '{build.info['config']}': its layout installs files to "
                                f"absolute paths ({first_of(absolute, 2)}), which a relocatable tarball cannot hold, "
                                "and packaging/bintar/ has no recipe for a standalone tree of "
                                f"{build.info['product']}; package it as deb or rpm")
        tree = bintar_tree(build, recipe("bintar", build), build.workdir.root / protocol.BINTAR_TREE)
    configured = cpack_setting(tree, "CPACK_PACKAGE_FILE_NAME")
    marker = f"-{build.version}-"
    if marker not in configured:
        raise PipelineError(f"the bintar name {configured} does not contain the version {build.version}")
    name = configured.replace(marker, f"-{build.package_version}-", 1)
    cpack(build, "TGZ", scratch, {"CPACK_PACKAGE_FILE_NAME": name}, tree=tree)
    if tree != build.tree:
        require_nothing_compiled(tree, "CPack", "bintar")
    tarball = scratch / f"{name}.tar.gz"
    if not tarball.is_file():
        raise PipelineError(f"cpack made no {tarball.name}")
    return build, [Path(shutil.move(tarball, folder / tarball.name))]


def bintar_tree(build, spec, root):
    """The bintar's tree of a build whose layout installs to absolute paths: configured with the checked
    build's CMake command plus the recipe's `cmake` (the standalone layout), the folders the checked
    programs have compiled in kept from its cache (`keep`: they find them under --basedir), and the
    checked build's files. Refused, before CPack runs, if it still installs to an absolute path."""
    cache = cmake_cache(build.tree)
    missing = [name for name in spec.get("keep", ()) if name not in cache]
    if missing:
        raise PipelineError(f"the bintar recipe keeps {missing[0]}, which the checked build's CMake cache "
                            "does not have")
    options = [*tree_options(spec, "bintar"), *(f"-D{name}={cache[name]}" for name in spec.get("keep", ()))]
    fresh_folder(root)
    tree, renamed = configured_tree(build, root / "tree", options, "bintar")
    absolute = absolute_destinations(tree)
    if absolute:
        raise PipelineError(f"no bintar of configuration '{build.info['config']}': configured for the bintar, it "
                            f"still installs files to absolute paths ({first_of(absolute, 2)}), which a relocatable "
                            "tarball cannot hold and cpack would write into this machine; the bintar recipe's cmake "
                            "must move them")
    fill_tree(build, tree, renamed, "bintar")
    return tree


def first_of(items, count):
    """'a, b' or 'a, b, ...': the first `count` of a list, for a one-line error."""
    return ", ".join(items[:count]) + (", ..." if len(items) > count else "")


def cmake_cache(tree):
    """{name: value} of a configured tree's CMakeCache.txt."""
    cache = {}
    for line in (tree / "CMakeCache.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", line)
        if match:
            cache[match.group(1)] = match.group(2)
    return cache


# --- rpm: MariaDB's -DRPM=<target> packaging of the checked build -------------

def make_rpm(build, folder, scratch):
    """The rpm set the way MariaDB's release builds make it (cmake/cpack_rpm.cmake: the
    distribution layout, one rpm per component group), made from the checked build's own
    files: a tree configured like it with -DRPM=<target> and never compiled holds them,
    and its install rules and CPack package them. MariaDB's release builds compile the
    configuration again for this; here that third compile (an hour of a full build on
    the build VM) would give binaries no check has seen."""
    spec = recipe("rpm", build)
    # In the work directory, beside the build tree, so that its files can be hard links to the build's.
    tree = rpm_tree(build, spec, build.workdir.root / protocol.RPM_TREE)
    settings = {
        **spec.get("cpack", {}),
        "CPACK_RPM_PACKAGE_VERSION": build.package_version,
        "CPACK_RPM_PACKAGE_RELEASE": str(build.release),
        "CPACK_RPM_FILE_NAME": "RPM-DEFAULT",
        "CPACK_RPM_CHANGELOG_FILE": write_rpm_changelog(build, spec, scratch / "changelog"),
        **layout_file_list(spec, tree),
    }
    if build.info.get("bolt"):
        # CPack's strip is binutils' strip on every binary, which breaks a BOLTed one: rpmbuild's strip
        # (%__strip below) strips the others and leaves it as BOLT wrote it.
        settings["CPACK_STRIP_FILES"] = "OFF"
    # rpmbuild macros CPack has no setting for, through rpmbuild's ~/.rpmmacros
    # (the project's CPACK_RPM_SPEC_MORE_DEFINE is MariaDB's own).
    home = scratch / "home"
    home.mkdir()
    (home / ".rpmmacros").write_text(f"%packager {spec['packager']}\n%_build_id_links none\n"
                                     f"%__strip {RECIPES / 'strip-unless-bolted.sh'}\n")
    cpack(build, "RPM", scratch / "cpack", settings, env={"HOME": str(home)}, tree=tree)
    require_nothing_compiled(tree, "CPack", "RPM")
    rpms = sorted((scratch / "cpack").glob("*.rpm"))
    if not rpms:
        raise PipelineError("cpack made no rpm files")
    require_whole_set(rpms)
    return build, [Path(shutil.move(rpm, folder / rpm.name)) for rpm in rpms]


def require_whole_set(rpms):
    """CPack goes on when rpmbuild fails for one package group and leaves that package out: a package
    of the set that another one requires (MariaDB-common) must be in it."""
    gaps = unmet_set_requirements(rpms)
    if gaps:
        rpm, requirement = gaps[0]
        raise PipelineError(f"cpack made no package that provides {requirement}, which {rpm.name} requires "
                            "(CPack leaves a package group out when rpmbuild fails for it)")


# What a build tree holds that no install rule reads: the objects, the profile's notes, CMake's own.
NOT_INSTALLED = {".o", ".obj", ".gcno", ".gcda", ".d"}


def rpm_tree(build, spec, root):
    """A tree configured with the checked build's own CMake command plus -DRPM=<target>, and
    the files that build made: what configuring wrote (scripts, .cnf, units with the RPM
    layout's paths) is the RPM tree's, every other file the checked build's, byte for byte."""
    fresh_folder(root)
    options = [f"-DRPM={spec['target']}", *tree_options(spec, "rpm")]
    layout = spec.get("layout_cnf")
    if layout:
        # An install rule for the layout file, declared by CMake's hook after project() (the top-level
        # one: the first; MariaDB's bundled libraries call project() too); the file itself is written
        # below, from the layout the configure step chose.
        hook = root / "layout.cmake"
        hook.write_text('get_property(declared GLOBAL PROPERTY PGO_LAYOUT_FILE)\n'
                        'if(NOT declared)\n'
                        '  set_property(GLOBAL PROPERTY PGO_LAYOUT_FILE ON)\n'
                        f'  install(FILES "{root}/{layout["name"]}" DESTINATION "{layout["destination"]}"\n'
                        f'          COMPONENT {layout["component"]})\n'
                        'endif()\n')
        options.append(f"-DCMAKE_PROJECT_INCLUDE={hook}")
    tree, renamed = configured_tree(build, root / "tree", options, "RPM")
    build_rpm_only_targets(spec, tree)
    fill_tree(build, tree, renamed, "RPM")
    if layout:
        write_layout_cnf(layout, tree, root / layout["name"])
    return tree


def fresh_folder(root):
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)


def configured_tree(build, tree, options, layout):
    """A tree configured with the checked build's own CMake command plus `options` (last: CMake takes
    -D and -U in the order given, so they override the checked build's), never compiled; and the
    targets whose file the layout names otherwise ({path in the tree: the checked build's file})."""
    # CPack builds a Makefiles tree's preinstall target before it installs, and that depends on `all`:
    # the tree would compile everything again, with the checked build's flags, and package that.
    extra = ["-DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON", *options]
    ctx = context(build.workdir, replace(build.workdir.load_settings(), tests="off"))
    recorded = read_json(build.tree / protocol.CONFIGURE_RECORD, "the checked build's configure record")
    comment = next((a.split("=", 1)[1] for a in recorded if a.startswith(f"-D{ctx.product.comment_variable}=")), "")
    say(f"  configuring {tree} with {' '.join(options)} (configure only: the packaged files are the checked "
        "build's)")
    # CMake's file API: the targets the configured tree would build and install, whatever its generator.
    (tree / ".cmake/api/v1/query/codemodel-v2").parent.mkdir(parents=True)
    (tree / ".cmake/api/v1/query/codemodel-v2").touch()
    run(configure_command(ctx, build.variant, tree, comment, extra))
    renamed = renamed_artifacts(build.tree, tree)
    require_same_targets(build.tree, tree, layout, renamed)
    return tree, renamed


def fill_tree(build, tree, renamed, layout):
    """The checked build's files into a configured tree, beside what configuring it wrote."""
    linked = take_built_files(build.tree, tree)
    for path, theirs in sorted(renamed.items()):
        link_file(build.tree / theirs, tree / path)
        say(f"  {path}: the checked build's {theirs}, the same target, which the {layout} layout names otherwise")
    say(f"  {linked + len(renamed)} files of the checked build linked into the {layout} tree")


def tree_options(spec, fmt):
    """The recipe's `cmake`: its tree's own -D and -U options, given after the checked build's."""
    options = spec.get("cmake", [])
    if not isinstance(options, list):
        raise PipelineError(f"the {fmt} recipe's cmake = {options!r} is not a list of -D or -U options")
    for option in options:
        if not isinstance(option, str) or not option.startswith(("-D", "-U")):
            raise PipelineError(f"the {fmt} recipe's cmake names {option!r}, which is not a -D or -U option")
    return options


def codemodel_targets(tree):
    """The targets of a configured tree, as CMake's file API describes them (its codemodel reply)."""
    reply = tree / ".cmake/api/v1/reply"
    index = max(reply.glob("index-*.json"), default=None)
    if index is None:
        raise PipelineError(f"CMake wrote no file-API reply into {reply}")
    model = next(o for o in read_json(index, "CMake's file-API index")["objects"] if o["kind"] == "codemodel")
    for configuration in read_json(reply / model["jsonFile"], "CMake's codemodel")["configurations"]:
        for target in configuration["targets"]:
            yield read_json(reply / target["jsonFile"], "a target of CMake's codemodel")


def installed_artifacts(tree):
    """The files of the targets a configured tree installs, relative to it."""
    return {artifact["path"] for target in codemodel_targets(tree) if "install" in target
            for artifact in target.get("artifacts", ())}


def build_rpm_only_targets(spec, tree):
    """Build what only the RPM configuration makes and compiles nothing (the recipe's patterns):
    MariaDB's SELinux policy modules, each a custom target running checkmodule on a .te file."""
    patterns = spec.get("rpm_tree_targets", ())
    wanted = sorted(t["name"] for t in codemodel_targets(tree)
                    if t["type"] == "UTILITY" and any(fnmatch.fnmatch(t["name"], p) for p in patterns))
    if not wanted:
        return
    say(f"  building in the RPM tree what only it makes: {', '.join(wanted)}")
    run(["cmake", "--build", tree, "--target", *wanted])
    require_nothing_compiled(tree, f"building {', '.join(wanted)}", "RPM")


def require_nothing_compiled(tree, what, layout):
    """No object in a package format's tree: the checked build's are never linked into it (NOT_INSTALLED)."""
    compiled = [str(o.relative_to(tree)) for o in tree.rglob("*.o")]
    if compiled:
        raise PipelineError(f"{what} in the {layout} tree compiled {compiled[0]} (and {len(compiled) - 1} more): "
                            "the packages must hold the checked build's objects only")


def renamed_artifacts(built, tree):
    """{artifact path in a configured tree: the checked build's file} for the installed targets whose output
    name the layout decides: Connector/C names its static library by INSTALL_LAYOUT (libmariadb.a in
    Debian's, libmariadbclient.a in the RPM one's). The same target, so the same objects, under
    another name; the checked build's own link step names its file."""
    renamed = {}
    for target in codemodel_targets(tree):
        if "install" not in target:
            continue
        for artifact in target.get("artifacts", ()):
            if not (built / artifact["path"]).exists():
                theirs = built_output(built, target["paths"]["build"], target["name"])
                if theirs is not None and (built / theirs).is_file():
                    renamed[artifact["path"]] = theirs
    return renamed


def built_output(built, folder, name):
    """What target `name` of `folder` (relative to the tree) made in the checked build, relative to it:
    the file its link step writes, from Makefiles' link.txt (`ar qc FILE ...`, `... -o FILE ...`, in
    the target's folder) or Ninja's build.ninja (`build FILE: ..._LINKER__NAME_...`); None if neither says."""
    link = built / folder / "CMakeFiles" / f"{name}.dir" / "link.txt"
    if link.is_file():
        words = shlex.split(link.read_text().splitlines()[0])
        output = (words[2] if len(words) > 2 and Path(words[0]).name.endswith("ar") and words[1] in ("qc", "cr", "rc")
                  else words[words.index("-o") + 1] if "-o" in words[:-1] else None)
        return os.path.normpath(Path(folder) / output) if output else None
    ninja = built / "build.ninja"
    if ninja.is_file():
        rule = re.compile(rf"^build ([^:\s]+): \w+_LINKER__{re.escape(name)}_\w*", re.M)
        found = rule.search(ninja.read_text())
        return found.group(1) if found else None
    return None


def require_same_targets(built, tree, layout, renamed=()):
    """Configuring finds the machine's libraries again: one installed or removed since the build
    turns a plugin on or off, and the tree would then package files the build never made."""
    missing = sorted(path for path in installed_artifacts(tree) if not (built / path).exists() and path not in renamed)
    if missing:
        raise PipelineError(f"configured for the {layout}, this machine builds {len(missing)} installed target(s) the "
                            f"checked build did not make ({first_of(missing, 4)}): its libraries changed since the "
                            "build; package it where it was built")


def take_built_files(built, tree):
    count = 0
    for folder, dirs, files in os.walk(built):
        dirs[:] = [d for d in dirs if d != "CMakeFiles"]
        into = tree / Path(folder).relative_to(built)
        for name in files:
            source, target = Path(folder) / name, into / name
            if Path(name).suffix in NOT_INSTALLED or target.exists() or target.is_symlink():
                continue
            link_file(source, target)
            count += 1
    return count


def link_file(source, target):
    """source at target: a symlink as a symlink, a file hard-linked (copied across file systems)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_symlink():
        target.symlink_to(os.readlink(source))
    else:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)


def write_layout_cnf(layout, tree, path):
    """The recipe's layout file, its @VARIABLE@s the RPM tree's CMake cache values (MariaDB's
    RPM install layout): where the rpms put what the checked programs look for elsewhere."""
    cache = cmake_cache(tree)

    def value(match):
        if match.group(1) not in cache:
            raise PipelineError(f"{path.name}: the RPM tree's CMake cache has no {match.group(1)}")
        return cache[match.group(1)]

    template = (RECIPES / "rpm" / layout["template"]).read_text()
    path.write_text(re.sub(r"@([A-Za-z_0-9]+)@", value, template))


def layout_file_list(spec, tree):
    """The layout file is a configuration file (%config(noreplace)), in the package group's
    own list of them when the project keeps one."""
    layout = spec.get("layout_cnf")
    if not layout:
        return {}
    name = f"CPACK_RPM_{layout['group']}_USER_FILELIST"
    match = re.search(rf'^set\({name} "([^"]*)"\)', (tree / "CPackConfig.cmake").read_text(), re.M)
    entry = f"%config(noreplace) {layout['destination']}/{layout['name']}"
    return {name: f"{match.group(1)};{entry}" if match and match.group(1) else entry}


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
    settings = replace(settings, tests="off")
    nested = Workdir(root)
    fresh = nested.settings_file.is_file() and nested.load_settings() != settings
    nested.save_settings(settings, fresh=fresh)
    ctx = context(nested, settings)
    pipeline = pipeline_of(settings, ctx.config)
    done = nested.state()["done"]
    say(f"building the {what} in {nested.root}"
        + (f"; resuming after {', '.join(p for p in pipeline if p in done)}" if done else ""))
    run_phases(ctx, pipeline, [p for p in pipeline if p not in done])
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
    debian/rules (debrules.py); the others through the hand-written split (debpackages.py)."""
    spec = recipe("deb", build)
    if build.config.debian_rules:
        return build, debrules.make(build, spec, folder, scratch)
    return build, debpackages.make(build, spec, folder, scratch)


# Each format's packaging (pgo/base/formats.py).
MAKERS = {Format.BINTAR: make_bintar, Format.DEB: make_deb, Format.RPM: make_rpm}
