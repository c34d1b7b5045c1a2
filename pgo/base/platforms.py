"""Platforms: the Debian releases the release matrix builds for, read from pgo/platforms.toml.

One entry says what a platform is (its release, the version suffix of its packages, its compiler,
its build image, the MariaDB lines it ships); the configurations, the deb recipes, `pgo prove`, BOLT,
tools/install-deps.sh and the VM images' validation read it from here instead of naming `bookworm`
or `deb12u1` each on their own. Every mistake is one line, before anything is built.

    python3 -m pgo.base.platforms list                       every platform, one line each
    python3 -m pgo.base.platforms show NAME [--field KEY]    one platform (KEY: one value, for the shell)
    python3 -m pgo.base.platforms host [--field KEY]         this machine's platform ($PGO_PLATFORM, else
                                                        /etc/os-release's VERSION_CODENAME)
"""

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pgo import REPO
from pgo.base.errors import PipelineError, run_command
from pgo.base.readers import read_toml

PLATFORMS_FILE = REPO / "pgo" / "platforms.toml"
OS_RELEASE = Path("/etc/os-release")
# Names the platform a command works for where it cannot tell from the machine it runs on (a
# chroot, a container of another release): the master may set it on every step of a platform.
ENV = "PGO_PLATFORM"

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
CODENAME_RE = re.compile(r"^[a-z]+$")
SUFFIX_RE = re.compile(r"^deb[0-9]+u[0-9]+$")
LINE_RE = re.compile(r"^[0-9]+\.[0-9]+$")
GCC_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
KEYS = {"distribution", "codename", "version", "version_suffix", "compiler", "image", "lines", "source_suites",
        "bolt"}
REQUIRED = {"distribution", "codename", "version", "version_suffix", "compiler", "lines"}
COMPILER_KEYS = {"cc", "cxx", "version"}


class PlatformError(PipelineError):
    pass


@dataclass(frozen=True)
class Compiler:
    cc: str
    cxx: str
    version: str          # what `cc -dumpfullversion` prints


@dataclass(frozen=True)
class Platform:
    name: str
    distribution: str
    codename: str         # the suite of apt's sources, mmdebstrap, piuparts and a changelog entry
    version: str
    version_suffix: str   # deb12u1: the end of Debian's revision of a package updated in the release
    compiler: Compiler
    image: str | None     # the vm_images definition its builds run in
    lines: tuple[str, ...]            # the MariaDB lines the release ships
    source_suites: tuple[str, ...] = ()   # other releases whose source packages its workers build
    bolt: str | None = None           # LLVM major version of its BOLT

    def serves(self, suite):
        """Whether this platform's workers can fetch source packages of `suite` (None: their own)."""
        return suite is None or suite == self.codename or suite in self.source_suites

    def require_image(self):
        if not self.image:
            raise PlatformError(f"platform '{self.name}' has no build image ({PLATFORMS_FILE.name}: image): "
                                "it cannot build yet")
        return self.image

    def as_dict(self):
        return {"name": self.name, "distribution": self.distribution, "codename": self.codename,
                "version": self.version, "version_suffix": self.version_suffix,
                "compiler": {"cc": self.compiler.cc, "cxx": self.compiler.cxx, "version": self.compiler.version},
                "image": self.image, "lines": list(self.lines), "source_suites": list(self.source_suites),
                "bolt": self.bolt}


def load(path=PLATFORMS_FILE):
    """Every platform of the file by name, validated; the first mistake as one line."""
    data = read_toml(path, "platform table", PlatformError)
    unknown = sorted(set(data) - {"platforms"})
    if unknown:
        raise PlatformError(f"{Path(path).name}: unknown section '{unknown[0]}' (known: platforms)")
    table = data.get("platforms", {})
    if not table:
        raise PlatformError(f"{Path(path).name} defines no platform")
    platforms = {name: parse(name, raw) for name, raw in table.items()}
    for key, what in (("codename", "release"), ("image", "image")):
        seen: dict[str, str] = {}
        for p in platforms.values():
            value = getattr(p, key)
            if value and value in seen:
                raise PlatformError(f"platforms '{seen[value]}' and '{p.name}' are the same {what} ({value})")
            seen[value] = p.name
    shipped: dict[str, str] = {}
    for p in platforms.values():
        for line in p.lines:
            if line in shipped:
                # The source of a line comes from the release that ships it: it must be one.
                raise PlatformError(f"platforms '{shipped[line]}' and '{p.name}' both ship line {line}")
            shipped[line] = p.name
    return platforms


