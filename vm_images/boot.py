"""Boot a build's disk the way a libvirt domain does (direct kernel boot, virtio disk and NIC)
and wait for its login prompt on the serial console.

The VM writes to a throwaway copy-on-write child of disk.qcow2, as a latent worker's
hd_image does, so booting never changes the image. QEMU emulates the CPU (TCG) instead of
using KVM: slower (under a minute to the prompt) but the same on every machine, including
nested ones whose /dev/kvm cannot run an ordinary guest kernel.
"""

import shutil

from pgo.base import process
from vm_images import ImageError
from vm_images.store import DISK, INITRD, KERNEL

QEMU = "qemu-system-x86_64"
BOOT_TIMEOUT = 300
LOGIN_PROMPT = "pgo-worker login:"


def emulator_missing():
    """Why no VM can be booted here, or None."""
    if shutil.which(QEMU) is None:
        return f"no {QEMU} (apt-get install qemu-system-x86)"
    return None


def boot(build, scratch, timeout=BOOT_TIMEOUT):
    """(reached the login prompt, console transcript); the VM is stopped either way."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    child = scratch / "hd.qcow2"
    console = scratch / "console.log"
    process.output_of(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", build.path / DISK,
                       child], error=ImageError)
    vm = process.start([QEMU, "-accel", "tcg", "-m", "1024", "-smp", "1", "-display", "none", "-no-reboot",
                        "-kernel", build.path / KERNEL, "-initrd", build.path / INITRD,
                        "-append", build.manifest["kernel_cmdline"],
                        "-drive", f"file={child},if=virtio,format=qcow2",
                        "-nic", "user,model=virtio-net-pci", "-serial", f"file:{console}"],
                       stdout=process.DEVNULL, stderr=process.PIPE, text=True, error=ImageError)
    try:
        if process.wrote(vm, console, LOGIN_PROMPT, timeout, interval=1):
            return True, console.read_text(errors="replace")
        if vm.poll() is not None:
            raise ImageError(f"{QEMU} exited with status {vm.returncode}: {vm.stderr.read().strip()[-300:]}")
        return False, console.read_text(errors="replace") if console.is_file() else ""
    finally:
        process.stopped(vm)
