"""The master's settings: read from a TOML file outside the repository, with safe defaults.

The file is named by $PGO_MASTER_SETTINGS, else run/master-settings.toml (the
runtime folder the repository ignores). Without a file every password is a
fresh random string nobody knows: `buildbot checkconfig` passes on a fresh
checkout, yet no worker can connect and nobody can log in. `./release`
writes the file with generated passwords on first use. Relative paths in the
file are relative to the file's folder.
"""

import os
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pgo import REPO, PipelineError
from pgo.base import formats, platforms
from pgo.base.readers import read_toml
from pgo.base.versions import validate_request
from pgo.bench.policy import INCONCLUSIVE_CHOICES
from pgo.core.config import build_config, default_config

SETTINGS_ENV = "PGO_MASTER_SETTINGS"
DEFAULT_RUNTIME = REPO / "run"
SETTINGS_FILE = "master-settings.toml"      # in the runtime folder, unless $PGO_MASTER_SETTINGS names another
PACKAGE_FORMATS = formats.NAMES
# The master's ports unless the settings say otherwise: the web UI, the workers', and the
# downloads (buildmaster/downloads.py), by default the one after the web UI's.
WEB_PORT, WORKER_PORT = 8010, 9989
# The interface the master listens on unless the settings say otherwise (`listen`).
LISTEN = "127.0.0.1"


def downloads_port_after(web_port):
    return web_port + 1
WORKER_KINDS = ("local", "libvirt", "docker")
# A libvirt worker's domain types: QEMU's emulation (TCG), KVM, or auto: KVM where a guest kernel really boots
# under it (buildmaster/workers.py, kvm_boots), else TCG.
LIBVIRT_DOMAIN_TYPES = ("auto", "qemu", "kvm")
# A docker worker's daemon unless its entry says otherwise: this machine's own.
DOCKER_HOST = "unix:///var/run/docker.sock"
# The machine the master runs on, as a worker's `host`: where a local worker, a container of this
# machine's Docker daemon and a VM of this machine's hypervisor compile. Other spellings of this
# machine count as it, so one machine is never two hosts with two locks.
MASTER_HOST = "localhost"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class SettingsError(PipelineError):
    pass


@dataclass(frozen=True)
class WorkerSettings:
    name: str
    password: str
    kind: str = "local"               # local: a buildbot-worker we start; libvirt: a latent VM; docker: a container
    hd_image: str | None = None       # libvirt: the VM's disk, a copy-on-write child of the image
    images: str | None = None         # libvirt, docker: vm_images' folder; its current.json names the image
    uri: str = "qemu:///system"       # libvirt: the hypervisor connection
    # libvirt: "qemu" (QEMU's emulation, TCG), "kvm", or "auto" (default): KVM if a guest kernel prints its
    # banner under it within seconds (probed once at the master's start, on the master's host), else TCG.
    # On hosts whose /dev/kvm opens but cannot run a guest kernel (nested, as ours) a kvm domain hangs
    # silently; where KVM boots a guest, it compiles about 11x faster than TCG.
    domain_type: str = "auto"
    docker_host: str = DOCKER_HOST    # docker: the daemon that runs the containers
    memory_mib: int = 8192
    cpus: int = 2
    # libvirt, docker: seconds a started VM or container has until its worker connects (default: 20 min
    # for a VM, 5 min for a container; buildmaster/workers.py). A start that fails is tried again, up to
    # max_lost_workers times for one build request.
    start_timeout: int | None = None
    # The machine whose cores it compiles on: workers of one host take turns for heavy builds
    # (heavy_builds_per_host). Default: docker_host's or uri's machine, else the master's.
    host: str | None = None

    @property
    def build_host(self):
        """The host this worker compiles on, in one spelling per machine (MASTER_HOST for the master's)."""
        named = self.host
        if named is None and self.kind == "docker":
            named = urlsplit(self.docker_host).hostname            # unix:// has none: this machine's daemon
        elif named is None and self.kind == "libvirt":
            named = urlsplit(self.uri).hostname                    # qemu:///system has none: this machine
        if named is None:
            return MASTER_HOST
        named = named.strip().lower()
        this_machine = socket.gethostname().lower()
        return MASTER_HOST if named in (*LOOPBACK_NAMES, this_machine, this_machine.split(".")[0]) else named


# A [[platforms]] entry's keys; `platform` names its platform of pgo/platforms.toml when its name is not one.
PLATFORM_KEYS = ("name", "workers", "formats", "platform")


