"""master.cfg loads into the builders, schedulers, workers and web access the settings ask for."""

import base64
import json
import os
import re
import shutil
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree

import pytest
from buildbot.config.master import FileLoader, MasterConfig
from buildbot.process.properties import Properties
from buildbot.schedulers.forcesched import ForceScheduler, ValidationError
from buildbot.schedulers.timed import Nightly
from buildbot.schedulers.triggerable import Triggerable
from buildbot.worker.docker import DockerLatentWorker
from twisted.internet import defer
from twisted.python.failure import Failure

from buildmaster import kept, workers
from buildmaster.builders import make_builders
from buildmaster.config import buildmaster_config
from buildmaster.preflight import refusal, resolve
from buildmaster.schedulers import VersionParameter, release_form_properties
from buildmaster.settings import SETTINGS_ENV, SettingsError, WorkerSettings, from_dict, load_settings
from buildmaster.workers import IMAGE_PROPERTY, current_image, domain_xml, make_workers, running_image
from launcher import local
from pgo.base import platforms
from pgo.build.phases import PHASES, PIPELINES, plan
from pgo.build.source import ensure_deb_src
from pgo.core.config import build_config

REPO = Path(__file__).resolve().parent.parent
ASK_DOCKER = workers.docker_image_state

TWO_PLATFORMS = """
web_port = 8123
worker_port = 9123
downloads = "dl"
archive = "/srv/pgo/archive"
[admins]
releaser = "secret-1"
[[workers]]
name = "deb12"
password = "secret-2"
[[workers]]
name = "el9"
password = "secret-3"
[[platforms]]
name = "debian-12"
workers = ["deb12"]
formats = ["deb", "bintar"]
[[platforms]]
name = "rocky-9"
workers = ["el9"]
formats = ["rpm"]
[nightly]
platform = "debian-12"
keep = 3
"""


@pytest.fixture(autouse=True)
def docker_has_every_image(monkeypatch):
    """These tests' images are made up: no Docker daemon has them (the real one: tests/test_container_worker.py)."""
    monkeypatch.setattr(workers, "docker_image_state", lambda docker_host, image: "present")


@pytest.fixture
def two_platforms(tmp_path, monkeypatch):
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text(TWO_PLATFORMS)
    monkeypatch.setenv(SETTINGS_ENV, str(settings_file))
    return FileLoader(str(tmp_path), str(REPO / "master.cfg")).loadConfig()


def test_master_cfg_builds_the_release_matrix(two_platforms):
    builders = {b.name: b for b in two_platforms.builders}
    assert sorted(builders) == ["nightly-debian-12", "package-debian-12-bintar", "package-debian-12-deb",
                                "package-rocky-9-rpm", "release-debian-12", "release-rocky-9"]
    assert builders["release-rocky-9"].workernames == ["el9"]
    assert builders["package-debian-12-deb"].nextWorker is not None
    assert all(b.locks for b in builders.values())
    assert two_platforms.collapseRequests is False


def test_release_steps_are_the_pipeline_phases(two_platforms):
    factory = next(b.factory for b in two_platforms.builders if b.name == "release-debian-12")
    names = [step.kwargs.get("name", step.step_class.name) for step in factory.steps]
    phases = [n for n in names if n in PIPELINES["on"]]
    assert phases == list(PIPELINES["on"])
    assert [n for n in names if n in PIPELINES["reuse"]] == ["source", "import", "optimized", "bolt", "stage",
                                                            "test"]
    assert [n.removeprefix("baseline-") for n in names if n.startswith("baseline-")] == list(PIPELINES["off"])
    assert names.index("benchmark") < names.index("packages") < names.index("publish")
    # Both builds are tested before the verdict, which comes before anything is archived or published.
    assert names.index("test") < names.index("baseline-test") < names.index("test-verdict") < names.index("benchmark")
    assert names.index("test-results-pgo") < names.index("test-verdict") < names.index("publish")
    # 'latest' the master could not resolve: the worker resolves it once, before any phase.
    assert names.index("resume") < names.index("version") < names.index("source")
    # A release resumes after an interruption (pgo/build/resume.py): its phases skip what the work directory
    # finished, and its last step, run whatever happened before, forgets the request.
    by_name = {step.kwargs.get("name"): step for step in factory.steps}

    def resumes(step):    # a renderable's == is a renderable, and truthy: compare strings only
        return any(isinstance(arg, str) and arg == "--resume" for arg in step.kwargs.get("command", []))
    phase_steps = [n for n in names if n.removeprefix("baseline-") in PHASES]
    assert len(phase_steps) > 10 and all(resumes(by_name[n]) for n in phase_steps)
    assert names[-1] == "forget-request" and by_name["forget-request"].kwargs["alwaysRun"] is True
    nightly = next(b.factory for b in two_platforms.builders if b.name == "nightly-debian-12")
    nightly_names = [step.kwargs.get("name", step.step_class.name) for step in nightly.steps]
    assert not any(resumes(step) for step in nightly.steps)
    assert nightly_names.index("version") < nightly_names.index("source")
    assert nightly_names.index("test") < nightly_names.index("test-verdict") < nightly_names.index("package-bintar")


def test_the_bolt_step_runs_only_for_a_configuration_with_bolt(two_platforms):
    """Defined once in pgo/build/phases.py; a step of every PGO build, run where the configuration asks for it: by
    the plan the worker's source phase resolved (plan.json, kept by the source step), never by the master's
    own checkout. Without a plan it runs, and the worker refuses a phase its build does not run."""
    for builder in ("release-debian-12", "nightly-debian-12"):
        factory = next(b.factory for b in two_platforms.builders if b.name == builder)
        step = next(s for s in factory.steps if s.kwargs.get("name") == "bolt")
        assert step.kwargs["command"][-2:] == ["--phase", "bolt"]
        for config, profile, runs in (("fixture-lto-bolt", "train", True), ("minimal-lto-bolt", "latest", True),
                                      ("fixture-lto", "train", False), ("minimal-lto", "train", False)):
            settings = SimpleNamespace(config=config, pgo="on", tests="release",
                                       profile_from=None if profile == "train" else profile)
            properties = {"config": config, "profile": profile,
                          "plan": kept.kept_plan(plan(settings, build_config(config)))}
            build = SimpleNamespace(getProperty=lambda name, default=None, properties=properties:
                                    properties.get(name, default))
            assert step.kwargs["doStepIf"](build) is runs, (builder, config)
            del properties["plan"]
            assert step.kwargs["doStepIf"](build) is True, (builder, config)


