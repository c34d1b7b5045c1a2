"""The profile archive: every release's profile kept with a manifest, verifiable and reusable.

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

An entry is written in a hidden directory next to its final place, synced, and
renamed into place. Readers never see half an entry, and rename never replaces a
non-empty directory: of two builds storing the same profile at once, the second
finds the first one's entry and leaves it alone. Prune moves an entry out of
sight before removing it. Every change of an entry (store, promote, prune), and
every read of its kind, holds the entry's lock: prune reads the kind again
under it before it removes an entry, so a profile promoted since prune read the
kinds stays, and a promotion that waited for prune finds its entry gone and
says so. A store, prune or promotion killed leaves a hidden .partial file or
folder; list, verify and prune remove those whose process (on this host) is
gone, and name those of live processes and of other hosts.

The root is --archive, else $PGO_ARCHIVE, else ~/.local/share/pgo/profiles. A
Buildbot builder points --archive at a worker directory that it uploads to the
master's archive, and every pgo step sets PGO_BUILDER and PGO_BUILD_NUMBER (the
builder's name and the build's number, pgo/protocol.py) for the manifest.

`pgo build --profile-from NAME|latest` builds with an archived profile instead
of training. "latest" is the entry, not pending, of the same product line (major.minor),
no newer than the version built, for the same target, GCC version and flags
fingerprint, trained by the newest training workload (the workload version its
training's report names: profile_load's for MariaDB), of those the newest version,
then the newest made; it says which it took, and names the newer versions it passed
over for an older workload. The import names the workload version that trained the
profile, and so do `list` and `verify` (`show`: the manifest's training). A
named profile of another product, target, GCC version or flags fingerprint is
refused before building. A damaged entry is passed over and named, never taken
(`pgo archive verify` says what is wrong). GCC also checksums each function's
source file path and line: a profile applies in full only
to builds from the same source path, which pgo/source.py gives every build of one
product line (its line's tree in the download cache), so a profile of 10.11.18 keeps
every function 10.11.19 did not change or move; other source is stale: the optimised build fails when GCC discarded the
profile of more than 1% of its functions, or when fewer than 90% of the hot
objects that got a profile in the training build get one now, unless
--max-mismatch / --min-hot-coverage say otherwise or --accept-stale accepts any
staleness short of no profile at all.
"""

import argparse
import fcntl
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pgo import PipelineError, atomic, contract, profile
from pgo.config import build_config
from pgo.errors import fail
from pgo.protocol import BUILD_NUMBER_ENV, BUILDER_ENV
from pgo.source import sha256_file, version_key, version_line
from pgo.toolchain import build_environment, config_flags, detect, fingerprint, gcov_binary
from pgo.workdir import Workdir, read_json

MANIFEST_FORMAT = 1
ARCHIVE = "profile.tar.xz"
MANIFEST = "manifest.json"
SUMS = "sha256sums.txt"
KINDS = ("release", "pending", "nightly")
RANK = {"nightly": 0, "pending": 1, "release": 2}
BUILD_KINDS = ("release", "nightly")     # what a build is meant to be; its profile is pending until published
KIND = "kind.json"
STAGED_KIND = "kind.json.next"      # a change of kind on its way (change_kind)
BUILDBOT_ENV = {"builder": BUILDER_ENV, "build_number": BUILD_NUMBER_ENV}
# A reused profile from other source loses the functions whose control flow,
# lines or source path changed (GCC discards their counters) and the objects
# that are new. Allow a
# little of both by default: 1% of the profile's functions discarded, and 90%
# of the hot coverage the training build reached.
REUSE_DISCARD_SHARE = 0.01
REUSE_COVERAGE_SHARE = 0.9


def default_root():
    if os.environ.get("PGO_ARCHIVE"):
        return Path(os.environ["PGO_ARCHIVE"]).resolve()
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return (data / "pgo" / "profiles").resolve()


def root_of(archive_option):
    return Path(archive_option).resolve() if archive_option else default_root()


