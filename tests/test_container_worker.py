"""A container worker for real: a small image of the gcc12 definition, imported into Docker, and a
fixture release through a master whose only worker is a DockerLatentWorker of that image.

Needs root (mmdebstrap, the image's provisioning), the network (Debian's archive, PyPI for the
worker's wheels) and a Docker daemon `docker info` reaches; skipped without them. About a
minute: the image is the definition's worker set, its pinned compiler and what the fixture's
build and packages need, not the 2 GB of a build VM.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from buildbot.process.results import EXCEPTION, RETRY
from conftest import REPO, free_port, held_source, step_output

from pgo.base import atomic
from pgo.base.checksums import sha256_file, verify_sha256sums
from vm_images import definition
from vm_images.build import installed_packages, pack_tarball, provision
from vm_images.container import START
from vm_images.store import ROOTFS_TARBALL, Store


def docker_answers():
    return shutil.which("docker") is not None and subprocess.run(
        ["docker", "info"], capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="building the image needs root (mmdebstrap, chroot)"),
    pytest.mark.skipif(not shutil.which("mmdebstrap") or not shutil.which("zstd"),
                       reason="building the image needs mmdebstrap and zstd (tools/install-deps.sh test)"),
    pytest.mark.skipif(not docker_answers(), reason="`docker info` does not answer: no Docker daemon to run the "
                       "container worker (start one: setsid /usr/sbin/dockerd)"),
]
IMAGE = "gcc12"
# Beside the image's worker set and compiler: the fixture's build (CMake, Ninja) and its bintar and debs.
FIXTURE_NEEDS = ["cmake", "ninja-build", "binutils", "dpkg-dev", "fakeroot"]
FORMATS = ["bintar", "deb"]


def docker(*args):
    return subprocess.run(["docker", *map(str, args)], capture_output=True, text=True)


def run_cli(*args):
    result = subprocess.run([sys.executable, "-m", "vm_images", *map(str, args)], cwd=REPO, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def current_image(tmp_path_factory):
    """A small build of the gcc12 image, provisioned as every build is, promoted and imported into Docker."""
    store = Store(tmp_path_factory.mktemp("images"))
    image = definition.image(IMAGE)
    build_id, partial, final = store.new_build_dir(IMAGE)
    rootfs, log = partial / "rootfs", partial / "build.log"
    packages = [*definition.load()["package_sets"]["worker"], *FIXTURE_NEEDS, *image.compiler.pins()]
    bootstrap = subprocess.run(["mmdebstrap", "--variant=apt", "--mode=root", f"--include={','.join(packages)}",
                                "--skip=cleanup/apt/lists", image.release, rootfs,
                                f"deb {image.mirror} {image.release} main",
                                f"deb {image.security_mirror} {image.release}-security main"],
                               capture_output=True, text=True)
    assert bootstrap.returncode == 0, bootstrap.stderr[-2000:]
    provision(image, build_id, rootfs, log)
    pack_tarball(rootfs, partial / ROOTFS_TARBALL, log)
    tarball = partial / ROOTFS_TARBALL
    atomic.write_json(partial / "manifest.json", {
        "image": IMAGE, "build": build_id, "definition": image.as_dict(), "packages": installed_packages(rootfs),
        "kernel_cmdline": "none: a container-only build",
        "artifacts": {ROOTFS_TARBALL: {"bytes": tarball.stat().st_size, "sha256": sha256_file(tarball)}}})
    atomic.reveal(partial, final)
    run_cli("--images", store.root, "promote", IMAGE)
    current = store.pointer()["current"]
    try:
        yield store, current
    finally:
        docker("rmi", "-f", current.get("container_image", f"pgo-worker/{IMAGE}:{build_id}"))


@pytest.fixture(scope="module")
def master(current_image, tmp_path_factory):
    """A master with two containers of the current image: one that builds, one whose worker cannot connect
    within its start_timeout of a second (the container is hardly created by then)."""
    from launcher import local

    store, current = current_image
    root = tmp_path_factory.mktemp("runtime")
    worker, late = f"container-{os.getpid()}", f"late-{os.getpid()}"
    web_port = free_port()
    (root / "master-settings.toml").write_text(f"""
