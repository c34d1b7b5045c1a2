"""The profile archive's model: what an entry is, its files, kinds and manifest, and where the archive is.

An archive entry is one directory:

    <root>/<product>/<version>/<target>-gcc-<compiler version>/<profile id>/
        profile.tar.xz    manifest.json + profile/<name>.gcda, the one file that is the profile
        manifest.json     a copy of the archived manifest, so that list and show need not unpack
        kind.json         the entry's kind since it was promoted, and when (absent: the manifest's kind)
        sha256sums.txt    the other files' checksums, in `sha256sum -c` format
        kind.json.next    only while a promotion is on its way (see below)

An entry's kind says how long it is kept and whether later builds take it:
  nightly   pruned to the newest few; reusable
  pending   the profile of a release not yet published (the archive phase runs
            before the benchmark gate): pruned like a nightly, never `latest`
  release   kept; reusable
Storing a profile again with a higher kind promotes its entry (nightly ->
pending -> release, `pgo archive promote` after publishing); a lower one keeps
the entry's kind, and both say so. A promotion rewrites kind.json and the
checksums that cover it; a kind.json they do not prove is damage, which
`verify` reports and nothing that reads kinds (latest, prune) takes on trust.
The new checksums are the promotion's commit: the new kind.json waits beside
the old one as kind.json.next until they prove it, then takes its place. The
next command that reads or changes the entry undoes a promotion killed before
that commit, and finishes one killed after it.

The root is --archive, else $PGO_ARCHIVE, else ~/.local/share/pgo/profiles (`promote
--workdir`: else the archive the work directory's build used). Every pgo step of a
Buildbot build sets PGO_BUILDER and PGO_BUILD_NUMBER (the builder's name and the
build's number, pgo/base/protocol.py) for the manifest.

Between machines no folder is shared; the Buildbot master holds the archive of record:
  add --from DIR   stores the one entry of another archive folder (a build's own, uploaded),
                   once its checksums, the manifest inside profile.tar.xz and every .gcda
                   agree; a damaged one is refused in one line and nothing is stored
  wants            writes what a reusing build matches a profile on (product, line, target,
                   GCC version, flags fingerprint: as --profile-from does)
  pick --wants F   chooses the entry by them, as --profile-from would, and packs it in one
                   file (--out) to send; --record gives its name and the file's sha256
  add --from FILE --sha256 X
                   stores what pick packed, once the file's sha256 is X (the master's): a
                   file damaged on its way is refused before anything reads it
Promote and prune run where the archive is: on the master.

Reading an entry's kind, and every change of an entry, belong to its store (pgo/archive/store.py),
which holds the entry's lock for them; the manifest is written once and never changes, so the
entry reads it itself.
"""

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgo import PipelineError
from pgo.base.protocol import BUILD_NUMBER_ENV, BUILDER_ENV

MANIFEST_FORMAT = 1
ARCHIVE = "profile.tar.xz"
MANIFEST = "manifest.json"
KINDS = ("release", "pending", "nightly")
RANK = {"nightly": 0, "pending": 1, "release": 2}
BUILD_KINDS = ("release", "nightly")     # what a build is meant to be; its profile is pending until published
KIND = "kind.json"
STAGED_KIND = "kind.json.next"      # a change of kind on its way (pgo/archive/store.py change_kind)
BUILDBOT_ENV = {"builder": BUILDER_ENV, "build_number": BUILD_NUMBER_ENV}


def root_of(archive_option: str | None, given_as: str = "--archive") -> Path:
    """The archive's root: archive_option (which the user gave as `given_as`), else $PGO_ARCHIVE, else the default.

    A file where the root or a folder above it would be is refused: read as an archive it would
    hold no entries, and list, verify and `latest` would say so instead of naming the mistake.
    """
    if archive_option:
        root, named = Path(archive_option), f"{given_as} {archive_option}"
    elif os.environ.get("PGO_ARCHIVE"):
        root, named = Path(os.environ["PGO_ARCHIVE"]), f"$PGO_ARCHIVE {os.environ['PGO_ARCHIVE']}"
    else:
        data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
        root = data / "pgo" / "profiles"
        named = f"the default profile archive {root}"
    root = root.resolve()
    existing = next(path for path in (root, *root.parents) if path.exists())
    if not existing.is_dir():
        if existing != root:
            raise PipelineError(f"{named}: {existing} is a file, not a folder")
        raise PipelineError(f"{named} is a file, not a profile archive folder")
    return root


