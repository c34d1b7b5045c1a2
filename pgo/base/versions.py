"""What a version is: MAJOR.MINOR.PATCH, the product line it belongs to, their order, and 'latest'
(the newest of a line, which pgo/build/source.py resolves)."""

import re

from pgo.base.errors import PipelineError

# Each part at most 6 digits: a version names files and folders (package names, work directories), and a
# longer one is a typo that would fail only at the packages, on a file name too long.
VERSION_RE = re.compile(r"[0-9]{1,6}\.[0-9]{1,6}\.[0-9]{1,6}")
LATEST = "latest"


def validate_version(version):
    if not VERSION_RE.fullmatch(version or ""):
        raise PipelineError(f"invalid version {version!r}: expected MAJOR.MINOR.PATCH, e.g. 10.11.19")
    return version


def validate_request(version):
    """A version to build: MAJOR.MINOR.PATCH, or 'latest' (resolve_version() says which)."""
    return version if version == LATEST else validate_version(version)


def version_key(version):
    return tuple(int(part) for part in version.split("."))


def version_line(version):
    """'10.11.19' -> '10.11': the product line a version belongs to."""
    return ".".join(version.split(".")[:2])
