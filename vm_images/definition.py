"""Image and canary definitions, read from the declarative file vm_images/images.toml and validated.

Every mistake gets one line naming the file, the image and the setting, because a
definition that builds something other than what it says is worse than none.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from pgo.base import platforms, protocol
from pgo.base.readers import read_toml
from pgo.bench.policy import POLICIES
from vm_images import REPO, ImageError

DEFINITIONS = Path(__file__).with_name("images.toml")
MASTER_REQUIREMENTS = REPO / protocol.MASTER_REQUIREMENTS

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
USER_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
RELEASE_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
# A Debian version, exactly: no operators, ranges or wildcards.
DEB_VERSION_RE = re.compile(r"^(\d+:)?[0-9][A-Za-z0-9.+~-]*$")
PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9.+-]+$")

IMAGE_KEYS = {"base", "family", "bootstrap", "distribution", "release", "mirror", "security_mirror",
              "source_suites", "package_sets", "packages", "disk_gib", "worker", "compiler"}
REQUIRED_IMAGE_KEYS = IMAGE_KEYS - {"base", "packages", "source_suites"}
COMPILER_KEYS = {"cc", "cxx", "version", "packages"}
WORKER_KEYS = {"user", "buildbot_worker"}
CANARY_KEYS = {"version", "config", "source", "gate", "compare", "policy", "bench_options"}
# What the rollout itself passes to pgo bench, and what the gate policy decides: a canary's
# bench_options must not set them.
ROLLOUT_BENCH_OPTIONS = ("--baseline", "--candidate", "--out", "--from-result", "--policy", "--min-speedup",
                         "--inconclusive")
GATES = ("bench", "same-output")
# Families the definition format knows; only those with a bootstrap tool here can be defined.
BOOTSTRAPS = {"deb": "mmdebstrap"}
PLANNED_FAMILIES = {"rpm": "dnf --installroot"}


@dataclass(frozen=True)
class Compiler:
    cc: str
    cxx: str
    version: str                  # what `cc -dumpfullversion` must print
    packages: tuple[tuple[str, str], ...]   # (package, exact version)

    def pins(self):
        return [f"{package}={version}" for package, version in self.packages]


@dataclass(frozen=True)
class Worker:
    user: str
    buildbot_worker: str


@dataclass(frozen=True)
class Image:
    name: str
    family: str
    bootstrap: str
    distribution: str
    release: str
    mirror: str
    security_mirror: str
    packages: tuple[str, ...]     # unpinned packages, from the package sets and `packages`
    compiler: Compiler
    worker: Worker
    disk_gib: int
    # Other releases whose source packages the worker builds (the 11.8 line is trixie's):
    # deb-src entries only, so the worker needs no root to `apt-get source` them.
    source_suites: tuple[str, ...] = ()

    def as_dict(self):
        return {
            "name": self.name, "family": self.family, "bootstrap": self.bootstrap,
            "distribution": self.distribution, "release": self.release, "mirror": self.mirror,
            "security_mirror": self.security_mirror, "packages": list(self.packages),
            "compiler": {"cc": self.compiler.cc, "cxx": self.compiler.cxx, "version": self.compiler.version,
                         "packages": dict(self.compiler.packages)},
            "worker": {"user": self.worker.user, "buildbot_worker": self.worker.buildbot_worker},
            "disk_gib": self.disk_gib, "source_suites": list(self.source_suites),
        }


@dataclass(frozen=True)
class Canary:
    name: str
    version: str
    config: str
    source: str
    gate: str                      # "bench" or "same-output"
    compare: tuple[str, ...]       # same-output: the command, relative to a staged tree
    policy: str | None             # bench: the gate policy (pgo/bench/policy.py)
    bench_options: tuple[str, ...] = ()  # bench: what to measure (pgo bench options)


def load(path=DEFINITIONS):
    return read_toml(path, "image definitions", ImageError)


def image_names(data=None):
    return sorted((data if data is not None else load()).get("images", {}))


def image(name, data=None, requirements=MASTER_REQUIREMENTS):
    """The image `name` with its base merged in, validated."""
    data = data if data is not None else load()
    images = data.get("images", {})
    if name not in images:
        raise ImageError(f"unknown image '{name}' (known: {', '.join(sorted(images)) or 'none'})")
    if not NAME_RE.match(name):
        raise ImageError(f"image '{name}': a name is lower-case letters, digits and '-', starting with a letter")
    raw = merged(name, images[name], data.get("bases", {}))
    where = f"image '{name}'"
    unknown = sorted(set(raw) - IMAGE_KEYS)
    if unknown:
        raise ImageError(f"{where}: unknown setting '{unknown[0]}' (known: {', '.join(sorted(IMAGE_KEYS))})")
    missing = sorted(REQUIRED_IMAGE_KEYS - set(raw))
    if missing:
        raise ImageError(f"{where}: missing setting '{missing[0]}'")
    family, bootstrap = raw["family"], raw["bootstrap"]
    if family in PLANNED_FAMILIES:
        raise ImageError(f"{where}: family '{family}' (bootstrap {PLANNED_FAMILIES[family]}) is planned "
                         f"but not implemented yet; only {', '.join(BOOTSTRAPS)} images can be built")
    if family not in BOOTSTRAPS:
        raise ImageError(f"{where}: unknown family '{family}' (known: {', '.join(BOOTSTRAPS)})")
    if bootstrap != BOOTSTRAPS[family]:
        raise ImageError(f"{where}: family '{family}' is bootstrapped with '{BOOTSTRAPS[family]}', not '{bootstrap}'")
    for key in ("distribution", "release"):
        text(raw[key], f"{where}: {key}")
    source_suites = raw.get("source_suites", [])
    if not isinstance(source_suites, list) or not all(isinstance(s, str) and re.fullmatch(r"[a-z]+", s)
                                                      for s in source_suites):
        raise ImageError(f"{where}: source_suites must be a list of release names, not {source_suites!r}")
    for key in ("mirror", "security_mirror"):
        if not re.match(r"^https?://[^\s/]+(/\S*)?$", text(raw[key], f"{where}: {key}")):
            raise ImageError(f"{where}: {key} '{raw[key]}' is not an http(s) URL")
    disk_gib = raw["disk_gib"]
    if not isinstance(disk_gib, int) or isinstance(disk_gib, bool) or not 4 <= disk_gib <= 2048:
        raise ImageError(f"{where}: disk_gib must be a whole number of GiB between 4 and 2048, not {disk_gib!r}")
    compiler = parse_compiler(raw["compiler"], where)
    packages = resolve_packages(raw, data.get("package_sets", {}), where)
    pinned_elsewhere = sorted(set(packages) & {p for p, _ in compiler.packages})
    if pinned_elsewhere:
        raise ImageError(f"{where}: {pinned_elsewhere[0]} is pinned by the compiler; "
                         "remove it from the package sets (an unpinned copy would defeat the pin)")
    worker = parse_worker(raw["worker"], where, requirements)
    return Image(name, family, bootstrap, raw["distribution"], raw["release"], raw["mirror"],
                 raw["security_mirror"], packages, compiler, worker, disk_gib, tuple(source_suites))


def merged(name, own, bases):
    base_name = own.get("base")
    if base_name is None:
        return dict(own)
    if base_name not in bases:
        raise ImageError(f"image '{name}': unknown base '{base_name}' (known: {', '.join(sorted(bases)) or 'none'})")
    result = {**bases[base_name], **{k: v for k, v in own.items() if k != "base"}}
    # Tables merge one level deep, so an image can override one worker setting.
    for key in ("worker", "compiler"):
        if isinstance(bases[base_name].get(key), dict) and isinstance(own.get(key), dict):
            result[key] = {**bases[base_name][key], **own[key]}
    return result


def text(value, where):
    if not isinstance(value, str) or not value.strip():
        raise ImageError(f"{where} must be a non-empty string, not {value!r}")
    return value


def table(value, keys, where):
    if not isinstance(value, dict):
        raise ImageError(f"{where} must be a table, not {value!r}")
    unknown = sorted(set(value) - keys)
    if unknown:
        raise ImageError(f"{where}: unknown setting '{unknown[0]}' (known: {', '.join(sorted(keys))})")
    missing = sorted(keys - set(value))
    if missing:
        raise ImageError(f"{where}: missing setting '{missing[0]}'")
    return value


def parse_compiler(raw, where):
    where = f"{where}: compiler"
    raw = table(raw, COMPILER_KEYS, where)
    cc, cxx, version = (text(raw[k], f"{where}.{k}") for k in ("cc", "cxx", "version"))
    if not RELEASE_VERSION_RE.match(version):
        raise ImageError(f"{where}.version '{version}' is not an exact GCC version like 12.2.0")
    packages = raw["packages"]
    if not isinstance(packages, dict) or not packages:
        raise ImageError(f"{where}.packages must name the compiler's packages with exact versions")
    for package, pin in packages.items():
        if not PACKAGE_RE.match(package):
            raise ImageError(f"{where}.packages: '{package}' is not a package name")
        if not isinstance(pin, str) or not DEB_VERSION_RE.match(pin):
            raise ImageError(f"{where}.packages: {package} = {pin!r} is not an exact version "
                             "(ranges and wildcards would let the compiler change under the pin)")
        upstream = pin.split(":", 1)[-1].rsplit("-", 1)[0]
        if upstream != version:
            raise ImageError(f"{where}.packages: {package} {pin} is GCC {upstream}, but the compiler "
                             f"version says {version}")
    for tool in (cc, cxx):
        if tool not in packages:
            raise ImageError(f"{where}: {tool} is not among the pinned packages ({', '.join(packages)})")
    return Compiler(cc, cxx, version, tuple(sorted(packages.items())))


def resolve_packages(raw, package_sets, where):
    names = raw["package_sets"]
    if not isinstance(names, list) or not names:
        raise ImageError(f"{where}: package_sets must be a list of set names")
    packages = []
    for set_name in names:
        if set_name not in package_sets:
            raise ImageError(f"{where}: unknown package set '{set_name}' "
                             f"(known: {', '.join(sorted(package_sets)) or 'none'})")
        packages += package_sets[set_name]
    packages += raw.get("packages", [])
    for package in packages:
        if not isinstance(package, str) or not PACKAGE_RE.match(package):
            raise ImageError(f"{where}: '{package}' is not a package name (versions are pinned "
                             "only for the compiler, in compiler.packages)")
    return tuple(sorted(set(packages)))


def parse_worker(raw, where, requirements):
    where = f"{where}: worker"
    raw = table(raw, WORKER_KEYS, where)
    user = text(raw["user"], f"{where}.user")
    if not USER_RE.match(user) or user == "root":
        raise ImageError(f"{where}.user '{user}' must be an unprivileged user name (not root)")
    version = text(raw["buildbot_worker"], f"{where}.buildbot_worker")
    if not RELEASE_VERSION_RE.match(version):
        raise ImageError(f"{where}.buildbot_worker '{version}' is not an exact version like 4.3.0")
    master = master_buildbot_version(requirements)
    if master and master != version:
        raise ImageError(f"{where}.buildbot_worker is {version} but {rel(requirements)} pins "
                         f"buildbot {master}: worker and master must run the same version")
    return Worker(user, version)


def master_buildbot_version(requirements):
    """The buildbot version the master pins, or None where no master requirements exist yet."""
    if not Path(requirements).is_file():
        return None
    match = re.search(r"^buildbot==(\S+)", Path(requirements).read_text(), re.M | re.I)
    return match.group(1) if match else None


def rel(path):
    path = Path(path)
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def canary(name, data=None):
    data = data if data is not None else load()
    canaries = data.get("canaries", {})
    if name not in canaries:
        raise ImageError(f"unknown canary '{name}' (known: {', '.join(sorted(canaries)) or 'none'})")
    where = f"canary '{name}'"
    raw = canaries[name]
    unknown = sorted(set(raw) - CANARY_KEYS)
    if unknown:
        raise ImageError(f"{where}: unknown setting '{unknown[0]}' (known: {', '.join(sorted(CANARY_KEYS))})")
    for key in ("version", "config", "source", "gate"):
        if key not in raw:
            raise ImageError(f"{where}: missing setting '{key}'")
        text(raw[key], f"{where}: {key}")
    if not RELEASE_VERSION_RE.match(raw["version"]):
        raise ImageError(f"{where}: version '{raw['version']}' is not MAJOR.MINOR.PATCH")
    if raw["gate"] not in GATES:
        raise ImageError(f"{where}: unknown gate '{raw['gate']}' (known: {', '.join(GATES)})")
    compare = raw.get("compare", [])
    if raw["gate"] == "same-output" and (not isinstance(compare, list) or not compare):
        raise ImageError(f"{where}: gate 'same-output' needs compare = [command, args...] "
                         "relative to the staged tree")
    if raw["gate"] == "bench" and compare:
        raise ImageError(f"{where}: compare is for gate 'same-output'; gate 'bench' runs pgo bench")
    policy = raw.get("policy")
    if raw["gate"] == "bench" and policy not in POLICIES:
        raise ImageError(f"{where}: gate 'bench' needs policy, the name of a gate policy in "
                         f"pgo/bench/policy.py ({', '.join(sorted(POLICIES))}), not {policy!r}")
    if raw["gate"] != "bench" and policy is not None:
        raise ImageError(f"{where}: policy is for gate 'bench'")
    options = raw.get("bench_options", [])
    if raw["gate"] != "bench" and options:
        raise ImageError(f"{where}: bench_options is for gate 'bench'")
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ImageError(f"{where}: bench_options must be a list of pgo bench arguments, not {options!r}")
    taken = [o for o in options if o.split("=", 1)[0] in ROLLOUT_BENCH_OPTIONS]
    if taken:
        raise ImageError(f"{where}: bench_options cannot set {taken[0].split('=', 1)[0]}: the rollout sets it")
    return Canary(name, raw["version"], raw["config"], raw["source"], raw["gate"], tuple(compare), policy,
                  tuple(options))


def validate_all(data=None, requirements=MASTER_REQUIREMENTS, platform_table=None):
    """Every image and canary of the file, or the first error; and that each platform's image fits it."""
    data = data if data is not None else load()
    unknown = sorted(set(data) - {"package_sets", "bases", "images", "canaries"})
    if unknown:
        raise ImageError(f"unknown section '{unknown[0]}' (known: bases, canaries, images, package_sets)")
    images = [image(n, data, requirements) for n in image_names(data)]
    canaries = [canary(n, data) for n in sorted(data.get("canaries", {}))]
    check_platforms(images, platform_table)
    return images, canaries


