"""Publishing on the master: a staging folder becomes a download folder in one rename.

A build uploads everything into a staging folder next to the downloads (same
file system, so the rename is atomic: pgo/atomic.py reveal), and only its last step publishes:
readers see a complete folder with its sha256sums.txt or no folder at all.
Nothing published is ever replaced.
"""

import os
import shutil
import time
from pathlib import Path

from pgo import PipelineError, atomic
from pgo.checksums import SUMS, write_sha256sums

STAGING = ".incoming"
PACKAGE_SUFFIXES = (".deb", ".rpm", ".tar.gz", ".tar.xz")


class PublishError(PipelineError):
    pass


def staging_dir(downloads: str | os.PathLike, build_name: str) -> Path:
    return Path(downloads) / STAGING / build_name


def release_dir(downloads: str | os.PathLike, version: str, platform: str) -> Path:
    """Where a release of version built for platform is published."""
    return Path(downloads) / version / platform


def publish(staging: str | os.PathLike, destination: str | os.PathLike) -> int:
    """Checksum staging and rename it to destination; returns the number of files published."""
    staging, destination = Path(staging), Path(destination)
    if destination.exists():
        raise PublishError(f"{destination} is already published; a release is never replaced")
    if not staging.is_dir() or not any(p.is_file() for p in staging.rglob("*")):
        raise PublishError(f"nothing to publish: the build uploaded no files into {staging}")
    count = write_sha256sums(staging)
    try:
        atomic.reveal(staging, destination)
    except FileExistsError:
        raise PublishError(f"{destination} is already published; a release is never replaced") from None
    return count


def packages(folder: str | os.PathLike) -> list[str]:
    """The packages of a published folder (in its format folders), as relative paths."""
    folder = Path(folder)
    return sorted(str(path.relative_to(folder)) for path in folder.glob("*/*")
                  if path.is_file() and path.name.endswith(PACKAGE_SUFFIXES))


def test_reports(folder: str | os.PathLike) -> list[str]:
    """The JUnit files of a published folder's test runs (tests/<build>/junit.xml), as relative paths."""
    folder = Path(folder)
    return sorted(str(path.relative_to(folder)) for path in folder.glob("tests/*/junit.xml") if path.is_file())


def nightly_name(version: str, build_number: object, now: float | None = None) -> str:
    """Names sort by time, so the oldest nightly comes first."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now))}-{version}-b{build_number}"


def prune_nightlies(folder: str | os.PathLike, keep: int) -> list[str]:
    """Delete all but the newest `keep` nightly folders; returns the names deleted."""
    folder = Path(folder)
    nightlies = sorted(p for p in folder.iterdir() if p.is_dir() and (p / SUMS).is_file())
    doomed = nightlies[:max(len(nightlies) - keep, 0)]
    for path in doomed:
        shutil.rmtree(path)
    return [p.name for p in doomed]


def discard(staging: str | os.PathLike) -> None:
    shutil.rmtree(staging, ignore_errors=True)