web_port = {web_port}
worker_port = {free_port()}
downloads_port = {free_port()}
[admins]
admin = "test-admin"
[[workers]]
name = "{worker}"
kind = "docker"
images = "{store.root}"
[[workers]]
name = "{late}"
kind = "docker"
images = "{store.root}"
start_timeout = 1
[[platforms]]
name = "local"
workers = ["{worker}"]
formats = {json.dumps(FORMATS)}
[[platforms]]
name = "never-connects"
workers = ["{late}"]
formats = ["bintar"]
[nightly]
enabled = false
""")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(local.SETTINGS_ENV, raising=False)
        runtime = local.Runtime(root)
        settings = runtime.settings()
        local.create_master(runtime, settings)
        local.start_master(runtime)
        try:
            yield runtime, settings, worker, late
        finally:
            local.run_tool("buildbot", "stop", str(runtime.master))
            docker("volume", "rm", f"pgo-cache-{worker}", f"pgo-cache-{late}", f"pgo-builds-{worker}",
                   f"pgo-builds-{late}")


def test_the_image_is_imported_with_its_compiler_and_labels(current_image):
    store, current = current_image
    assert current["container_image"] == f"pgo-worker/{IMAGE}:{current['build']}"
    config = json.loads(docker("image", "inspect", current["container_image"]).stdout)[0]["Config"]
    assert {"CC=gcc-12", "CXX=g++-12"} <= set(config["Env"])
    assert config["Cmd"] == [START]
    tarball = store.build(f"{IMAGE}/{current['build']}").path / ROOTFS_TARBALL
    assert config["Labels"]["org.pgo.image.rootfs-sha256"] == sha256_file(tarball)


def test_a_release_runs_in_a_container_that_is_gone_after_it(master):
    from launcher import local

    runtime, settings, worker, _ = master
    api = local.Api(settings.url)
    local.login_as_admin(settings, api)
    before = local.newest_build_id(api)
    started = time.monotonic()
    bsid = local.force_release(api, "1.0.0", "fixture", "tests/fixture", FORMATS, platforms=["local"])
    lines = []
    results = local.follow(api, bsid, before, out=lines.append, give_up_after=600)
    assert results == 0, "\n".join(lines)
    assert time.monotonic() - started < 600
    published = settings.downloads / "1.0.0" / "local"
    assert verify_sha256sums(published) == []
    assert (published / "bintar" / "fixture-1.0.0+pgo-linux-x86_64.tar.gz").is_file()
    assert (published / "deb" / "fixture_1.0.0+pgo-1_amd64.deb").is_file()
    # The container never saw the master's profile archive: it uploaded its profile, the master stored it.
    stored = json.loads(subprocess.run([sys.executable, "-m", "pgo", "archive", "list", "--json", "--archive",
                                        str(settings.archive)], cwd=REPO, capture_output=True, text=True).stdout)
    assert [(e["kind"], e["name"].split("/")[:2]) for e in stored] == [("release", ["fixture", "1.0.0"])]
    info = json.loads((published / "build-info.json").read_text())
    assert info["compiler"]["cc"] == "gcc-12"                      # the image's ENV, not a default
    builds = [b for b in api.get("builds", property="*")["builds"] if b["buildid"] > before]
    assert {b["properties"]["workername"][0] for b in builds} == {worker}
    # The release, then its package builds in the same container, in the release's image.
    assert all(b["properties"]["builddir"][0].startswith("/home/buildbot/worker/") for b in builds)
    packaged = [b for b in builds if b["properties"].get("worker_image")]
    assert len(packaged) == len(FORMATS)
    # build_wait_timeout 0: the container is removed once the release is done.
    deadline = time.monotonic() + 60
    while docker("ps", "-aq", "--filter", f"name=buildbot-{worker}-").stdout.strip():
        assert time.monotonic() < deadline, "the container is still there a minute after the release"
        time.sleep(1)
    assert docker("volume", "inspect", f"pgo-cache-{worker}").returncode == 0      # the cache stays


def test_a_release_whose_container_was_killed_resumes_in_the_next_one(master, current_image):
    """The container of a release is killed in its optimised build: Buildbot starts another (the worker-lost
    guard allows one more), whose release resumes after the last phase the first finished: its builder folder
    is in the worker's builds volume. The optimised build runs again and is proven, and the release is
    published once."""
    from launcher import local

    runtime, settings, worker, _ = master
    _, current = current_image
    assert current["worker_builds"] == "/home/buildbot/worker/builds"
    version = "1.0.7"
    # A source the container sees (the checkout is its read-only /srv/pgo): the fixture, whose optimised
    # build's configure waits while the gate file is missing.
    here = REPO / "work" / f"test-resume-{os.getpid()}"
    shutil.rmtree(here, ignore_errors=True)
    gate = here / "go"
    source = held_source(here / "fixture", version, f"{current['worker_repo']}/{gate.relative_to(REPO)}",
                         only_with="-fprofile-use")
    try:
        api = local.Api(settings.url)
        local.login_as_admin(settings, api)
        before = local.newest_build_id(api)
        bsid = local.force_release(api, version, "fixture", str(source.relative_to(REPO)), ["bintar"],
                                   platforms=["local"])
        deadline = time.monotonic() + 600
        while not any(s["name"] == "optimized" and s["started_at"] and not s["complete"]
                      for b in api.get("builds", complete=False)["builds"] if b["buildid"] > before
                      for s in api.get(f"builds/{b['buildid']}/steps")["steps"]):
            assert time.monotonic() < deadline, "the release never reached its optimised build"
            time.sleep(0.5)
        (container,) = docker("ps", "-q", "--filter", f"name=buildbot-{worker}-").stdout.split()
        assert docker("kill", container).returncode == 0
        gate.touch()
        lines = []
        results = local.follow(api, bsid, before, out=lines.append, give_up_after=600)
        assert results == 0, "\n".join(lines)
        releases = [b for b in api.get("builds", order="buildid")["builds"]
                    if b["buildid"] > before and b["builderid"] == api.get("builders", name="release-local")[
                        "builders"][0]["builderid"]]
        assert [b["results"] for b in releases] == [RETRY, 0]
        steps = {s["name"]: s for s in api.get(f"builds/{releases[-1]['buildid']}/steps")["steps"]}
        assert step_output(api, steps["resume"])[0] == (
            "resuming the interrupted build of this request: keeping work; its finished phases are not run again")
        for phase in ("source", "instrumented", "train", "check"):
            assert any(line.endswith("by the interrupted build this one resumes: not run again")
                       for line in step_output(api, steps[phase])), phase
        assert "profile used by" in steps["optimized"]["state_string"]
        assert (settings.downloads / version / "local" / "bintar" / f"fixture-{version}+pgo-linux-x86_64.tar.gz"
                ).is_file()
    finally:
        gate.parent.mkdir(parents=True, exist_ok=True)
        gate.touch()
        shutil.rmtree(here, ignore_errors=True)


def test_a_container_whose_worker_never_connects_fails_its_release_after_two_starts_in_one_line(master):
    """Buildbot would start it again for ever (a build ended RETRY is queued again): two starts, the first
    ends its build as RETRY, the second as EXCEPTION, each with its reason on the build page."""
    from launcher import local

    runtime, settings, _, late = master
    api = local.Api(settings.url)
    local.login_as_admin(settings, api)
    before = local.newest_build_id(api)
    bsid = local.force_release(api, "1.0.0", "fixture", "tests/fixture", ["bintar"], platforms=["never-connects"])
    lines = []
    results = local.follow(api, bsid, before, out=lines.append, give_up_after=600)
    assert results == EXCEPTION, "\n".join(lines)
    builds = [b for b in api.get("builds", order="buildid")["builds"] if b["buildid"] > before]
    assert [b["results"] for b in builds] == [RETRY, EXCEPTION]
    reason = f"container {late} did not start (%d of 2): its worker did not connect within 1 s; %s"
    assert [b["state_string"] for b in builds] == [reason % (1, "trying again"), reason % (2, "giving up")]
    steps = api.get(f"builds/{builds[-1]['buildid']}/steps")["steps"]
    assert steps[0]["name"] == "worker_preparation" and steps[0]["state_string"] == reason % (2, "giving up")
    # What ./release prints for it is that line.
    assert any(line.endswith(reason % (2, "giving up")) for line in lines), "\n".join(lines)
    assert not (settings.downloads / "1.0.0" / "never-connects").exists()
    deadline = time.monotonic() + 60
    while docker("ps", "-aq", "--filter", f"name=buildbot-{late}-").stdout.strip():
        assert time.monotonic() < deadline, "the container is still there a minute after its start failed"
        time.sleep(1)


def test_the_worker_process_holds_no_password_in_its_environment(current_image):
    """What every build step inherits: the environment of the container's twistd."""
    _, current = current_image
    name = f"pgo-password-check-{os.getpid()}"
    started = docker("run", "-d", "--name", name, "--network", "host", "--init", "-e", "WORKERPASS=s3cret-pw",
                     "-e", "BUILDMASTER=127.0.0.1", "-e", "BUILDMASTER_PORT=1", "-e", "WORKERNAME=x",
                     current["container_image"])
    assert started.returncode == 0, started.stderr
    try:
        home = f"/home/{current['worker_user']}"
        deadline = time.monotonic() + 60
        # The worker is up once twistd runs and its tac took the password file away.
        while not (pid := docker("exec", name, "pgrep", "-f", "twistd").stdout.strip()) or docker(
                "exec", name, "ls", "-A", f"{home}/worker").stdout.split() != ["builds", "twistd.hostname"]:
            assert time.monotonic() < deadline, docker("logs", name).stderr
            time.sleep(1)
        # As the worker user, as a build step would (root in a container lacks CAP_SYS_PTRACE to read it).
        environment = docker("exec", "-u", current["worker_user"], name, "cat",
                             f"/proc/{pid.split()[0]}/environ").stdout.split("\0")
        assert "WORKERNAME=x" in environment and "CC=gcc-12" in environment
        assert not [v for v in environment if "s3cret" in v or v.startswith("WORKERPASS")]
        user = docker("exec", name, "ps", "-o", "user=", "-p", pid.split()[0]).stdout.strip()
        assert user == current["worker_user"]
    finally:
        docker("rm", "-f", name)