@dataclass(frozen=True)
class Platform:
    """One row of the release matrix: where it builds and which packages it makes.

    name is the row's: its builders' and its download folder's (<downloads>/<version>/<name>/).
    platform is the entry of pgo/platforms.toml it builds for (its steps get it as $PGO_PLATFORM):
    its `platform` key, else its name when that is a table name, else this machine's platform (the
    generated settings' row `local`: its workers are this machine or its containers).
    """
    name: str
    workers: tuple[str, ...]
    formats: tuple[str, ...]
    platform: str = ""


@dataclass(frozen=True)
class Nightly:
    enabled: bool = True
    hour: int = 3
    minute: int = 0
    platform: str = "local"
    version: str = "latest"           # the newest of the configuration's line, resolved at each run
    config: str = field(default_factory=default_config)   # pgo/configs.toml's `default`
    source: str = "debian"
    profile: str = "train"            # or "latest": reuse the newest archived profile of the line (one build)
    keep: int = 7
    tests: str = "nightly"            # the test set (pgo/configs.toml): the larger one, every night


BENCH_OPTIONS = ("--workloads", "oltp_point_select", "oltp_read_only", "oltp_read_write",
                 "--threads", "1,4,16,64", "--time", "10", "--latency-time", "30", "--callgrind")


@dataclass(frozen=True)
class Settings:
    title: str
    url: str
    listen: str
    web_port: int
    worker_port: int
    downloads_port: int               # the master serves the downloads folder here (buildmaster/downloads.py)
    downloads_url: str                # ... as users reach it
    db_url: str
    admins: dict[str, str]
    workers: tuple[WorkerSettings, ...]
    platforms: tuple[Platform, ...]
    nightly: Nightly
    downloads: Path                   # master: <downloads>/<version>/<platform>/, nightly/
    archive: str                      # the profile archive, as the workers see it
    repo_on_worker: str               # this repository's checkout on the workers
    # The gate judges by the release policy (pgo/bench/policy.py); these two, when
    # set, override its minimum speedup and what an inconclusive gate does.
    min_speedup: float | None = None
    inconclusive: str | None = None
    # The gate's measurement: the three workloads over a short sweep; the policy
    # adds pairs and bounds the time (`pgo bench --help`).
    bench_options: tuple[str, ...] = BENCH_OPTIONS
    max_lost_workers: int = 2         # a build request whose worker got lost, or did not start, this often fails
    # ./release gives up on a request that waited this long for a worker which is not
    # connected: long enough for a worker to be restarted, short of a silent afternoon.
    worker_wait_minutes: float = 15.0
    # Heavy builds (release, nightly: each compiles with every core) at once on the workers of one
    # host; more only slow each other down and disturb the benchmark.
    heavy_builds_per_host: int = 1
    source_file: Path | None = field(default=None, compare=False)

    def platform(self, name):
        return next(p for p in self.platforms if p.name == name)

    def worker(self, name):
        return next(w for w in self.workers if w.name == name)


def settings_path():
    return Path(os.environ.get(SETTINGS_ENV) or DEFAULT_RUNTIME / SETTINGS_FILE)


def load_settings(path=None):
    """Settings from path (default: settings_path()); defaults only when the default file is absent."""
    explicit = path is not None or bool(os.environ.get(SETTINGS_ENV))
    path = Path(path) if path is not None else settings_path()
    if path.is_file():
        data = read_toml(path, "master settings", SettingsError)
        return from_dict(data, path.resolve().parent, path)
    if explicit:
        raise SettingsError(f"master settings file {path} does not exist")
    return from_dict({}, DEFAULT_RUNTIME, None)