def compiler_target(cc):
    result = subprocess.run([cc, "-dumpmachine"], capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.strip():
        raise PipelineError(f"'{cc} -dumpmachine' failed: cannot tell the compiler's target platform")
    return result.stdout.strip()


# --- entries ------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    root: Path
    name: str            # <product>/<version>/<platform>/<profile id>, relative to root

    @property
    def path(self):
        return self.root / self.name

    @property
    def profile_id(self):
        return self.name.rsplit("/", 1)[1]

    def manifest(self):
        try:
            return json.loads((self.path / MANIFEST).read_text())
        except (OSError, ValueError) as e:
            if not self.path.is_dir():
                raise Gone(self) from None
            raise PipelineError(f"archive entry {self.name}: unreadable {MANIFEST}: {e}") from e

    def kind(self):
        """The entry's kind, read under its lock: never between the steps of a promotion."""
        with held(self):
            return proven_kind(self)


class Gone(PipelineError):
    """An entry removed (pruned) after it was found, before it could be read or changed."""

    def __init__(self, entry):
        super().__init__(f"archived profile {entry.name} was removed meanwhile (by `pgo archive prune`, "
                         "or by hand)")


def proven_kind(entry):
    """The manifest's kind, or kind.json's once promoted: only as sha256sums.txt proves it."""
    listed = listed_sums(entry)
    if not (entry.path / KIND).is_file() and KIND not in listed:
        return entry.manifest()["kind"]
    problem = sum_problem(entry, KIND, listed)
    kind = None if problem else read_json(entry.path / KIND).get("kind")
    if kind not in KINDS:
        raise PipelineError(f"archive entry {entry.name}: {problem or f'{KIND} names no known kind'}, "
                            "so its kind is unknown (see `pgo archive verify`)")
    return kind


# What reading a damaged entry raises: an unreadable file, or a manifest of the wrong shape.
DAMAGE = (PipelineError, KeyError, TypeError, AttributeError)


def damage(entry, e):
    """What is wrong with an entry, from what reading it raised (one of DAMAGE), naming the entry."""
    if isinstance(e, PipelineError):
        return str(e)
    return f"archive entry {entry.name}: {MANIFEST} is no profile manifest ({type(e).__name__}: {e})"


def entries(root):
    """Every entry in the archive; hidden directories are unfinished writes."""
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.glob("*/*/*/*")):
        parts = path.relative_to(root).parts
        if path.is_dir() and not any(p.startswith(".") for p in parts):
            found.append(Entry(root, "/".join(parts)))
    return found


def find(root, name):
    """An entry by its name, or by its profile id alone when that is unique."""
    name = name.strip("/")
    matches = [e for e in entries(root) if name in (e.name, e.profile_id)]
    if not matches:
        raise PipelineError(f"no archived profile '{name}' in {root} (see `pgo archive list --archive {root}`)")
    if len(matches) > 1:
        raise PipelineError(f"'{name}' names {len(matches)} archived profiles: "
                            f"{', '.join(e.name for e in matches)}; give the full name")
    return matches[0]


# --- storing ------------------------------------------------------------------

def store(workdir, root, kind, out=print):
    """Archive a work directory's profile (once); return its entry.

    A trained profile gets a new entry; a reused one is copied, verified, from
    the entry it came from (a release publishes the profile it was built with).
    """
    settings = workdir.load_settings()
    if settings.profile_from:
        source = find(root_of(settings.archive), archived_entry(workdir, "archived"))
        verify(source)
        entry = Entry(root, source.name)
        fill = lambda partial: copy_entry(source, partial)
    else:
        manifest, files = manifest_of(workdir, kind)
        entry = Entry(root, f"{manifest['product']}/{manifest['version']}/{manifest['compiler']['target']}-gcc-"
                            f"{manifest['compiler']['version']}/{manifest['profile_id']}")
        fill = lambda partial: write_entry(partial, manifest, files)
    for _ in range(3):
        placed = not entry.path.exists() and write_atomically(entry, root, fill, out)
        try:
            with held(entry):
                if not placed:
                    existing(entry, out)
                settle_kind(entry, kind, out)
            return entry
        except Gone:
            out(f"the entry of profile {entry.profile_id} was removed (pruned) meanwhile: storing it again")
    raise Gone(entry)


def copy_entry(source, partial):
    """An entry's files as one state of it (the lock keeps a promotion from changing them meanwhile)."""
    with held(source):
        for name in (ARCHIVE, MANIFEST, KIND, SUMS):
            if (source.path / name).is_file():
                shutil.copy2(source.path / name, partial / name)
                with open(partial / name, "rb") as f:
                    os.fsync(f.fileno())


def write_atomically(entry, root, fill, out):
    """Fill a hidden directory, then rename it to the entry's name: all or nothing. False: it was there first."""
    def made(directory):
        directory.mkdir()
        directory.chmod(0o755)
        fill(directory)

    try:
        placed = atomic.place(entry.path, made)
    except OSError as e:
        raise PipelineError(f"cannot archive profile {entry.profile_id} in {root}: {e.strerror or e}; "
                            "nothing was stored, archived profiles are unchanged") from e
    if placed:
        sync_dir(entry.path.parent)
        out(f"archived profile {entry.profile_id} as {entry.name} in {root}")
    return placed