def test_the_plain_build_runs_only_when_the_distribution_s_packages_are_not_the_baseline(two_platforms):
    """The baseline step (pgo baseline) decides after the PGO build's phases, by its record, kept as a property:
    with the distribution's packages as the baseline the release makes no plain build and no plain test run (its
    test verdict runs the failed tests again on those packages); otherwise (or without the record) it makes them."""
    factory = next(b.factory for b in two_platforms.builders if b.name == "release-debian-12")
    names = [step.kwargs.get("name", step.step_class.name) for step in factory.steps]
    assert names.index("test") < names.index("baseline") < names.index("baseline-source")
    by_name = {step.kwargs.get("name"): step for step in factory.steps}
    plain_steps = [n for n in names if n.startswith("baseline-") or n.endswith("-plain")]
    assert "upload-tests-plain" in plain_steps and "test-results-plain" in plain_steps
    distribution = kept.kept_baseline({"kind": "distribution", "source": "mariadb", "version": "1:10.11.18-0+deb12u1",
                                       "packages": [], "server_version": "Ver 10.11.18-MariaDB-0+deb12u1"})
    for baseline, runs in ((distribution, False), (kept.kept_baseline({"kind": "plain", "why": "asked"}), True),
                           (None, True)):
        properties = {"config": "release", "baseline_used": baseline} if baseline else {"config": "release"}
        build = SimpleNamespace(getProperty=lambda name, default=None, properties=properties:
                                properties.get(name, default))
        assert all(by_name[n].kwargs["doStepIf"](build) is runs for n in plain_steps), baseline
        assert by_name["baseline"].kwargs["doStepIf"](build) is True
        verdict = by_name["test-verdict"].kwargs["command"]
        rendered = [arg for arg in verdict if callable(getattr(arg, "getRenderingFor", None))]
        props = Properties(builddir="/b", **properties)
        compared = [rendered_arg for arg in rendered
                    for rendered_arg in [defer.maybeDeferred(props.render, arg).result]]
        # The verdict has a baseline either way: the plain build's run, or the distribution's packages.
        assert ["--baseline", "/b/work-plain"] in compared, compared


def test_schedulers_release_nightly_and_fan_out(two_platforms):
    schedulers = {s.name: s for s in two_platforms.schedulers.values()}
    release = schedulers["release"]
    assert isinstance(release, ForceScheduler)
    assert sorted(release.builderNames) == ["release-debian-12", "release-rocky-9"]
    assert isinstance(schedulers["nightly"], Nightly)
    assert schedulers["nightly"].builderNames == ["nightly-debian-12"]
    # Every night the newest version of the configuration's line; a profile trained each time
    # unless the settings say profile = "latest".
    properties = schedulers["nightly"]._config_kwargs["properties"]
    assert (properties["version"], properties["profile"]) == ("latest", "train")
    triggerable = sorted(n for n, s in schedulers.items() if isinstance(s, Triggerable))
    assert triggerable == ["package-debian-12-bintar", "package-debian-12-deb", "package-rocky-9-rpm"]


def test_kept_records_never_overwrite_a_property_the_build_decides_by(two_platforms):
    """What a step keeps of its record for the dashboard (buildmaster/kept.py) is a build property: one named
    like a release form's or the nightly's property (profile, tests, benchmark, ...) would change what the
    rest of the build does."""
    schedulers = {s.name: s for s in two_platforms.schedulers.values()}
    form = {p.name for p in schedulers["release"]._config_kwargs["properties"]}
    nightly = set(schedulers["nightly"]._config_kwargs["properties"])
    decided = form | nightly | {"version", "platforms", "resolved_from", "published", "published_url", "packages",
                                "builddir", "buildername", "buildnumber", "workername"}
    assert {"profile", "tests", "benchmark", "config"} <= decided
    assert {name for name, _ in kept.KEPT.values()} & decided == set()


def test_each_platforms_steps_get_its_entry_of_the_platform_table(two_platforms):
    """pgo reads the platform from $PGO_PLATFORM (the debs' suffix, prove's distribution): every builder of a
    [[platforms]] row sets it, to the row's name when that is a table name, else to this machine's platform."""
    here = platforms.host().name
    envs = {b.name: b.env for b in two_platforms.builders}
    for name in ("release-debian-12", "package-debian-12-deb", "package-debian-12-bintar", "nightly-debian-12"):
        assert envs[name] == {"PGO_PLATFORM": "debian-12"}, name
    for name in ("release-rocky-9", "package-rocky-9-rpm"):
        assert envs[name] == {"PGO_PLATFORM": here}, name


def test_a_platforms_row_names_its_platform_or_builds_for_this_machines(tmp_path, monkeypatch):
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text("[[workers]]\nname = 'w'\npassword = 'p'\nhost = 'build-box'\n"
                             "[[platforms]]\nname = 'local'\nworkers = ['w']\n"
                             "[[platforms]]\nname = 'debian-13'\nworkers = ['w']\n"
                             "[[platforms]]\nname = 'trixie-big'\nworkers = ['w']\nplatform = 'debian-13'\n")
    # The generated settings' `local` (and any name that is not a table name): this machine's platform,
    # which $PGO_PLATFORM names where /etc/os-release cannot.
    for here in ("debian-12", "debian-13"):
        monkeypatch.setenv(platforms.ENV, here)
        assert [(p.name, p.platform) for p in load_settings(settings_file).platforms] == [
            ("local", here), ("debian-13", "debian-13"), ("trixie-big", "debian-13")]
    monkeypatch.setenv(platforms.ENV, "debian-7")
    with pytest.raises(SettingsError, match=r"platform local builds for this machine's platform: unknown platform "
                       r"'debian-7' \(known: debian-12, debian-13\); or name one with platform = "):
        load_settings(settings_file)


def test_a_worker_must_build_with_its_platforms_release(tmp_path, monkeypatch):
    """A worker process of this machine, or a container of an image, in an entry of another platform: its
    steps would say PGO_PLATFORM=debian-13 and compile with Debian 12's GCC."""
    monkeypatch.setenv(platforms.ENV, "debian-12")
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text("[[workers]]\nname = 'w'\npassword = 'p'\n"
                             "[[platforms]]\nname = 'debian-13'\nworkers = ['w']\n[nightly]\nenabled = false\n")
    with pytest.raises(SettingsError) as refused:
        load_settings(settings_file)
    assert str(refused.value) == (f"{settings_file}: platform debian-13 builds for debian-13, but its worker w is a "
                                  "process of this machine, a debian-12: name it in an entry of debian-12, or set "
                                  "its host if it runs on another machine")
    settings_file.write_text(settings_file.read_text().replace("password = 'p'", "password = 'p'\nhost = 'box-13'"))
    assert load_settings(settings_file).platform("debian-13").platform == "debian-13"
    write_pointer(tmp_path / "images", **CONTAINER)
    settings_file.write_text("[[workers]]\nname = 'c1'\nkind = 'docker'\nimages = 'images'\n"
                             "[[platforms]]\nname = 'debian-13'\nworkers = ['c1']\n[nightly]\nenabled = false\n")
    with pytest.raises(SettingsError) as refused:
        make_workers(load_settings(settings_file))
    assert str(refused.value) == (
        f"platform debian-13 builds for debian-13, whose image is gcc14, but its worker c1 runs gcc12 (current in "
        f"{tmp_path}/images): make gcc14 current there (`python3 -m vm_images --images {tmp_path}/images promote "
        "gcc14`), or name the worker in an entry of debian-12")
    write_pointer(tmp_path / "images", **CONTAINER | {"image": "gcc14"})
    assert len(make_workers(load_settings(settings_file))) == 1


