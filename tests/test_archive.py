"""The profile archive and builds that reuse it, on the fixture project: real builds, real gcov-tool."""

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pgo.archive import model as archive_model, store as archive
from pgo.base import checksums

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixture"
HOT_LOOP_LINE = "h = (h << 5) | (h >> 27);"


def pgo(*args, archive_root, limit_file_size=None):
    env = {**os.environ, "PGO_ARCHIVE": str(archive_root)}
    env.pop("PGO_BUILDER", None)
    def limit_size():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size, limit_file_size))
    preexec = limit_size if limit_file_size is not None else None
    return subprocess.run([sys.executable, "-m", "pgo", *map(str, args)], cwd=REPO, env=env,
                          capture_output=True, text=True, preexec_fn=preexec)


def ok(result):
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def one_line_error(result, *phrases):
    assert result.returncode != 0, result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("pgo: error:")]
    assert len(errors) == 1, result.stderr
    for phrase in phrases:
        assert phrase in errors[0], errors[0]
    return errors[0]


def build(workdir, archive_root, *extra, version="1.0.0", source=FIXTURE):
    return pgo("build", "--version", version, "--config", "fixture", "--source", source,
               "--workdir", workdir, *extra, archive_root=archive_root)


def store(workdir, root, *extra, **limits):
    return pgo("archive", "store", "--workdir", workdir, "--archive", root, *extra, archive_root=root, **limits)


def fixture_source(directory, version, old=None, new=None, file="hot.c"):
    shutil.copytree(FIXTURE, directory)
    (directory / "VERSION").write_text(version + "\n")
    if old:
        changed = directory / "src" / file
        assert old in changed.read_text()
        changed.write_text(changed.read_text().replace(old, new))
    return directory


def text_section(binary, scratch):
    out = scratch / (binary.parent.parent.parent.name + ".text")
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.text", binary, out], check=True)
    return out.read_bytes()


def only_entry(root):
    found = archive.entries(root)
    assert len(found) == 1, found
    return found[0]


def hidden_leftovers(root):
    return [p for p in root.rglob(".*")]


def rewrite_sums(entry_path):
    """Checksums that agree with whatever the entry now holds: only deeper checks can catch a change."""
    names = [name for name in (archive_model.ARCHIVE, archive_model.MANIFEST, archive_model.KIND)
             if (entry_path / name).is_file()]
    lines = [f"{archive.sha256_file(entry_path / name)}  {name}\n" for name in names]
    (entry_path / checksums.SUMS).write_text("".join(lines))