def check_platforms(images, platform_table=None):
    """Each platform of pgo/platforms.toml that names an image names one defined here, of its Debian
    release, with its compiler, able to fetch the sources it builds: the table says what a platform
    is, the image pins it, and the two must not drift apart."""
    try:
        table = platform_table if platform_table is not None else platforms.load()
    except platforms.PlatformError as e:
        raise ImageError(str(e)) from None
    by_name = {i.name: i for i in images}
    for p in sorted(table.values(), key=lambda p: p.name):
        if p.image is None:
            continue
        where = f"platform '{p.name}' ({platforms.PLATFORMS_FILE.name})"
        if p.image not in by_name:
            raise ImageError(f"{where}: image '{p.image}' is not defined in {DEFINITIONS.name} "
                             f"(known: {', '.join(sorted(by_name)) or 'none'})")
        i = by_name[p.image]
        if (i.distribution, i.release) != (p.distribution, p.codename):
            raise ImageError(f"{where}: image '{i.name}' is {i.distribution} {i.release}, "
                             f"not {p.distribution} {p.codename}")
        theirs = (i.compiler.cc, i.compiler.cxx, i.compiler.version)
        ours = (p.compiler.cc, p.compiler.cxx, p.compiler.version)
        if theirs != ours:
            raise ImageError(f"{where}: image '{i.name}' pins {' '.join(theirs)}, the platform says {' '.join(ours)}")
        missing = [s for s in p.source_suites if s not in i.source_suites]
        if missing:
            raise ImageError(f"{where}: image '{i.name}' has no deb-src entries of {missing[0]}, "
                             "whose sources the platform builds (source_suites)")
