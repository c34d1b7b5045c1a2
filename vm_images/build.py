"""Build an image from its definition: root filesystem, tarball, bootable disk, manifest.

    mmdebstrap            the root filesystem from the distribution's archive, compiler pinned
    provision             worker user, Buildbot worker venv (started by a container or, from the
                          VM's fw_cfg, by its unit), boot and network settings
    kernel                vmlinuz and initrd.img copied out, for libvirt's direct kernel boot
    tarball               rootfs.tar.zst (containers, chroots, a VM's first-boot unpack)
    disk                  disk.qcow2: one ext4 filesystem made from the tree by mke2fs -d,
                          so no loop device or mount is needed
    manifest              manifest.json: every installed package and version, the sizes

Everything is written into a hidden .partial folder and renamed into place when complete.
"""

import json
import os
import shutil
import sys
import time
from pathlib import Path

from pgo.base import atomic, process
from pgo.base.checksums import sha256_file
from vm_images import ImageError, chroot
from vm_images.container import CACHE, REPO_IN_IMAGE, START, TAC, WORKER_DIR, builds_folder, container_tag
from vm_images.definition import MASTER_REQUIREMENTS
from vm_images.store import ARTIFACTS, DISK, INITRD, KERNEL, MANIFEST, ROOTFS_TARBALL, now

TOOLS = {"mmdebstrap": "mmdebstrap", "mke2fs": "e2fsprogs", "qemu-img": "qemu-utils",
         "zstd": "zstd", "unshare": "util-linux", "dpkg-query": "dpkg"}
WORKER_VENV = "/opt/buildbot-worker"
# virtio disk = /dev/vda; net.ifnames=0 names the NIC eth0, which /etc/network/interfaces configures
KERNEL_CMDLINE = "root=/dev/vda rw console=ttyS0 net.ifnames=0"


def check_tools():
    chroot.require_root()
    missing = [f"{tool} (apt-get install {package})" for tool, package in TOOLS.items() if not shutil.which(tool)]
    if missing:
        raise ImageError(f"building an image needs {', '.join(missing)}")


def build(image, store, say=print):
    """Build image into the store; return the finished build's folder."""
    check_tools()
    build_id, partial, final = store.new_build_dir(image.name)
    log = partial / "build.log"
    say(f"building image {image.name} as {image.name}/{build_id} (log: {log})")
    steps = {}
    started = time.monotonic()

    def step(name, function):
        say(f"== {name}")
        t0 = time.monotonic()
        function()
        steps[name] = round(time.monotonic() - t0, 1)
        say(f"== {name} done in {steps[name]:.0f} s")

    rootfs = partial / "rootfs"
    step("mmdebstrap", lambda: bootstrap(image, rootfs, log))
    step("provision", lambda: provision(image, build_id, rootfs, log))
    step("kernel", lambda: copy_kernel(rootfs, partial))
    step("tarball", lambda: pack_tarball(rootfs, partial / ROOTFS_TARBALL, log))
    step("disk", lambda: make_disk(rootfs, partial, image.disk_gib, log))
    manifest = {
        "image": image.name,
        "build": build_id,
        "built_at": now(),
        "build_seconds": round(time.monotonic() - started, 1),
        "step_seconds": steps,
        "definition": image.as_dict(),
        "packages": installed_packages(rootfs),
        "python_packages": python_packages(rootfs),
        "kernel_cmdline": KERNEL_CMDLINE,
        "rootfs_bytes": tree_bytes(rootfs),
        "artifacts": artifacts(partial),
    }
    check_pins(image, manifest["packages"])
    atomic.write_json(partial / MANIFEST, manifest)
    atomic.reveal(partial, final)
    say(f"built {image.name}/{build_id} in {manifest['build_seconds']:.0f} s: "
        + ", ".join(f"{name} {human(a['bytes'])}" for name, a in manifest["artifacts"].items()))
    return final


def bootstrap(image, rootfs, log):
    suite = image.release
    entries = [f"{kind} {image.mirror} {dist} main" for dist in (suite, f"{suite}-updates")
               for kind in ("deb", "deb-src")]
    entries += [f"{kind} {image.security_mirror} {suite}-security main" for kind in ("deb", "deb-src")]
    for other in image.source_suites:
        entries += [f"deb-src {image.mirror} {dist} main" for dist in (other, f"{other}-updates")]
        entries.append(f"deb-src {image.security_mirror} {other}-security main")
    run_logged(["mmdebstrap", "--variant=apt", "--mode=root",
                f"--include={','.join([*image.packages, *image.compiler.pins()])}",
                # the package lists stay, so the worker can `apt-get source` without root
                "--skip=cleanup/apt/lists",
                suite, rootfs, *entries], log)