def test_the_release_form_offers_the_platforms_none_chosen_is_the_matrix(two_platforms):
    release = next(s for s in two_platforms.schedulers.values() if s.name == "release")
    (chosen,) = [p for p in release._config_kwargs["properties"] if p.name == "platforms"]
    assert (chosen.choices, chosen.default, chosen.multiple) == (["debian-12", "rocky-9"], [], True)
    assert chosen.getFromKwargs({}) == []
    # A platform of the table is a choice too (./release --platform debian-13): the scheduler judges it.
    assert chosen.getFromKwargs({"platforms": ["debian-13"]}) == ["debian-13"]


def test_only_admins_control_builds(two_platforms):
    www = two_platforms.www
    assert www["port"] == "tcp:8123:interface=127.0.0.1"
    rules = www["authz"].allowRules
    assert {type(r).__name__ for r in rules} >= {"ForceBuildEndpointMatcher", "StopBuildEndpointMatcher",
                                                  "RebuildBuildEndpointMatcher"}
    assert all(r.role == "admins" for r in rules)
    assert www["authz"].roleMatchers[0].usernames == ["releaser"]


def test_web_ui_views_are_buildbots_own_pinned_with_the_master(two_platforms):
    pins = dict(line.split("==") for line in (REPO / "requirements" / "master.txt").read_text().splitlines()
                if "==" in line)
    assert sorted(two_platforms.www["plugins"]) == ["console_view", "grid_view", "waterfall_view", "wsgi_dashboards"]
    for view in two_platforms.www["plugins"]:
        package = "buildbot-" + view.replace("_", "-")
        assert pins[package] == pins["buildbot"] == metadata.version(package), package
    # ./release installs the master's stack into run/venv when this Python lacks one of them.
    assert local.missing_distributions() == []


def test_defaults_pass_checkconfig_without_a_settings_file(tmp_path):
    settings = from_dict({}, tmp_path, None)
    config = MasterConfig.loadFromDict(buildmaster_config(settings), "master.cfg")
    assert "release-local" in {b.name for b in config.builders}
    # Nobody knows the generated passwords: they differ on every load.
    assert from_dict({}, tmp_path, None).admins != settings.admins


def test_version_is_validated_with_a_clear_message():
    version = VersionParameter(name="version", required=True)
    assert version.getFromKwargs({"version": ["10.11.18"]}) == "10.11.18"
    assert version.getFromKwargs({"version": ["latest"]}) == "latest"
    with pytest.raises(ValidationError, match="invalid version '10.11': expected MAJOR.MINOR.PATCH"):
        version.getFromKwargs({"version": ["10.11"]})
    with pytest.raises(ValidationError, match="needs to be specified"):
        version.getFromKwargs({"version": [""]})
    # Buildbot's form draws no mark for a required field: the label says it.
    shown = next(p for p in release_form_properties() if p.name == "version")
    assert shown.required and shown.label.startswith("Version (required): ")