def manifest_of(workdir, kind):
    """The manifest of a trained work directory's profile, and its .gcda files, checked."""
    if kind not in KINDS:
        raise PipelineError(f"unknown archive kind '{kind}' (known: {', '.join(KINDS)})")
    settings = workdir.load_settings()
    config = build_config(settings.config)
    profile_dir = workdir.profile(settings)
    files = profile.gcda_files(profile_dir)
    if not files:
        raise PipelineError(f"{profile_dir} holds no .gcda files: nothing to archive")
    current_id = contract.proven_profile(workdir, settings, "archived")
    check = read_json(workdir.root / contract.PROFILE_CHECK)
    use = read_json(workdir.root / contract.PROFILE_USE)
    # The compiler that made and used the profile, as its passed check recorded it.
    compiler = use["identity"][contract.COMPILER_ID]
    functions = readable_functions(profile_dir, files, compiler["version"])
    target = compiler_target(compiler["path"])
    manifest = {
        "format": MANIFEST_FORMAT,
        "profile_id": current_id,
        "kind": kind,
        "product": config.product.name,
        "version": settings.version,
        "line": version_line(settings.version),
        "config": config.name,
        "source": read_json(workdir.root / contract.SOURCE_RECORD),
        "compiler": {"cc": compiler["cc"], "version": compiler["version"], "banner": compiler["banner"],
                     "target": target},
        "cmake_args": list(config.cmake_args),
        "flags": config_flags("optimized", config)[0],
        # As the build that used it had them: `pgo archive store` may run in another environment.
        "flags_fingerprint": use["identity"][contract.FLAGS_ID],
        "build_environment": use["identity"].get(contract.ENVIRONMENT_ID, {}),
        "training": check.get("training"),
        "profile_check": {k: v for k, v in check.items() if k not in ("training", "profile_id", "identity")},
        "optimized": {k: use[k] for k in ("hot_objects", "hot_coverage", "missing_profile", "coverage_mismatch")},
        "functions": functions,
        "files": [{"name": f.name, "size": f.stat().st_size, "sha256": sha256_file(f)} for f in files],
        "built_by": {"host": socket.gethostname(), "user": os.environ.get("USER") or str(os.getuid()),
                     **{key: os.environ.get(var) for key, var in BUILDBOT_ENV.items()}},
        "created": datetime.now(UTC).isoformat(timespec="microseconds"),
    }
    return manifest, files


def existing(entry, out):
    """The same profile is archived already: fine if intact, an error if damaged (never overwritten)."""
    problems = check_sums(entry)
    if problems:
        raise PipelineError(f"profile {entry.profile_id} is archived already as {entry.name}, but that entry is "
                            f"damaged ({problems[0]}); move it aside, then store again")
    out(f"profile {entry.profile_id} is archived already as {entry.name}")


def settle_kind(entry, wanted, out):
    """Promote an entry (held) to the kind it is stored as again, when that is higher; never demote it. Say which."""
    current = proven_kind(entry)
    if RANK[wanted] > RANK[current]:
        history = read_json(entry.path / KIND)["history"] if (entry.path / KIND).is_file() else []
        now = datetime.now(UTC).isoformat(timespec="seconds")
        change_kind(entry, atomic.json_bytes({"kind": wanted, "history": [*history, {"from": current, "to": wanted,
                                                                                     "at": now}]}))
        out(f"profile {entry.profile_id} promoted from {current} to {wanted}")
    elif wanted != current:
        out(f"profile {entry.profile_id} stays {current} (asked to store it as {wanted}: kinds are never lowered)")


def change_kind(entry, kind):
    """Replace kind.json by `kind` (bytes), and sha256sums.txt by checksums that prove it, so that a kill
    at any point leaves the old kind or the new one, never a kind.json its checksums do not prove.

    Two files cannot change in one rename, so sha256sums.txt is the commit: the new kind.json is
    staged beside the old one first, then the new checksums replace the old ones, then the staged
    file takes kind.json's place. Whoever holds the entry next (held) finishes a committed change,
    or drops a staged file the checksums do not prove.
    """
    atomic.write(entry.path / STAGED_KIND, kind)
    sync_dir(entry.path)
    write_sums(entry.path, kind)
    sync_dir(entry.path)
    os.replace(entry.path / STAGED_KIND, entry.path / KIND)
    sync_dir(entry.path)


def finish_change(entry):
    """Finish the change of kind a killed command committed, or undo the one it did not (change_kind)."""
    staged = entry.path / STAGED_KIND
    if not staged.is_file():
        return
    try:
        if listed_sums(entry).get(KIND) == sha256_file(staged):
            os.replace(staged, entry.path / KIND)
        else:
            staged.unlink()
        sync_dir(entry.path)
    except OSError as e:
        raise PipelineError(f"archived profile {entry.name}: cannot finish the change of its kind that a killed "
                            f"command left half done: {e.strerror or e}") from e