def snapshot(directory):
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One trained fixture build, archived; tests copy the archive before touching it."""
    base = tmp_path_factory.mktemp("trained")
    root = base / "archive"
    ok(build(base / "work", root))
    ok(pgo("archive", "promote", "--workdir", base / "work", archive_root=root))     # as if published
    return base / "work", root


@pytest.fixture
def archive_copy(trained, tmp_path):
    root = tmp_path / "archive"
    shutil.copytree(trained[1], root)
    return root


# --- storing and reading ------------------------------------------------------

def test_training_build_archives_its_profile_with_a_full_manifest(trained):
    work, root = trained
    entry = only_entry(root)
    manifest = entry.manifest()
    check = json.loads((work / "profile-check.json").read_text())
    info = json.loads((work / "build-info.json").read_text())
    assert entry.name == f"fixture/1.0.0/{manifest['compiler']['target']}-gcc-{info['compiler']['version']}/" \
                         f"{check['profile_id']}"
    assert manifest["profile_id"] == info["profile_id"] == check["profile_id"]
    assert manifest["compiler"]["version"] == info["compiler"]["version"]
    assert manifest["flags_fingerprint"] == info["flags_fingerprint"]
    assert manifest["source"]["checksum"] == info["source"]["checksum"]
    assert manifest["kind"] == "pending" and archive.kind_of(entry) == "release" and manifest["line"] == "1.0"
    assert len(manifest["files"]) == check["gcda_files"] == len(list((work / "profile").glob("*.gcda")))
    assert manifest["functions"] >= 3          # main, hot_digest, cold_digest
    assert manifest["optimized"]["hot_coverage"] == 1.0
    assert manifest["built_by"]["host"]
    assert subprocess.run(["sha256sum", "-c", checksums.SUMS], cwd=entry.path, capture_output=True).returncode == 0
    assert json.loads((work / "archive.json").read_text())["entry"] == entry.name

    listed = json.loads(ok(pgo("archive", "list", "--json", archive_root=root)).stdout)
    assert [row["name"] for row in listed] == [entry.name]
    assert json.loads(ok(pgo("archive", "show", entry.profile_id, archive_root=root)).stdout) == manifest
    assert "ok " in ok(pgo("archive", "verify", archive_root=root)).stdout


def test_storing_the_same_profile_again_changes_nothing(trained, archive_copy):
    work, _ = trained
    before = snapshot(archive_copy)
    result = ok(store(work, archive_copy))
    assert "archived already" in result.stdout
    assert snapshot(archive_copy) == before


def test_buildbot_names_the_builder_in_the_manifest(trained, tmp_path):
    work, _ = trained
    env = {**os.environ, "PGO_BUILDER": "pgo-release-amd64", "PGO_BUILD_NUMBER": "42"}
    subprocess.run([sys.executable, "-m", "pgo", "archive", "store", "--workdir", work, "--kind", "nightly",
                    "--archive", tmp_path / "a"], cwd=REPO, env=env, check=True, capture_output=True)
    built_by = only_entry(tmp_path / "a").manifest()["built_by"]
    assert (built_by["builder"], built_by["build_number"]) == ("pgo-release-amd64", "42")


# --- reuse --------------------------------------------------------------------

def test_reused_profile_from_another_workdir_gives_the_trained_binary(trained, tmp_path):
    work, root = trained
    reuse = tmp_path / "reuse"
    result = ok(build(reuse, root, "--profile-from", "latest"))
    assert "[import] trained on this very source" in result.stdout
    assert not (reuse / "build" / "instrumented-install").exists()   # no training: one build
    use = json.loads((reuse / "profile-use.json").read_text())
    # Another work directory, the same shared source tree: GCC finds every function where
    # the training saw it.
    assert use["hot_coverage"] == 1.0 and use["coverage_mismatch"] == 0 and use["source_moved"] == 0
    assert json.loads((reuse / "build-info.json").read_text())["profile_id"] == only_entry(root).profile_id

    ok(build(tmp_path / "plain", root, "--pgo", "off"))
    trained_text = text_section(work / "stage" / "bin" / "fixture", tmp_path)
    assert text_section(reuse / "stage" / "bin" / "fixture", tmp_path) == trained_text
    assert text_section(tmp_path / "plain" / "stage" / "bin" / "fixture", tmp_path) != trained_text


def test_incompatible_profile_is_refused_before_anything_is_built(archive_copy, tmp_path):
    entry = only_entry(archive_copy)
    manifest = entry.manifest()
    manifest["compiler"]["version"] = "11.9.9"
    manifest["flags_fingerprint"] = "0000000000000000"
    (entry.path / archive_model.MANIFEST).write_text(json.dumps(manifest))
    rewrite_sums(entry.path)
    refused = build(tmp_path / "w", archive_copy, "--profile-from", entry.profile_id)
    one_line_error(refused, "does not fit", "compiler version (GCC): profile 11.9.9, this build",
                          "flags fingerprint: profile 0000000000000000")
    assert "source" not in refused.stdout and not (tmp_path / "w").exists()
    one_line_error(build(tmp_path / "w", archive_copy, "--profile-from", "latest"), "no archived profile", "fits")
    one_line_error(build(tmp_path / "w", archive_copy, "--profile-from", "1.0.0-nosuchprofile"),
                   "no archived profile '1.0.0-nosuchprofile'")


def test_stale_profile_needs_explicit_acceptance(archive_copy, tmp_path):
    # Lines that moved: GCC drops the function's counters ("source locations ... have changed").
    moved = fixture_source(tmp_path / "moved-src", "1.0.1", HOT_LOOP_LINE, "\n\n" + HOT_LOOP_LINE)
    one_line_error(build(tmp_path / "moved", archive_copy, "--profile-from", "latest", version="1.0.1",
                         source=moved), "coverage-mismatch", "limit 0")
    result = ok(build(tmp_path / "moved", archive_copy, "--profile-from", "latest", "--accept-stale", "--fresh",
                      version="1.0.1", source=moved))
    assert "[import] stale: trained on fixture 1.0.0" in result.stdout
    assert json.loads((tmp_path / "moved" / "profile-check.json").read_text())["reused"]["stale"] is True
    use = json.loads((tmp_path / "moved" / "profile-use.json").read_text())
    assert use["source_moved"] >= 1 and use["coverage_mismatch"] >= use["source_moved"]

    changed = fixture_source(tmp_path / "changed-src", "1.0.1", HOT_LOOP_LINE, HOT_LOOP_LINE + " if (h & 1) words++;")
    work = tmp_path / "changed"
    refused = build(work, archive_copy, "--profile-from", "latest", version="1.0.1", source=changed)
    one_line_error(refused, "coverage-mismatch", "limit 0")
    assert not (work / "stage").exists() and not (work / "build-info.json").exists()

    ok(build(work, archive_copy, "--profile-from", "latest", "--accept-stale", "--fresh",
                        version="1.0.1", source=changed))
    use = json.loads((work / "profile-use.json").read_text())
    # GCC dropped hot_digest's counters: its object counts as without profile (issue 28).
    assert use["coverage_mismatch"] >= 1 and use["hot_coverage"] == 0.5 and use["stale"] is True
    assert use["mismatch_hot_objects"] == ["CMakeFiles/hot.dir/src/hot.c"]
    assert (work / "stage" / "bin" / "fixture").is_file()


def test_a_profile_carries_to_the_next_version_of_its_line(archive_copy, tmp_path):
    # 1.0.1 changes nothing the training ran, and moves no function: built at the line's one
    # source path (src/fixture-1.0), every function keeps the profile 1.0.0 trained.
    newer = fixture_source(tmp_path / "newer-src", "1.0.1")
    main = newer / "src" / "main.c"
    main.write_text(main.read_text() + "\n/* 1.0.1: a comment after every function */\n")
    result = ok(build(tmp_path / "newer", archive_copy, "--profile-from", "latest", version="1.0.1", source=newer))
    assert "[import] stale: trained on fixture 1.0.0" in result.stdout
    use = json.loads((tmp_path / "newer" / "profile-use.json").read_text())
    assert use["hot_coverage"] == 1.0 and use["coverage_mismatch"] == 0 and use["source_moved"] == 0
    assert os.readlink(tmp_path / "newer" / "src").endswith("/src/fixture-1.0")
    # The same source at another path (another cache, as per version before): GCC drops the profile
    # of every function, because each one's source path changed. No hot object has a profile then,
    # which no --accept-stale makes a PGO build (issue 28).
    elsewhere = build(tmp_path / "elsewhere", archive_copy, "--profile-from", "latest", "--accept-stale",
                      "--cache", tmp_path / "other-cache", version="1.0.1", source=newer)
    use = json.loads((tmp_path / "elsewhere" / "profile-use.json").read_text())
    one_line_error(elsewhere, "no hot object got a profile")
    assert use["source_moved"] >= 2 and use["hot_coverage"] == 0 and use["hot_in_effect"] == 2


def test_a_newer_version_line_does_not_take_an_older_lines_profile(archive_copy, tmp_path):
    other_line = fixture_source(tmp_path / "src", "1.1.0")
    one_line_error(build(tmp_path / "w", archive_copy, "--profile-from", "latest", version="1.1.0",
                         source=other_line), "no archived profile", "fixture 1.1.x")


# --- faults -------------------------------------------------------------------

def test_truncated_archive_fails_verify_and_reuse_and_is_never_overwritten(trained, archive_copy, tmp_path):
    entry = only_entry(archive_copy)
    tarball = entry.path / archive_model.ARCHIVE
    tarball.write_bytes(tarball.read_bytes()[:100])
    damaged = snapshot(archive_copy)

    result = pgo("archive", "verify", archive_root=archive_copy)
    assert result.returncode == 1 and "profile.tar.xz does not match its checksum" in result.stdout

    work = tmp_path / "w"
    one_line_error(build(work, archive_copy, "--profile-from", "latest"), "is damaged")
    assert not (work / "build" / "pgo").exists() and not (work / "profile-check.json").exists()
    assert not list(work.glob("profile*/*.gcda"))

    one_line_error(store(trained[0], archive_copy), "archived already", "damaged", "move it aside")
    assert snapshot(archive_copy) == damaged


def test_corrupted_archive_with_consistent_checksums_is_caught(archive_copy):
    entry = only_entry(archive_copy)
    tarball = entry.path / archive_model.ARCHIVE
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tarball.write_bytes(bytes(data))
    rewrite_sums(entry.path)
    result = pgo("archive", "verify", entry.name, archive_root=archive_copy)
    assert result.returncode == 1 and "cannot unpack profile.tar.xz" in result.stdout, result.stdout


@pytest.mark.parametrize("fault, message", [
    ("outer manifest edited", "differs from the manifest inside the archive"),
    ("a .gcda altered", "does not match its manifest"),
    ("a .gcda missing", "lacks 1 files its manifest lists"),
    ("a .gcda unreadable", "cannot read 1 .gcda files"),
])
def test_manifest_that_does_not_match_its_files_fails_verify(trained, archive_copy, tmp_path, fault, message):
    work, _ = trained
    entry = only_entry(archive_copy)
    manifest = entry.manifest()
    files = sorted((work / "profile").glob("*.gcda"))
    altered = tmp_path / "profile"
    shutil.copytree(work / "profile", altered)
    if fault == "outer manifest edited":
        manifest["version"] = "1.0.9"
        (entry.path / archive_model.MANIFEST).write_text(json.dumps(manifest))
        rewrite_sums(entry.path)
    else:
        if fault == "a .gcda altered":
            (altered / files[0].name).write_bytes(files[0].read_bytes()[:-4])
        elif fault == "a .gcda missing":
            (altered / files[0].name).unlink()
        else:
            (altered / files[0].name).write_bytes(b"not a gcov data file")
            record = next(f for f in manifest["files"] if f["name"] == files[0].name)
            record.update(size=20, sha256=archive.sha256_file(altered / files[0].name))
        shutil.rmtree(entry.path)
        entry.path.mkdir()
        archive.write_entry(entry.path, manifest, sorted(altered.glob("*.gcda")))
    healthy = tmp_path / "healthy"
    ok(store(work, healthy))
    other = only_entry(healthy)
    shutil.copytree(other.path, archive_copy / "fixture" / "1.0.0" / other.name.split("/")[2] / "healthy-copy")

    result = pgo("archive", "verify", archive_root=archive_copy)
    assert result.returncode == 1
    assert f"FAILED  {entry.name}" in result.stdout and message in result.stdout, result.stdout
    assert "ok      fixture/1.0.0/" in result.stdout and "healthy-copy" in result.stdout
    one_line_error(result, "1 of 2 archived profiles failed verification")


def test_disk_full_while_archiving_stores_nothing_and_keeps_what_was_there(trained, tmp_path):
    work, _ = trained
    mount = tmp_path / "small-disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mount],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root); test_file_size_limit covers the same path")
    try:
        ok(store(work, mount))
        first = only_entry(mount)
        kept = snapshot(mount)
        newer = fixture_source(tmp_path / "src", "1.0.1")
        ok(build(tmp_path / "newer", tmp_path / "elsewhere", version="1.0.1", source=newer))
        filler = mount / "filler"
        with open(filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"\0" * 1024)
            except OSError:
                pass
        one_line_error(store(tmp_path / "newer", mount), "No space left on device", "nothing was stored")
        filler.unlink()
        assert snapshot(mount) == kept
        assert archive.entries(mount) == [first] and not hidden_leftovers(mount)
        ok(pgo("archive", "verify", archive_root=mount))
        ok(store(tmp_path / "newer", mount))
        assert len(archive.entries(mount)) == 2
    finally:
        subprocess.run(["umount", mount], check=True)


def test_file_size_limit_while_archiving_stores_nothing(trained, archive_copy, tmp_path):
    newer = fixture_source(tmp_path / "src", "1.0.1")
    ok(build(tmp_path / "newer", tmp_path / "elsewhere", version="1.0.1", source=newer))
    kept = snapshot(archive_copy)
    # Above the size of gcov-tool's rewritten .gcda files (~200 bytes), below the archive's (~1200).
    one_line_error(store(tmp_path / "newer", archive_copy, limit_file_size=1000),
                   "File too large", "nothing was stored")
    assert snapshot(archive_copy) == kept and not hidden_leftovers(archive_copy)


def test_builds_archiving_at_once_neither_damage_nor_duplicate(trained, tmp_path):
    work, _ = trained
    newer = fixture_source(tmp_path / "src", "1.0.1")
    ok(build(tmp_path / "newer", tmp_path / "elsewhere", version="1.0.1", source=newer))
    root = tmp_path / "archive"
    workdirs = [work, work, work, tmp_path / "newer", tmp_path / "newer"]
    for _ in range(2):
        with ThreadPoolExecutor(len(workdirs)) as pool:
            results = list(pool.map(lambda w: store(w, root), workdirs))
        for result in results:
            ok(result)
        assert len(archive.entries(root)) == 2 and not hidden_leftovers(root)
    stored = [r for r in results if "archived profile" in r.stdout]
    assert len(stored) + sum("archived already" in r.stdout for r in results) == len(workdirs)
    assert ok(pgo("archive", "verify", archive_root=root)).stdout.count("ok ") == 2


def test_prune_keeps_releases_and_the_newest_nightlies(trained, tmp_path):
    work, _ = trained
    root = tmp_path / "archive"
    ok(store(work, root, "--kind", "release"))
    for patch in (1, 2, 3):
        src = fixture_source(tmp_path / f"src{patch}", f"1.0.{patch}")
        ok(build(tmp_path / f"w{patch}", root, "--archive-kind", "nightly", version=f"1.0.{patch}", source=src))
    dry = ok(pgo("archive", "prune", "--keep", "2", "--dry-run", archive_root=root))
    assert "would remove fixture/1.0.1/" in dry.stdout and len(archive.entries(root)) == 4
    ok(pgo("archive", "prune", "--keep", "2", archive_root=root))
    assert sorted(e.name.split("/")[1] for e in archive.entries(root)) == ["1.0.0", "1.0.2", "1.0.3"]
    assert not hidden_leftovers(root)
    one_line_error(pgo("archive", "prune", "--keep", "0", archive_root=root), "--keep must be at least 1")


# --- kinds --------------------------------------------------------------------

def kinds(root):
    return [row["kind"] for row in json.loads(ok(pgo("archive", "list", "--json", archive_root=root)).stdout)]


def test_a_release_profile_is_pending_until_published_and_never_latest_before(tmp_path):
    root = tmp_path / "archive"
    work = tmp_path / "work"
    result = ok(build(work, root))
    # The benchmark gate refused the release: its profile is no `latest`.
    one_line_error(build(tmp_path / "reuse", root, "--profile-from", "latest"), "no archived profile", "fits")
    assert kinds(root) == ["pending"] and json.loads((work / "archive.json").read_text())["kind"] == "pending"
    assert "promoted" not in result.stdout
    promoted = ok(pgo("archive", "promote", "--workdir", work, archive_root=root))
    entry = only_entry(root)
    assert f"profile {entry.profile_id} promoted from pending to release" in promoted.stdout
    assert kinds(root) == ["release"]
    ok(build(tmp_path / "reuse", root, "--profile-from", "latest"))
    ok(pgo("archive", "verify", archive_root=root))


def test_a_nightly_profile_stored_again_as_a_release_is_promoted_never_demoted(tmp_path):
    root = tmp_path / "archive"
    work = tmp_path / "work"
    ok(build(work, root, "--archive-kind", "nightly"))
    assert kinds(root) == ["nightly"]
    stored = ok(store(work, root, "--kind", "release"))
    assert "promoted from nightly to release" in stored.stdout and kinds(root) == ["release"]
    again = ok(store(work, root, "--kind", "nightly"))
    assert "stays release" in again.stdout and kinds(root) == ["release"]
    entry = only_entry(root)
    history = json.loads((entry.path / archive_model.KIND).read_text())["history"]
    assert [(h["from"], h["to"]) for h in history] == [("nightly", "release")]
    # A promoted nightly is a release: prune keeps it.
    ok(pgo("archive", "prune", "--keep", "1", archive_root=root))
    assert archive.entries(root) == [entry]
    one_line_error(pgo("archive", "promote", "--workdir", work, entry.name, archive_root=root), "one of them")


def test_one_damaged_entry_hides_no_other_from_the_list(archive_copy):
    """An entry half-copied by hand (its manifest cut short) is listed as damaged, beside the intact one."""
    intact = only_entry(archive_copy)
    broken = intact.path.parent / "0123456789ab"
    broken.mkdir()
    (broken / archive_model.MANIFEST).write_text((intact.path / archive_model.MANIFEST).read_text()[:100])
    listed = pgo("archive", "list", archive_root=archive_copy)
    error = one_line_error(listed, "1 of 2 archived profiles damaged", broken.name, "unreadable manifest.json")
    assert intact.name not in error
    assert any(line.startswith(intact.name) and " release " in line for line in listed.stdout.splitlines())
    assert any(line.startswith(f"{intact.path.parent.relative_to(archive_copy)}/{broken.name}") and " damaged " in line
               for line in listed.stdout.splitlines()), listed.stdout
    as_json = pgo("archive", "list", "--json", archive_root=archive_copy)
    assert as_json.returncode == 1
    rows = json.loads(as_json.stdout)
    assert [(row["name"], row["kind"]) for row in rows] == sorted(
        [(intact.name, "release"), (f"{intact.path.parent.relative_to(archive_copy)}/{broken.name}", "damaged")])


def test_latest_passes_over_a_damaged_entry_names_it_and_takes_the_intact_one(archive_copy, tmp_path):
    """One bad entry must not stop every nightly that reuses profiles, nor be taken silently."""
    intact = only_entry(archive_copy)
    broken = intact.path.parent / "0123456789ab"
    broken.mkdir()
    (broken / archive_model.MANIFEST).write_text((intact.path / archive_model.MANIFEST).read_text()[:100])
    reuse = tmp_path / "reuse"
    result = ok(build(reuse, archive_copy, "--profile-from", "latest"))
    passed_over = [line for line in result.stdout.splitlines() if line.startswith("[import] passed over")]
    assert len(passed_over) == 1 and broken.name in passed_over[0] and "unreadable manifest.json" in passed_over[0]
    assert json.loads((reuse / "build-info.json").read_text())["profile_id"] == intact.profile_id
    # With nothing else to take, the refusal says what it passed over, and why.
    shutil.rmtree(intact.path)
    one_line_error(build(tmp_path / "none", archive_copy, "--profile-from", "latest"),
                   "no archived profile", "(passed over 1 damaged: ", broken.name, "unreadable manifest.json")


def test_a_kind_changed_by_hand_is_caught_by_verify_and_taken_by_nothing(tmp_path):
    """kind.json decides what prune removes and what `latest` takes: sha256sums.txt covers it."""
    root = tmp_path / "archive"
    ok(build(tmp_path / "work", root, "--archive-kind", "nightly"))
    ok(store(tmp_path / "work", root, "--kind", "release"))
    entry = only_entry(root)
    assert ok(pgo("archive", "verify", archive_root=root)).stdout.startswith("ok ")
    promoted = (entry.path / archive_model.KIND).read_text()
    # A release demoted by hand would be pruned like a nightly.
    (entry.path / archive_model.KIND).write_text(json.dumps({"kind": "nightly", "history": []}))
    failed = pgo("archive", "verify", archive_root=root)
    assert failed.returncode == 1 and "kind.json does not match its checksum" in failed.stdout
    one_line_error(pgo("archive", "prune", "--keep", "1", archive_root=root), entry.name, "its kind is unknown")
    one_line_error(pgo("archive", "list", archive_root=root), "kind.json does not match its checksum")
    assert archive.entries(root) == [entry]
    (entry.path / archive_model.KIND).write_text(promoted)
    ok(pgo("archive", "verify", archive_root=root))

    # A pending profile (a release not yet published) made a release by a kind.json of its own.
    pending_root = tmp_path / "pending"
    ok(build(tmp_path / "unpublished", pending_root))
    pending = only_entry(pending_root)
    (pending.path / archive_model.KIND).write_text(json.dumps({"kind": "release", "history": []}))
    failed = pgo("archive", "verify", archive_root=pending_root)
    assert failed.returncode == 1 and "sha256sums.txt does not list kind.json" in failed.stdout
    one_line_error(build(tmp_path / "reuse", pending_root, "--profile-from", "latest"), pending.name,
                   "its kind is unknown")


def test_promoting_a_work_directorys_profile_promotes_it_in_the_archive_its_build_used(tmp_path):
    """Not in $PGO_ARCHIVE's: a copy of the archive there (a mirror, an upload) keeps its own kinds."""
    root, mirror, work = tmp_path / "archive", tmp_path / "mirror", tmp_path / "work"
    ok(build(work, root))
    shutil.copytree(root, mirror)
    promoted = ok(pgo("archive", "promote", "--workdir", work, archive_root=mirror))
    assert "promoted from pending to release" in promoted.stdout
    assert kinds(root) == ["release"] and kinds(mirror) == ["pending"]


