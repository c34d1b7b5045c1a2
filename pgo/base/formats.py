"""The package formats, one entry each: the CLI (`pgo package --format`, `pgo prove`), the master's
settings and release form, the downloads site and the tests read them here.

Adding a format: its entry in FORMATS (the order is the release's: the order a release lists and
packages them), then its module pgo/packaging/formats/<name>.py (make, extract, prove) and its recipe
folder packaging/<name>/; tests/test_package.py fails until it has both.
"""

from dataclasses import dataclass
from enum import StrEnum

from pgo.base.errors import PipelineError


class Format(StrEnum):
    BINTAR = "bintar"
    DEB = "deb"
    RPM = "rpm"


@dataclass(frozen=True)
class FormatInfo:
    name: Format
    suffixes: tuple[str, ...]     # its package files' names end so (the downloads site lists them)
    what: str                     # for people


FORMATS: dict[Format, FormatInfo] = {info.name: info for info in (
    FormatInfo(Format.BINTAR, (".tar.gz", ".tar.xz"), "a binary tarball, unpacked anywhere"),
    FormatInfo(Format.DEB, (".deb",), "Debian packages"),
    FormatInfo(Format.RPM, (".rpm",), "RPM packages with MariaDB's names"))}
NAMES: tuple[str, ...] = tuple(str(f) for f in FORMATS)
PACKAGE_SUFFIXES: tuple[str, ...] = tuple(s for info in FORMATS.values() for s in info.suffixes)


def parse(name: str) -> Format:
    """The format called name; PipelineError naming the known ones otherwise."""
    try:
        return Format(name)
    except ValueError:
        raise PipelineError(f"unknown package format '{name}' (known: {', '.join(NAMES)})") from None