def provision(image, build_id, rootfs, log):
    user = image.worker.user
    in_image(rootfs, ["useradd", "--create-home", "--shell", "/bin/bash", user], log)
    in_image(rootfs, ["python3", "-m", "venv", WORKER_VENV], log)
    wheels = rootfs / "tmp" / "worker-wheels"
    try:
        download_worker_wheels(image, installed_packages(rootfs), wheels, log)
        in_image(rootfs, [f"{WORKER_VENV}/bin/pip", "install", "--no-index", "--disable-pip-version-check",
                          "--find-links", f"/{wheels.relative_to(rootfs)}",
                          f"buildbot-worker=={image.worker.buildbot_worker}"], log)
    finally:
        shutil.rmtree(wheels, ignore_errors=True)
    files = {
        "etc/hostname": "pgo-worker\n",
        "etc/hosts": "127.0.0.1 localhost\n127.0.1.1 pgo-worker\n::1 localhost ip6-localhost ip6-loopback\n",
        "etc/fstab": "/dev/vda / ext4 errors=remount-ro 0 1\n",
        "etc/network/interfaces.d/eth0": "auto eth0\niface eth0 inet dhcp\n",
        # dhclient writes it at boot; the builder's own must not leak into the image
        "etc/resolv.conf": "",
        # pgo's --cc/--cxx default to $CC/$CXX: the pinned compiler, not whatever `gcc` is
        "etc/environment": f"CC={image.compiler.cc}\nCXX={image.compiler.cxx}\n",
        "etc/pgo-image.json": json.dumps({"image": image.name, "build": build_id,
                                          "container_image": container_tag(image.name, build_id),
                                          "compiler": image.as_dict()["compiler"]}, indent=2) + "\n",
        **vm_worker_files(image),
        TAC.lstrip("/"): CONTAINER_TAC,
        START.lstrip("/"): container_start(image),
    }
    for path, content in files.items():
        target = rootfs / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        target.write_text(content)
    (rootfs / START.lstrip("/")).chmod(0o755)
    (rootfs / VM_START.lstrip("/")).chmod(0o755)
    # A new named volume (the container worker's cache, its builds) takes the owner of its mount point.
    home = f"/home/{user}"
    in_image(rootfs, ["install", "-d", "-o", user, "-g", user, f"{home}/.cache", f"{home}/{CACHE}",
                      f"{home}/{WORKER_DIR}", builds_folder(user)], log)
    wants = rootfs / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / "buildbot-worker.service").unlink(missing_ok=True)
    (wants / "buildbot-worker.service").symlink_to("/etc/systemd/system/buildbot-worker.service")


def download_worker_wheels(image, packages, wheels, log):
    """The Buildbot worker and its dependencies as wheels for the image's Python and C library.

    Downloaded by this machine's pip, with its index and certificate settings, so the image
    needs neither; requirements/master.txt constrains them, so Twisted & co. match the master.
    """
    python = ".".join(packages["python3"].split(".")[:2])
    glibc_minor = int(packages["libc6"].split("-")[0].split(".")[1])
    platforms = ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64",
                 *(f"manylinux_2_{minor}_x86_64" for minor in range(5, glibc_minor + 1))]
    constraints = ["--constraint", MASTER_REQUIREMENTS] if MASTER_REQUIREMENTS.is_file() else []
    run_logged([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--dest", wheels,
                "--only-binary=:all:", "--implementation", "cp", "--python-version", python,
                *(arg for platform in platforms for arg in ("--platform", platform)),
                f"buildbot-worker=={image.worker.buildbot_worker}", *constraints], log)


# The VM worker (buildmaster/workers.py, VMWorker): libvirt gives the VM its worker's name and
# password and the master's address at boot, through QEMU's fw_cfg, as base64 of a JSON object
# (master, port, name, password, hide). The name is buildmaster's VM_FW_CFG too (a test checks it).
# The image holds no credentials: the same files serve every VM worker.
VM_FW_CFG = "opt/org.pgo/worker"
FW_CFG_RAW = f"/sys/firmware/qemu_fw_cfg/by_name/{VM_FW_CFG}/raw"
VM_START = "/opt/buildbot-worker/start-vm"
VM_TAC = "/opt/buildbot-worker/vm.tac"
VM_CONFIG_FILE = ".workerconf"
# The master's checkout, shared read-only over 9p with this tag (buildmaster's VM_REPO_TAG), where a
# container has it.
VM_REPO_TAG = "pgo"