@pytest.mark.parametrize("text, message", [
    ("colour = 'red'", "unknown setting 'colour'"),
    ("[[platforms]]\nname = 'x'\nworkers = ['nobody']", "platform x names no known worker"),
    ("[[platforms]]\nname = 'x'\nworkers = ['local-worker']\nformats = ['zip']", "unknown package format 'zip'"),
    ("[[workers]]\nname = 'vm'\npassword = 'p'\nkind = 'libvirt'", "libvirt worker vm needs hd_image and images"),
    ("[[workers]]\nname = 'c1'\nkind = 'docker'", "docker worker c1 needs images"),
    ("[[workers]]\nname = 'c1'\npassword = 'p'\nkind = 'podman'",
     "worker c1: kind 'podman' is not one of local, libvirt, docker"),
    ("[nightly]\nkeep = 0", "keep must be at least 1"),
    ("[nightly]\nversion = 'newest'", "[nightly] invalid version 'newest'"),
    ("[nightly]\nconfig = 'minmal'", "[nightly] unknown configuration 'minmal'"),
    ("admins = {}", "no [admins]"),
    ("inconclusive = 'maybe'", "inconclusive 'maybe' is not one of block, publish-if-ahead"),
    ("min_speedup = 'fast'", "min_speedup must be a number, not 'fast'"),
    ("worker_wait_minutes = 0", "worker_wait_minutes must be above 0"),
    ("downloads_url = 'http://example.org/dl'", "downloads_url must end with '/'"),
    ("worker_wait_minutes = 'long'", "worker_wait_minutes must be a number, not 'long'"),
    ("heavy_builds_per_host = 0", "heavy_builds_per_host must be a whole number of at least 1, not 0"),
    ("heavy_builds_per_host = 'two'", "heavy_builds_per_host must be a whole number of at least 1, not 'two'"),
    ("[[workers]]\nname = 'w'\npassword = 'p'\nhost = 3", "worker w: host must be a machine's name, not 3"),
    ("[[workers]]\nname = 'w'\npassword = 'p'\nhots = 'a'", "entry w: .*unexpected keyword argument 'hots'"),
    ("[[platforms]]\nname = 'x'\nworkers = ['local-worker']\nplatform = 'debian-99'",
     "platform x: platform = 'debian-99' is no platform of platforms.toml .known: debian-12, debian-13.$"),
    ("[[platforms]]\nname = 'debian-14'\nworkers = ['local-worker']",
     "platform debian-14 is no platform of platforms.toml .known: debian-12, debian-13.; name one with platform"),
    ("[[platforms]]\nname = 'x'\nworkers = ['local-worker']\nplatfrom = 'debian-12'",
     "platform x: unknown setting 'platfrom' .known: name, workers, formats, platform.$"),
])
def test_bad_settings_are_refused(tmp_path, text, message):
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text(text)
    with pytest.raises(SettingsError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_settings(settings_file)


@pytest.mark.parametrize("text, gate", [
    ("", ["--policy", "release"]),
    ("min_speedup = 1.02\ninconclusive = 'block'",
     ["--policy", "release", "--min-speedup", "1.02", "--inconclusive", "block"]),
])
def test_the_benchmark_gates_by_the_release_policy_and_the_settings_overrides(tmp_path, text, gate):
    from buildmaster.factories import release_factory

    settings_file = tmp_path / "settings.toml"
    settings_file.write_text(text)
    settings = load_settings(settings_file)
    factory = release_factory(settings, settings.platforms[0])
    command = next(s.kwargs["command"] for s in factory.steps if s.kwargs.get("name") == "benchmark")
    assert command[-len(gate):] == gate
    assert "--pairs" not in [a for a in command if isinstance(a, str)]      # the policy's minimum


def test_a_named_settings_file_must_exist(tmp_path, monkeypatch):
    monkeypatch.setenv(SETTINGS_ENV, str(tmp_path / "missing.toml"))
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings()


def test_vm_worker_boots_the_current_image(tmp_path):
    (tmp_path / "current.json").write_text(json.dumps({"current": {
        "disk": "gcc12/B1/disk.qcow2", "kernel": "gcc12/B1/vmlinuz", "initrd": "gcc12/B1/initrd.img",
        "kernel_cmdline": "root=/dev/vda rw console=ttyS0"}}))
    spec = WorkerSettings(name="vm1", password="p", kind="libvirt", hd_image="/var/lib/vm1.qcow2",
                          images=str(tmp_path))
    image = current_image(spec.images)
    assert image["disk"] == str(tmp_path / "gcc12/B1/disk.qcow2")
    domain = ElementTree.fromstring(domain_xml(spec, image))
    assert domain.findtext("name") == "vm1"
    assert domain.findtext("os/kernel") == str(tmp_path / "gcc12/B1/vmlinuz")
    assert domain.find("devices/disk/source").get("file") == "/var/lib/vm1.qcow2"


def test_missing_image_pointer_is_a_clear_error(tmp_path):
    with pytest.raises(SettingsError, match="cannot read the current VM image from .*current.json"):
        current_image(tmp_path)


def debian_mariadb_versions(line="10.11"):
    shown = subprocess.run(["apt-cache", "showsrc", "mariadb"], capture_output=True, text=True).stdout
    return [v for v in re.findall(r"^Version: \d+:([0-9.]+)-\S+$", shown, re.M) if v.startswith(line + ".")]


@pytest.mark.skipif(os.geteuid() != 0, reason="Debian source lookups add a deb-src entry as root")
def test_the_master_resolves_latest_when_it_can_see_the_source(tmp_path):
    settings = from_dict({}, tmp_path, None)
    assert resolve(settings, "latest", "fixture", "tests/fixture") == ("1.0.0", "the version of tests/fixture")
    assert resolve(settings, "1.0.0", "fixture", "tests/fixture") == ("1.0.0", None)
    # A path only the worker has: its version step resolves it.
    assert resolve(settings, "latest", "fixture", "/srv/elsewhere") == ("latest", None)
    assert refusal(settings, settings.platforms, "latest", "fixture", "/srv/elsewhere") is None
    assert refusal(settings, settings.platforms, "11.8.9", "minimal", "debian").startswith(
        "configuration 'minimal' builds mariadb 10.11; 11.8.9 is of line 11.8")


def test_a_version_debian_lacks_is_refused_before_the_build(tmp_path):
    if not debian_mariadb_versions():
        ensure_deb_src()                  # what the source phase does on a fresh machine
    known = debian_mariadb_versions()[0]
    settings = from_dict({}, tmp_path, None)
    assert refusal(settings, settings.platforms, known, "minimal", "debian") is None
    assert refusal(settings, settings.platforms, "10.11.99", "minimal", "debian").startswith(
        "unknown version 10.11.99: Debian's archive has mariadb 1:")
    (tmp_path / "downloads" / known / "local").mkdir(parents=True)
    assert refusal(settings, settings.platforms, known, "minimal", "debian") == (
        f"{known} is already published for local ({tmp_path}/downloads/{known}/local); a release is never replaced")


CONTAINER_SETTINGS = """
[admins]
admin = "secret"
[[workers]]
name = "c1"
kind = "docker"
images = "images"
memory_mib = 4096
cpus = 3
[[platforms]]
name = "local"
workers = ["c1"]
"""


CONTAINER = {"container_image": "pgo-worker/gcc12:B1", "worker_user": "buildbot", "worker_uid": os.getuid(),
             "worker_gid": os.getgid(), "worker_cache": "/home/buildbot/.cache/pgo", "worker_repo": "/srv/pgo"}


def write_pointer(images, **current):
    images.mkdir(exist_ok=True)
    (images / "current.json").write_text(json.dumps({"current": {
        "image": "gcc12", "build": "B1", "disk": "gcc12/B1/disk.qcow2", **current}, "history": []}))


def render(value, build=None, **properties):
    props = Properties(**properties)
    props.build = build
    rendered = props.render(value)
    return rendered.result


def test_a_docker_worker_is_a_latent_container_of_the_current_image(tmp_path):
    write_pointer(tmp_path / "images", **CONTAINER)
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text(CONTAINER_SETTINGS)
    (tmp_path / "archive").mkdir()
    settings = load_settings(settings_file)
    spec = settings.worker("c1")
    # No password in the settings: the master gives the container a random one at each start.
    assert len(spec.password) > 20 and spec.password != load_settings(settings_file).worker("c1").password
    (container,) = make_workers(settings)
    assert type(container).__name__ == "ContainerWorker" and isinstance(container, DockerLatentWorker)
    assert (container.missing_timeout, container.max_starts) == (workers.CONTAINER_START_TIMEOUT, 2)
    args = container._config_kwargs
    assert args["docker_host"] == "unix:///var/run/docker.sock"
    assert args["masterFQDN"] == "127.0.0.1"
    assert args["build_wait_timeout"] == 0              # a fresh container for each release
    assert args["hostconfig"] | {"tmpfs": None} == {"network_mode": "host", "init": True, "shm_size": "1g",
                                                     "mem_limit": "4096m", "nano_cpus": 3 * 10**9, "tmpfs": None}
    # No profile archive: the master keeps it, and a build uploads and downloads its profile.
    assert args["volumes"] == [f"{REPO}:/srv/pgo:ro", "pgo-cache-c1:/home/buildbot/.cache/pgo"]
    assert args["properties"] == {"pgo_repo": "/srv/pgo"}
    # The image is read per build: a promotion reaches the next release without a reconfig ...
    assert render(args["image"]) == "pgo-worker/gcc12:B1"
    write_pointer(tmp_path / "images", **CONTAINER | {"container_image": "pgo-worker/gcc12:B2"})
    assert render(args["image"]) == "pgo-worker/gcc12:B2"
    # ... but a release's package builds run in the release's own image.
    assert render(args["image"], **{IMAGE_PROPERTY: "pgo-worker/gcc12:B1"}) == "pgo-worker/gcc12:B1"
    # An image that keeps the builder folders in a volume (vm_images writes worker_builds): the work of a
    # release whose container was lost is there for the next container, which resumes it.
    write_pointer(tmp_path / "images", **CONTAINER | {"worker_builds": "/home/buildbot/worker/builds"})
    (container,) = make_workers(settings)
    assert container._config_kwargs["volumes"][2:] == ["pgo-builds-c1:/home/buildbot/worker/builds"]
    builders = {b.name: b for b in make_builders(settings)}
    assert {b.workerbuilddir for b in builders.values()} == {f"builds/{name}" for name in builders}


def test_a_container_never_sees_the_masters_settings_in_the_checkout(tmp_path):
    write_pointer(tmp_path / "images", **CONTAINER)
    (tmp_path / "archive").mkdir()
    settings = from_dict({
        "archive": str(tmp_path / "archive"),
        "workers": [{"name": "c1", "kind": "docker", "images": str(tmp_path / "images")}],
        "platforms": [{"name": "local", "workers": ["c1"]}]}, REPO / "run", REPO / "run" / "master-settings.toml")
    (container,) = make_workers(settings)
    assert container._config_kwargs["hostconfig"]["tmpfs"] == {"/srv/pgo/run": "size=1m,ro"}


def test_a_docker_worker_without_a_container_image_names_the_command(tmp_path):
    write_pointer(tmp_path / "images")
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text(CONTAINER_SETTINGS)
    with pytest.raises(SettingsError) as refused:
        make_workers(load_settings(settings_file))
    assert str(refused.value) == (f"{tmp_path}/images/current.json names no container image: on the Docker host, "
                                  f"run `python3 -m vm_images --images {tmp_path}/images promote IMAGE` "
                                  "(or container-image)")


def test_pgo_steps_run_in_the_workers_checkout_and_package_builds_in_the_releases_image(tmp_path):
    from buildmaster.factories import release_factory

    settings = from_dict({"repo_on_worker": "/opt/pgo"}, tmp_path, None)
    factory = release_factory(settings, settings.platforms[0])
    steps = {s.kwargs.get("name"): s.kwargs for s in factory.steps}
    for name in ("version", "source", "benchmark", "receive-profile"):
        assert render(steps[name]["workdir"]) == "/opt/pgo", name
        assert render(steps[name]["workdir"], pgo_repo="/srv/pgo") == "/srv/pgo", name
    handed = steps["packages"]["set_properties"][IMAGE_PROPERTY]
    assert handed is running_image
    container = SimpleNamespace(workerforbuilder=SimpleNamespace(worker=SimpleNamespace(
        instance={"Id": "abc", "image": "pgo-worker/gcc12:B1"})))
    assert render(handed, container) == "pgo-worker/gcc12:B1"
    local_worker = SimpleNamespace(workerforbuilder=SimpleNamespace(worker=SimpleNamespace()))
    assert render(handed, local_worker) is None


def test_a_docker_worker_needs_no_archive_folder_on_the_master(tmp_path):
    """The master's archive is the master's own: a container never mounts it, whoever may write it."""
    write_pointer(tmp_path / "images", **CONTAINER | {"worker_uid": 4321, "worker_gid": 4321})
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text(CONTAINER_SETTINGS)
    settings = load_settings(settings_file)
    assert not (tmp_path / "archive").exists()
    (container,) = make_workers(settings)
    assert not any(str(settings.archive) in volume for volume in container._config_kwargs["volumes"])


ONE_HOST = """
heavy_builds_per_host = 1
[admins]
admin = "secret"
[[workers]]
name = "local-worker"
password = "p1"
[[workers]]
name = "c1"
kind = "docker"
images = "images"
[[workers]]
name = "big"
password = "p2"
host = "buildhost-2"
[[platforms]]
name = "local"
workers = ["local-worker"]
formats = ["bintar"]
[[platforms]]
name = "container"
workers = ["c1", "big"]
formats = ["deb"]
[nightly]
platform = "container"
"""


@pytest.mark.parametrize("worker, host", [
    ({}, "localhost"),
    ({"host": "127.0.0.1"}, "localhost"),
    ({"host": socket.gethostname().upper()}, "localhost"),        # this machine by its own name
    ({"host": "BuildHost-2"}, "buildhost-2"),
    ({"kind": "docker", "images": "i"}, "localhost"),
    ({"kind": "docker", "images": "i", "docker_host": "tcp://buildhost-3:2375"}, "buildhost-3"),
    ({"kind": "docker", "images": "i", "docker_host": "ssh://pgo@buildhost-3"}, "buildhost-3"),
    ({"kind": "libvirt", "images": "i", "hd_image": "d"}, "localhost"),
    ({"kind": "libvirt", "images": "i", "hd_image": "d", "uri": "qemu+ssh://root@vmhost/system"}, "vmhost"),
    ({"kind": "libvirt", "images": "i", "hd_image": "d", "uri": "qemu+ssh://vmhost/system", "host": "other"},
     "other"),
])
def test_a_worker_builds_on_its_host_by_default_the_masters(worker, host):
    assert WorkerSettings(name="w", password="p", **worker).build_host == host


def locks_for(builder, workername):
    """The (lock, access mode) pairs a build of builder takes on workername, as Buildbot renders them."""
    return [(access.lockid, access.mode) for access in render(builder.locks, workername=workername)]


def test_heavy_builds_take_turns_on_one_host_package_builds_on_their_release(tmp_path):
    """A local worker and a container on this machine share its cores: their releases and nightlies take one
    lock of the host between them; a worker of another host has its own."""
    write_pointer(tmp_path / "images", **CONTAINER)
    (tmp_path / "archive").mkdir()
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text(ONE_HOST)
    config = MasterConfig.loadFromDict(buildmaster_config(load_settings(settings_file)), "master.cfg")
    builders = {b.name: b for b in config.builders}
    this_machine = locks_for(builders["release-local"], "local-worker")
    assert this_machine == locks_for(builders["release-container"], "c1")
    assert this_machine == locks_for(builders["nightly-container"], "c1")
    ((worker_lock, worker_mode), (host_lock, host_mode)) = this_machine
    assert (worker_lock, worker_mode) == (workers.HEAVY_BUILD, "exclusive")     # and one at a time on each worker
    assert (host_lock.name, host_lock.maxCount, host_mode) == ("heavy-builds-on-localhost", 1, "counting")
    (_, (other_host, _)) = locks_for(builders["release-container"], "big")
    assert (other_host.name, other_host.maxCount) == ("heavy-builds-on-buildhost-2", 1)
    # A release holds its host's lock while it waits for its package builds: they must not want it too.
    for name in ("package-local-bintar", "package-container-deb"):
        assert builders[name].locks == [workers.PACKAGING.access("exclusive")], name
    settings_file.write_text(ONE_HOST.replace("heavy_builds_per_host = 1", "heavy_builds_per_host = 2"))
    config = MasterConfig.loadFromDict(buildmaster_config(load_settings(settings_file)), "master.cfg")
    release = next(b for b in config.builders if b.name == "release-local")
    assert locks_for(release, "local-worker")[1][0].maxCount == 2


def test_a_docker_host_without_the_current_image_names_the_command_that_imports_it(tmp_path, monkeypatch):
    write_pointer(tmp_path / "images", **CONTAINER)
    (tmp_path / "archive").mkdir()
    settings_file = tmp_path / "settings.toml"
    settings_file.write_text(CONTAINER_SETTINGS)
    asked = []
    monkeypatch.setattr(workers, "docker_image_state", lambda host, image: asked.append((host, image)) or "missing")
    with pytest.raises(SettingsError) as missing:
        make_workers(load_settings(settings_file))
    assert asked == [("unix:///var/run/docker.sock", "pgo-worker/gcc12:B1")]
    assert str(missing.value) == ("docker worker c1: the Docker host unix:///var/run/docker.sock has no image "
                                  "pgo-worker/gcc12:B1 (the current image): import it with `python3 -m vm_images "
                                  f"--images {tmp_path}/images container-image`")
    # Another machine's daemon: the same command, with Docker's client pointed at it.
    settings_file.write_text(CONTAINER_SETTINGS.replace('images = "images"',
                                                        'images = "images"\ndocker_host = "tcp://buildhost-3:2375"'))
    with pytest.raises(SettingsError, match="import it with `DOCKER_HOST=tcp://buildhost-3:2375 python3 -m"):
        make_workers(load_settings(settings_file))
    monkeypatch.setattr(workers, "docker_image_state", lambda host, image: "Error while fetching server API "
                        "version: ('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))")
    with pytest.raises(SettingsError) as silent:
        make_workers(load_settings(settings_file))
    assert str(silent.value) == (
        "docker worker c1: the Docker daemon at tcp://buildhost-3:2375 does not answer (Error while fetching server "
        "API version: ('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))): start it "
        "(`setsid /usr/sbin/dockerd` where there is no systemd)")


def test_the_docker_daemon_is_asked_for_the_image():
    """The real question to a daemon: here one that is not there (a socket nobody listens on)."""
    state = ASK_DOCKER("unix:///nonexistent/docker.sock", "pgo-worker/gcc12:B1")
    assert state.startswith("Error while fetching server API version")


# --- the VM worker (kind = "libvirt"): its domain, its credentials at boot, its throwaway disk -------------

VM_POINTER = {"kernel": "gcc12/B1/vmlinuz", "initrd": "gcc12/B1/initrd.img",
              "kernel_cmdline": "root=/dev/vda rw console=ttyS0 net.ifnames=0"}


def vm_settings(tmp_path, extra=None, listen=None, source=None):
    write_pointer(tmp_path / "images", **VM_POINTER)
    (tmp_path / "archive").mkdir(exist_ok=True)
    data = {"archive": str(tmp_path / "archive"), "worker_port": 9876,
            "workers": [{"name": "vm1", "kind": "libvirt", "images": str(tmp_path / "images"),
                         "hd_image": str(tmp_path / "vm1.qcow2"), **(extra or {})}],
            "platforms": [{"name": "local", "workers": ["vm1"]}], "nightly": {"enabled": False}}
    if listen is not None:
        data["listen"] = listen
    return from_dict(data, tmp_path, source)


def fw_cfg_payload(domain):
    """What the image's start-vm reads from /sys/firmware/qemu_fw_cfg/by_name/<name>/raw (vm_images/build.py)."""
    (entry,) = domain.findall("sysinfo[@type='fwcfg']/entry")
    assert entry.get("name") == workers.VM_FW_CFG
    return json.loads(base64.b64decode(entry.text))


def test_a_vm_worker_boots_on_qemus_user_network_and_gets_its_credentials_at_boot(tmp_path):
    settings = vm_settings(tmp_path)
    spec = settings.worker("vm1")
    # No password in the settings: the master gives the VM a random one at each start, through fw_cfg.
    assert len(spec.password) > 20 and spec.domain_type == "auto"
    raw = domain_xml(spec, current_image(spec.images), settings)
    domain = ElementTree.fromstring(raw)
    assert domain.get("type") == "qemu"                      # QEMU's emulation: boots where /dev/kvm cannot
    assert [i.get("type") for i in domain.iter("interface")] == ["user"]
    assert '<interface type="network"' not in raw and "<source network" not in raw and "bridge" not in raw
    assert fw_cfg_payload(domain) == {"master": "10.0.2.2", "port": 9876, "name": "vm1", "password": spec.password,
                                      "hide": []}
    # The throwaway child is the domain's only disk (not the image: Buildbot issue 7122), the checkout read-only.
    assert [d.find("source").get("file") for d in domain.iter("disk")] == [str(tmp_path / "vm1.qcow2")]
    (share,) = domain.iter("filesystem")
    assert (share.find("source").get("dir"), share.find("target").get("dir")) == (str(REPO), "pgo")
    assert share.find("readonly") is not None
    assert domain.find("devices/serial/log").get("file") == f"{tmp_path}/vm1.qcow2.console.log"
    assert domain.findtext("os/kernel") == str(tmp_path / "images/gcc12/B1/vmlinuz")
    assert domain.findtext("on_poweroff") == "destroy"
    # ACPI: without it libvirt passes -no-acpi, and the guest's fw_cfg driver shows no entry (the worker
    # unit skipped itself and the VM never connected, seen on the first boot under libvirt).
    assert domain.find("features/acpi") is not None


def test_the_fw_cfg_entry_survives_any_password_and_the_domain_type_is_a_setting(tmp_path):
    password = 'p<a>s&s"w\'o,r d\n,,x'
    settings = vm_settings(tmp_path, {"password": password, "domain_type": "kvm", "memory_mib": 2048, "cpus": 1})
    spec = settings.worker("vm1")
    raw = domain_xml(spec, current_image(spec.images), settings)
    domain = ElementTree.fromstring(raw)                     # well-formed, whatever the password holds
    assert domain.get("type") == "kvm"
    assert (domain.findtext("memory"), domain.findtext("vcpu")) == ("2048", "1")
    assert fw_cfg_payload(domain)["password"] == password
    # base64: nothing for XML to escape, and no ',' to end the value on QEMU's -fw_cfg command line.
    (entry,) = domain.findall("sysinfo/entry")
    assert re.fullmatch(r"[A-Za-z0-9+/=]+", entry.text)
    assert password not in raw and "s&amp;s" not in raw
    with pytest.raises(SettingsError, match="libvirt worker vm1: domain_type 'tcg' is not one of auto, qemu, kvm"):
        vm_settings(tmp_path, {"domain_type": "tcg"})


@pytest.mark.parametrize("listen, master", [("127.0.0.1", "10.0.2.2"), ("0.0.0.0", "10.0.2.2"),
                                            ("localhost", "10.0.2.2"), ("192.0.2.7", "192.0.2.7")])
def test_the_vm_reaches_the_master_at_the_hosts_loopback(tmp_path, listen, master):
    """QEMU's slirp takes the guest's connections to 10.0.2.2 to the host's 127.0.0.1."""
    settings = vm_settings(tmp_path, listen=listen)
    spec = settings.worker("vm1")
    assert fw_cfg_payload(ElementTree.fromstring(domain_xml(spec, current_image(spec.images), settings)))[
        "master"] == master


def test_a_vm_never_sees_the_masters_settings_in_the_checkout(tmp_path):
    settings = vm_settings(tmp_path, source=REPO / "run" / "master-settings.toml")
    spec = settings.worker("vm1")
    payload = fw_cfg_payload(ElementTree.fromstring(domain_xml(spec, current_image(spec.images), settings)))
    assert payload["hide"] == ["run"]


class FakeLibvirtError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code

    def get_error_code(self):
        return self.code


class FakeDomain:
    def __init__(self, conn, name):
        self.conn, self.name, self.running = conn, name, True

    def ID(self):
        return 3 if self.running else -1

    def isActive(self):
        return self.running

    def destroy(self):
        self.conn.destroyed.append(self.name)
        del self.conn.domains[self.name]      # a transient domain is gone once it stops


class FakeConnection:
    """libvirt's connection as LibVirtWorker uses it; lookupByName raises for a missing domain, as libvirt does."""
    NO_DOMAIN = 42

    def __init__(self):
        self.domains, self.created, self.destroyed = {}, [], []

    def lookupByName(self, name):
        if name not in self.domains:
            raise FakeLibvirtError(self.NO_DOMAIN, f"Domain not found: no domain with matching name '{name}'")
        return self.domains[name]

    def createXML(self, xml, flags):
        name = ElementTree.fromstring(xml).findtext("name")
        self.created.append(xml)
        self.domains[name] = FakeDomain(self, name)
        return self.domains[name]


class FakePool:
    def __init__(self, conn):
        self.conn, self.resets = conn, 0

    def do(self, uri, func):
        try:
            return defer.succeed(func(self.conn))
        except Exception as e:
            return defer.fail(e)

    def reset_connection(self, uri):
        self.resets += 1


def fired(d):
    results = []
    d.addBoth(results.append)
    (result,) = results
    if isinstance(result, Failure):
        result.raiseException()
    return result


@pytest.fixture
def fake_libvirt(monkeypatch):
    """Buildbot's LibVirtWorker on a fake libvirt module: the binding (requirements/libvirt.txt) is a VM
    host's (tools/install-deps.sh vm), not the tests'."""
    import buildbot.worker.libvirt as buildbot_libvirt

    monkeypatch.setattr(buildbot_libvirt, "libvirt", SimpleNamespace(
        libvirtError=FakeLibvirtError, VIR_ERR_NO_DOMAIN=FakeConnection.NO_DOMAIN))
    return buildbot_libvirt


@pytest.fixture
def vm(tmp_path, monkeypatch, fake_libvirt):
    """The VM worker as master.cfg makes it, on a fake libvirt; its overlay made by the real qemu-img."""
    buildbot_libvirt = fake_libvirt
    if not shutil.which("qemu-img"):
        pytest.skip("no qemu-img (apt-get install qemu-utils)")
    clones = []

    def run_process(reactor, command, **kwargs):
        clones.append(command)
        return defer.succeed(subprocess.run(command, capture_output=True).returncode)
    monkeypatch.setattr(buildbot_libvirt.runprocess, "run_process", run_process)
    settings = vm_settings(tmp_path)
    (images := tmp_path / "images" / "gcc12" / "B1").mkdir(parents=True)
    for build in ("B1", "B2"):
        (tmp_path / "images" / "gcc12" / build).mkdir(parents=True, exist_ok=True)
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", tmp_path / "images/gcc12" / build / "disk.qcow2",
                        "64M"], check=True)
    (vm_worker,) = make_workers(settings)
    conn = FakeConnection()
    vm_worker.pool = FakePool(conn)
    vm_worker.parent = SimpleNamespace(master=SimpleNamespace(reactor=None))       # what the clone step asks for
    return SimpleNamespace(worker=vm_worker, conn=conn, clones=clones, overlay=tmp_path / "vm1.qcow2",
                           images=images.parent.parent, settings=settings)


