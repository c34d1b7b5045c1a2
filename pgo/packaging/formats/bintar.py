"""The bintar: MariaDB's `make package` (CPack TGZ) over the checked build tree, proven by unpacking it
anywhere and running the server and the smoke test set from there."""

import shutil
import tarfile
import tempfile
from pathlib import Path

from pgo import PipelineError
from pgo.base import protocol
from pgo.base.runner import say
from pgo.build.phases import absolute_destinations
from pgo.packaging.proving import only, run, run_test_set, smoke
from pgo.packaging.recipes import RECIPES, recipe
from pgo.packaging.trees import (
    cmake_cache,
    configured_tree,
    cpack,
    cpack_setting,
    extract_from_tar,
    fill_tree,
    first_of,
    fresh_folder,
    require_nothing_compiled,
    tree_options,
)


def make(build, folder, scratch):
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


def extract(package, name, into):
    return extract_from_tar(tarfile.open(package, "r:*"), name, into)


def prove(folder, info, args):
    tarball = only(folder, "*.tar.gz")
    with tempfile.TemporaryDirectory(prefix="pgo-prove-") as tmp:
        run(["tar", "-xzf", tarball, "-C", tmp])
        top = Path(tmp) / tarball.name.removesuffix(".tar.gz")
        if not top.is_dir():
            raise PipelineError(f"{tarball.name} does not unpack into {top.name}/ as MariaDB's bintars do")
        say(f"  unpacked into {top.name}/, running it from there")
        comment = smoke(info, "tree", top)
        run_test_set(info, top, Path(tmp), tarball.name)
        return comment
