"""A VM worker for real, on demand: a fixture release through a master whose only worker is a libvirt VM
of the gcc12 image, under QEMU's emulation (TCG), and the VM and its disk overlay gone after it.

Not part of the suite: it boots a VM, which under TCG takes minutes. Run it with

    PGO_VM_TEST=1 python3 -m pytest -q -s tests/test_vm_worker.py

as root, with QEMU, libvirt and the master's libvirt binding (`tools/install-deps.sh vm`) and
mmdebstrap. It starts virtlogd and libvirtd when `virsh -c qemu:///system version` does not answer
(and stops them after). The image is a small build of the gcc12 definition (its worker and vm-boot
package sets, its pinned compiler, what the fixture's build and packages need: a few minutes), or,
with PGO_VM_IMAGES=DIR, the current image of that vm_images folder (which must be gcc12, fully
built). PGO_VM_URI names another libvirt connection, PGO_VM_DOMAIN_TYPE=kvm uses KVM where a guest
boots. It prints the boot, connect, build and destroy times in one line.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from conftest import free_port

from pgo import atomic
from pgo.checksums import sha256_file, verify_sha256sums
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


@pytest.fixture(scope="module")
def master(libvirtd, images, scratch, tmp_path_factory):
    """A master whose only worker is a VM of the current image."""
    from launcher import local

    root = tmp_path_factory.mktemp("runtime")
    worker = f"vm-{os.getpid()}"
    overlay = scratch / f"{worker}.qcow2"
    (root / "master-settings.toml").write_text(f"""
web_port = {free_port()}
worker_port = {free_port()}
downloads_port = {free_port()}
[admins]
admin = "test-admin"
[[workers]]
name = "{worker}"
kind = "libvirt"
images = "{images.root}"
hd_image = "{overlay}"
uri = "{URI}"
domain_type = "{DOMAIN_TYPE}"
memory_mib = 2048
cpus = 2
[[platforms]]
name = "local"
workers = ["{worker}"]
formats = {json.dumps(FORMATS)}
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
            yield runtime, settings, worker, overlay
        finally:
            local.run_tool("buildbot", "stop", str(runtime.master))
            if virsh("domstate", worker).returncode == 0:
                virsh("destroy", worker)


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
    bsid = local.force_release(api, "1.0.0", "fixture", "tests/fixture", FORMATS)
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
    assert domain.get("type") == DOMAIN_TYPE
    assert [i.get("type") for i in domain.iter("interface")] == ["user"]
    assert domain.find("devices/disk/source").get("file") == str(overlay) and watch.seen["overlay"]
    published = settings.downloads / "1.0.0" / "local"
    assert verify_sha256sums(published) == []
    assert (published / "bintar" / "fixture-1.0.0+pgo-linux-x86_64.tar.gz").is_file()
    assert json.loads((published / "build-info.json").read_text())["compiler"]["cc"] == "gcc-12"
    builds = api.get("builds", property="*")["builds"]
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
