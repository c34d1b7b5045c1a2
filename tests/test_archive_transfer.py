"""Moving a profile between a worker and the master, which holds the archive of record: `pgo archive add`
(an upload, or the file the master sent), `wants` and `pick`, and the master-side step that runs them.

Real fixture builds, real archives; the end-to-end run through Buildbot is tests/test_archive_on_master.py.
"""

import atexit
import functools
import io
import json
import shutil
import tarfile
import tempfile
from pathlib import Path

import pytest
from buildbot.process.results import FAILURE, SUCCESS
from buildbot.test.reactor import TestReactorMixin
from buildbot.test.steps import TestBuildStepMixin
from conftest import build_fixture, refused, run_pgo
from twisted.trial import unittest

from buildmaster.buildsteps import MasterPgoCommand
from pgo.archive import model as archive_model, store as archive
from pgo.base import checksums


@functools.cache
def trained_upload():
    """A worker's one-entry archive of a trained fixture build (pending: its release is not published)."""
    base = Path(tempfile.mkdtemp(prefix="pgo-transfer-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    build_fixture(base / "work", "--archive", base / "upload", "--tests", "off")
    return base / "upload"


def upload_copy(tmp_path):
    shutil.copytree(trained_upload(), tmp_path / "upload")
    return tmp_path / "upload"


def only_entry(root):
    (entry,) = archive.entries(root)
    return entry


def files_below(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def flip_a_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def edit_manifest(entry_path):
    manifest = json.loads((entry_path / archive_model.MANIFEST).read_text())
    manifest["built_by"]["host"] = "edited-on-its-way"
    (entry_path / archive_model.MANIFEST).write_text(json.dumps(manifest))


def rewrite_sums(entry_path):
    """Checksums that agree with whatever the entry holds now: only the deeper checks can catch a change."""
    lines = [f"{checksums.sha256_file(entry_path / name)}  {name}\n"
             for name in (archive_model.ARCHIVE, archive_model.MANIFEST)]
    (entry_path / checksums.SUMS).write_text("".join(lines))


def renamed(entry_path):
    entry_path.rename(entry_path.with_name("1.0.0-000000000000"))


# --- add --from an upload ----------------------------------------------------------

def test_an_upload_is_stored_with_its_kind_checked_and_recorded(tmp_path):
    upload, master = upload_copy(tmp_path), tmp_path / "master"
    entry = only_entry(upload)
    added = run_pgo("archive", "add", "--from", upload, "--archive", master, "--record", tmp_path / "stored.json")
    assert f"archived profile {entry.profile_id} as {entry.name} in {master}" in added.stdout
    assert json.loads((tmp_path / "stored.json").read_text()) == {"entry": entry.name, "kind": "pending"}
    assert files_below(master) == files_below(upload)
    assert run_pgo("archive", "verify", "--archive", master).stdout.startswith(f"ok      {entry.name}")
    # Twice (a retried step): the entry is there, intact; nothing changes.
    again = run_pgo("archive", "add", "--from", upload, "--archive", master)
    assert f"profile {entry.profile_id} is archived already" in again.stdout
    assert files_below(master) == files_below(upload)


def test_an_upload_of_a_higher_kind_promotes_the_masters_entry_never_demotes_it(tmp_path):
    upload, master = upload_copy(tmp_path), tmp_path / "master"
    entry = only_entry(upload)
    run_pgo("archive", "promote", entry.name, "--archive", upload, "--kind", "release")
    run_pgo("archive", "add", "--from", trained_upload(), "--archive", master)          # pending
    promoted = run_pgo("archive", "add", "--from", upload, "--archive", master)
    assert f"profile {entry.profile_id} promoted from pending to release" in promoted.stdout
    kept = run_pgo("archive", "add", "--from", trained_upload(), "--archive", master)
    assert f"profile {entry.profile_id} stays release" in kept.stdout


DAMAGED_UPLOADS = {
    "a byte of profile.tar.xz changed": (lambda path: flip_a_byte(path / archive_model.ARCHIVE),
                                         "profile.tar.xz does not match its checksum"),
    "manifest.json changed": (edit_manifest, "manifest.json does not match its checksum"),
    "profile.tar.xz changed, checksums to match": (
        lambda path: (flip_a_byte(path / archive_model.ARCHIVE), rewrite_sums(path)), "cannot unpack profile.tar.xz"),
    "sha256sums.txt missing": (lambda path: (path / checksums.SUMS).unlink(), "sha256sums.txt is missing"),
    "the entry under another name": (renamed, "holds the profile of fixture/1.0.0/"),
    "no entry at all": (lambda path: shutil.rmtree(path.parent.parent.parent), "holds 0 archived profiles"),
}


@pytest.mark.parametrize("damage", DAMAGED_UPLOADS)
def test_a_damaged_upload_is_refused_in_one_line_and_nothing_is_stored(tmp_path, damage):
    upload, master = upload_copy(tmp_path), tmp_path / "master"
    other = tmp_path / "other"
    build_fixture(tmp_path / "work-1.0.0", "--archive", other, "--tests", "off")     # an entry the master has
    shutil.copytree(other, master)
    before = files_below(master)
    do, problem = DAMAGED_UPLOADS[damage]
    do(only_entry(upload).path)
    refused(run_pgo("archive", "add", "--from", upload, "--archive", master, check=False),
            problem, f"nothing stored in {master}")
    assert files_below(master) == before
    assert not [p for p in master.rglob(".*")]                  # no half-written entry left behind


def test_add_needs_a_folder_or_the_file_pick_made_with_its_checksum(tmp_path):
    master = tmp_path / "master"
    refused(run_pgo("archive", "add", "--from", tmp_path / "nothing", "--archive", master, check=False),
            f"--from {tmp_path / 'nothing'}: no such folder or file")
    refused(run_pgo("archive", "add", "--from", trained_upload(), "--sha256", "0" * 64, "--archive", master,
                    check=False), "--sha256 checks a file `pick` made")
    (tmp_path / "sent.tar").write_bytes(b"")
    refused(run_pgo("archive", "add", "--from", tmp_path / "sent.tar", "--archive", master, check=False),
            "is a file: give its --sha256")
    assert not master.exists()


# --- wants and pick ------------------------------------------------------------------

def master_with_a_release(tmp_path):
    master = tmp_path / "master"
    run_pgo("archive", "add", "--from", trained_upload(), "--archive", master)
    run_pgo("archive", "promote", only_entry(master).profile_id, "--archive", master)
    return master


def wants(tmp_path, profile="latest", version="1.0.0", **changed):
    out = tmp_path / "wants.json"
    run_pgo("archive", "wants", "--config", "fixture", "--version", version, "--profile", profile, "--out", out)
    if changed:
        out.write_text(json.dumps(json.loads(out.read_text()) | changed))
    return out


def test_wants_are_what_a_reusing_build_matches_a_profile_on(tmp_path):
    manifest = only_entry(trained_upload()).manifest()
    written = json.loads(wants(tmp_path, version="1.0.4").read_text())
    assert written == {"format": 1, "profile": "latest", "product": "fixture", "version": "1.0.4", "line": "1.0",
                       "target": manifest["compiler"]["target"], "compiler_version": manifest["compiler"]["version"],
                       "flags_fingerprint": manifest["flags_fingerprint"]}
    refused(run_pgo("archive", "wants", "--config", "fixture", "--version", "1.0", "--profile", "latest",
                    "--out", tmp_path / "bad.json", check=False), "invalid version '1.0'")
    refused(run_pgo("archive", "wants", "--config", "no-such-config", "--version", "1.0.0", "--profile", "latest",
                    "--out", tmp_path / "bad.json", check=False), "no-such-config")
    assert not (tmp_path / "bad.json").exists()


def test_pick_sends_the_entry_a_build_wants_and_the_worker_takes_it_once_its_checksum_agrees(tmp_path):
    master = master_with_a_release(tmp_path)
    entry = only_entry(master)
    sent, record, worker = tmp_path / "transfer" / "profile.tar", tmp_path / "picked.json", tmp_path / "worker"
    picked = run_pgo("archive", "pick", "--wants", wants(tmp_path, version="1.0.4"), "--archive", master,
                     "--out", sent, "--record", record)
    sha256 = checksums.sha256_file(sent)
    assert json.loads(record.read_text()) == {"entry": entry.name, "sha256": sha256}
    assert f"picked {entry.name} (release); sent as {sent}, sha256 {sha256}" in picked.stdout
    run_pgo("archive", "add", "--from", sent, "--sha256", sha256, "--archive", worker)
    assert files_below(worker) == files_below(master)
    # ... and the worker's build imports it from its own archive: one build, no training.
    reused = build_fixture(tmp_path / "reuse", "--archive", worker, "--profile-from", entry.name, "--tests", "off")
    assert f"[import] profile {entry.profile_id} from the archive ({entry.name}" in reused.stdout
    assert not (tmp_path / "reuse" / "build" / "instrumented-install").exists()
    # A named entry is sent as it is.
    run_pgo("archive", "pick", "--wants", wants(tmp_path, profile=entry.profile_id), "--archive", master,
            "--out", tmp_path / "named.tar")
    assert checksums.sha256_file(tmp_path / "named.tar") == sha256


def escaping_tarball(path):
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("../../outside")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    return checksums.sha256_file(path)


def test_a_damaged_download_is_refused_in_one_line_and_nothing_is_stored(tmp_path):
    master, worker = master_with_a_release(tmp_path), tmp_path / "worker"
    sent = tmp_path / "profile.tar"
    run_pgo("archive", "pick", "--wants", wants(tmp_path), "--archive", master, "--out", sent,
            "--record", tmp_path / "picked.json")
    sha256 = json.loads((tmp_path / "picked.json").read_text())["sha256"]
    flip_a_byte(sent)
    refused(run_pgo("archive", "add", "--from", sent, "--sha256", sha256, "--archive", worker, check=False),
            f"{sent} has sha256 {checksums.sha256_file(sent)}, not {sha256} as the master sent it (damaged on its "
            "way): nothing stored")
    escaping = escaping_tarball(tmp_path / "escaping.tar")
    refused(run_pgo("archive", "add", "--from", tmp_path / "escaping.tar", "--sha256", escaping, "--archive", worker,
                    check=False), "holds ../../outside, which is no file of an archive entry: nothing stored")
    assert not worker.exists() and not (tmp_path.parent / "outside").exists()


def test_pick_refuses_what_fits_no_entry_in_one_line(tmp_path):
    master, out = tmp_path / "master", tmp_path / "profile.tar"
    run_pgo("archive", "add", "--from", trained_upload(), "--archive", master)
    # A pending profile (its release not published) is never `latest`.
    refused(run_pgo("archive", "pick", "--wants", wants(tmp_path), "--archive", master, "--out", out, check=False),
            f"no archived profile in {master} fits fixture 1.0.x up to 1.0.0")
    entry = only_entry(master)
    refused(run_pgo("archive", "pick", "--wants", wants(tmp_path, profile=entry.profile_id, compiler_version="99.1.0"),
                    "--archive", master, "--out", out, check=False),
            f"archived profile {entry.name} does not fit this build: compiler version (GCC): profile")
    (tmp_path / "half.json").write_text(json.dumps({"profile": "latest", "product": "fixture"}))
    refused(run_pgo("archive", "pick", "--wants", tmp_path / "half.json", "--archive", master, "--out", out,
                    check=False), "is no reuse build's wants (`pgo archive wants`): it lacks version, target")
    refused(run_pgo("archive", "pick", "--wants", tmp_path / "none.json", "--archive", master, "--out", out,
                    check=False), "cannot read the wants")
    flip_a_byte(entry.path / archive_model.ARCHIVE)
    refused(run_pgo("archive", "pick", "--wants", wants(tmp_path, profile=entry.profile_id), "--archive", master,
                    "--out", out, check=False), f"archived profile {entry.name} is damaged: profile.tar.xz")
    assert not out.exists() and not [p for p in tmp_path.glob(".profile.tar*")]


# --- the master-side step -----------------------------------------------------------

class MasterPgoCommandTest(TestBuildStepMixin, TestReactorMixin, unittest.TestCase):
    """The step the master runs `pgo archive add` and `pick` with, on real archives (no worker involved)."""

    def setUp(self):
        self.setup_test_reactor()
        self.tmp = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.tmp)
        return self.setup_test_build_step()

    async def test_a_damaged_upload_fails_the_step_with_its_one_line_and_stores_nothing(self):
        upload, master = upload_copy(self.tmp), self.tmp / "master"
        entry = only_entry(upload)
        flip_a_byte(entry.path / archive_model.ARCHIVE)
        self.setup_step(MasterPgoCommand(name="store-profile", command=[
            "archive", "add", "--from", str(upload), "--archive", str(master), "--record", str(self.tmp / "r.json")],
            record=str(self.tmp / "r.json"), sets={"profile_entry": "entry"}))
        self.expect_outcome(result=FAILURE, state_string=(
            f"store-profile (failure): archived profile {entry.name} is damaged: profile.tar.xz does not match its "
            f"checksum (truncated, corrupted or changed by hand) (uploaded to {upload}): nothing stored in {master}"))
        await self.run_step()
        self.assertFalse(master.exists())
        self.assertFalse(self.get_nth_step(0).build.hasProperty("profile_entry"))

    async def test_pick_gives_the_build_the_entry_and_the_checksum_of_what_it_sends(self):
        master = master_with_a_release(self.tmp)
        sent, record = self.tmp / "profile.tar", self.tmp / "picked.json"
        self.setup_step(MasterPgoCommand(name="pick-profile", command=[
            "archive", "pick", "--wants", str(wants(self.tmp)), "--archive", str(master), "--out", str(sent),
            "--record", str(record)], record=str(record), sets={"profile_entry": "entry", "profile_sha256": "sha256"}))
        self.expect_outcome(result=SUCCESS, state_string="pick-profile")
        self.expect_property("profile_entry", only_entry(master).name, "pick-profile")
        await self.run_step()
        self.assertEqual(self.get_nth_step(0).getProperty("profile_sha256"), checksums.sha256_file(sent))
