"""Builders: per platform of the release matrix one release builder, one package
builder per package format, and the nightly builder on the nightly's platform.

Every step of a platform's builders gets $PGO_PLATFORM, its entry of pgo/platforms.toml: pgo reads
the platform from it (the debs' suffix and distribution, prove's chroot) rather than from the machine
the step runs on, which may be a container or a VM of another release than the master's.
"""

from buildbot.plugins import util

from buildmaster import factories
from buildmaster.workers import PACKAGING, heavy_build_locks, same_worker_as_release
from pgo.base import platforms
from pgo.build.resume import BUILDERS_DIR


def platform_env(platform):
    """The environment of every step of a [[platforms]] row's builders (Buildbot merges it into each
    shell step's own)."""
    return {platforms.ENV: platform.platform}


def in_builds(name):
    """Where a builder's folder is on its worker: under the folder a container worker keeps in a volume
    (pgo/build/resume.py), so that an interrupted release resumes there."""
    return f"{BUILDERS_DIR}/{name}"


def make_builders(settings):
    builders = []
    heavy = heavy_build_locks(settings)
    for platform in settings.platforms:
        workers = list(platform.workers)
        name = factories.release_builder_name(platform)
        builders.append(util.BuilderConfig(
            name=name, workerbuilddir=in_builds(name), workernames=workers, tags=["release", platform.name],
            factory=factories.release_factory(settings, platform), locks=heavy, env=platform_env(platform),
            description=f"PGO release for {platform.name} ({platform.platform}): {', '.join(platform.formats)}"))
        for package_format in platform.formats:
            name = factories.package_builder_name(platform, package_format)
            builders.append(util.BuilderConfig(
                name=name, workerbuilddir=in_builds(name), workernames=workers,
                tags=["package", platform.name], factory=factories.package_factory(settings, package_format),
                nextWorker=same_worker_as_release, locks=[PACKAGING.access("exclusive")], env=platform_env(platform),
                description=f"{package_format} packages of a release built for {platform.name}"))
    if settings.nightly.enabled:
        platform = settings.platform(settings.nightly.platform)
        name = factories.nightly_builder_name(platform)
        builders.append(util.BuilderConfig(
            name=name, workerbuilddir=in_builds(name), workernames=list(platform.workers),
            tags=["nightly", platform.name], factory=factories.nightly_factory(settings),
            locks=heavy, env=platform_env(platform),
            description=f"nightly PGO tarball of {settings.nightly.source}, keeps the last {settings.nightly.keep}"))
    return builders