def backing_file(overlay):
    info = json.loads(subprocess.run(["qemu-img", "info", "--output=json", overlay], capture_output=True,
                                     text=True, check=True).stdout)
    return info.get("backing-filename")


def test_a_vm_starts_on_a_fresh_overlay_of_the_current_image_and_leaves_none_behind(vm):
    assert type(vm.worker).__name__ == "VMWorker"
    args = vm.worker._config_kwargs
    assert (args["build_wait_timeout"], args["properties"]) == (0, {"pgo_repo": "/srv/pgo"})   # a VM per release
    # An overlay a crashed master left: never booted again.
    vm.overlay.write_bytes(b"what an earlier build wrote")
    assert fired(vm.worker.start_instance(None)) is True
    assert backing_file(vm.overlay) == str(vm.images / "gcc12/B1/disk.qcow2")
    assert vm.clones[-1][-1] == str(vm.overlay)
    (xml,) = vm.conn.created
    assert ElementTree.fromstring(xml).find("devices/disk/source").get("file") == str(vm.overlay)
    assert fw_cfg_payload(ElementTree.fromstring(xml))["password"] == vm.worker.password
    (vm.overlay.parent / "vm1.qcow2.console.log").write_text("console")
    fired(vm.worker.stop_instance())
    assert vm.conn.destroyed == ["vm1"] and not vm.overlay.exists()
    assert not (vm.overlay.parent / "vm1.qcow2.console.log").exists()
    # A promotion reaches the next VM without a reconfig, as it reaches the next container.
    write_pointer(vm.images, **VM_POINTER | {"disk": "gcc12/B2/disk.qcow2", "kernel": "gcc12/B2/vmlinuz"})
    fired(vm.worker.start_instance(None))
    assert backing_file(vm.overlay) == str(vm.images / "gcc12/B2/disk.qcow2")
    assert ElementTree.fromstring(vm.conn.created[-1]).findtext("os/kernel") == str(vm.images / "gcc12/B2/vmlinuz")
    assert vm.worker.pool.resets == 0        # "no such domain" before a start is no connection error