def from_dict(data, base, source_file):
    def path_setting(name, default):
        value = Path(data.get(name, default))
        return value if value.is_absolute() else base / value

    known = {"title", "url", "listen", "web_port", "worker_port", "downloads_port", "downloads_url", "db_url",
             "admins", "workers", "platforms", "nightly", "downloads", "archive", "repo_on_worker", "min_speedup",
             "inconclusive", "bench_options", "max_lost_workers", "worker_wait_minutes", "heavy_builds_per_host"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SettingsError(f"{source_file}: unknown setting '{unknown[0]}' (known: {', '.join(sorted(known))})")
    web_port = int(data.get("web_port", WEB_PORT))
    downloads_port = int(data.get("downloads_port", downloads_port_after(web_port)))
    workers = tuple(worker_settings(w, base, source_file) for w in data.get("workers", [
        {"name": "local-worker", "password": secrets.token_urlsafe(24)}]))
    try:
        table = platforms.load()
    except PipelineError as e:
        raise SettingsError(f"{source_file or 'default settings'}: {e}") from None
    rows = tuple(platform_settings(p, source_file, table) for p in data.get("platforms", [
        {"name": "local", "workers": [workers[0].name], "formats": list(PACKAGE_FORMATS)}]))
    settings = Settings(
        title=data.get("title", "MariaDB PGO"),
        url=data.get("url", f"http://localhost:{web_port}/"),
        listen=data.get("listen", LISTEN),
        web_port=web_port,
        worker_port=int(data.get("worker_port", WORKER_PORT)),
        downloads_port=downloads_port,
        downloads_url=data.get("downloads_url", f"http://localhost:{downloads_port}/"),
        db_url=data.get("db_url", "sqlite:///state.sqlite"),
        admins=dict(data.get("admins", {"admin": secrets.token_urlsafe(24)})),
        workers=workers,
        platforms=rows,
        nightly=nightly_settings(data.get("nightly", {}), source_file),
        downloads=path_setting("downloads", "downloads"),
        archive=str(path_setting("archive", "archive")),
        repo_on_worker=data.get("repo_on_worker", str(REPO)),
        min_speedup=number_setting(data, "min_speedup", source_file),
        inconclusive=data.get("inconclusive"),
        bench_options=tuple(str(o) for o in data.get("bench_options", BENCH_OPTIONS)),
        max_lost_workers=int(data.get("max_lost_workers", 2)),
        worker_wait_minutes=number_setting(data, "worker_wait_minutes", source_file,
                                           default=Settings.worker_wait_minutes),
        heavy_builds_per_host=data.get("heavy_builds_per_host", Settings.heavy_builds_per_host),
        source_file=source_file,
    )
    check(settings)
    return settings


def number_setting(data, name, source_file, default=None):
    value = data.get(name, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise SettingsError(f"{source_file}: {name} must be a number, not {value!r}")
    return None if value is None else float(value)


def worker_settings(data, base, source_file):
    if data.get("kind") in ("docker", "libvirt") and "password" not in data:
        # The master gives a container (environment) or a VM (fw_cfg) its password itself: any will do,
        # nobody needs to know it.
        data = {**data, "password": secrets.token_urlsafe(24)}
    if data.get("images"):
        data = {**data, "images": str(base / data["images"])}     # an absolute path stays as it is
    try:
        return WorkerSettings(**data)
    except TypeError as e:
        raise SettingsError(f"{source_file}: [[workers]] entry {data.get('name', '?')}: {e}") from None


def nightly_settings(data, source_file):
    try:
        return Nightly(**data)
    except TypeError as e:
        raise SettingsError(f"{source_file}: [nightly]: {e}") from None


def platform_settings(data, source_file, table):
    where = source_file or "default settings"
    try:
        row = Platform(name=data["name"], workers=tuple(data["workers"]),
                       formats=tuple(data.get("formats", PACKAGE_FORMATS)))
    except KeyError as e:
        raise SettingsError(f"{where}: a [[platforms]] entry lacks {e}") from None
    unknown = sorted(set(data) - set(PLATFORM_KEYS))
    if unknown:
        raise SettingsError(f"{where}: platform {row.name}: unknown setting '{unknown[0]}' "
                            f"(known: {', '.join(PLATFORM_KEYS)})")
    return Platform(row.name, row.workers, row.formats, table_platform(row.name, data.get("platform"), table, where))


def table_platform(name, named, table, where):
    """The platform of pgo/platforms.toml a [[platforms]] row builds for (see Platform), or one line."""
    known = ", ".join(sorted(table))
    if named is not None:
        if not isinstance(named, str) or named not in table:
            raise SettingsError(f"{where}: platform {name}: platform = {named!r} is no platform of "
                                f"{platforms.PLATFORMS_FILE.name} (known: {known})")
        return named
    if name in table:
        return name
    if name.startswith(tuple(f"{p.distribution}-" for p in table.values())):
        # Spelled like a table name (debian-14, a typo): never taken for this machine's platform.
        raise SettingsError(f"{where}: platform {name} is no platform of {platforms.PLATFORMS_FILE.name} "
                            f"(known: {known}); name one with platform = \"...\"")
    try:
        return platforms.host(table).name
    except PipelineError as e:
        raise SettingsError(f"{where}: platform {name} builds for this machine's platform: {e}; or name one "
                            f"with platform = \"...\" ({known})") from None


def check_local_workers(s, where):
    """Refuse a worker process of this machine in an entry of another platform than this machine's: its
    steps would say PGO_PLATFORM=debian-13 and compile with this machine's compiler. (A container's or a
    VM's image is checked against its platform where the master reads it: buildmaster/workers.py.)"""
    try:
        here = platforms.host().name
    except PipelineError:
        return              # a machine of no platform: the entries that need it said so already
    for p in s.platforms:
        for w in (s.worker(name) for name in p.workers):
            if w.kind == "local" and w.build_host == MASTER_HOST and p.platform != here:
                raise SettingsError(f"{where}: platform {p.name} builds for {p.platform}, but its worker {w.name} "
                                    f"is a process of this machine, a {here}: name it in an entry of {here}, or "
                                    "set its host if it runs on another machine")


def check(s):
    where = s.source_file or "default settings"
    if not s.admins:
        raise SettingsError(f"{where}: no [admins]: nobody could start a release")
    names = [w.name for w in s.workers]
    if len(set(names)) != len(names):
        raise SettingsError(f"{where}: two [[workers]] have the same name")
    for w in s.workers:
        if w.kind not in WORKER_KINDS:
            raise SettingsError(f"{where}: worker {w.name}: kind '{w.kind}' is not one of {', '.join(WORKER_KINDS)}")
        if w.kind == "libvirt" and not (w.hd_image and w.images):
            raise SettingsError(f"{where}: libvirt worker {w.name} needs hd_image and images")
        if w.kind == "libvirt" and w.domain_type not in LIBVIRT_DOMAIN_TYPES:
            raise SettingsError(f"{where}: libvirt worker {w.name}: domain_type '{w.domain_type}' is not one of "
                                f"{', '.join(LIBVIRT_DOMAIN_TYPES)}")
        if w.kind == "docker" and not w.images:
            raise SettingsError(f"{where}: docker worker {w.name} needs images (vm_images' folder)")
        if w.start_timeout is not None and (isinstance(w.start_timeout, bool) or not isinstance(w.start_timeout, int)
                                            or w.start_timeout <= 0):
            raise SettingsError(f"{where}: worker {w.name}: start_timeout must be a number of seconds above 0, "
                                f"not {w.start_timeout!r}")
        if w.host is not None and (not isinstance(w.host, str) or not w.host.strip()):
            raise SettingsError(f"{where}: worker {w.name}: host must be a machine's name, not {w.host!r}")
    if not s.platforms:
        raise SettingsError(f"{where}: no [[platforms]]: nothing to build on")
    for p in s.platforms:
        if not p.name.replace("-", "").replace(".", "").isalnum():
            raise SettingsError(f"{where}: platform name '{p.name}' may hold only letters, digits, '-' and '.'")
        missing = [w for w in p.workers if w not in names]
        if missing or not p.workers:
            raise SettingsError(f"{where}: platform {p.name} names no known worker ({', '.join(missing)})")
        bad = [f for f in p.formats if f not in PACKAGE_FORMATS]
        if bad:
            raise SettingsError(f"{where}: platform {p.name}: unknown package format '{bad[0]}' "
                                f"(known: {', '.join(PACKAGE_FORMATS)})")
    check_local_workers(s, where)
    if s.nightly.enabled and s.nightly.platform not in [p.name for p in s.platforms]:
        raise SettingsError(f"{where}: [nightly] platform '{s.nightly.platform}' is not a [[platforms]] name")
    if s.inconclusive is not None and s.inconclusive not in INCONCLUSIVE_CHOICES:
        raise SettingsError(f"{where}: inconclusive '{s.inconclusive}' is not one of {', '.join(INCONCLUSIVE_CHOICES)}")
    if not s.downloads_url.endswith("/"):
        raise SettingsError(f"{where}: downloads_url must end with '/'")
    if (isinstance(s.heavy_builds_per_host, bool) or not isinstance(s.heavy_builds_per_host, int)
            or s.heavy_builds_per_host < 1):
        raise SettingsError(f"{where}: heavy_builds_per_host must be a whole number of at least 1, "
                            f"not {s.heavy_builds_per_host!r}")
    if s.worker_wait_minutes <= 0:
        raise SettingsError(f"{where}: worker_wait_minutes must be above 0")
    if s.nightly.keep < 1:
        raise SettingsError(f"{where}: [nightly] keep must be at least 1")
    try:
        validate_request(s.nightly.version)
        product = build_config(s.nightly.config).product
        if product.tests and s.nightly.tests != "off":
            product.tests.test_set(s.nightly.tests)
    except PipelineError as e:
        raise SettingsError(f"{where}: [nightly] {e}") from None
