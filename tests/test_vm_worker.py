"""A VM worker for real, on demand: fixture releases through a master whose workers are libvirt VMs of
the gcc12 image, under QEMU's emulation (TCG): one that builds and is gone after it with its disk
overlay, and the failures a farm sees, each ending with its one line on the build page: a VM that never
boots, one whose worker never connects, one killed in the middle of its build (a new VM builds the
release, published once), and one whose disk fills up.

Not part of the suite: it boots a VM, which under TCG takes minutes. Run it with

    PGO_VM_TEST=1 python3 -m pytest -q -s tests/test_vm_worker.py

as root, with QEMU, libvirt and the master's libvirt binding (`tools/install-deps.sh vm`) and
mmdebstrap. It starts virtlogd and libvirtd when `virsh -c qemu:///system version` does not answer
(and stops them after). The image is a small build of the gcc12 definition (its worker and vm-boot
package sets, its pinned compiler, what the fixture's build and packages need: a few minutes), or,
with PGO_VM_IMAGES=DIR, the current image of that vm_images folder (which must be gcc12, fully
built). PGO_VM_URI names another libvirt connection, PGO_VM_DOMAIN_TYPE=kvm uses KVM where a guest
boots. It prints the boot, connect, build and destroy times, and each failure's line. About 20 minutes
under TCG on 2 cores.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from buildbot.process.results import EXCEPTION, FAILURE, RETRY, SUCCESS
from conftest import free_port

from pgo.base import atomic
from pgo.base.checksums import sha256_file, verify_sha256sums
from vm_images import definition
from vm_images.build import KERNEL_CMDLINE, copy_kernel, installed_packages, make_disk, provision
from vm_images.store import DISK, INITRD, KERNEL, Store

URI = os.environ.get("PGO_VM_URI", "qemu:///system")
DOMAIN_TYPE = os.environ.get("PGO_VM_DOMAIN_TYPE", "qemu")
TOOLS = ["mmdebstrap", "mke2fs", "qemu-img", "qemu-system-x86_64", "virsh", "libvirtd", "virtlogd"]


def libvirt_binding():
    try:
        import libvirt  # noqa: F401  (requirements/libvirt.txt)
        return True
    except ImportError:
        return False


pytestmark = [
    pytest.mark.skipif(os.environ.get("PGO_VM_TEST") != "1",
                       reason="boots a VM (minutes under TCG): on demand, with PGO_VM_TEST=1"),
    pytest.mark.skipif(os.geteuid() != 0, reason="building the image and starting libvirtd need root"),
    pytest.mark.skipif(not all(shutil.which(t) for t in TOOLS),
                       reason=f"needs {', '.join(TOOLS)} (tools/install-deps.sh vm; mmdebstrap)"),
    pytest.mark.skipif(not libvirt_binding(), reason="the master needs the libvirt module: "
                       "python3 -m pip install -r requirements/libvirt.txt (tools/install-deps.sh vm)"),
]
IMAGE = "gcc12"
FIXTURE_NEEDS = ["cmake", "ninja-build", "binutils", "dpkg-dev", "fakeroot"]
FORMATS = ["bintar", "deb"]
DISK_GIB = 8
# The worker whose VM boots but whose worker never connects: how long it has.
MUTE_TIMEOUT = 150
# The disk that fills up: TINY_FREE_MIB free, of which all but USER_FREE_KIB reserved for root (ext4's
# reserved blocks): the system boots and the worker starts (it writes a few kB), but what the builds
# write as the worker user does not fit (CMake's build tree alone is larger).
TINY_FREE_MIB = 6
USER_FREE_KIB = 256


def virsh(*args):
    return subprocess.run(["virsh", "-c", URI, *map(str, args)], capture_output=True, text=True)


@pytest.fixture(scope="module")
def libvirtd():
    """libvirt's daemons, started here when nothing answers (no systemd on these hosts), stopped after."""
    started = []
    if virsh("version").returncode != 0:
        for daemon in ("virtlogd", "libvirtd"):
            started.append(subprocess.Popen([daemon], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                            start_new_session=True))
        deadline = time.monotonic() + 60
        while virsh("version").returncode != 0:
            assert time.monotonic() < deadline, f"libvirtd does not answer on {URI}: {virsh('version').stderr}"
            time.sleep(1)
    try:
        yield
    finally:
        for daemon in reversed(started):
            daemon.terminate()
            daemon.wait(timeout=60)