def test_a_vm_that_is_already_gone_still_loses_its_overlay(vm):
    fired(vm.worker.start_instance(None))
    vm.conn.domains.clear()                  # powered off, killed: libvirt forgets a transient domain
    fired(vm.worker.stop_instance())
    assert vm.conn.destroyed == [] and not vm.overlay.exists()


def test_a_vm_a_stopped_master_left_running_is_destroyed_before_the_next_start(vm):
    vm.conn.domains["vm1"] = FakeDomain(vm.conn, "vm1")
    assert fired(vm.worker.start_instance(None)) is True
    assert vm.conn.destroyed == ["vm1"] and len(vm.conn.created) == 1 and vm.overlay.is_file()


def test_a_vm_that_stops_before_its_worker_connects_fails_its_start_with_its_consoles_last_line(vm):
    fired(vm.worker.start_instance(None))
    assert fired(vm.worker.check_instance()) == (True, "")
    console = vm.overlay.parent / "vm1.qcow2.console.log"
    console.write_text("[    1.0] Booting\n"
                       "\x1b[0;1;31mKernel panic - not syncing: VFS: Unable to mount root fs\x1b[0m\n\n")
    vm.conn.domains.clear()                  # the kernel panicked: on_crash destroys the domain
    assert fired(vm.worker.check_instance()) == (False, "the VM stopped before its worker connected")
    kept = vm.overlay.parent / "vm1.qcow2.failed-start.log"
    assert vm.worker.start_detail() == ("console: 'Kernel panic - not syncing: VFS: Unable to mount root fs' "
                                        f"(all of it: {kept})")
    assert vm.worker.start_detail(quote=False) == f"console: {kept}"    # a failure that says why itself
    fired(vm.worker.stop_instance())
    assert not console.exists() and "Booting" in kept.read_text()     # the overlay's console goes, its copy stays