def test_a_release_builds_profile_stored_by_hand_is_pending_until_published(trained, tmp_path):
    """`pgo archive store --workdir` stores as the archive phase does: no release profile before publishing."""
    work, _ = trained
    root = tmp_path / "archive"
    ok(store(work, root))
    assert kinds(root) == ["pending"]
    one_line_error(build(tmp_path / "reuse", root, "--profile-from", "latest"), "no archived profile", "fits")
    ok(pgo("archive", "promote", "--workdir", work, "--archive", root, archive_root=root))
    assert kinds(root) == ["release"]


# --- interruptions and races (issue 28) -----------------------------------------

# A pgo command whose Nth step on the archive is never taken: just before it, the process sends
# itself SIGKILL (a crash, a lost VM) or SIGSTOP (so that another command gets in between). A
# step is a call that changes the file system at or below plan["root"] (with plan["reads"], also
# one that opens or locks there), counted once a call touched plan["after"] (if given); with
# plan["only"], only calls of those names count. The code under test runs unchanged.
INTERRUPTED = r"""
import builtins, fcntl, io, json, os, signal, sys
from pgo import cli

plan = json.loads(sys.argv[1])
steps, started = 0, "after" not in plan

def place(arg, dir_fd=None):
    if isinstance(arg, int):
        return os.readlink(f"/proc/self/fd/{arg}")
    path = os.fsdecode(os.fspath(arg))
    return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path) if dir_fd is not None else os.path.abspath(path)

def within(path, top):
    return path == top or path.startswith(top + os.sep)

def step(name, real, classify):
    def call(*args, **kw):
        global steps, started
        paths, changes = classify(*args, **kw)
        places = [place(p, kw.get("dir_fd")) for p in paths]
        if not started:
            started = any(within(p, plan["after"]) for p in places)
        elif ((changes or plan.get("reads")) and name in plan.get("only", [name])
              and any(within(p, plan["root"]) for p in places)):
            steps += 1
            if steps == plan["at"]:
                print(f"{name}({', '.join(places)})", file=sys.stderr, flush=True)
                os.kill(os.getpid(), getattr(signal, "SIG" + plan.get("signal", "KILL")))
        return real(*args, **kw)
    return call

def opened(file, mode="r", *args, **kw):
    return ([] if isinstance(file, int) else [file]), any(c in mode for c in "wax+")

def os_opened(path, flags, *args, **kw):
    return [path], bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))

one = lambda path, *args, **kw: ([path], True)
two = lambda src, dst, *args, **kw: ([src, dst], True)
for name, classify in (("unlink", one), ("rmdir", one), ("mkdir", one), ("fsync", one),
                       ("replace", two), ("rename", two), ("open", os_opened)):
    setattr(os, name, step(name, getattr(os, name), classify))
io.open = builtins.open = step("open", io.open, opened)
fcntl.flock = step("flock", fcntl.flock, lambda fd, operation: ([fd], False))
sys.exit(cli.main(sys.argv[2:]))
"""


