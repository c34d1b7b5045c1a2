"""The profile archive and builds that reuse it, on the fixture project: real builds, real gcov-tool."""

import json
import os
import resource
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pgo import archive

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


def fixture_source(directory, version, old=None, new=None):
    shutil.copytree(FIXTURE, directory)
    (directory / "VERSION").write_text(version + "\n")
    if old:
        hot = directory / "src" / "hot.c"
        assert old in hot.read_text()
        hot.write_text(hot.read_text().replace(old, new))
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
    names = [name for name in (archive.ARCHIVE, archive.MANIFEST, archive.KIND) if (entry_path / name).is_file()]
    lines = [f"{archive.sha256_file(entry_path / name)}  {name}\n" for name in names]
    (entry_path / archive.SUMS).write_text("".join(lines))


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
    assert manifest["kind"] == "pending" and entry.kind() == "release" and manifest["line"] == "1.0"
    assert len(manifest["files"]) == check["gcda_files"] == len(list((work / "profile").glob("*.gcda")))
    assert manifest["functions"] >= 3          # main, hot_digest, cold_digest
    assert manifest["optimized"]["hot_coverage"] == 1.0
    assert manifest["built_by"]["host"]
    assert subprocess.run(["sha256sum", "-c", archive.SUMS], cwd=entry.path, capture_output=True).returncode == 0
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
    (entry.path / archive.MANIFEST).write_text(json.dumps(manifest))
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
    tarball = entry.path / archive.ARCHIVE
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
    tarball = entry.path / archive.ARCHIVE
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
        (entry.path / archive.MANIFEST).write_text(json.dumps(manifest))
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
    one_line_error(store(tmp_path / "newer", archive_copy, limit_file_size=1000), "File too large", "nothing was stored")
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
    history = json.loads((entry.path / archive.KIND).read_text())["history"]
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
    (broken / archive.MANIFEST).write_text((intact.path / archive.MANIFEST).read_text()[:100])
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
    (broken / archive.MANIFEST).write_text((intact.path / archive.MANIFEST).read_text()[:100])
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
    promoted = (entry.path / archive.KIND).read_text()
    # A release demoted by hand would be pruned like a nightly.
    (entry.path / archive.KIND).write_text(json.dumps({"kind": "nightly", "history": []}))
    failed = pgo("archive", "verify", archive_root=root)
    assert failed.returncode == 1 and "kind.json does not match its checksum" in failed.stdout
    one_line_error(pgo("archive", "prune", "--keep", "1", archive_root=root), entry.name, "its kind is unknown")
    one_line_error(pgo("archive", "list", archive_root=root), "kind.json does not match its checksum")
    assert archive.entries(root) == [entry]
    (entry.path / archive.KIND).write_text(promoted)
    ok(pgo("archive", "verify", archive_root=root))

    # A pending profile (a release not yet published) made a release by a kind.json of its own.
    pending_root = tmp_path / "pending"
    ok(build(tmp_path / "unpublished", pending_root))
    pending = only_entry(pending_root)
    (pending.path / archive.KIND).write_text(json.dumps({"kind": "release", "history": []}))
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