def test_the_console_line_of_a_vm_that_did_not_connect_is_its_alarm_else_its_last():
    initramfs = ("Begin: Running /scripts/local-block ... done.\n"
                 "Gave up waiting for root file system device.  Common problems:\n - Boot args (cat /proc/cmdline)\n"
                 "ALERT!  /dev/vdz does not exist.  Dropping to a shell!\n"
                 "Rebooting automatically due to panic= boot argument\n[   36.75] reboot: machine restart\n")
    assert workers.console_reason(initramfs) == "ALERT!  /dev/vdz does not exist.  Dropping to a shell!"
    booted = "[\x1b[0;32m  OK  \x1b[0m] Reached target multi-user.target\n\npgo-worker login: \n"
    assert workers.console_reason(booted) == "pgo-worker login:"
    assert workers.console_reason("") is None


def test_auto_is_kvm_only_where_a_guest_kernel_prints_its_banner_under_it(tmp_path, monkeypatch):
    """domain_type auto: the probe boots a kernel with -accel kvm and waits for its banner (KVM_PROBE_SECONDS)."""
    monkeypatch.setattr(workers, "KVM_PROBE", {})
    spec = vm_settings(tmp_path).worker("vm1")
    image = current_image(spec.images)
    # A kernel that cannot boot (the test image's is no kernel): QEMU stops, or there is no KVM here: TCG.
    assert workers.kvm_boots(image["kernel"], seconds=5)[0] is False
    assert ElementTree.fromstring(domain_xml(spec, image)).get("type") == "qemu"
    # The answer is the host's, asked once per master: a later promotion's kernel is not probed again.
    monkeypatch.setattr(workers, "KVM_PROBE", {"answer": "kvm"})
    assert ElementTree.fromstring(domain_xml(spec, image)).get("type") == "kvm"
    # A hypervisor on another machine is not probed from here.
    remote = vm_settings(tmp_path, {"uri": "qemu+ssh://build-7/system"}).worker("vm1")
    assert ElementTree.fromstring(domain_xml(remote, image)).get("type") == "qemu"
    assert ElementTree.fromstring(domain_xml(vm_settings(tmp_path, {"domain_type": "kvm"}).worker("vm1"),
                                             image)).get("type") == "kvm"