@contextmanager
def locked(entry):
    """The entry's lock: one change of it at a time (promote, store, prune), and no reader between a
    change's steps. Prune removes an entry under it, so the entry waited for may be gone (Gone), or
    another one stored under its name since: then that one is locked."""
    while True:
        try:
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            raise Gone(entry) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(entry.path)
            except FileNotFoundError:
                raise Gone(entry) from None
            mine = os.fstat(fd)
            if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
                yield
                return
        finally:
            os.close(fd)


@contextmanager
def held(entry):
    """The entry locked, and in one state: a change of its kind that a killed command left half done is
    finished or undone first."""
    with locked(entry):
        finish_change(entry)
        yield


def archived_entry(workdir, use):
    """The archive entry of a work directory's profile: the one its optimised build reused, or the one its
    archive phase stored (which proved the profile as store() does). Else an error that says the profile
    is not `use`d."""
    settings = workdir.load_settings()
    if settings.profile_from:
        contract.proven_profile(workdir, settings, use)
        return settings.profile_from
    stored = workdir.root / contract.ARCHIVE_RECORD
    if not stored.is_file():
        raise PipelineError(f"{workdir.root}: the profile is not archived (run phase archive first)")
    return read_json(stored)["entry"]


def promote(root, name, kind, out=print):
    entry = find(root, name)
    with held(entry):
        settle_kind(entry, kind, out)
    return entry


def write_entry(directory, manifest, files):
    manifest_bytes = atomic.json_bytes(manifest)
    with open(directory / ARCHIVE, "wb") as raw:
        with tarfile.open(fileobj=raw, mode="w:xz") as tar:
            add_bytes(tar, MANIFEST, manifest_bytes)
            for f in files:
                add_bytes(tar, f"profile/{f.name}", f.read_bytes())
        raw.flush()
        os.fsync(raw.fileno())
    atomic.write(directory / MANIFEST, manifest_bytes)
    write_sums(directory)
    sync_dir(directory)


def write_sums(directory, kind=None):
    """An entry's sha256sums.txt: its archive and manifest, and once promoted its kind (`kind`: kind.json's new
    bytes)."""
    sums = {name: sha256_file(directory / name) for name in (ARCHIVE, MANIFEST)}
    if kind is not None:
        sums[KIND] = hashlib.sha256(kind).hexdigest()
    atomic.write(directory / SUMS, "".join(f"{digest}  {name}\n" for name, digest in sums.items()).encode())