def build_root(settings) -> Path:
    """The archive a work directory's build stores into and reuses from: its `pgo build --archive`, resolved."""
    return root_of(settings.archive, "the work directory's archive (its build's --archive)")


# --- entries ------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    root: Path
    name: str            # <product>/<version>/<platform>/<profile id>, relative to root

    @property
    def path(self) -> Path:
        return self.root / self.name

    @property
    def profile_id(self) -> str:
        return self.name.rsplit("/", 1)[1]

    def manifest(self) -> dict[str, Any]:
        """The manifest the entry was stored with (written once, never changed: read without its lock)."""
        try:
            return json.loads((self.path / MANIFEST).read_text())
        except (OSError, ValueError) as e:
            if not self.path.is_dir():
                raise Gone(self) from None
            raise PipelineError(f"archive entry {self.name}: unreadable {MANIFEST}: {e}") from e

    @classmethod
    def of(cls, root: Path, manifest: Mapping[str, Any]) -> "Entry":
        """The entry a manifest's profile is stored as in the archive at root."""
        compiler = manifest["compiler"]
        return cls(root, f"{manifest['product']}/{manifest['version']}/{compiler['target']}-gcc-"
                         f"{compiler['version']}/{manifest['profile_id']}")


class Gone(PipelineError):
    """An entry removed (pruned) after it was found, before it could be read or changed."""

    def __init__(self, entry: Entry):
        super().__init__(f"archived profile {entry.name} was removed meanwhile (by `pgo archive prune`, "
                         "or by hand)")


# What reading a damaged entry raises: an unreadable file, or a manifest of the wrong shape.
DAMAGE = (PipelineError, KeyError, TypeError, AttributeError)


def damage(entry: Entry, e: Exception) -> str:
    """What is wrong with an entry, from what reading it raised (one of DAMAGE), naming the entry."""
    if isinstance(e, PipelineError):
        return str(e)
    return f"archive entry {entry.name}: {MANIFEST} is no profile manifest ({type(e).__name__}: {e})"


# --- the training that made a profile ------------------------------------------

def workload_version(manifest: Mapping[str, Any]) -> str | None:
    """The version of the training workload that made a profile, as its training's report gave it
    (profile_load's PROFILE_LOAD_VERSION); None when the manifest records none."""
    training = manifest.get("training")
    version = training.get("workload_version") if isinstance(training, dict) else None
    return None if version is None else str(version)


# ASCII digits only: str.isdigit() also takes '²', which int() refuses.
WORKLOAD_VERSION_FORM = re.compile(r"[0-9]+(\.[0-9]+)*")
UNORDERED = "not of the form N.N... (ASCII digits and dots) by which `--profile-from latest` orders profiles"


def orderable(version: str | None) -> bool:
    return version is not None and WORKLOAD_VERSION_FORM.fullmatch(version) is not None


def workload_key(manifest: Mapping[str, Any]) -> tuple[int, ...]:
    """Sorts newer workload versions higher, and a profile whose workload is unknown, or of a version
    that is not of the form N.N... (so not ordered), lowest."""
    version = workload_version(manifest)
    return tuple(int(part) for part in version.split(".")) if orderable(version) else ()


def trained_by(manifest: Mapping[str, Any]) -> str:
    version = workload_version(manifest)
    if not version:
        return "a workload of unknown version (its manifest names none)"
    if not orderable(version):
        return f"workload version {version!r} ({UNORDERED}: ordered below every other)"
    return f"workload version {version}"
