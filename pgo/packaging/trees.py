"""What the formats' makers share: CPack over a build tree, and the trees configured like the checked
build and filled with its files (the rpm tree, a standalone bintar tree), which compile nothing."""

import os
import re
import shlex
import shutil
from dataclasses import replace
from pathlib import Path

from pgo import PipelineError
from pgo.base import protocol
from pgo.base.readers import read_json
from pgo.base.runner import say
from pgo.build.phases import configure_command, context
from pgo.core.toolchain import built_with_lto
from pgo.packaging.recipes import RECIPES, run

# --- CPack over a build tree ---------------------------------------------------

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


# --- a tree configured like the checked build, holding its files -------------

# What a build tree holds that no install rule reads: the objects, the profile's notes, CMake's own.
NOT_INSTALLED = {".o", ".obj", ".gcno", ".gcda", ".d"}


# The archiver a static library's link step runs: `ar`, or an LTO build's (CMAKE_AR) `gcc-ar` under
# Debian's names (x86_64-linux-gnu-gcc-ar-12), or `llvm-ar-19`: its name, not its path.
ARCHIVER = re.compile(r"(.+-)?ar(-[0-9.]+)?")


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
        archived = len(words) > 2 and ARCHIVER.fullmatch(Path(words[0]).name) and words[1] in ("qc", "cr", "rc")
        output = words[2] if archived else words[words.index("-o") + 1] if "-o" in words[:-1] else None
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


def cmake_cache(tree):
    """{name: value} of a configured tree's CMakeCache.txt."""
    cache = {}
    for line in (tree / "CMakeCache.txt").read_text().splitlines():
        match = re.match(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", line)
        if match:
            cache[match.group(1)] = match.group(2)
    return cache


def first_of(items, count):
    """'a, b' or 'a, b, ...': the first `count` of a list, for a one-line error."""
    return ", ".join(items[:count]) + (", ..." if len(items) > count else "")

