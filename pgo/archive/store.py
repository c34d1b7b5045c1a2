"""The profile archive's store: writing, locking, promoting, verifying and pruning its entries.

What an entry is, its files and kinds: pgo/archive/model.py.

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
(`pgo archive verify` says what is wrong): "latest" trusts no manifest, and takes
no profile.tar.xz, that sha256sums.txt does not prove. GCC also checksums each
function's source file path and line: a profile applies in full only
to builds from the same source path, which pgo/build/source.py gives every build of one
product line (its line's tree in the download cache), so a profile of 10.11.18 keeps
every function 10.11.19 did not change or move; other source is stale: the optimised build fails when GCC discarded the
profile of more than 1% of its functions, or when fewer than 90% of the hot
objects that got a profile in the training build get one now, unless
--max-mismatch / --min-hot-coverage say otherwise or --accept-stale accepts any
staleness short of no profile at all.
"""

import fcntl
import hashlib
import io
import os
import shutil
import socket
import tarfile
import tempfile
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pgo import PipelineError
from pgo.archive.model import (
    ARCHIVE,
    BUILDBOT_ENV,
    DAMAGE,
    KIND,
    KINDS,
    MANIFEST,
    MANIFEST_FORMAT,
    RANK,
    STAGED_KIND,
    UNORDERED,
    Entry,
    Gone,
    build_root,
    damage,
    orderable,
    workload_version,
)
from pgo.base import atomic, process
from pgo.base.checksums import SUMS, sha256_file
from pgo.base.protocol import Variant
from pgo.base.versions import version_line
from pgo.core import contract, profile
from pgo.core.toolchain import config_flags, gcov_binary
from pgo.core.workdir import read_json


def compiler_target(cc):
    result = process.run([cc, "-dumpmachine"])
    if result.returncode != 0 or not result.stdout.strip():
        raise PipelineError(f"'{cc} -dumpmachine' failed: cannot tell the compiler's target platform")
    return result.stdout.strip()


# --- entries ------------------------------------------------------------------

def kind_of(entry: Entry) -> str:
    """An entry's kind, read under its lock: never between the steps of a promotion."""
    with held(entry):
        return proven_kind(entry)


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
        source = find(build_root(settings), archived_entry(workdir, "archived"))
        verify(source)
        entry = Entry(root, source.name)
        fill = lambda partial: copy_entry(source, partial)
    else:
        manifest, files = manifest_of(workdir, kind)
        entry = Entry.of(root, manifest)
        fill = lambda partial: write_entry(partial, manifest, files)
    return place_entry(entry, root, fill, kind, out)


def place_entry(entry, root, fill, kind, out):
    """Write an entry with fill (a hidden folder renamed into place) unless it is there, intact, already; then
    settle its kind. A prune that removes it meanwhile makes it written again."""
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
    config = contract.resolved_config(workdir)
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
        # Where the training's source was: GCC names the profile of each function that is not public (static,
        # in an anonymous namespace) by its source's path too, so a build from elsewhere finds none for them
        # (cmake/pgo.cmake says so; measured with GCC 12 in docs/cmake-pgo-10.11.18-minimal/).
        "source_dir": str(workdir.src.resolve()),
        "compiler": {"cc": compiler["cc"], "version": compiler["version"], "banner": compiler["banner"],
                     "target": target},
        "cmake_args": list(config.cmake_args),
        "flags": config_flags(Variant.OPTIMIZED, config)[0],
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
    workload = workload_version(manifest)
    if workload is not None and not orderable(workload):
        # Stored, it would sort below every other profile of its line, however new its workload.
        raise PipelineError(f"profile {current_id}: its training's report names workload version {workload!r}, "
                            f"{UNORDERED}: not archived (give the workload such a version and train again)")
    return manifest, files


def existing(entry, out):
    """The same profile is archived already: fine if intact, an error if damaged (never overwritten)."""
    problems = check_sums(entry)
    if problems:
        raise PipelineError(f"profile {entry.profile_id} is archived already as {entry.name} in {entry.root}, but "
                            f"that entry is damaged ({problems[0]}); move it aside, then store again")
    out(f"profile {entry.profile_id} is archived already as {entry.name} in {entry.root}")


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
        result = process.run([tool, "merge", "-v", directory, directory, "-o", out])
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


def check_sums(entry, names=None):
    """What is wrong with an entry's files against sha256sums.txt: with those named, else with all of them."""
    if not (entry.path / SUMS).is_file():
        return [f"{SUMS} is missing"]
    listed = listed_sums(entry)
    if names is None:
        promoted = (entry.path / KIND).is_file() or KIND in listed
        names = (ARCHIVE, MANIFEST, *([KIND] if promoted else []))
    problems = [sum_problem(entry, name, listed) for name in names]
    return [problem for problem in problems if problem]