def parse(name, raw):
    where = f"platform '{name}'"
    if not NAME_RE.match(name):
        raise PlatformError(f"{where}: a name is lower-case letters, digits and '-', starting with a letter")
    if not isinstance(raw, dict):
        raise PlatformError(f"{where} must be a table")
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise PlatformError(f"{where}: unknown setting '{unknown[0]}' (known: {', '.join(sorted(KEYS))})")
    missing = sorted(REQUIRED - set(raw))
    if missing:
        raise PlatformError(f"{where}: missing setting '{missing[0]}'")
    for key in ("distribution", "codename", "version", "version_suffix", "image", "bolt"):
        if key in raw and (not isinstance(raw[key], str) or not raw[key]):
            raise PlatformError(f"{where}: {key} must be a non-empty string, not {raw[key]!r}")
    if not CODENAME_RE.match(raw["codename"]):
        raise PlatformError(f"{where}: codename '{raw['codename']}' is not a release's codename such as bookworm")
    if not SUFFIX_RE.match(raw["version_suffix"]):
        raise PlatformError(f"{where}: version_suffix '{raw['version_suffix']}' is not Debian's suffix of a "
                            "stable update such as deb12u1")
    compiler = raw["compiler"]
    if not isinstance(compiler, dict) or set(compiler) != COMPILER_KEYS \
            or not all(isinstance(v, str) and v for v in compiler.values()):
        raise PlatformError(f"{where}: compiler must be a table of exactly cc, cxx and version, not {compiler!r}")
    if not GCC_VERSION_RE.match(compiler["version"]):
        raise PlatformError(f"{where}: compiler version '{compiler['version']}' is not an exact version like 12.2.0")
    lines = raw["lines"]
    if not isinstance(lines, list) or not all(isinstance(x, str) and LINE_RE.match(x) for x in lines):
        raise PlatformError(f"{where}: lines must be a list of MAJOR.MINOR lines, not {lines!r}")
    suites = raw.get("source_suites", [])
    if not isinstance(suites, list) or not all(isinstance(s, str) and CODENAME_RE.match(s) for s in suites):
        raise PlatformError(f"{where}: source_suites must be a list of release codenames, not {suites!r}")
    return Platform(name, raw["distribution"], raw["codename"], raw["version"], raw["version_suffix"],
                    Compiler(compiler["cc"], compiler["cxx"], compiler["version"]), raw.get("image"),
                    tuple(lines), tuple(suites), raw.get("bolt"))


def names(platforms=None):
    return sorted(platforms if platforms is not None else load())


def platform(name, platforms=None):
    """The platform `name`, or one line naming the known ones."""
    platforms = platforms if platforms is not None else load()
    if name not in platforms:
        raise PlatformError(f"unknown platform '{name}' (known: {', '.join(sorted(platforms))})")
    return platforms[name]


def image(name, platforms=None):
    """The build image of platform `name`; one line for an unknown platform or one without an image."""
    return platform(name, platforms).require_image()


def of_codename(codename, platforms=None):
    """The platform of Debian release `codename` (bookworm), or one line."""
    platforms = platforms if platforms is not None else load()
    for p in platforms.values():
        if p.codename == codename:
            return p
    known = ", ".join(f"{p.name} ({p.codename})" for p in sorted(platforms.values(), key=lambda p: p.name))
    raise PlatformError(f"Debian release '{codename}' is no platform of {PLATFORMS_FILE.name} (known: {known})")


def shipping(line, platforms=None):
    """The platform whose release ships MariaDB `line` (its source package's suite), or None."""
    platforms = platforms if platforms is not None else load()
    return next((p for p in platforms.values() if line in p.lines), None)