def test_a_start_timeout_is_a_number_of_seconds(tmp_path, fake_libvirt):
    spec = vm_settings(tmp_path, {"start_timeout": 90}).worker("vm1")
    assert make_workers(vm_settings(tmp_path, {"start_timeout": 90}))[0].missing_timeout == spec.start_timeout == 90
    assert make_workers(vm_settings(tmp_path))[0].missing_timeout == workers.VM_BOOT_TIMEOUT
    for wrong in (0, "20m", True, 1.5):
        with pytest.raises(SettingsError, match=f"worker vm1: start_timeout must be a number of seconds above 0, "
                                                f"not {re.escape(repr(wrong))}"):
            vm_settings(tmp_path, {"start_timeout": wrong})


def test_the_image_holds_no_credentials_and_reads_what_the_domain_gives(tmp_path):
    from vm_images import build, definition
    from vm_images.container import REPO_IN_IMAGE

    assert (build.VM_FW_CFG, build.VM_REPO_TAG, REPO_IN_IMAGE) == (workers.VM_FW_CFG, workers.VM_REPO_TAG,
                                                                    workers.VM_REPO)
    settings = vm_settings(tmp_path, {"password": "s3cret-vm-pw"})
    spec = settings.worker("vm1")
    image = definition.image("gcc12")
    files = build.vm_worker_files(image)
    assert sorted(files) == ["etc/systemd/system/buildbot-worker.service", "opt/buildbot-worker/start-vm",
                             "opt/buildbot-worker/vm.tac"]
    for path, content in files.items():
        assert "s3cret-vm-pw" not in content and spec.name not in content, path
        assert "9876" not in content and "10.0.2.2" not in content, path
    unit = files["etc/systemd/system/buildbot-worker.service"]
    # Skipped, not failed, where no domain gave the entry (vm_images' boot check, a chroot, this machine):
    # status 1 (systemd skips a unit whose ExecCondition ends 1 to 254), and a line on the console saying so.
    (condition,) = re.findall(r"^ExecCondition=\+/bin/sh -c '(.*)'$", unit, re.M)
    assert "test -r /sys/firmware/qemu_fw_cfg/by_name/opt/org.pgo/worker/raw" in condition
    skipped = subprocess.run(["/bin/sh", "-c", condition], capture_output=True, text=True)
    assert (skipped.returncode, skipped.stderr) == (1, "buildbot-worker: no fw_cfg entry opt/org.pgo/worker (not a "
                                                       "VM worker, or a domain without ACPI): not starting\n")
    assert "StandardOutput=journal+console" in unit and "StandardError=journal+console" in unit
    assert "ExecStartPre=+/opt/buildbot-worker/start-vm" in unit and "User=buildbot" in unit
    for path in ("opt/buildbot-worker/start-vm", "opt/buildbot-worker/vm.tac"):
        compile(files[path], path, "exec")
    # The password file: only the worker user reads it, and the tac deletes it once read.
    assert "0o600" in files["opt/buildbot-worker/start-vm"] and "os.fchown" in files["opt/buildbot-worker/start-vm"]
    assert 'os.remove(os.path.join(basedir, ".workerconf"))' in files["opt/buildbot-worker/vm.tac"]
