"""Workers and the locks that keep one heavy build per worker.

A local worker is a buildbot-worker process on this machine (`./release` starts
it). A libvirt worker is a latent VM, booted for a build from the image that
vm_images/ made current (its current.json) and shut down after it.
"""

import json
from pathlib import Path
from xml.sax.saxutils import escape

from buildbot.plugins import util, worker

from buildmaster.settings import SettingsError
from pgo.protocol import CURRENT_IMAGE

# Missing VMs and lost connections must end, not hang a release.
VM_BOOT_TIMEOUT = 20 * 60
VM_IDLE_SHUTDOWN = 10 * 60

# A PGO build compiles twice with every core; two at once on one worker only
# slow each other down (and the benchmark needs a quiet machine).
HEAVY_BUILD = util.WorkerLock("heavy-build", maxCount=1)
# The package builds of one release run one at a time on its worker (the rpm
# build compiles once more, while the release build only waits for it).
PACKAGING = util.WorkerLock("packaging", maxCount=1)

# The images have no boot loader: libvirt boots their kernel directly (vm_images/README.md).
DOMAIN_XML = """<domain type="kvm">
  <name>{name}</name>
  <memory unit="MiB">{memory_mib}</memory>
  <vcpu>{cpus}</vcpu>
  <os>
    <type arch="x86_64" machine="q35">hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <devices>
    <disk type="file" device="disk"><driver name="qemu" type="qcow2"/>
      <source file="{hd_image}"/><target dev="vda" bus="virtio"/></disk>
    <interface type="network"><source network="default"/><model type="virtio"/></interface>
    <serial type="pty"/><console type="pty"/>
  </devices>
</domain>
"""


def current_image(images):
    """The image vm_images/ made current: its entry of <images>/current.json, paths made absolute."""
    pointer = Path(images) / CURRENT_IMAGE
    try:
        current = json.loads(pointer.read_text())["current"]
        return {key: str(Path(images) / current[key]) for key in ("disk", "kernel", "initrd")} | {
            "kernel_cmdline": current["kernel_cmdline"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SettingsError(f"cannot read the current VM image from {pointer}: {e}") from None


def domain_xml(spec, image):
    values = {"name": spec.name, "memory_mib": spec.memory_mib, "cpus": spec.cpus, "kernel": image["kernel"],
              "initrd": image["initrd"], "cmdline": image["kernel_cmdline"], "hd_image": spec.hd_image}
    return DOMAIN_XML.format(**{k: escape(str(v), {'"': "&quot;"}) for k, v in values.items()})


def make_worker(spec):
    if spec.kind == "libvirt":
        image = current_image(spec.images)
        return worker.LibVirtWorker(spec.name, spec.password, hd_image=spec.hd_image, base_image=image["disk"],
                                    uri=spec.uri, xml=domain_xml(spec, image),
                                    missing_timeout=VM_BOOT_TIMEOUT, build_wait_timeout=VM_IDLE_SHUTDOWN)
    return worker.Worker(spec.name, spec.password)


def make_workers(settings):
    return [make_worker(spec) for spec in settings.workers]


def same_worker_as_release(builder, workers, request):
    """Package builds read the release's work directory: run them on the release's worker."""
    wanted = request.properties.getProperty("release_worker")
    return next((w for w in workers if w.worker.workername == wanted), None)
