"""The master is the archive of record: a real master and a worker that cannot see the master's archive.

The worker runs in a mount namespace of its own where the master's archive folder is an empty,
read-only tmpfs (as a container or a VM sees nothing of the master's disk): a release stores
its profile on the master only through the upload and the master's `pgo archive add`, and a
later release reuses it only through the master's `pgo archive pick` and the download, which the
worker checks before its import. Needs root (mount namespaces); skipped otherwise.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE, REPO, free_port

from buildmaster.factories import TRANSFERS
from buildmaster.settings import SETTINGS_ENV
from launcher import local
from pgo.base.checksums import sha256_file, verify_sha256sums

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="a worker blind to the master's archive needs root and unshare(1)")

FORMATS = ["bintar"]


def start_blind_worker(runtime, archive):
    """The local worker, in a mount namespace whose view of `archive` is an empty read-only tmpfs."""
    local.describe_worker(runtime.worker)
    subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount -t tmpfs -o ro,size=1m not-the-masters-archive "$1" && exec "$2" start "$3"',
                    "sh", str(archive), local.tool("buildbot-worker"), str(runtime.worker)], check=True)


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(SETTINGS_ENV, raising=False)
        runtime = local.Runtime(tmp_path_factory.mktemp("buildbot"))
        text = local.settings_text(free_port(), free_port(), free_port())
        # The nightly reuses the newest release profile of the fixture's line, from the master.
        nightly = 'version = "latest"\nsource = "debian"\nkeep = 7'
        assert nightly in text
        reusing = 'version = "latest"\nconfig = "fixture"\nsource = "tests/fixture"\nprofile = "latest"\nkeep = 1'
        runtime.settings_file.write_text(text.replace(nightly, reusing))
        settings = local.setup(runtime)
        archive = Path(settings.archive)
        archive.mkdir()
        try:
            local.start_master(runtime)
            start_blind_worker(runtime, archive)
            api = local.Api(settings.url)
            local.wait_for_worker(api, "local-worker")
            local.login_as_admin(settings, api)
            yield runtime, settings, api
        finally:
            local.stop(runtime)


def release(api, version, source, profile="train"):
    before = local.newest_build_id(api)
    bsid = local.force_release(api, version, "fixture", str(source), FORMATS, profile=profile)
    lines = []
    results = local.follow(api, bsid, before, out=lines.append)
    (build,) = local.release_builds(api, bsid)
    (build,) = api.get(f"builds/{build['buildid']}", property="*")["builds"]
    steps = {s["name"]: s for s in api.get(f"builds/{build['buildid']}/steps")["steps"]}
    return results, build, steps, lines


def listed(archive):
    result = subprocess.run([sys.executable, "-m", "pgo", "archive", "list", "--json", "--archive", archive],
                            cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return {entry["name"]: entry["kind"] for entry in json.loads(result.stdout)}


def fixture_version(directory, version):
    shutil.copytree(FIXTURE, directory)
    (directory / "VERSION").write_text(version + "\n")
    return directory


def no_transfers_left(archive):
    return not (archive / TRANSFERS).exists() or not any((archive / TRANSFERS).iterdir())


def test_the_worker_does_not_see_the_masters_archive(master):
    runtime, settings, _ = master
    pid = local.running_pid(runtime.worker)
    mounts = Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
    assert any(f" {settings.archive} " in m and "not-the-masters-archive" in m for m in mounts), mounts
    assert not any("not-the-masters-archive" in m for m in Path("/proc/self/mountinfo").read_text().splitlines())


def test_a_release_stores_its_profile_on_the_master(master):
    _, settings, api = master
    archive = Path(settings.archive)
    results, build, steps, lines = release(api, "1.0.0", "tests/fixture")
    assert results == 0, "\n".join(lines)
    for name in ("archive", "upload-profile-archive", "store-profile", "promote-profile", "prune-profiles"):
        assert steps[name]["results"] == 0, name
    entry = build["properties"]["profile_entry"][0]
    assert entry.startswith("fixture/1.0.0/")
    # Uploaded as pending (the archive phase runs before the release is published), promoted once published.
    assert listed(archive) == {entry: "release"}
    assert no_transfers_left(archive)
    published = settings.downloads / "1.0.0" / "local"
    assert verify_sha256sums(published) == []
    assert (published / "profile-archive" / entry / "manifest.json").is_file()


def test_a_later_release_reuses_the_masters_profile_downloaded_and_checked(master, tmp_path):
    _, settings, api = master
    archive = Path(settings.archive)
    (entry,) = listed(archive)
    results, build, steps, lines = release(api, "1.0.1", fixture_version(tmp_path / "fixture-1.0.1", "1.0.1"),
                                           profile="latest")
    assert results == 0, "\n".join(lines)
    for name in ("profile-wants", "upload-profile-wants", "pick-profile", "download-profile", "receive-profile",
                 "import"):
        assert steps[name]["results"] == 0, name
    assert steps["train"]["results"] == steps["instrumented"]["results"] == 3       # skipped: one build
    assert steps["upload-profile-archive"]["results"] == 3                           # nothing new to store
    props = build["properties"]
    assert props["profile_entry"][0] == entry
    # What the worker checked before it stored the entry in its own archive: the master's checksum.
    assert len(props["profile_sha256"][0]) == 64
    assert "profile used by 100% of 2 hot objects" in build["state_string"]
    assert listed(archive) == {entry: "release"}
    assert no_transfers_left(archive)
    published = settings.downloads / "1.0.1" / "local"
    assert (published / "profile-archive" / entry / "manifest.json").is_file()


def test_a_nightly_reuses_the_release_profile_from_the_master(master):
    _, settings, api = master
    archive = Path(settings.archive)
    (entry,) = listed(archive)
    before = local.newest_build_id(api)
    bsid, _ = api.control("forceschedulers/nightly_now", "force", reason="reuse test")
    assert local.follow(api, bsid, before, out=lambda line: None) == 0
    (build,) = local.release_builds(api, bsid)
    (build,) = api.get(f"builds/{build['buildid']}", property="*")["builds"]
    steps = {s["name"]: s["results"] for s in api.get(f"builds/{build['buildid']}/steps")["steps"]}
    assert steps["pick-profile"] == steps["receive-profile"] == steps["import"] == 0
    assert steps["train"] == 3
    assert build["properties"]["profile_entry"][0] == entry
    assert listed(archive) == {entry: "release"}             # reused: nothing new to store
    (nightly,) = (settings.downloads / "nightly").iterdir()
    assert (nightly / "bintar" / "fixture-1.0.0+pgo-linux-x86_64.tar.gz").is_file()
    assert no_transfers_left(archive)


def test_a_damaged_entry_on_the_master_is_refused_in_one_line_and_nothing_is_built(master, tmp_path):
    _, settings, api = master
    archive = Path(settings.archive)
    (entry,) = listed(archive)
    damaged = archive / entry / "profile.tar.xz"
    before = sha256_file(damaged)
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    results, build, steps, lines = release(api, "1.0.2", fixture_version(tmp_path / "fixture-1.0.2", "1.0.2"),
                                           profile=entry.rsplit("/", 1)[1])
    assert results != 0
    assert steps["pick-profile"]["results"] == 2
    reason = local.step_reason(api, steps["pick-profile"])
    assert reason == (f"archived profile {entry} is damaged: profile.tar.xz does not match its checksum "
                      "(truncated, corrupted or changed by hand)")
    assert steps["pick-profile"]["state_string"] == f"pick-profile (failure): {reason}"
    assert "download-profile" not in steps or steps["download-profile"]["results"] in (None, 3)
    assert "source" not in steps or steps["source"]["results"] in (None, 3)
    assert not (settings.downloads / "1.0.2").exists()
    assert no_transfers_left(archive)
    assert sha256_file(damaged) != before            # left as it was found, for `pgo archive verify`