def interrupted(plan, *args, archive_root, wait=True):
    """Run `pgo ARGS` as INTERRUPTED says; the finished process, or the running one (wait=False)."""
    env = {**os.environ, "PGO_ARCHIVE": str(archive_root), "PYTHONPATH": str(REPO)}
    process = subprocess.Popen([sys.executable, "-c", INTERRUPTED, json.dumps(plan), *map(str, args)], cwd=REPO,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return process
    out, err = process.communicate(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def listed(root):
    """{entry name: kind} as `pgo archive list` tells them; it must succeed."""
    rows = json.loads(ok(pgo("archive", "list", "--json", archive_root=root)).stdout)
    return {row["name"]: row["kind"] for row in rows}


@pytest.fixture(scope="module")
def nightlies(tmp_path_factory):
    """Two nightly builds of the line, 1.0.1 and then 1.0.2, archived; tests copy the archive."""
    base = tmp_path_factory.mktemp("nightlies")
    for patch in (1, 2):
        src = fixture_source(base / f"src{patch}", f"1.0.{patch}")
        ok(build(base / f"w{patch}", base / "archive", "--archive-kind", "nightly", version=f"1.0.{patch}", source=src))
    older, newer = archive.entries(base / "archive")
    return base, older, newer


def nightlies_copy(nightlies, tmp_path):
    root = tmp_path / "archive"
    shutil.copytree(nightlies[0] / "archive", root)
    return root, *(archive_model.Entry(root, entry.name) for entry in nightlies[1:])


# Every change to an archive entry, killed before each of its steps: the archive it starts from
# (both nightlies; 1.0.1's made pending by a store; 1.0.1's removed), the command, and the kind
# of 1.0.1's entry before and after the change ("absent": none).
CHANGES = {
    "promote": ("nightlies", ["archive", "promote", "{entry}", "--kind", "release"], "nightly", "release"),
    "store again as a higher kind": ("pending", ["archive", "store", "--workdir", "{work}", "--kind", "release"],
                                     "pending", "release"),
    "store a new entry": ("without it", ["archive", "store", "--workdir", "{work}", "--kind", "nightly"],
                          "absent", "nightly"),
    "prune": ("nightlies", ["archive", "prune", "--keep", "1"], "nightly", "absent"),
}


@pytest.mark.parametrize("change", CHANGES)
def test_an_archive_change_killed_at_any_step_leaves_every_entry_whole(nightlies, tmp_path, change):
    """Afterwards list, verify, store and promote work, and the entry is as before or as after, never damaged."""
    start, command, before, after = CHANGES[change]
    work = nightlies[0] / "w1"
    initial, entry, newer = nightlies_copy(nightlies, tmp_path / "initial")
    if start == "pending":
        ok(store(work, initial, "--kind", "pending"))
    elif start == "without it":
        shutil.rmtree(entry.path)
    assert listed(initial).get(entry.name, "absent") == before
    root = tmp_path / "archive"
    entry, newer = archive_model.Entry(root, entry.name), archive_model.Entry(root, newer.name)
    args = [arg.format(entry=entry.name, work=work) for arg in command] + ["--archive", root]
    step = 0
    while True:
        step += 1
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(initial, root)
        result = interrupted({"root": str(root), "at": step}, *args, archive_root=root)
        if result.returncode == 0:
            break               # the change was done before this step: every step was tried
        print(f"{change}: killed before step {step}: {result.stderr.strip()}")
        assert result.returncode == -signal.SIGKILL, result.stderr
        found = listed(root)
        assert found.get(entry.name, "absent") in (before, after) and found[newer.name] == "nightly", (step, found)
        ok(pgo("archive", "verify", archive_root=root))
        ok(store(work, root, "--kind", "nightly"))
        ok(pgo("archive", "promote", entry.name, "--kind", "release", archive_root=root))
        assert listed(root) == {entry.name: "release", newer.name: "nightly"}, step
    assert step > 3, f"{change}: the hook saw only {step - 1} steps"
    assert listed(root).get(entry.name, "absent") == after


def test_prune_keeps_an_entry_promoted_after_it_read_the_kinds(nightlies, tmp_path):
    """prune --keep 1 reads both nightlies' kinds, then stops; meanwhile 1.0.1's profile is made a release."""
    root, entry, newer = nightlies_copy(nightlies, tmp_path)
    # Stopped at its first touch of 1.0.1 after reading 1.0.2: it has read every kind, decided, acts next.
    prune = interrupted({"root": str(entry.path), "after": str(newer.path), "reads": True, "at": 1, "signal": "STOP"},
                        "archive", "prune", "--keep", "1", archive_root=root, wait=False)
    try:
        wait_until_stopped(prune)
        ok(pgo("archive", "promote", entry.name, "--kind", "release", archive_root=root))
    finally:
        prune.send_signal(signal.SIGCONT)
        out, err = prune.communicate(timeout=120)
    assert prune.returncode == 0, out + err
    assert listed(root) == {entry.name: "release", newer.name: "nightly"}, out
    ok(pgo("archive", "verify", archive_root=root))


def test_a_promotion_waits_for_a_prune_that_holds_its_entry(nightlies, tmp_path):
    """prune --keep 1 stops just before it removes 1.0.1, which it holds; a promotion of 1.0.1 waits for
    it, then says the entry is gone: never 'promoted' for an entry that is then removed."""
    root, entry, newer = nightlies_copy(nightlies, tmp_path)
    prune = interrupted({"root": str(entry.path), "at": 1, "signal": "STOP"},
                        "archive", "prune", "--keep", "1", archive_root=root, wait=False)
    promote = None
    try:
        wait_until_stopped(prune)
        promote = subprocess.Popen([sys.executable, "-m", "pgo", "archive", "promote", entry.name, "--kind", "release"],
                                   cwd=REPO, env={**os.environ, "PGO_ARCHIVE": str(root)},
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until_waiting_for_a_lock_or_done(promote)
    finally:
        prune.send_signal(signal.SIGCONT)
        prune.communicate(timeout=120)
        out, err = promote.communicate(timeout=120) if promote else ("", "")
    found = listed(root)
    assert promote.returncode != 0, f"the promotion said {out.strip()!r}; the archive holds {found}"
    one_line_error(subprocess.CompletedProcess(promote.args, promote.returncode, out, err), entry.name, "removed")
    assert found == {newer.name: "nightly"}
    ok(pgo("archive", "verify", archive_root=root))


def wait_until_stopped(process, timeout=60):
    """Until the process has stopped itself (SIGSTOP); it must not finish first."""
    status = Path(f"/proc/{process.pid}/status")
    for _ in range(timeout * 20):
        assert process.poll() is None, process.communicate()
        if "State:\tT" in status.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {process.pid} never stopped")


def wait_until_waiting_for_a_lock_or_done(process, timeout=60):
    """Until the process waits for a file lock (the kernel lists it in /proc/locks, marked '->'), or has finished."""
    for _ in range(timeout * 20):
        if process.poll() is not None:
            return
        waiting = [line.split() for line in Path("/proc/locks").read_text().splitlines() if " -> " in line]
        if any(str(process.pid) in fields for fields in waiting):
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {process.pid} neither finished nor waited for a lock")


def test_unfinished_writes_are_reported_and_swept_once_their_writer_is_dead(trained, nightlies, tmp_path):
    """list and verify name every hidden .partial write, and remove those whose process on this host is gone."""
    root, entry, newer = nightlies_copy(nightlies, tmp_path)
    # Real processes killed mid-write: a store before it renames its entry into place, a promotion
    # before it replaces its first file.
    killed_store = interrupted({"root": str(root), "at": 1, "only": ["rename"]},
                               "archive", "store", "--workdir", trained[0], "--kind", "nightly", "--archive", root,
                               archive_root=root)
    killed_promote = interrupted({"root": str(root), "at": 1, "only": ["replace"]},
                                 "archive", "promote", entry.name, archive_root=root)
    assert killed_store.returncode == killed_promote.returncode == -signal.SIGKILL
    dead = hidden_leftovers(root)
    assert len(dead) == 2, dead
    live = subprocess.Popen(["sleep", "60"])
    try:
        running = entry.path.parent / f".1.0.1-000000000000.{socket.gethostname()}.{live.pid}.partial"
        elsewhere = newer.path / f".kind.json.another-host.{live.pid}.partial"
        for leftover in (running, elsewhere):
            leftover.mkdir()
        listing = pgo("archive", "list", archive_root=root)
        assert listing.returncode == 0, listing.stderr
        for path in dead:
            assert f"removed {path.relative_to(root)}" in listing.stdout, listing.stdout
        assert f"{running.relative_to(root)}" in listing.stdout and f"pid {live.pid} on this host" in listing.stdout
        assert f"{elsewhere.relative_to(root)}" in listing.stdout and "another host" in listing.stdout
        assert sorted(hidden_leftovers(root)) == sorted([running, elsewhere])
        as_json = pgo("archive", "list", "--json", archive_root=root)
        assert as_json.returncode == 0 and len(json.loads(as_json.stdout)) == 2
        assert str(running.relative_to(root)) in as_json.stderr
        verified = pgo("archive", "verify", archive_root=root)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert f"{running.relative_to(root)}" in verified.stdout and f"{elsewhere.relative_to(root)}" in verified.stdout
    finally:
        live.kill()
        live.wait()
    assert "removed" in ok(pgo("archive", "verify", archive_root=root)).stdout
    assert hidden_leftovers(root) == [elsewhere]       # another host's: pgo cannot tell whether it lives
    assert listed(root) == {entry.name: "nightly", newer.name: "nightly"}


# --- which profile `latest` takes, and what it is called (issue 28) --------------

WORKLOAD_DEFINE = 'define WORKLOAD_VERSION "1"'


def test_latest_takes_the_newest_training_workload_and_says_which(tmp_path):
    """1.0.1's profile was trained by workload version 1; 1.0.0's again, later, by version 2."""
    root = tmp_path / "archive"
    newer_release = fixture_source(tmp_path / "src-1.0.1", "1.0.1")
    ok(build(tmp_path / "w-1.0.1", root, "--archive-kind", "nightly", version="1.0.1", source=newer_release))
    newer_workload = fixture_source(tmp_path / "src-1.0.0", "1.0.0", WORKLOAD_DEFINE, 'define WORKLOAD_VERSION "2"',
                                    file="main.c")
    ok(build(tmp_path / "w-1.0.0", root, "--archive-kind", "nightly", source=newer_workload))
    by_version = {e.name.split("/")[1]: e for e in archive.entries(root)}

    reuse = tmp_path / "reuse"
    result = ok(build(reuse, root, "--profile-from", "latest", version="1.0.1", source=newer_release))
    assert json.loads((reuse / "build-info.json").read_text())["profile_id"] == by_version["1.0.0"].profile_id
    assert by_version["1.0.1"].manifest()["training"]["workload_version"] == "1"
    assert by_version["1.0.0"].manifest()["training"]["workload_version"] == "2"
    chosen = [line for line in result.stdout.splitlines() if line.startswith("[import] latest")]
    assert len(chosen) == 1 and by_version["1.0.0"].name in chosen[0] and "workload version 2" in chosen[0], chosen
    assert any(by_version["1.0.1"].name in line and "workload version 1" in line
               for line in result.stdout.splitlines() if line.startswith("[import] passed over")), result.stdout
    imported = next(line for line in result.stdout.splitlines() if line.startswith("[import] profile "))
    assert "trained by workload version 2" in imported, imported
    assert json.loads((reuse / "profile-check.json").read_text())["training"]["workload_version"] == "2"

    # Named, not `latest`: the import still says which workload trained it.
    named = ok(build(tmp_path / "named", root, "--profile-from", by_version["1.0.1"].profile_id, version="1.0.1",
                     source=newer_release))
    assert any(line.startswith("[import] profile ") and "trained by workload version 1" in line
               for line in named.stdout.splitlines()), named.stdout
    rows = {row["name"]: row for row in json.loads(ok(pgo("archive", "list", "--json", archive_root=root)).stdout)}
    assert {name: row["workload_version"] for name, row in rows.items()} == {
        by_version["1.0.0"].name: "2", by_version["1.0.1"].name: "1"}
    text = ok(pgo("archive", "list", archive_root=root)).stdout
    assert any(line.startswith(by_version["1.0.0"].name) and "workload 2" in line for line in text.splitlines()), text
    shown = json.loads(ok(pgo("archive", "show", by_version["1.0.0"].profile_id, archive_root=root)).stdout)
    assert shown["training"]["workload_version"] == "2"


# --- what a build that reuses a profile calls it (issue 28) ----------------------

def test_a_reused_profile_keeps_its_archived_id_in_every_record(archive_copy, tmp_path):
    """1.0.1 built with 1.0.0's profile: its identity names 1.0.0's profile, which the archive holds."""
    entry = only_entry(archive_copy)
    work = tmp_path / "reuse"
    ok(build(work, archive_copy, "--profile-from", "latest", version="1.0.1",
             source=fixture_source(tmp_path / "src", "1.0.1")))
    info = json.loads((work / "build-info.json").read_text())
    state = json.loads((work / "state.json").read_text())
    assert info["profile_id"] == info["identity"]["profile_id"] == entry.profile_id
    assert {state["done"][phase]["identity"]["profile_id"] for phase in ("import", "optimized")} == {entry.profile_id}
    ok(pgo("package", "--workdir", work, "--format", "bintar", "--out", tmp_path / "out", archive_root=archive_copy))
    packaged = json.loads((tmp_path / "out" / "buildinfo.json").read_text())
    assert packaged["profile_id"] == packaged["identity"]["profile_id"] == entry.profile_id
    assert archive.find(archive_copy, packaged["identity"]["profile_id"]) == entry
    # The profile the work directory used is still proven by its id: storing and promoting it work.
    ok(store(work, tmp_path / "release-archive", "--kind", "release"))
    assert only_entry(tmp_path / "release-archive").name == entry.name
    ok(pgo("archive", "promote", "--workdir", work, archive_root=archive_copy))


# --- a hostile user's faults (issue 43) -------------------------------------------

def flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def edit_by_hand(entry_path):
    """A manifest changed the way an editor would, its checksum left as it was."""
    manifest = json.loads((entry_path / archive_model.MANIFEST).read_text())
    manifest["built_by"]["host"] = "edited-by-hand"
    (entry_path / archive_model.MANIFEST).write_text(json.dumps(manifest, indent=2))


DAMAGE_SINCE_STORED = {
    "a byte of profile.tar.xz changed": (lambda path: flip_a_byte(path / archive_model.ARCHIVE),
                                         "profile.tar.xz does not match its checksum"),
    "manifest.json edited by hand": (edit_by_hand, "manifest.json does not match its checksum"),
}


@pytest.mark.parametrize("fault", DAMAGE_SINCE_STORED)
def test_latest_passes_over_an_entry_damaged_since_it_was_stored_and_takes_an_intact_older_one(
        nightlies, tmp_path, fault):
    """1.0.2's own profile would be latest for 1.0.2; damaged, it is named and 1.0.1's is taken."""
    damage, problem = DAMAGE_SINCE_STORED[fault]
    root, older, newer = nightlies_copy(nightlies, tmp_path / "copy")
    damage(newer.path)
    src = fixture_source(tmp_path / "src", "1.0.2")
    reuse = tmp_path / "reuse"
    result = ok(build(reuse, root, "--profile-from", "latest", version="1.0.2", source=src))
    passed_over = [line for line in result.stdout.splitlines() if line.startswith("[import] passed over")]
    assert len(passed_over) == 1 and newer.name in passed_over[0] and problem in passed_over[0], result.stdout
    chosen = [line for line in result.stdout.splitlines() if line.startswith("[import] latest is")]
    assert len(chosen) == 1 and older.name in chosen[0], chosen
    assert json.loads((reuse / "build-info.json").read_text())["profile_id"] == older.profile_id
    # With no intact entry left, the one error line names every damaged one it passed over.
    damaged = snapshot(root)
    damage(older.path)
    error = one_line_error(build(tmp_path / "none", root, "--profile-from", "latest", version="1.0.2", source=src),
                           "no archived profile", "(passed over 2 damaged: ", newer.name, older.name, problem)
    assert error.count(problem) == 2, error
    assert snapshot(root).keys() == damaged.keys()


# '²' is a digit to str.isdigit(), not to int(): a workload version of it, once archived, made every
# `latest` of its line a traceback.
ODD_WORKLOAD = "1.\u00b2"


def test_a_workload_version_latest_cannot_order_is_never_archived(tmp_path):
    src = fixture_source(tmp_path / "src", "1.0.0", WORKLOAD_DEFINE, f'define WORKLOAD_VERSION "{ODD_WORKLOAD}"',
                         file="main.c")
    root = tmp_path / "archive"
    one_line_error(build(tmp_path / "odd", root, source=src), f"workload version {ODD_WORKLOAD!r}", "not archived")
    assert archive.entries(root) == []
    one_line_error(store(tmp_path / "odd", root), f"workload version {ODD_WORKLOAD!r}", "not archived")
    assert archive.entries(root) == []


def test_latest_sorts_a_profile_of_a_workload_version_it_cannot_order_below_every_other(
        trained, archive_copy, tmp_path):
    """As an older pgo archived it: a release of the line, made after the intact one, which latest takes."""
    intact = only_entry(archive_copy)
    manifest = intact.manifest()
    manifest.update(kind="release", profile_id="1.0.0-0123456789ab", created="2999-01-01T00:00:00.000000+00:00")
    manifest["training"]["workload_version"] = ODD_WORKLOAD
    odd = archive_model.Entry.of(archive_copy, manifest)
    odd.path.mkdir()
    archive.write_entry(odd.path, manifest, sorted((trained[0] / "profile").glob("*.gcda")))
    reuse = tmp_path / "reuse"
    result = ok(build(reuse, archive_copy, "--profile-from", "latest"))
    chosen = [line for line in result.stdout.splitlines() if line.startswith("[import] latest is")]
    assert len(chosen) == 1 and intact.name in chosen[0], result.stdout
    assert json.loads((reuse / "build-info.json").read_text())["profile_id"] == intact.profile_id
    verified = ok(pgo("archive", "verify", odd.name, archive_root=archive_copy)).stdout
    assert f"workload version {ODD_WORKLOAD!r} (not of the form" in verified, verified


def test_store_by_hand_goes_to_pgo_archive_as_its_help_says_and_names_the_archive(trained, archive_copy, tmp_path):
    """Not to the work directory's archive, which its archive phase stored into already."""
    work, trained_root = trained
    kept = snapshot(trained_root)
    from_env = tmp_path / "from-env"
    assert "$PGO_ARCHIVE" in ok(pgo("archive", "store", "--help", archive_root=from_env)).stdout
    first = ok(pgo("archive", "store", "--workdir", work, archive_root=from_env))
    entry = only_entry(from_env)
    assert entry.name == only_entry(trained_root).name
    assert f"as {entry.name} in {from_env.resolve()}" in first.stdout, first.stdout
    again = ok(pgo("archive", "store", "--workdir", work, archive_root=from_env))
    assert f"archived already as {entry.name} in {from_env.resolve()}" in again.stdout, again.stdout
    explicit = ok(store(work, archive_copy))       # --archive before $PGO_ARCHIVE
    assert f"archived already as {entry.name} in {archive_copy.resolve()}" in explicit.stdout, explicit.stdout
    assert snapshot(trained_root) == kept


def test_a_file_given_as_the_archive_is_refused_by_every_command(trained, tmp_path):
    work, trained_root = trained
    not_a_folder = tmp_path / "profiles.txt"
    not_a_folder.write_text("a file, not an archive\n")
    entry = only_entry(trained_root)
    for command in (["list"], ["list", "--json"], ["verify"], ["verify", entry.name], ["show", entry.name],
                    ["prune", "--keep", "1"], ["promote", entry.name], ["promote", "--workdir", work],
                    ["store", "--workdir", work]):
        result = pgo("archive", *command, "--archive", not_a_folder, archive_root=trained_root)
        one_line_error(result, f"--archive {not_a_folder} is a file, not a profile archive folder")
        assert result.stdout == "", (command, result.stdout)
    one_line_error(pgo("archive", "list", archive_root=not_a_folder),
                   f"$PGO_ARCHIVE {not_a_folder} is a file, not a profile archive folder")
    below = not_a_folder / "profiles"
    one_line_error(pgo("archive", "list", "--archive", below, archive_root=trained_root),
                   f"--archive {below}: {not_a_folder} is a file, not a folder")
    one_line_error(build(tmp_path / "w", not_a_folder, "--archive", not_a_folder),
                   f"--archive {not_a_folder} is a file")
    assert not_a_folder.read_text() == "a file, not an archive\n" and not (tmp_path / "w").exists()