def worker_unit(image):
    """The VM's worker. It runs only where the domain gave the fw_cfg entry (ExecCondition, as root:
    the qemu_fw_cfg module shows it under /sys/firmware); elsewhere, such as vm_images' boot check or
    a chroot, the unit is skipped, not failed. Its root step (start-vm) copies the entry into a file
    only the worker user reads, which vm.tac deletes once read. What the unit and the worker print goes
    to the console too, which the master keeps for a VM that did not connect (its last line is the
    reason on the build page): a VM has no other way to say why."""
    user, cc, cxx = image.worker.user, image.compiler.cc, image.compiler.cxx
    no_entry = f"buildbot-worker: no fw_cfg entry {VM_FW_CFG} (not a VM worker, or a domain without ACPI): not starting"
    condition = f'modprobe qemu_fw_cfg 2>/dev/null; test -r {FW_CFG_RAW} || {{ echo "{no_entry}" >&2; exit 1; }}'
    return f"""[Unit]
Description=Buildbot worker of the PGO pipeline
After=network-online.target
Wants=network-online.target

[Service]
ExecCondition=+/bin/sh -c '{condition}'
StandardOutput=journal+console
StandardError=journal+console
ExecStartPre=+{VM_START}
User={user}
Environment=CC={cc} CXX={cxx}
WorkingDirectory=/home/{user}
ExecStart={WORKER_VENV}/bin/twistd --nodaemon --no_save --pidfile= --python {VM_TAC}
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def vm_start(image):
    """The VM worker's root step: the fw_cfg entry into a file only the worker user reads, this
    repository's checkout mounted read-only at REPO_IN_IMAGE, the folders the master names in `hide`
    (its settings, with their passwords) covered by an empty read-only tmpfs."""
    user = image.worker.user
    return f'''#!/usr/bin/python3
import base64
import json
import os
import pwd
import subprocess

with open("{FW_CFG_RAW}", "rb") as f:
    config = json.loads(base64.b64decode(f.read()))
worker = pwd.getpwnam("{user}")
basedir = os.path.join(worker.pw_dir, "{WORKER_DIR}")
os.makedirs(basedir, exist_ok=True)
os.chown(basedir, worker.pw_uid, worker.pw_gid)
path = os.path.join(basedir, "{VM_CONFIG_FILE}")
if os.path.lexists(path):
    os.remove(path)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.fchown(fd, worker.pw_uid, worker.pw_gid)
os.write(fd, json.dumps(config).encode())
os.close(fd)
os.makedirs("{REPO_IN_IMAGE}", exist_ok=True)
if not os.path.ismount("{REPO_IN_IMAGE}"):
    subprocess.run(["mount", "-t", "9p", "-o", "trans=virtio,version=9p2000.L,ro", "{VM_REPO_TAG}",
                    "{REPO_IN_IMAGE}"], check=True)
for folder in config.get("hide", []):
    target = os.path.normpath(os.path.join("{REPO_IN_IMAGE}", folder))
    if target.startswith("{REPO_IN_IMAGE}/") and os.path.isdir(target) and not os.path.ismount(target):
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", target], check=True)
'''


VM_WORKER_TAC = f"""import json
import os

from buildbot_worker.bot import Worker
from twisted.application import service

basedir = os.path.expanduser("~/{WORKER_DIR}")
with open(os.path.join(basedir, "{VM_CONFIG_FILE}")) as f:
    config = json.load(f)
os.remove(os.path.join(basedir, "{VM_CONFIG_FILE}"))
application = service.Application("buildbot-worker")
Worker(config["master"], int(config["port"]), config["name"], config["password"], basedir, keepalive=600,
       umask=0o22, maxdelay=300, allow_shutdown=None, maxRetries=None).setServiceParent(application)
"""


def vm_worker_files(image):
    """What provision writes for the VM worker, by path in the image: the same for every worker."""
    return {"etc/systemd/system/buildbot-worker.service": worker_unit(image),
            VM_START.lstrip("/"): vm_start(image), VM_TAC.lstrip("/"): VM_WORKER_TAC}


# The container worker (vm_images/container.py): Buildbot's DockerLatentWorker gives the container
# BUILDMASTER, BUILDMASTER_PORT, WORKERNAME and WORKERPASS. The start script hands the password
# over in a file only the worker user reads, and starts the worker without it in its environment
# (which /proc shows to every process of that user); the tac reads the file and deletes it.
PASSWORD_FILE = ".workerpass"
CONTAINER_TAC = f"""import os

from buildbot_worker.bot import Worker
from twisted.application import service

basedir = os.path.expanduser("~/{WORKER_DIR}")
with open(os.path.join(basedir, "{PASSWORD_FILE}")) as f:
    password = f.read()
os.remove(os.path.join(basedir, "{PASSWORD_FILE}"))
os.environ.pop("WORKERPASS", None)
application = service.Application("buildbot-worker")
Worker(os.environ["BUILDMASTER"], int(os.environ["BUILDMASTER_PORT"]), os.environ["WORKERNAME"], password,
       basedir, keepalive=600, umask=0o22, maxdelay=300, allow_shutdown=None,
       maxRetries=None).setServiceParent(application)
