"""The checked build a package is made of: a work directory's staged build, its label and its server's
GNU build-id (the packaged binary must carry it), or a plain build of its configuration (--as-plain)."""

import re
from dataclasses import dataclass, replace
from pathlib import Path

from pgo import PipelineError
from pgo.base import process
from pgo.base.protocol import Variant
from pgo.base.runner import say
from pgo.build.phases import context, pipeline_of, run_phases, source_tree
from pgo.core import contract
from pgo.core.config import BuildConfig, server_binary
from pgo.core.workdir import Workdir
from pgo.packaging.recipes import BOLT_MARK, STALE_MARK

BUILD_ID = re.compile(r"Build ID: ([0-9a-f]+)")


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
