"""Schedulers: the release form, the nightly build, and the package fan-out."""

from buildbot.plugins import schedulers, util
from buildbot.schedulers.forcesched import CollectedValidationError, ValidationError
from twisted.internet import defer, threads

from buildmaster import factories, preflight
from buildmaster.settings import PACKAGE_FORMATS
from pgo import PipelineError
from pgo.base.protocol import DEFAULT_TEST_SET
from pgo.base.versions import validate_request
from pgo.core.config import config_names, default_config, test_set_names


class VersionParameter(util.StringParameter):
    """A release version; refused with pgo's own message unless it is MAJOR.MINOR.PATCH or 'latest'."""

    def parse_from_arg(self, s):
        try:
            return validate_request(s.strip())
        except PipelineError as e:
            raise ValidationError(str(e)) from None


class ReleaseForceScheduler(schedulers.ForceScheduler):
    """The release form; refuses, before any build starts, a release preflight.refusal gives a reason for.

    It builds on the platforms chosen in the form (`platforms`: names of [[platforms]] rows, or of
    platforms of pgo/platforms.toml), else on the matrix: every row whose platform's workers can fetch
    the source (buildmaster/preflight.py release_platforms).

    A release it starts is recorded as a change (revision: the version): the
    web UI's grid and console views show builds by change, so each release is
    a row there, with its builds on every platform. 'latest' is resolved here
    when the master's apt knows the line (the release then builds that version
    and the change names it), else by the build's `version` step on the worker.
    """

    def checkConfig(self, builderNames, settings=None, **kwargs):
        super().checkConfig(builderNames, **kwargs)

    def reconfigService(self, builderNames, settings=None, **kwargs):
        self.settings = settings
        return super().reconfigService(builderNames, **kwargs)

    @defer.inlineCallbacks
    def addBuildsetForSourceStampsWithDefaults(self, reason, sourcestamps=None, properties=None, builderNames=None,
                                               **kwargs):
        # The form's builders: all, or the one whose page the form was opened from.
        offered = [p for p in self.settings.platforms if factories.release_builder_name(p) in builderNames]
        requested, config, source = (properties.getProperty(name) for name in ("version", "config", "source"))
        chosen = properties.getProperty("platforms") or []
        try:
            platforms, _ = yield threads.deferToThread(preflight.release_platforms, self.settings, config, source,
                                                       chosen, offered)
        except PipelineError as e:
            raise CollectedValidationError({"platforms": str(e)}) from None
        try:
            version, how = yield threads.deferToThread(preflight.resolve, self.settings, requested, config, source)
            why = yield threads.deferToThread(preflight.refusal, self.settings, platforms, version, config, source)
        except PipelineError as e:
            why = str(e)
        if why:
            raise CollectedValidationError({"version": why})
        builderNames = [factories.release_builder_name(p) for p in platforms]
        properties.setProperty("platforms", [p.name for p in platforms], "release form")
        if how:
            properties.setProperty("version", version, "release form")
            properties.setProperty("resolved_from", f"latest is {version}: {how}", "release form")
        changeid = yield self.master.data.updates.addChange(
            author=properties.getProperty("owner"), revision=version, category="release", codebase="",
            comments=f"release {version} ({config}) from {source}: {properties.getProperty('reason')}")
        result = yield self.addBuildsetForChanges(reason=reason, changeids=[changeid], builderNames=builderNames,
                                                  properties=properties, **kwargs)
        return result


class PlatformsParameter(util.ChoiceStringParameter):
    """The platforms to build on; none chosen: the matrix. Not strict: a platform of pgo/platforms.toml is
    a choice too (`./release --platform debian-13`), and the scheduler refuses what cannot build in its
    own words."""

    def __init__(self, settings, **kwargs):
        super().__init__(name="platforms", choices=[p.name for p in settings.platforms], default=[], multiple=True,
                         strict=False, **kwargs)


def release_form_properties(settings=None):
    platforms = [PlatformsParameter(settings, label="Platforms (none chosen: every platform whose workers can "
                                    "build the source)")] if settings is not None else []
    return [
        VersionParameter(name="version", label="Version (required): MAJOR.MINOR.PATCH, or latest (the newest "
                         "of the configuration's line)", default="latest", required=True, size=12),
        util.ChoiceStringParameter(name="config", label="Configuration", choices=config_names(),
                                   default=default_config()),
        util.StringParameter(name="source", label="Source ('debian', a tarball, a directory or a git URL)",
                             default="debian", size=50),
        util.ChoiceStringParameter(name="formats", label="Package formats", choices=list(PACKAGE_FORMATS),
                                   default=list(PACKAGE_FORMATS), multiple=True),
        util.StringParameter(name="profile", label="Profile ('train', or an archived one: a name or 'latest')",
                             default="train", size=30),
        util.ChoiceStringParameter(name="benchmark", label="Benchmark gate (auto: for MariaDB)",
                                   choices=["auto", "on", "off"], default="auto"),
        util.ChoiceStringParameter(name="baseline", label="Benchmark baseline (auto: the distribution's packages "
                                   "of the version built, when its configuration builds as the distribution does and "
                                   "they are served; else the plain build)",
                                   choices=["auto", "plain", "distribution"], default="auto"),
        util.ChoiceStringParameter(name="tests", label="Test set (run on the optimised and the plain build)",
                                   choices=test_set_names(), default=DEFAULT_TEST_SET),
        *platforms,
    ]


def no_source_stamp():
    """The release names its source in properties; hide the VCS fields of the form."""
    return [util.CodebaseParameter(codebase="", label="", hide=True,
                                   branch=util.FixedParameter(name="branch", default=""),
                                   revision=util.FixedParameter(name="revision", default=""),
                                   repository=util.FixedParameter(name="repository", default=""),
                                   project=util.FixedParameter(name="project", default=""))]


def make_schedulers(settings):
    result = [ReleaseForceScheduler(
        name="release", label="Start a PGO release", buttonName="Start release", settings=settings,
        builderNames=[factories.release_builder_name(p) for p in settings.platforms],
        reason=util.StringParameter(name="reason", label="Reason", default="release", size=40),
        codebases=no_source_stamp(), properties=release_form_properties(settings))]
    for platform in settings.platforms:
        for package_format in platform.formats:
            name = factories.package_builder_name(platform, package_format)
            result.append(schedulers.Triggerable(name=name, builderNames=[name]))
    if settings.nightly.enabled:
        n = settings.nightly
        builder = factories.nightly_builder_name(settings.platform(n.platform))
        result.append(schedulers.Nightly(
            name="nightly", builderNames=[builder], hour=n.hour, minute=n.minute,
            codebases={"": {"repository": "", "branch": ""}},
            properties={"version": n.version, "config": n.config, "source": n.source, "profile": n.profile,
                        "formats": ["bintar"], "benchmark": "off", "tests": n.tests}))
        result.append(schedulers.ForceScheduler(
            name="nightly_now", label="Run the nightly now", buttonName="Start nightly",
            builderNames=[builder], codebases=no_source_stamp(),
            properties=[util.FixedParameter(name=k, default=v) for k, v in
                        {"version": n.version, "config": n.config, "source": n.source,
                         "profile": n.profile, "tests": n.tests}.items()]))
    return result