"""


def container_start(image):
    """The container's command: refresh apt's lists (frozen at the image's build, and
    `apt-get source` needs current ones), then the worker, as the worker user."""
    user = image.worker.user
    return f"""#!/bin/sh
apt-get update -qq || echo "start-container: apt-get update failed; apt's lists are the image's" >&2
basedir=/home/{user}/{WORKER_DIR}
mkdir -p "{builds_folder(user)}" && chown {user}:{user} "$basedir" "{builds_folder(user)}"
(umask 077 && printf '%s' "$WORKERPASS" > "$basedir/{PASSWORD_FILE}") && chown {user}:{user} "$basedir/{PASSWORD_FILE}"
cd "$basedir"
exec setpriv --reuid={user} --regid={user} --init-groups env -u WORKERPASS HOME=/home/{user} USER={user} \\
    {WORKER_VENV}/bin/twistd --nodaemon --no_save --pidfile= --python {TAC}
"""


def in_image(rootfs, argv, log):
    result = chroot.run(rootfs, argv, log)
    if not result.ok:
        raise ImageError(f"'{' '.join(argv)}' failed in the image with status {result.returncode}: "
                         f"{last_line(result.tail)} (log: {log})")


def copy_kernel(rootfs, folder):
    for name in (KERNEL, INITRD):
        pattern = f"{name}-*"
        found = sorted((rootfs / "boot").glob(pattern))
        if len(found) != 1:
            raise ImageError(f"expected one {pattern} in the image's /boot, found {len(found)}: "
                             "the vm-boot package set needs linux-image-amd64")
        shutil.copy2(found[0], folder / name)


def pack_tarball(rootfs, tarball, log):
    run_logged(["tar", "--create", "--numeric-owner", "--xattrs", "--xattrs-include=*", "--sort=name",
                "--use-compress-program=zstd -T1 -3", "--file", tarball, "-C", rootfs, "."], log)


def make_disk(rootfs, folder, disk_gib, log):
    raw = folder / "disk.raw"
    with open(raw, "wb") as f:
        f.truncate(disk_gib << 30)
    try:
        # lazy init: the kernel zeroes inode tables on first mount, the file stays sparse
        run_logged(["mke2fs", "-q", "-F", "-t", "ext4", "-L", "pgo-root", "-d", rootfs,
                    "-E", "lazy_itable_init=1,lazy_journal_init=1", raw], log)
        run_logged(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, folder / DISK], log)
    finally:
        raw.unlink(missing_ok=True)


def run_logged(argv, log):
    argv = [str(a) for a in argv]
    with open(log, "a", encoding="utf-8", errors="replace") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        returncode = process.run_into(argv, out, error=ImageError)
    if returncode != 0:
        lines = Path(log).read_text(errors="replace").splitlines()
        raise ImageError(f"{Path(argv[0]).name} failed with status {returncode}: "
                         f"{last_line(chr(10).join(lines[-20:]))} (log: {log})")


def last_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def installed_packages(rootfs):
    output = process.output_of(["dpkg-query", f"--admindir={rootfs}/var/lib/dpkg", "-W",
                                "-f=${db:Status-Abbrev}\t${Package}\t${Version}\n"], error=ImageError)
    return {name: version for status, name, version in (line.split("\t") for line in output.splitlines())
            if status.strip() == "ii"}


def python_packages(rootfs):
    """The worker venv's distributions, from their METADATA (no need to run the venv's pip)."""
    packages = {}
    for metadata in sorted(rootfs.glob(WORKER_VENV.lstrip("/") + "/lib/python3*/site-packages/*.dist-info/METADATA")):
        fields = dict(line.split(": ", 1) for line in metadata.read_text(errors="replace").splitlines()
                      if line.startswith(("Name: ", "Version: ")))
        packages[fields["Name"].lower()] = fields["Version"]
    return packages


def check_pins(image, packages):
    for package, pin in image.compiler.packages:
        if packages.get(package) != pin:
            raise ImageError(f"{package} is {packages.get(package, 'not installed')} in the image, "
                             f"not the pinned {pin}")


def tree_bytes(root):
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                total += os.lstat(path).st_size
    return total


def artifacts(folder):
    result = {}
    for name in ARTIFACTS:
        path = folder / name
        entry = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
        if name == DISK:
            info = json.loads(process.output_of(["qemu-img", "info", "--output=json", path], error=ImageError))
            entry["virtual_bytes"] = info["virtual-size"]
        result[name] = entry
    return result


def human(size):
    return f"{size / 2**20:.0f} MiB"
