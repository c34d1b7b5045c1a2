"""The rpm set: MariaDB's -DRPM=<target> packaging (its install rules and CPack) over a tree configured in
the RPM layout that holds the checked build's files; proven with rpm's metadata, rpmlint and the payload
run as the bintar is."""

import fnmatch
import re
import shlex
import shutil
import tempfile
import time
from pathlib import Path

from pgo import PipelineError
from pgo.base import protocol
from pgo.base.runner import say
from pgo.packaging.proving import is_server, run, run_test_set, smoke, smoke_set, some, test_runner
from pgo.packaging.recipes import RECIPES, changelog_line, load_toml, recipe, run as run_quiet, unmet_set_requirements
from pgo.packaging.trees import (
    cmake_cache,
    codemodel_targets,
    configured_tree,
    cpack,
    fill_tree,
    fresh_folder,
    require_nothing_compiled,
    tree_options,
)


def make(build, folder, scratch):
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


def build_rpm_only_targets(spec, tree):
    """Build what only the RPM configuration makes and compiles nothing (the recipe's patterns):
    MariaDB's SELinux policy modules, each a custom target running checkmodule on a .te file."""
    patterns = spec.get("rpm_tree_targets", ())
    wanted = sorted(t["name"] for t in codemodel_targets(tree)
                    if t["type"] == "UTILITY" and any(fnmatch.fnmatch(t["name"], p) for p in patterns))
    if not wanted:
        return
    say(f"  building in the RPM tree what only it makes: {', '.join(wanted)}")
    run_quiet(["cmake", "--build", tree, "--target", *wanted])
    require_nothing_compiled(tree, f"building {', '.join(wanted)}", "RPM")


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


def write_rpm_changelog(build, spec, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    day = time.strftime("%a %b %d %Y")
    path.write_text(f"* {day} {spec['packager']} - {build.package_version}-{build.release}\n"
                    f"- {changelog_line(build)}\n")
    return path


def extract(package, name, into):
    listing = run_quiet(["rpm", "-qpl", package]).splitlines()
    wanted = [f".{p}" for p in listing if Path(p).name == name]
    if wanted:
        cpio = f"rpm2cpio {shlex.quote(str(package))} | cpio -idm --quiet {shlex.join(wanted)}"
        run_quiet(["sh", "-c", cpio], cwd=into)
    return [into / w for w in wanted if (into / w).is_file() and not (into / w).is_symlink()]


def prove(folder, info, args):
    rpms = some(folder, "*.rpm")
    names = {}
    for rpm in rpms:
        name, version, release = run(["rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE}", rpm]).split()
        if (version, release) != (info["package_version"], str(info["release"])):
            raise PipelineError(f"{rpm.name} is {name} {version}-{release}, buildinfo.json says "
                                f"{info['package_version']}-{info['release']}")
        names[rpm] = name
    say(f"  {len(rpms)} packages, version {info['package_version']}-{info['release']}: "
        + ", ".join(names.values()))
    holders = {rpm: path for rpm in rpms for path in run(["rpm", "-qpl", rpm]).splitlines() if is_server(path, info)}
    if len(holders) != 1:
        raise PipelineError(f"{len(holders)} packages hold a {info['binary']['name']} binary, expected one")
    (server, path), = holders.items()
    say(f"  rpm -qp --info {server.name}")
    run(["rpm", "-qp", "--info", server], show=True)
    say(f"  {path} is in {names[server]}; its requirements:")
    requires = run(["rpm", "-qp", "--requires", server], show=True).splitlines()
    if not any(r.startswith("libc.so.6") for r in requires):
        raise PipelineError(f"{server.name} requires no libc.so.6: its automatic requirements are missing")
    # A package of the set that another one needs must be in the set.
    gaps = unmet_set_requirements(rpms)
    if gaps:
        rpm = gaps[0][0]
        missing = ", ".join(r for holder, r in gaps if holder == rpm)
        raise PipelineError(f"{rpm.name} requires {missing}, which no package of {folder.name} provides")
    say("  rpmlint:")
    rpmlintrc = RECIPES / "rpm" / f"{info['product']}.rpmlintrc"
    # One rpmlintrc serves the sets of every configuration (packaging/rpm/<product>.rpmlintrc says why).
    run(["rpmlint", "--ignore-unused-rpmlintrc", "--rpmlintrc", rpmlintrc, *rpms], show=True)
    with tempfile.TemporaryDirectory(prefix="pgo-prove-") as tmp:
        for rpm in rpms:
            run(["sh", "-c", f"rpm2cpio {shlex.quote(str(rpm))} | cpio -idm --quiet"], cwd=tmp)
        base = Path(tmp) / Path(path).parent.parent.relative_to("/")
        say(f"  every package extracted with rpm2cpio | cpio, running it from {Path(path).parent.parent}")
        comment = smoke(info, "tree", base)
        if smoke_set(info)[0]:
            recipe = load_toml(RECIPES / "rpm" / f"{info['product']}.toml")
            runner = test_runner(recipe, "rpm", info, lambda p: (Path(tmp) / p).is_file())
            run_test_set(info, Path(tmp), Path(tmp), f"the rpm set's /{runner}", runner=runner)
        return comment