def add_bytes(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = int(time.time())
    tar.addfile(info, fileobj=io.BytesIO(data))


def sync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- checking -----------------------------------------------------------------

def readable_functions(directory, files, version):
    """Have this compiler's gcov-tool read every .gcda; return how many functions they hold."""
    tool = gcov_binary("gcov-tool", version)
    with tempfile.TemporaryDirectory(prefix="pgo-gcov-tool-") as scratch:
        out = Path(scratch) / "rewritten"
        # `merge` of the profile with itself, not `rewrite`: GCC 12's rewrite
        # crashes on the top-N value counters of a real server profile.
        result = subprocess.run([tool, "merge", "-v", str(directory), str(directory), "-o", str(out)],
                                capture_output=True, text=True)
        written = {p.name for p in out.glob("*.gcda")}
    errors = [line for line in result.stderr.splitlines() if not line.startswith("reading file:")]
    if result.returncode != 0:
        raise PipelineError(f"{tool} merge failed on {directory} (exit status {result.returncode}): "
                            f"{errors[-1] if errors else 'no message'}")
    # gcov-tool skips what it cannot read and still exits 0: compare what it wrote back.
    unreadable = [f.name for f in files if f.stat().st_size > 0 and f.name not in written]
    if unreadable:
        raise PipelineError(f"gcov-tool of GCC {version} cannot read {len(unreadable)} .gcda files "
                            f"({', '.join(unreadable[:3])}): {errors[-1] if errors else 'no message'}")
    return result.stdout.count("tag one function") // 2   # each function read from both inputs


def check_sums(entry):
    if not (entry.path / SUMS).is_file():
        return [f"{SUMS} is missing"]
    listed = listed_sums(entry)
    promoted = (entry.path / KIND).is_file() or KIND in listed
    problems = [sum_problem(entry, name, listed) for name in (ARCHIVE, MANIFEST, *([KIND] if promoted else []))]
    return [problem for problem in problems if problem]


def listed_sums(entry):
    """{file name: checksum} as sha256sums.txt lists them ({} without one)."""
    sums_file = entry.path / SUMS
    if not sums_file.is_file():
        return {}
    lines = sums_file.read_text(errors="replace").splitlines()
    return {name.strip(): digest for digest, _, name in (line.partition(" ") for line in lines if line.strip())}


def sum_problem(entry, name, listed):
    """What is wrong with one file of an entry against sha256sums.txt, or None."""
    if name not in listed:
        return f"{SUMS} does not list {name}"
    if not (entry.path / name).is_file():
        return f"{name} is missing"
    if sha256_file(entry.path / name) != listed[name]:
        return f"{name} does not match its checksum (truncated, corrupted or changed by hand)"
    return None


def unpack(entry, dest):
    """Check an entry completely and unpack its .gcda files into dest (created); return its manifest."""
    with held(entry):
        manifest = unpack_held(entry, dest)
    readable_functions(dest, sorted(dest.glob("*.gcda")), manifest["compiler"]["version"])
    return manifest


def unpack_held(entry, dest):
    problems = check_sums(entry)
    if problems:
        raise PipelineError(f"archived profile {entry.name} is damaged: {'; '.join(problems)}")
    manifest = entry.manifest()
    outer = (entry.path / MANIFEST).read_bytes()
    expected = {f["name"]: f for f in manifest.get("files", [])}
    seen = set()
    dest.mkdir(parents=True)
    try:
        with tarfile.open(entry.path / ARCHIVE, "r:xz") as tar:
            for member in tar:
                data = tar.extractfile(member).read() if member.isfile() else None
                name = member.name.removeprefix("profile/")
                if member.name == MANIFEST and data == outer:
                    continue
                if member.name == MANIFEST:
                    raise PipelineError(f"archived profile {entry.name}: {MANIFEST} differs from the manifest "
                                        "inside the archive")
                if data is None or "/" in name or name not in expected:
                    raise PipelineError(f"archived profile {entry.name} holds {member.name}, "
                                        "which its manifest does not list")
                if len(data) != expected[name]["size"] or hashlib.sha256(data).hexdigest() != expected[name]["sha256"]:
                    raise PipelineError(f"archived profile {entry.name}: {name} does not match its manifest")
                (dest / name).write_bytes(data)
                seen.add(name)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise PipelineError(f"archived profile {entry.name}: cannot unpack {ARCHIVE}: {e}") from e
    if seen != set(expected):
        missing = sorted(set(expected) - seen)
        raise PipelineError(f"archived profile {entry.name} lacks {len(missing)} files its manifest lists "
                            f"({', '.join(missing[:3])})")
    return manifest


def verify(entry):
    """Every check an entry can get; returns its manifest or raises PipelineError."""
    with tempfile.TemporaryDirectory(prefix="pgo-verify-") as scratch:
        return unpack(entry, Path(scratch) / "profile")


# --- reuse --------------------------------------------------------------------

def passed_over_note(problems, shown=2):
    """The refusal's note on the damaged entries `latest` passed over: the first ones in full, so
    that the one error line says what to repair even when the log of the passing-over is gone."""
    if not problems:
        return ""
    more = f"; and {len(problems) - shown} more" if len(problems) > shown else ""
    return f" (passed over {len(problems)} damaged: {'; '.join(problems[:shown])}{more})"


def latest(root, product, version, target, compiler_version, flags_fingerprint):
    """Newest compatible profile of this product line, from this version or an older one.

    A damaged entry is passed over, and named, not taken: one bad entry must not stop every
    later build that reuses profiles (the entry taken is checked in full when it is unpacked).
    """
    candidates, passed_over = [], []
    for entry in entries(root):
        try:
            m = entry.manifest()
            if (entry.kind() != "pending" and m["product"] == product and m["line"] == version_line(version)
                    and version_key(m["version"]) <= version_key(version)
                    and not incompatibilities(m, product, target, compiler_version, flags_fingerprint)):
                candidates.append(((workload_key(m), version_key(m["version"]), m["created"]), entry, m))
        except Gone:
            continue
        except DAMAGE as e:
            passed_over.append(damage(entry, e))
    for problem in passed_over:
        print(f"[import] passed over a damaged entry: {problem} (see `pgo archive verify`)", flush=True)
    if not candidates:
        raise PipelineError(f"no archived profile in {root} fits {product} {version_line(version)}.x up to "
                            f"{version} built by GCC {compiler_version} for {target} with flags "
                            f"{flags_fingerprint}" + passed_over_note(passed_over))
    # A newer training workload first: it was changed because the older one missed code that
    # matters (docs/training-limit-11.8.6-minimal-11.8/), which a newer release does not make up for.
    (workload, *newest), entry, m = max(candidates, key=lambda c: c[0])
    print(f"[import] latest is {entry.name}: {m['product']} {m['version']}, trained by {trained_by(m)}; the "
          f"newest training workload, then the newest version, of {len(candidates)} compatible profiles",
          flush=True)
    for (their_workload, *their_newest), other, theirs in sorted(candidates, key=lambda c: c[0], reverse=True):
        if their_workload < workload and their_newest > newest:
            print(f"[import] passed over {other.name} ({theirs['product']} {theirs['version']}): trained by "
                  f"{trained_by(theirs)}, older than the chosen one's", flush=True)
    return entry


def workload_version(manifest):
    """The version of the training workload that made a profile, as its training's report gave it
    (profile_load's PROFILE_LOAD_VERSION); None when the manifest records none."""
    training = manifest.get("training")
    version = training.get("workload_version") if isinstance(training, dict) else None
    return None if version is None else str(version)


def workload_key(manifest):
    """Sorts newer workload versions higher, and a profile whose workload is unknown lowest."""
    parts = (workload_version(manifest) or "").split(".")
    return tuple(int(part) for part in parts) if all(part.isdigit() for part in parts) else ()


def trained_by(manifest):
    version = workload_version(manifest)
    return f"workload version {version}" if version else "a workload of unknown version (its manifest names none)"


def incompatibilities(manifest, product, target, compiler_version, flags_fingerprint):
    """What differs between a profile and a build in ways that make the profile useless or wrong."""
    theirs = (manifest["product"], manifest["compiler"]["target"], manifest["compiler"]["version"],
              manifest["flags_fingerprint"])
    ours = (product, target, compiler_version, flags_fingerprint)
    names = ("product", "target platform", "compiler version (GCC)", "flags fingerprint")
    return [f"{name}: profile {a}, this build {b}" for name, a, b in zip(names, theirs, ours) if a != b]


def plan_reuse(args, root):
    """Choose the archived profile for a build and its limits, before anything is built.

    Returns (entry name, max discarded functions, min hot coverage).
    """
    config = build_config(args.config)
    compiler = detect(args.cc, args.cxx)
    target = compiler_target(compiler.cc)
    flags = fingerprint(config, build_environment())
    if args.profile_from == "latest":
        entry = latest(root, config.product.name, args.version, target, compiler.version, flags)
    else:
        entry = find(root, args.profile_from)
    manifest = entry.manifest()
    differs = incompatibilities(manifest, config.product.name, target, compiler.version, flags)
    if differs:
        raise PipelineError(f"archived profile {entry.name} does not fit this build: {'; '.join(differs)}")
    max_discarded, min_coverage = reuse_limits(manifest, args.accept_stale)
    if args.max_mismatch is not None:
        max_discarded = args.max_mismatch
    if args.min_hot_coverage is not None:
        min_coverage = args.min_hot_coverage
    return entry.name, max_discarded, min_coverage


def reuse_limits(manifest, accept_stale=False):
    """(max discarded functions, min hot coverage) of a build that reuses this archived profile."""
    if accept_stale:
        # Stale is accepted, a build without any profile is not.
        return manifest["functions"], 0.001
    return (int(manifest["functions"] * REUSE_DISCARD_SHARE),
            round(manifest["optimized"]["hot_coverage"] * REUSE_COVERAGE_SHARE, 3))


def import_profile(ctx, log):
    """The reuse pipeline's phase: unpack the archived profile, check it fits, say how stale it is."""
    s = ctx.settings
    entry = find(root_of(s.archive), s.profile_from)
    manifest = entry.manifest()
    differs = incompatibilities(manifest, ctx.product.name, compiler_target(ctx.compiler.cc),
                                ctx.compiler.version, fingerprint(ctx.config, ctx.environment))
    if differs:
        raise PipelineError(f"archived profile {entry.name} does not fit this build: {'; '.join(differs)}")
    # Whatever the profile directory held is no longer this build's profile, whether the import succeeds or not.
    shutil.rmtree(ctx.profile, ignore_errors=True)
    atomic.place(ctx.profile, lambda unpacking: unpack(entry, unpacking))
    source = read_json(ctx.workdir.root / contract.SOURCE_RECORD)
    stale = manifest["source"]["checksum"] != source["checksum"]
    figures = dict(manifest["profile_check"], profile_id=manifest["profile_id"], training=manifest["training"],
                   reused={"entry": entry.name, "version": manifest["version"], "created": manifest["created"],
                           "source_checksum": manifest["source"]["checksum"], "stale": stale,
                           "max_discarded_functions": s.max_mismatch, "min_hot_coverage": s.min_hot_coverage})
    contract.write(ctx, "import", contract.PROFILE_CHECK, figures)
    lines = [f"profile {manifest['profile_id']} from the archive ({entry.name}, {len(manifest['files'])} .gcda files, "
             f"{manifest['functions']} functions), trained by {trained_by(manifest)}"]
    if stale:
        lines.append(f"stale: trained on {manifest['product']} {manifest['version']} source "
                     f"{manifest['source']['checksum'][:12]}, this is {s.version} source {source['checksum'][:12]}")
    else:
        lines.append("trained on this very source")
    lines.append(f"limits: at most {s.max_mismatch} functions with a discarded profile, at least "
                 f"{s.min_hot_coverage:.0%} hot coverage (the training build had "
                 f"{manifest['optimized']['hot_coverage']:.0%})")
    for line in lines:
        log.note(line)
        print(f"[import] {line}", flush=True)


def archive_phase(ctx, log):
    """The trained pipeline's phase: keep the profile the optimised build just proved usable."""
    entry = store(ctx.workdir, root_of(ctx.settings.archive), unpublished_kind(ctx.settings),
                  out=lambda line: (log.note(line), print(f"[archive] {line}", flush=True)))
    contract.write(ctx, "archive", contract.ARCHIVE_RECORD,
                   {"root": str(entry.root), "entry": entry.name, "kind": entry.kind()})


def unpublished_kind(settings):
    """The kind a build's profile is archived as: a release's is pending until the release is published
    (after the benchmark gate; `promote`), so that a refused release never becomes `--profile-from latest`."""
    return "pending" if settings.archive_kind == "release" else settings.archive_kind


# --- pruning ------------------------------------------------------------------

def prune(root, keep, dry_run, out=print):
    """Keep every release; of the nightlies, and of the pending profiles of releases never published,
    keep the newest `keep` per kind, product line, platform and config."""
    for line in sweep_leftovers(root):
        out(line)
    groups = {}
    for entry in entries(root):
        try:
            m, kind = entry.manifest(), entry.kind()
        except Gone:
            continue
        if kind != "release":
            key = (kind, m["product"], m["line"], m["compiler"]["target"], m["compiler"]["version"], m["config"])
            groups.setdefault(key, []).append((m["created"], entry))
    removed = []
    for (kind, *_), group in groups.items():
        group.sort(key=lambda n: n[0], reverse=True)
        for _, entry in group[keep:]:
            if dry_run:
                out(f"would remove {entry.name}")
                removed.append(entry)
            elif remove_entry(entry, kind, out):
                removed.append(entry)
    return removed


def remove_entry(entry, kind, out):
    """Remove an entry prune chose as a `kind`, unless it is one no longer. Its kind is read again under
    its lock, which promote and store hold while they change it: one promoted since prune read the kinds
    stays, and one that prune holds is promoted by no one (they wait, and find it gone)."""
    try:
        with held(entry):
            now = proven_kind(entry)
            if now != kind:
                out(f"keeping {entry.name}: it is {now} now")
                return False
            out(f"removing {entry.name}")
            # Out of sight first, so that no reader finds half an entry; a killed prune's is swept.
            doomed = atomic.hidden(entry.path)
            try:
                entry.path.rename(doomed)
                shutil.rmtree(doomed)
            except OSError as e:
                raise PipelineError(f"cannot remove {entry.name}: {e.strerror or e}") from e
    except Gone:
        out(f"{entry.name} is gone already")
        return False
    return True


# --- unfinished writes --------------------------------------------------------

def sweep_leftovers(root):
    """Remove the hidden files and folders that writers on this host left unfinished and did not live
    to remove (a store, a prune or a promotion killed); return a line on each, and on each left alone:
    of a live writer, or of another host (whose processes pgo cannot see)."""
    parents = {path.parent for pattern in (f"*/*/*/.*{atomic.SUFFIX}", f"*/*/*/*/.*{atomic.SUFFIX}")
               for path in root.glob(pattern)} if root.is_dir() else set()
    told = []
    for parent in sorted(p for p in parents if not any(part.startswith(".") for part in p.relative_to(root).parts)):
        for path in atomic.sweep(parent):
            told.append(f"removed {path.relative_to(root)}: the unfinished write of pid "
                        f"{atomic.local_writer(path)} on this host, which is gone")
        for path in sorted(parent.glob(f".*{atomic.SUFFIX}")):
            pid = atomic.local_writer(path)
            told.append(f"left {path.relative_to(root)}: " + (
                f"pid {pid} on this host is still writing it" if pid is not None else
                "an unfinished write of another host; remove it by hand once no pgo there writes to this archive"))
    return told


# --- command line -------------------------------------------------------------

def register(subparsers):
    archive = subparsers.add_parser("archive", help="the profile archive: store, promote, list, show, verify, prune",
                                    description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = archive.add_subparsers(metavar="action")

    def action(name, func, help):
        parser = commands.add_parser(name, help=help)
        parser.add_argument("--archive", help="archive directory (default: $PGO_ARCHIVE or "
                            "~/.local/share/pgo/profiles)")
        parser.set_defaults(func=func)
        return parser

    store_cmd = action("store", cmd_store, "archive the profile of a trained work directory")
    store_cmd.add_argument("--workdir", required=True)
    store_cmd.add_argument("--kind", choices=KINDS,
                           help="release (kept forever), pending (a release not yet published) or nightly "
                           "(pruned); default: pending for a release build (promote it once published), "
                           "nightly for a nightly")
    promote_cmd = action("promote", cmd_promote, "raise an archived profile's kind, e.g. to release once published")
    promote_cmd.add_argument("name", nargs="?", help="entry name or profile id")
    promote_cmd.add_argument("--workdir", help="instead of a name: the profile the work directory archived "
                             "(default --archive: the work directory's)")
    promote_cmd.add_argument("--kind", choices=KINDS, default="release", help="default: release")
    list_cmd = action("list", cmd_list, "list the archived profiles")
    list_cmd.add_argument("--json", action="store_true")
    show = action("show", cmd_show, "print an archived profile's manifest")
    show.add_argument("name", help="entry name or profile id")
    verify_cmd = action("verify", cmd_verify, "check checksums, manifest and every .gcda of one or all entries")
    verify_cmd.add_argument("name", nargs="?", help="entry name or profile id (default: all)")
    prune_cmd = action("prune", cmd_prune, "remove old nightly profiles (releases are always kept)")
    prune_cmd.add_argument("--keep", type=int, default=10, help="nightlies kept per product line (default 10)")
    prune_cmd.add_argument("--dry-run", action="store_true")
    archive.set_defaults(func=lambda args: archive.print_help() or 2)


def cmd_store(args):
    workdir = Workdir(args.workdir)
    settings = workdir.load_settings()
    root = root_of(args.archive or settings.archive)
    store(workdir, root, args.kind or unpublished_kind(settings))


def cmd_promote(args):
    if bool(args.name) == bool(args.workdir):
        raise PipelineError("give the archived profile's name or --workdir (one of them)")
    if args.name:
        promote(root_of(args.archive), args.name, args.kind)
        return
    # The archive the work directory's build stored into and reused from, as `store` takes it.
    workdir = Workdir(args.workdir)
    promote(root_of(args.archive or workdir.load_settings().archive), archived_entry(workdir, "promoted"), args.kind)


def cmd_list(args):
    """Every entry, the damaged ones too (kind "damaged" and what is wrong): one bad entry hides no other."""
    root = root_of(args.archive)
    leftovers = sweep_leftovers(root)
    rows = []
    for entry in entries(root):
        try:
            m = entry.manifest()
            rows.append({"name": entry.name, "kind": entry.kind(), "config": m["config"], "created": m["created"],
                         "workload_version": workload_version(m), "gcda_files": len(m["files"]),
                         "builder": m["built_by"].get("builder")})
        except Gone:
            continue
        except DAMAGE as e:
            rows.append({"name": entry.name, "kind": "damaged", "problem": damage(entry, e)})
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"no archived profiles in {root}")
    for row in [] if args.json else rows:
        trained = f"workload {row['workload_version'] or '?':<3}" if "created" in row else ""
        print(f"{row['name']:<70} {row['kind']:<8} {row.get('config', '-'):<10} {trained:<12} "
              f"{row.get('created', row.get('problem'))}")
    # Beside the JSON, not in it: what parses the rows gets entries only.
    for line in leftovers:
        print(line, file=sys.stderr if args.json else sys.stdout)
    damaged = [row["problem"] for row in rows if row["kind"] == "damaged"]     # each names its entry
    if damaged:
        return fail("pgo", f"{len(damaged)} of {len(rows)} archived profiles damaged: {'; '.join(damaged)} "
                           "(see `pgo archive verify`)")
    return 0


def cmd_show(args):
    print(json.dumps(find(root_of(args.archive), args.name).manifest(), indent=2, sort_keys=True))


def cmd_verify(args):
    root = root_of(args.archive)
    for line in sweep_leftovers(root):
        print(line)
    chosen = [find(root, args.name)] if args.name else entries(root)
    if not chosen:
        raise PipelineError(f"no archived profiles in {root}")
    failed = 0
    for entry in chosen:
        try:
            manifest = verify(entry)
            print(f"ok      {entry.name} ({len(manifest['files'])} .gcda files, {manifest['functions']} functions, "
                  f"trained by {trained_by(manifest)})")
        except Gone as e:
            print(f"gone    {entry.name}: {e}")
        except PipelineError as e:
            failed += 1
            print(f"FAILED  {entry.name}: {e}")
    if failed:
        return fail("pgo", f"{failed} of {len(chosen)} archived profiles failed verification")
    return 0


def cmd_prune(args):
    if args.keep < 1:
        raise PipelineError("--keep must be at least 1")
    removed = prune(root_of(args.archive), args.keep, args.dry_run)
    print(f"{'would remove' if args.dry_run else 'removed'} {len(removed)} nightly profiles")