@pytest.fixture(scope="module")
def scratch():
    """Where the images and the overlay go: a folder QEMU's own user (libvirt-qemu under qemu:///system) can
    reach, which pytest's 0700 temporary folders are not."""
    folder = Path(tempfile.mkdtemp(prefix="pgo-vm-test-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def small_image(store):
    """A small build of the gcc12 image with what a VM boots: provisioned as every build is, its kernel, its disk."""
    image = definition.image(IMAGE)
    build_id, partial, final = store.new_build_dir(IMAGE)
    rootfs, log = partial / "rootfs", partial / "build.log"
    sets = definition.load()["package_sets"]
    packages = [*sets["worker"], *sets["vm-boot"], *FIXTURE_NEEDS, *image.compiler.pins()]
    bootstrap = subprocess.run(["mmdebstrap", "--variant=apt", "--mode=root", f"--include={','.join(packages)}",
                                "--skip=cleanup/apt/lists", image.release, rootfs,
                                f"deb {image.mirror} {image.release} main",
                                f"deb {image.security_mirror} {image.release}-security main"],
                               capture_output=True, text=True)
    assert bootstrap.returncode == 0, bootstrap.stderr[-2000:]
    provision(image, build_id, rootfs, log)
    copy_kernel(rootfs, partial)
    make_disk(rootfs, partial, DISK_GIB, log)
    atomic.write_json(partial / "manifest.json", {
        "image": IMAGE, "build": build_id, "definition": image.as_dict(), "packages": installed_packages(rootfs),
        "kernel_cmdline": KERNEL_CMDLINE,
        "artifacts": {name: {"bytes": (partial / name).stat().st_size, "sha256": sha256_file(partial / name)}
                      for name in (DISK, KERNEL, INITRD)}})
    shutil.rmtree(rootfs)
    atomic.reveal(partial, final)
    store.point_to(store.build(f"{IMAGE}/{build_id}"), "tests/test_vm_worker.py")


@pytest.fixture(scope="module")
def images(scratch):
    given = os.environ.get("PGO_VM_IMAGES")
    store = Store(Path(given).resolve() if given else scratch / "images")
    if not given:
        small_image(store)
    current = store.pointer()["current"]
    assert current and current["image"] == IMAGE, f"{store.root}: the current image is not {IMAGE}"
    return store


def tiny_disk(disk, folder):
    """disk, its file system shrunk to what it holds plus TINY_FREE_MIB, USER_FREE_KIB of it for users."""
    raw = folder / "tiny.raw"
    for argv in (["qemu-img", "convert", "-O", "raw", disk, raw], ["e2fsck", "-fy", raw], ["resize2fs", "-M", raw]):
        result = subprocess.run(list(map(str, argv)), capture_output=True, text=True)
        assert result.returncode in (0, 1), result.stdout + result.stderr       # e2fsck: 1 = fixed
    header = subprocess.run(["dumpe2fs", "-h", raw], capture_output=True, text=True).stdout
    blocks, block_size = (int(re.search(rf"^{key}:\s+(\d+)", header, re.M)[1]) for key in ("Block count", "Block size"))
    size_kib = blocks * block_size // 1024 + TINY_FREE_MIB * 1024
    subprocess.run(["resize2fs", raw, f"{size_kib}K"], capture_output=True, check=True)
    os.truncate(raw, size_kib * 1024)
    header = subprocess.run(["dumpe2fs", "-h", raw], capture_output=True, text=True).stdout
    free = int(re.search(r"^Free blocks:\s+(\d+)", header, re.M)[1])
    subprocess.run(["tune2fs", "-r", str(free - USER_FREE_KIB * 1024 // block_size), raw], capture_output=True,
                   check=True)
    subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, folder / "tiny.qcow2"], check=True)
    raw.unlink()
    return folder / "tiny.qcow2"


@pytest.fixture(scope="module")
def broken_images(images, scratch):
    """Images folders whose current image is the test's, broken one way each."""
    current = images.pointer()["current"]
    base = {**current, **{key: str(images.root / current[key]) for key in ("disk", "kernel", "initrd")}}
    cmdline = base["kernel_cmdline"]

    def folder(name, **changes):
        path = scratch / f"images-{name}"
        path.mkdir()
        atomic.write_json(path / "current.json", {"current": {**base, **changes}, "history": []})
        return path
    return {
        # No root device: the initramfs gives up after rootdelay and, with panic=, reboots; on_reboot destroys.
        "never-boots": folder("never-boots", kernel_cmdline=cmdline.replace("root=/dev/vda", "root=/dev/vdz")
                              + " rootdelay=5 panic=1"),
        # Boots to its login prompt, its worker unit masked, as a unit that fails would leave it.
        "never-connects": folder("never-connects", kernel_cmdline=f"{cmdline} systemd.mask=buildbot-worker.service"),
        "disk-full": folder("disk-full", disk=str(tiny_disk(Path(base["disk"]), scratch))),
    }


@pytest.fixture(scope="module")
def master(libvirtd, images, broken_images, scratch, tmp_path_factory):
    """A master whose workers are VMs: one of the current image (platforms local and killed-mid-build), one
    of each broken image (a platform each)."""
    from launcher import local

    root = tmp_path_factory.mktemp("runtime")
    pid = os.getpid()
    folders = {f"vm-{pid}": images.root, **{f"{name}-{pid}": path for name, path in broken_images.items()}}
    rows = {"local": f"vm-{pid}", "killed-mid-build": f"vm-{pid}",
            **{name: f"{name}-{pid}" for name in broken_images}}
    entries = "".join(f"""
[[workers]]
name = "{name}"
kind = "libvirt"
images = "{folder}"
hd_image = "{scratch / name}.qcow2"
uri = "{URI}"
domain_type = "{DOMAIN_TYPE}"
memory_mib = 2048
cpus = 2
{f"start_timeout = {MUTE_TIMEOUT}" if name.startswith("never-connects") else ""}
""" for name, folder in folders.items())
    platforms = "".join(f"""
[[platforms]]
name = "{row}"
workers = ["{name}"]
formats = {json.dumps(FORMATS if row == "local" else ["bintar"])}
""" for row, name in rows.items())
    (root / "master-settings.toml").write_text(f"""
web_port = {free_port()}
worker_port = {free_port()}
downloads_port = {free_port()}
[admins]
admin = "test-admin"
{entries}
{platforms}
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
            yield runtime, settings, f"vm-{pid}", scratch / f"vm-{pid}.qcow2"
        finally:
            local.run_tool("buildbot", "stop", str(runtime.master))
            for name in folders:
                if virsh("domstate", name).returncode == 0:
                    virsh("destroy", name)


class Watch(threading.Thread):
    """When the domain appeared, what it ran, and when its worker connected."""

    def __init__(self, api, worker, overlay):
        super().__init__(daemon=True)
        self.api, self.worker, self.overlay, self.seen = api, worker, overlay, {}
        self.stop = threading.Event()

    def run(self):
        started = time.monotonic()
        while not self.stop.is_set():
            if "domain" not in self.seen and virsh("domstate", self.worker).stdout.strip() == "running":
                self.seen["domain"] = time.monotonic() - started
                self.seen["xml"] = virsh("dumpxml", self.worker).stdout
                self.seen["overlay"] = self.overlay.is_file()
            if "connected" not in self.seen:
                workers = self.api.get("workers", name=self.worker)["workers"]
                if workers and workers[0]["connected_to"]:
                    self.seen["connected"] = time.monotonic() - started
            time.sleep(2)


def test_a_release_runs_in_a_vm_that_is_gone_after_it_with_its_overlay(master):
    from xml.etree import ElementTree

    from launcher import local

    runtime, settings, worker, overlay = master
    api = local.Api(settings.url)
    local.login_as_admin(settings, api)
    before = local.newest_build_id(api)
    watch = Watch(local.Api(settings.url), worker, overlay)
    watch.start()
    started = time.monotonic()
    bsid = local.force_release(api, "1.0.0", "fixture", "tests/fixture", FORMATS, platforms=["local"])
    lines = []
    try:
        results = local.follow(api, bsid, before, out=lines.append, give_up_after=3600)
    finally:
        built = time.monotonic() - started
        watch.stop.set()
        watch.join()
    console = Path(f"{overlay}.console.log")
    assert results == 0, "\n".join(lines) + (f"\nconsole:\n{console.read_text()[-3000:]}" if console.is_file() else "")
    # The domain as libvirt ran it: the setting's type, QEMU's user network, the overlay as its disk.
    domain = ElementTree.fromstring(watch.seen["xml"])
    assert domain.get("type") == DOMAIN_TYPE and domain.find("features/acpi") is not None
    assert [i.get("type") for i in domain.iter("interface")] == ["user"]
    assert domain.find("devices/disk/source").get("file") == str(overlay) and watch.seen["overlay"]
    published = settings.downloads / "1.0.0" / "local"
    assert verify_sha256sums(published) == []
    assert (published / "bintar" / "fixture-1.0.0+pgo-linux-x86_64.tar.gz").is_file()
    assert json.loads((published / "build-info.json").read_text())["compiler"]["cc"] == "gcc-12"
    builds = [b for b in api.get("builds", property="*")["builds"] if b["buildid"] > before]
    assert {b["properties"]["workername"][0] for b in builds} == {worker}
    # build_wait_timeout 0: the VM is destroyed once the release is done, and its overlay removed.
    deadline = time.monotonic() + 120
    while virsh("domstate", worker).returncode == 0 or overlay.exists():
        assert time.monotonic() < deadline, "the VM or its overlay is still there two minutes after the release"
        time.sleep(1)
    destroyed = time.monotonic() - started
    print(f"\nVM worker {worker} ({DOMAIN_TYPE}, {URI}): domain running after {watch.seen['domain']:.0f} s, "
          f"worker connected after {watch.seen['connected']:.0f} s, release done after {built:.0f} s, "
          f"domain and overlay gone after {destroyed:.0f} s", file=sys.stderr)


def release(master, platform):
    """A fixture release on platform: (results, its builds, what ./release printed)."""
    from launcher import local

    runtime, settings, _, _ = master
    api = local.Api(settings.url)
    local.login_as_admin(settings, api)
    before = local.newest_build_id(api)
    started = time.monotonic()
    bsid = local.force_release(api, "1.0.0", "fixture", "tests/fixture", ["bintar"], platforms=[platform])
    lines = []
    results = local.follow(api, bsid, before, out=lines.append, give_up_after=3600)
    builds = [b for b in api.get("builds", order="buildid", property="*")["builds"] if b["buildid"] > before]
    print(f"\n{platform}: {time.monotonic() - started:.0f} s; " + "; ".join(
        f"build {b['number']}: {b['state_string']}" for b in builds), file=sys.stderr)
    return results, builds, lines, api


def gone(name, overlay):
    deadline = time.monotonic() + 120
    while virsh("domstate", name).returncode == 0 or overlay.exists():
        assert time.monotonic() < deadline, f"the VM {name} or its overlay is still there two minutes after"
        time.sleep(1)


def test_a_vm_that_never_boots_fails_its_release_at_once_with_its_consoles_last_line(master):
    name = f"never-boots-{os.getpid()}"
    results, builds, lines, _ = release(master, "never-boots")
    assert results == EXCEPTION, "\n".join(lines)
    assert [b["results"] for b in builds] == [RETRY, EXCEPTION]
    for n, (build, end) in enumerate(zip(builds, ("trying again", "giving up")), 1):
        assert build["state_string"].startswith(f"VM {name} did not start ({n} of 2): the VM stopped before its "
                                                "worker connected; console: 'ALERT!  /dev/vdz does not exist.")
        assert build["state_string"].endswith(f".failed-start.log); {end}")
    # Stopped by itself well before the start timeout: the initramfs gave up on its root device.
    assert builds[-1]["complete_at"] - builds[0]["started_at"] < 600
    kept = Path(f"{master[3].parent / name}.qcow2.failed-start.log").read_text(errors="replace")
    assert "/dev/vdz" in kept
    gone(name, master[3].parent / f"{name}.qcow2")


def test_a_vm_whose_worker_never_connects_fails_its_release_after_two_starts(master):
    name = f"never-connects-{os.getpid()}"
    results, builds, lines, _ = release(master, "never-connects")
    assert results == EXCEPTION, "\n".join(lines)
    assert [b["results"] for b in builds] == [RETRY, EXCEPTION]
    reason = (f"VM {name} did not start (2 of 2): its worker did not connect within {MUTE_TIMEOUT} s; "
              "console: 'pgo-worker login:'")
    assert builds[-1]["state_string"].startswith(reason)
    assert any(reason in line for line in lines), "\n".join(lines)
    gone(name, master[3].parent / f"{name}.qcow2")


def test_a_vm_killed_in_the_middle_of_its_build_is_replaced_and_the_release_published_once(master):
    """The worker-lost guard: the build that lost its VM ends RETRY, a new VM builds it, nothing half published."""
    from launcher import local

    runtime, settings, worker, overlay = master
    api = local.Api(settings.url)
    killed = []

    def kill_during_optimized():
        deadline = time.monotonic() + 3600
        while not killed and time.monotonic() < deadline:
            for build in api.get("builds", complete=False)["builds"]:
                steps = api.get(f"builds/{build['buildid']}/steps")["steps"]
                if any(s["name"] == "optimized" and s["started_at"] and not s["complete"] for s in steps):
                    killed.append(virsh("destroy", worker).returncode)
                    return
            time.sleep(2)
    killer = threading.Thread(target=kill_during_optimized, daemon=True)
    killer.start()
    results, builds, lines, api = release(master, "killed-mid-build")
    killer.join(timeout=10)
    assert killed == [0], "the VM was never killed: " + "\n".join(lines)
    assert results == SUCCESS, "\n".join(lines)
    releases = [b for b in builds if "pgo_workdir" not in b["properties"]]
    assert [b["results"] for b in releases] == [RETRY, SUCCESS]
    steps = api.get(f"builds/{releases[1]['buildid']}/steps")["steps"]
    assert [s["state_string"] for s in steps if s["name"] == "worker-lost-guard"] == ["worker lost 1 times before"]
    assert releases[0]["state_string"] == "retry lost connection optimized (retry)"
    published = settings.downloads / "1.0.0" / "killed-mid-build"
    assert verify_sha256sums(published) == [] and len(list((published / "bintar").glob("*.tar.gz"))) == 1
    gone(worker, overlay)


def test_a_vm_whose_disk_fills_up_fails_its_release_with_the_reason(master):
    """Its worker, given USER_FREE_KIB, cannot even make its build folder when it attaches (measured: the
    space is gone by then): the start fails, twice, with the reason; a disk that fills later fails a step
    with its error line. Either way the release names the full disk and publishes nothing."""
    name = f"disk-full-{os.getpid()}"
    results, builds, lines, api = release(master, "disk-full")
    assert results in (EXCEPTION, FAILURE), "\n".join(lines)
    failed = [s for b in builds for s in api.get(f"builds/{b['buildid']}/steps")["steps"]
              if s["results"] in (EXCEPTION, FAILURE)]
    assert failed and "No space left on device" in failed[-1]["state_string"], failed
    assert any("No space left on device" in line for line in lines), "\n".join(lines)
    assert not (master[1].downloads / "1.0.0" / "disk-full").exists()
    gone(name, master[3].parent / f"{name}.qcow2")