def sums_damage(entry, names=None):
    """check_sums' problems in one line that names the entry, or None."""
    problems = check_sums(entry, names)
    return f"archived profile {entry.name} is damaged: {'; '.join(problems)}" if problems else None


def damage_of(entry, names):
    """sums_damage of these files of an entry, read under its lock (never between a promotion's steps)."""
    with held(entry):
        return sums_damage(entry, names)


def proven_manifest(entry):
    """The manifest, as sha256sums.txt proves it: one changed by hand decides nothing (`latest` chooses by it)."""
    manifest = entry.manifest()
    damaged = damage_of(entry, (MANIFEST,))
    if damaged:
        raise PipelineError(damaged)
    return manifest


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
    damaged = sums_damage(entry)
    if damaged:
        raise PipelineError(damaged)
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



# --- moving an entry between archives ---------------------------------------------
# The master holds the archive of record; no folder is shared between machines. A worker stores
# its profile in a one-entry archive of its own, which the master `add`s once uploaded; a reuse
# build gets the entry the master chose as one file (`pack`), which it checks against the
# master's checksum, unpacks and `add`s to its own archive before it imports the profile.

def add(upload_root, root, out=print):
    """Store the one entry of another archive folder (a worker's upload) in root, with the kind it has there.

    It is checked in full first, as far as a machine without the profile's compiler can: its
    sha256sums.txt, the manifest inside its profile.tar.xz, every .gcda against that manifest, and
    its name against the manifest. A damaged upload is refused and root stays as it was. Returns
    the entry in root.
    """
    found = entries(upload_root) if upload_root.is_dir() else []
    if len(found) != 1:
        raise PipelineError(f"{upload_root} holds {len(found)} archived profiles, not the one of an upload: "
                            f"nothing stored in {root}")
    upload = found[0]
    with tempfile.TemporaryDirectory(prefix="pgo-add-") as scratch:
        try:
            with held(upload):
                manifest = unpack_held(upload, Path(scratch) / "profile")
                kind = proven_kind(upload)
            named = Entry.of(root, manifest).name
        except DAMAGE as e:
            raise PipelineError(f"{damage(upload, e)} (uploaded to {upload_root}): nothing stored in {root}") from e
    if named != upload.name:
        raise PipelineError(f"{upload_root}: entry {upload.name} holds the profile of {named}: "
                            f"nothing stored in {root}")
    return place_entry(Entry(root, upload.name), root, lambda partial: copy_entry(upload, partial), kind, out)


def pack(entry, tarball):
    """An entry, as its sha256sums.txt proves it, in one uncompressed tar file under its name (a one-entry
    archive to send; its profile.tar.xz is compressed already). Returns the file's sha256."""
    def fill(path):
        with held(entry):
            damaged = sums_damage(entry)
            if damaged:
                raise PipelineError(damaged)
            with tarfile.open(path, "w") as tar:
                for name in (ARCHIVE, MANIFEST, KIND, SUMS):
                    if (entry.path / name).is_file():
                        tar.add(entry.path / name, arcname=f"{entry.name}/{name}")
    tarball = Path(tarball)
    tarball.parent.mkdir(parents=True, exist_ok=True)
    atomic.place(tarball, fill)
    return sha256_file(tarball)


def unpack_sent(tarball, sha256, dest):
    """Unpack a one-entry archive that `pack` made into the folder dest, once the file's sha256 is the one
    the sender gave: a file damaged on its way is refused before anything reads it."""
    actual = sha256_file(tarball)
    if actual != sha256:
        raise PipelineError(f"{tarball} has sha256 {actual}, not {sha256} as the master sent it (damaged on its "
                            "way): nothing stored")
    try:
        with tarfile.open(tarball, "r:") as tar:
            for member in tar:
                parts = Path(member.name).parts
                # An entry's files only: <product>/<version>/<platform>/<profile id>/<file>, never a path out of dest.
                if not member.isfile() or len(parts) != 5 or Path(member.name).is_absolute() or ".." in parts:
                    raise PipelineError(f"{tarball} holds {member.name}, which is no file of an archive entry: "
                                        "nothing stored")
                target = dest.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
    except (tarfile.TarError, EOFError) as e:
        raise PipelineError(f"cannot unpack {tarball}: {e}: nothing stored") from e

# --- pruning ------------------------------------------------------------------

def prune(root, keep, dry_run, out=print):
    """Keep every release; of the nightlies, and of the pending profiles of releases never published,
    keep the newest `keep` per kind, product line, platform and config."""
    for line in sweep_leftovers(root):
        out(line)
    groups = {}
    for entry in entries(root):
        try:
            m, kind = entry.manifest(), kind_of(entry)
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