def source_suite(line, platforms=None):
    """The Debian suite whose source package carries `line`: the release shipping it (None: none does)."""
    shipper = shipping(line, platforms) if line else None
    return shipper.codename if shipper else None


def check_source(name, line, platforms=None):
    """Refuse, in one line, a build of `line` from Debian's source on platform `name` whose workers cannot
    fetch it (the release that ships the line is neither its own nor among its source_suites)."""
    platforms = platforms if platforms is not None else load()
    p = platform(name, platforms)
    suite = source_suite(line, platforms)
    if line and suite is None:
        raise PlatformError(f"no platform ships MariaDB {line} (Debian's source of it: "
                            f"{', '.join(f'{q.name} {list(q.lines)}' for q in platforms.values())})")
    if not p.serves(suite):
        raise PlatformError(f"platform '{name}' cannot build Debian's source of {line}: that is {suite}'s, "
                            f"and {name}'s workers fetch sources of {', '.join((p.codename, *p.source_suites))}")
    return suite


def bolt_versions(platforms=None):
    """The BOLT versions of all platforms, newest first: what pgo/build/bolt.py looks for on PATH."""
    platforms = platforms if platforms is not None else load()
    return tuple(sorted({p.bolt for p in platforms.values() if p.bolt}, key=int, reverse=True))


def host(platforms=None, environ=None, os_release=OS_RELEASE):
    """This machine's platform: $PGO_PLATFORM when set, else its Debian release (/etc/os-release)."""
    platforms = platforms if platforms is not None else load()
    environ = os.environ if environ is None else environ
    if environ.get(ENV):
        return platform(environ[ENV], platforms)
    try:
        text = Path(os_release).read_text()
    except OSError as e:
        raise PlatformError(f"cannot tell this machine's platform: {os_release}: {e.strerror}; "
                            f"set {ENV} to one of {', '.join(sorted(platforms))}") from None
    fields = dict(re.findall(r'^([A-Z_]+)="?([^"\n]*)"?$', text, re.M))
    codename = fields.get("VERSION_CODENAME")
    if not codename:
        raise PlatformError(f"cannot tell this machine's platform: {os_release} names no VERSION_CODENAME; "
                            f"set {ENV} to one of {', '.join(sorted(platforms))}")
    try:
        return of_codename(codename, platforms)
    except PlatformError as e:
        raise PlatformError(f"this machine: {e}; set {ENV} to build for one") from None


def describe(p):
    return (f"{p.name}: {p.distribution} {p.version} ({p.codename}, +{p.version_suffix}), {p.compiler.cc} "
            f"{p.compiler.version}, image {p.image or 'none'}, ships {', '.join(p.lines) or 'no line'}"
            + (f", builds sources of {', '.join(p.source_suites)} too" if p.source_suites else ""))


def value_of(p, key):
    """One value of a platform as the shell reads it: lists space-separated, compiler.cc etc."""
    value = p.as_dict()
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            known = ", ".join([*sorted(p.as_dict()), "compiler.cc", "compiler.cxx", "compiler.version"])
            raise PlatformError(f"platform '{p.name}' has no field '{key}' (known: {known})")
        value = value[part]
    if isinstance(value, list):
        return " ".join(value)
    return "" if value is None else str(value)


def show(p, key):
    print(value_of(p, key) if key else describe(p))


def list_platforms(_args):
    for p in sorted(load().values(), key=lambda p: p.name):
        print(describe(p))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="platforms", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers()
    listing = sub.add_parser("list", help="every platform")
    listing.set_defaults(func=list_platforms)
    one = sub.add_parser("show", help="one platform")
    one.add_argument("name")
    one.add_argument("--field", help="print only this value (codename, version_suffix, compiler.cc, ...)")
    one.set_defaults(func=lambda a: show(platform(a.name), a.field))
    here = sub.add_parser("host", help=f"this machine's platform (${ENV}, else /etc/os-release)")
    here.add_argument("--field", help="print only this value")
    here.set_defaults(func=lambda a: show(host(), a.field))
    return run_command(parser, argv, "platforms")


if __name__ == "__main__":
    raise SystemExit(main())
