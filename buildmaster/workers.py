"""Workers, and the locks that keep one heavy build per worker and per host (heavy_builds_per_host).

A local worker is a buildbot-worker process on this machine (`./release` starts
it). A libvirt worker is a latent VM, booted for a build from the image that
vm_images/ made current (its current.json) on a throwaway copy-on-write disk, on QEMU's
user-mode network (it reaches the master at 10.0.2.2, the host's 127.0.0.1), its credentials
given at boot through fw_cfg, and destroyed after it. A docker
worker is a latent container of the same image (`python3 -m vm_images promote`
imports it into Docker), started for a release on the host's network, reaching
the master on 127.0.0.1, and removed after it.
"""

import base64
import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from xml.sax.saxutils import escape

import buildbot.worker.libvirt as buildbot_libvirt
from buildbot.interfaces import LatentWorkerCannotSubstantiate, LatentWorkerFailedToSubstantiate
from buildbot.plugins import util, worker
from buildbot.worker.latent import States
from twisted.internet import defer
from twisted.python import log
from twisted.python.failure import Failure

from buildmaster.settings import DOCKER_HOST, LIBVIRT_DOMAIN_TYPES, MASTER_HOST, WORKER_PORT, SettingsError
from pgo import REPO
from pgo.base import platforms, process
from pgo.base.lines import first_line, without_terminal_codes
from pgo.base.protocol import CURRENT_IMAGE

# Missing VMs and lost connections must end, not hang a release (a worker's start_timeout overrides).
# Under QEMU's emulation (TCG) the image's worker connects about 20 s after the domain starts here.
VM_BOOT_TIMEOUT = 20 * 60
# A container's worker connects within seconds (plus its apt-get update); a daemon that cannot
# start it must not hold a release for the VMs' twenty minutes.
CONTAINER_START_TIMEOUT = 5 * 60
# How often the master asks libvirt or Docker whether a started VM or container still runs, until its
# worker connects: one that stopped fails its start then, not at the timeout.
CHECK_INSTANCE_INTERVAL = 10
# How long the master's start waits for a Docker daemon to say whether it has a worker's image.
DOCKER_ANSWER_TIMEOUT = 30
# The build property that tells the pgo steps where a container worker has this repository
# (buildmaster/factories.py); current.json says where (vm_images/container.py).
REPO_PROPERTY = "pgo_repo"
# The image a release's container runs, handed to its package builds: a promotion while the
# release runs must not give them another image (they would wait for a container that never
# comes, while the release waits for them).
IMAGE_PROPERTY = "worker_image"

# A PGO build compiles twice with every core; two at once on one worker only
# slow each other down (and the benchmark needs a quiet machine).
HEAVY_BUILD = util.WorkerLock("heavy-build", maxCount=1)
# The package builds of one release run one at a time on its worker (the rpm
# build compiles once more, while the release build only waits for it).
PACKAGING = util.WorkerLock("packaging", maxCount=1)

# The images have no boot loader: libvirt boots their kernel directly (vm_images/README.md).
# - type: "qemu" is QEMU's emulation (TCG), "kvm" the host's KVM (the worker's domain_type).
# - <features><acpi/>: without it libvirt runs QEMU with -no-acpi, and the guest's qemu_fw_cfg driver,
#   which finds the fw_cfg device through ACPI, shows no entry: the worker unit skipped itself and the
#   VM never connected (seen on the first boot under libvirt; QEMU started by hand has ACPI).
# - <interface type="user">: QEMU's user-mode network (slirp), no bridge, no address of the host's
#   networks: the guest reaches the host's own 127.0.0.1 at 10.0.2.2 (VM_HOST_ADDRESS).
# - <sysinfo type="fwcfg">: the worker's name, password and master, given at boot through QEMU's
#   fw_cfg (libvirt >= 6.5); the image's worker unit reads them (vm_images/build.py), the image holds none.
# - <filesystem>: this checkout, read-only over 9p, which the guest mounts at VM_REPO.
# - the serial console goes to a file beside the overlay, to say why a VM never connected.
DOMAIN_XML = """<domain type="{domain_type}">
  <name>{name}</name>
  <memory unit="MiB">{memory_mib}</memory>
  <vcpu>{cpus}</vcpu>
  <os>
    <type arch="x86_64" machine="q35">hvm</type>
    <kernel>{kernel}</kernel>
    <initrd>{initrd}</initrd>
    <cmdline>{cmdline}</cmdline>
  </os>
  <sysinfo type="fwcfg">
    <entry name="{fw_cfg_name}">{fw_cfg}</entry>
  </sysinfo>
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type="file" device="disk"><driver name="qemu" type="qcow2"/>
      <source file="{hd_image}"/><target dev="vda" bus="virtio"/></disk>
    <filesystem type="mount" accessmode="squash"><source dir="{repo}"/><target dir="{repo_tag}"/><readonly/>
      </filesystem>
    <interface type="user"><model type="virtio"/></interface>
    <serial type="pty"><log file="{console_log}" append="off"/></serial>
    <console type="pty"/>
  </devices>
</domain>
"""
# QEMU's user-mode network: the address at which the guest reaches the host's loopback (slirp
# connects to 127.0.0.1 for it), where a master listening on 127.0.0.1 takes the worker.
VM_HOST_ADDRESS = "10.0.2.2"
# The fw_cfg entry the image's worker unit reads from /sys/firmware/qemu_fw_cfg/by_name/<name>/raw:
# base64 of a JSON object (master, port, name, password, hide). The same name is in
# vm_images/build.py (VM_FW_CFG), which the master may not import; a test checks they agree.
VM_FW_CFG = "opt/org.pgo/worker"
# This checkout in the VM: a read-only 9p share with this tag, mounted where a container has it.
VM_REPO_TAG = "pgo"
VM_REPO = "/srv/pgo"
# The console log beside the worker's overlay disk: <hd_image>.console.log; that of the last start
# that failed, kept after the overlay's removal: <hd_image>.failed-start.log
CONSOLE_SUFFIX = ".console.log"
FAILED_START_SUFFIX = ".failed-start.log"
# What a console says when a boot went wrong (console_reason), among its last CONSOLE_TAIL lines.
CONSOLE_ALARM = re.compile(r"ALERT!|Kernel panic|\[FAILED\]|No space left|does not exist|Unable to|"
                           r"buildbot-worker: |Gave up waiting")
CONSOLE_TAIL = 200


def current_image(images):
    """The image vm_images/ made current: its entry of <images>/current.json, paths made absolute."""
    pointer = Path(images) / CURRENT_IMAGE
    try:
        current = json.loads(pointer.read_text())["current"]
        return {key: str(Path(images) / current[key]) for key in ("disk", "kernel", "initrd")} | {
            "kernel_cmdline": current["kernel_cmdline"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SettingsError(f"cannot read the current VM image from {pointer}: {e}") from None


# What the master reads of current.json's container entry (vm_images/container.py writes the worker's uid and
# gid there too, for people: no file of the master's is shared with a container, so no id needs to match).
CONTAINER_FIELDS = ("container_image", "worker_user", "worker_cache", "worker_repo")
# And where its builder folders are (pgo/build/resume.py BUILDERS_DIR), in images whose containers keep them in a volume
# (vm_images makes the mount point); an older image has none, and its releases start again from the first step.
CONTAINER_BUILDS_FIELD = "worker_builds"


def current_container(images):
    """The current image's container image and its layout, from <images>/current.json."""
    pointer = Path(images) / CURRENT_IMAGE
    try:
        current = json.loads(pointer.read_text())["current"]
        layout = {key: current[key] for key in CONTAINER_FIELDS}
        return {**layout, CONTAINER_BUILDS_FIELD: current.get(CONTAINER_BUILDS_FIELD)}
    except (OSError, ValueError, TypeError) as e:
        raise SettingsError(f"cannot read the current VM image from {pointer}: {e}") from None
    except KeyError:
        raise SettingsError(f"{pointer} names no container image: on the Docker host, run "
                            f"`python3 -m vm_images --images {images} promote IMAGE` (or container-image)") from None


def container_image(images):
    """The image a build's container runs: the release's own (package builds), else the current one."""
    @util.renderer
    def image(props):
        return props.getProperty(IMAGE_PROPERTY) or current_container(images)["container_image"]
    return image


def image_running(props):
    """The image the build's container runs (None on other workers)."""
    started = getattr(props.getBuild().workerforbuilder.worker, "instance", None) or {}
    return props.getProperty(IMAGE_PROPERTY) or started.get("image")


# For the builds a release triggers.
running_image = util.renderer(image_running)


def container_volumes(spec, layout, settings):
    """The checkout read-only, and the worker's cache volume at the same path every time (the pipeline's
    source tree lives there, and the profile's paths); its builds volume where the image keeps the builder
    folders, so that a release whose container was lost resumes in the next one (pgo/build/resume.py). No profile
    archive: the master keeps it, and a build uploads and downloads its profile (buildmaster/factories.py)."""
    builds = [f"pgo-builds-{spec.name}:{layout[CONTAINER_BUILDS_FIELD]}"] if layout.get(CONTAINER_BUILDS_FIELD) else []
    return [f"{REPO}:{layout['worker_repo']}:ro", f"pgo-cache-{spec.name}:{layout['worker_cache']}", *builds]


def hidden_settings(settings, layout):
    """The master's settings folder, when inside the checkout (run/): a container sees an empty one, not
    the passwords."""
    folder = settings.source_file.resolve().parent if settings.source_file else None
    if folder is None or not folder.is_relative_to(REPO):
        return {}
    return {f"{layout['worker_repo']}/{folder.relative_to(REPO)}": "size=1m,ro"}


def master_address(settings):
    """Where a container on the host's network reaches the master's worker port."""
    return "127.0.0.1" if settings.listen in ("", "0.0.0.0", "localhost") else settings.listen


def docker_image_state(docker_host, image):
    """'present', 'missing', or why the Docker daemon at docker_host could not tell."""
    import docker  # the master's requirements pin it; only a docker worker needs it
    import requests

    try:
        client = docker.APIClient(base_url=docker_host, timeout=DOCKER_ANSWER_TIMEOUT)
    except (docker.errors.DockerException, requests.RequestException) as e:
        return first_line(e) or type(e).__name__
    try:
        client.inspect_image(image)
        return "present"
    except docker.errors.ImageNotFound:
        return "missing"
    except (docker.errors.DockerException, requests.RequestException) as e:
        return first_line(e) or type(e).__name__
    finally:
        client.close()


def check_image_on_docker_host(spec, image):
    """Refuse at the master's start, in one line with its fix, an image the worker's Docker host lacks:
    Buildbot would find out at each release's start ('not found on docker host') and fail it."""
    docker_env = "" if spec.docker_host == DOCKER_HOST else f"DOCKER_HOST={spec.docker_host} "
    state = docker_image_state(spec.docker_host, image)
    if state == "missing":
        raise SettingsError(f"docker worker {spec.name}: the Docker host {spec.docker_host} has no image {image} "
                            f"(the current image): import it with `{docker_env}python3 -m vm_images --images "
                            f"{spec.images} container-image`")
    if state != "present":
        raise SettingsError(f"docker worker {spec.name}: the Docker daemon at {spec.docker_host} does not answer "
                            f"({state}): start it (`setsid /usr/sbin/dockerd` where there is no systemd)")


def human_seconds(seconds):
    return f"{seconds // 60} min" if seconds >= 120 and seconds % 60 == 0 else f"{seconds} s"


class BoundedStart:
    """A latent worker whose failed starts end, each with its reason in one line.

    Buildbot ends a build whose worker did not start as RETRY and queues its request again, without
    limit: a VM that never boots was booted again every twenty minutes, for ever (seen here). The
    worker-lost guard cannot help: it is a step, and no step runs without a worker. Here the failed
    starts of a build request are counted; the max_starts-th ends the build as EXCEPTION
    (LatentWorkerCannotSubstantiate), which Buildbot does not retry, the ones before it as RETRY. The
    failure says what failed and what the machine said last (start_detail); PgoBuild puts it on the
    build page.
    """

    kind = "worker"

    def init_bounded_start(self, max_starts):
        self.max_starts = max_starts
        self.failed_starts = {}        # build request ids -> failed starts
        self.starting_for = None       # the build request ids of the start under way

    def start_instance(self, build):
        self.starting_for = tuple(sorted(r.id for r in build.requests)) if build is not None else ()
        return super().start_instance(build)

    def start_detail(self, quote=True):
        """What the machine said last, for a start that failed ('' if nothing); with quote False only where
        to read it (the failure says why itself)."""
        return ""

    def start_failure(self, why):
        """Why a start failed, in one line (without the worker's name)."""
        quote = True
        if why.check(defer.TimeoutError):
            reason = f"its worker did not connect within {human_seconds(self.missing_timeout)}"
        elif why.check(LatentWorkerFailedToSubstantiate) and "crashed before connecting" in str(why.value):
            # check_instance's answer: "latent worker crashed before connecting: <what it said>"
            reason = first_line(str(why.value).split("crashed before connecting:", 1)[1]) or "it stopped"
        else:
            # An error of its own (a worker that could not attach, libvirt or Docker refusing): it says why.
            reason, quote = first_line(why.value) or type(why.value).__name__, False
        detail = self.start_detail(quote)
        return f"{reason}; {detail}" if detail else reason

    def _substantiation_failed(self, why):
        why = why if isinstance(why, Failure) else Failure(why)
        starting = self.state in (States.SUBSTANTIATING, States.SUBSTANTIATING_STARTING)
        if starting and not why.check(LatentWorkerCannotSubstantiate):
            attempt = self.failed_starts.get(self.starting_for, 0) + 1
            reason = (f"{self.kind} {self.name} did not start ({attempt} of {self.max_starts}): "
                      f"{self.start_failure(why)}")
            log.msg(f"{self}: {reason}")
            if attempt >= self.max_starts:
                self.failed_starts.pop(self.starting_for, None)
                why = Failure(LatentWorkerCannotSubstantiate(f"{reason}; giving up"))
            else:
                self.failed_starts[self.starting_for] = attempt
                why = Failure(LatentWorkerFailedToSubstantiate(f"{reason}; trying again"))
        return super()._substantiation_failed(why)

    @defer.inlineCallbacks
    def attached(self, conn):
        # A worker that connects and then fails to attach (its disk full: it cannot make its build folder)
        # is a failed start too (LatentWorker.attached calls _substantiation_failed): the count goes on.
        yield super().attached(conn)
        if self.substantiated:
            self.failed_starts.pop(self.starting_for, None)


class ContainerWorker(BoundedStart, worker.DockerLatentWorker):
    """Buildbot's DockerLatentWorker (4.3.0) with bounded starts; a container that exits before its
    worker connects fails its start with the last line it printed (check_instance)."""

    kind = "container"

    def check_instance(self):
        d = super().check_instance()

        def last_line_of_logs(answer):
            running, said = answer
            if running:
                return answer
            lines = [line for line in said.splitlines() if line.strip() and line.strip() != "logs:"]
            last = lines[-1].strip() if lines else "no output"
            return False, f"the container exited before its worker connected: {last}"
        return d.addCallback(last_line_of_logs)


def docker_worker(spec, settings):
    layout = current_container(spec.images)
    check_image_on_docker_host(spec, layout["container_image"])
    hostconfig = {"network_mode": "host", "init": True, "shm_size": "1g", "mem_limit": f"{spec.memory_mib}m",
                  "nano_cpus": spec.cpus * 10**9, "tmpfs": hidden_settings(settings, layout)}
    container = ContainerWorker(
        spec.name, spec.password, docker_host=spec.docker_host, image=container_image(spec.images),
        masterFQDN=master_address(settings), hostconfig=hostconfig, volumes=container_volumes(spec, layout, settings),
        properties={REPO_PROPERTY: layout["worker_repo"]},
        missing_timeout=spec.start_timeout or CONTAINER_START_TIMEOUT,
        check_instance_interval=CHECK_INSTANCE_INTERVAL, build_wait_timeout=0)
    container.init_bounded_start(settings.max_lost_workers)
    return container


def vm_master_address(settings):
    """Where the VM's worker reaches the master's worker port: QEMU's user-mode network takes the
    guest's connections to VM_HOST_ADDRESS to the host's 127.0.0.1 (a master listening there or on
    every address); any other address the master listens on, the guest reaches as it is."""
    return VM_HOST_ADDRESS if settings.listen in ("", "0.0.0.0", "localhost", "127.0.0.1") else settings.listen


def vm_credentials(spec, settings=None):
    """The fw_cfg entry's content: what the VM's worker needs to connect, as base64 of a JSON object:
    no character of it needs escaping in the XML or on QEMU's command line (where a ',' would end the
    value). `hide`: the checkout's folders the guest covers with an empty read-only tmpfs (the
    master's settings, with their passwords, when they are in the checkout). Without settings, the
    defaults': a master on 127.0.0.1:WORKER_PORT."""
    hide = [str(folder.relative_to(REPO)) for folder in settings_folder_in_checkout(settings)]
    payload = {"master": vm_master_address(settings) if settings else VM_HOST_ADDRESS,
               "port": settings.worker_port if settings else WORKER_PORT, "name": spec.name,
               "password": spec.password, "hide": hide}
    return base64.b64encode(json.dumps(payload).encode()).decode("ascii")


def settings_folder_in_checkout(settings):
    folder = settings.source_file.resolve().parent if settings and settings.source_file else None
    return [folder] if folder is not None and folder.is_relative_to(REPO) else []


# domain_type "auto": how long a guest kernel has to print its banner under KVM (where KVM works, well under
# a second; where /dev/kvm opens but cannot run a guest, as on these nested hosts, it never prints).
KVM_PROBE_SECONDS = 20
KERNEL_BANNER = "Linux version"
QEMU = "qemu-system-x86_64"
# The probe's answer for this master's run: KVM's use is the host's property, not an image's.
KVM_PROBE = {}


def kvm_boots(kernel, seconds=KVM_PROBE_SECONDS):
    """(whether a guest kernel really boots under this host's KVM, how the probe found it).

    Only a boot tells: on these hosts /dev/kvm opens and creates a VM, yet a Debian kernel under it prints
    nothing (issue 44). QEMU boots kernel with -accel kvm, no disk and no initrd, and the probe waits for the
    kernel's banner on the serial console."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "no /dev/kvm this master may use"
    if shutil.which(QEMU) is None:
        return False, f"no {QEMU}"
    with tempfile.TemporaryDirectory(prefix="pgo-kvm-probe-") as scratch:
        console = Path(scratch) / "console.log"
        started = time.monotonic()
        vm = process.start([QEMU, "-accel", "kvm", "-m", "256", "-display", "none", "-monitor", "none", "-no-reboot",
                            "-kernel", kernel, "-append", "console=ttyS0 panic=-1", "-serial", f"file:{console}"],
                           stdout=process.DEVNULL, stderr=process.PIPE, text=True, error=SettingsError)
        try:
            if process.wrote(vm, console, KERNEL_BANNER, seconds):
                return True, f"a guest kernel printed its banner under KVM after {time.monotonic() - started:.1f} s"
            if vm.poll() is not None:
                return False, f"QEMU with KVM stopped: {first_line(vm.stderr.read()) or f'status {vm.returncode}'}"
            return False, f"a guest kernel printed nothing under KVM in {seconds} s"
        finally:
            process.stopped(vm)


def domain_type_of(spec, image):
    """The worker's domain type; for "auto", KVM where it boots the image's kernel here (kvm_boots, probed once
    per master), else QEMU's emulation. A hypervisor on another machine is not probed from here: TCG."""
    if spec.domain_type != "auto":
        return spec.domain_type
    if spec.build_host != MASTER_HOST:
        return "qemu"
    if "answer" not in KVM_PROBE:
        boots, how = kvm_boots(image["kernel"])
        KVM_PROBE["answer"] = "kvm" if boots else "qemu"
        log.msg(f"libvirt worker {spec.name}: domain_type auto is {KVM_PROBE['answer']} on this host: {how}")
    return KVM_PROBE["answer"]


def domain_xml(spec, image, settings=None):
    """The libvirt domain of a VM worker, booting image (current_image) on a copy-on-write child
    (hd_image) of its disk, for the master of settings (vm_credentials)."""
    if spec.domain_type not in LIBVIRT_DOMAIN_TYPES:
        raise SettingsError(f"libvirt worker {spec.name}: domain_type '{spec.domain_type}' is not one of "
                            f"{', '.join(LIBVIRT_DOMAIN_TYPES)}")
    values = {"domain_type": domain_type_of(spec, image), "name": spec.name, "memory_mib": spec.memory_mib,
              "cpus": spec.cpus, "kernel": image["kernel"], "initrd": image["initrd"],
              "cmdline": image["kernel_cmdline"], "hd_image": spec.hd_image, "fw_cfg_name": VM_FW_CFG,
              "fw_cfg": vm_credentials(spec, settings), "repo": REPO, "repo_tag": VM_REPO_TAG,
              "console_log": f"{spec.hd_image}{CONSOLE_SUFFIX}"}
    return DOMAIN_XML.format(**{k: escape(str(v), {'"': "&quot;"}) for k, v in values.items()})


class VMWorker(BoundedStart, buildbot_libvirt.LibVirtWorker):
    """Buildbot's LibVirtWorker (4.3.0), for a transient domain on a throwaway overlay.

    - The domain is made at each start from the image current.json names then (a promotion reaches
      the next VM, as it reaches the next container), on a fresh qcow2 child of its disk at hd_image.
      The domain's disk is that child, not the image: Buildbot issue 7122 (a domain of its own XML
      still boots base_image, whose changes then persist) cannot happen.
    - LibVirtWorker asks libvirt for the domain by name before it starts one and takes libvirt's
      "no such domain" for an error: a domain made from xml= exists only while it runs, so it could
      never start. Here no domain is a domain that does not run.
    - A domain of this worker's name that still runs (a master stopped without stopping it) is
      destroyed before the start, and an overlay left behind is removed: each build boots the image.
    - The overlay (and its console log) is removed at each stop, also when the VM is already gone
      (powered off, killed): LibVirtWorker returns early then and keeps it. The console of a start that
      failed is kept first, at <hd_image>.failed-start.log (the last one only).
    - A domain that stops before its worker connects (a kernel that panics, a VM powered off) fails its
      start at the next check_instance, not at the timeout; each failed start names the console's last
      line (BoundedStart).
    """

    kind = "VM"

    def __init__(self, name, password, render_domain=None, **kwargs):
        super().__init__(name, password, **kwargs)
        self.render_domain = render_domain

    def _libvirt(self):
        return buildbot_libvirt.libvirt

    @defer.inlineCallbacks
    def _get_domain(self):
        libvirt = self._libvirt()
        try:
            return (yield self._pool_do(lambda conn: conn.lookupByName(self.workername)))
        except libvirt.libvirtError as e:
            if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                return None
            log.err(f"{self}: libvirt could not look up the domain: {e}")
            self.pool.reset_connection(self.uri)
            raise

    @defer.inlineCallbacks
    def start_instance(self, build):
        leftover = yield self._get_domain()
        if leftover is not None and (yield self._pool_do(lambda conn: leftover.ID())) != -1:
            log.msg(f"{self}: destroying a running domain {self.workername} left by an earlier master")
            yield self._pool_do(lambda conn: leftover.destroy())
        self.remove_overlay()
        if self.render_domain is not None:
            self.xml, self.base_image = self.render_domain()
        return (yield super().start_instance(build))

    @defer.inlineCallbacks
    def check_instance(self):
        libvirt = self._libvirt()
        domain = yield self._get_domain()
        try:
            running = domain is not None and (yield self._pool_do(lambda conn: domain.isActive()))
        except libvirt.libvirtError as e:
            if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                raise
            running = False                 # gone between the lookup and the question
        return (True, "") if running else (False, "the VM stopped before its worker connected")

    def start_detail(self, quote=True):
        """What the console said (console_reason), and the console kept where the overlay's removal does not
        take it."""
        console = Path(f"{self.image}{CONSOLE_SUFFIX}")
        try:
            text = console.read_text(errors="replace")
        except OSError:
            return "no console output"
        kept = Path(f"{self.image}{FAILED_START_SUFFIX}")
        kept.write_text(text)
        said = console_reason(text) if quote else None
        if said:
            return f"console: {said!r} (all of it: {kept})"
        return f"console: {kept}" if text.strip() else f"the console is empty ({kept})"

    @defer.inlineCallbacks
    def stop_instance(self, fast=False):
        try:
            yield super().stop_instance(fast)
        finally:
            self.remove_overlay()

    def remove_overlay(self):
        for path in (self.image, f"{self.image}{CONSOLE_SUFFIX}"):
            if self.base_image and path and os.path.lexists(path):
                log.msg(f"{self}: removing {path}")
                os.remove(path)


def console_reason(text):
    """The console line that says best why a VM did not connect: the last alarm among its last lines (an
    initramfs that found no root device, a kernel panic, a unit that failed), else its last line (a
    login prompt: the VM booted, its worker did not connect)."""
    tail = without_terminal_codes(text).splitlines()[-CONSOLE_TAIL:]
    lines = [line for line in (raw.strip() for raw in tail) if line]
    alarm = next((line for line in reversed(lines) if CONSOLE_ALARM.search(line)), None)
    return alarm or (lines[-1] if lines else None)


def vm_worker(spec, settings):
    def render_domain():
        image = current_image(spec.images)
        return domain_xml(spec, image, settings), image["disk"]

    xml, base_image = render_domain()
    # build_wait_timeout=0: a fresh VM (and overlay) per release, destroyed once it and its package builds end.
    vm = VMWorker(spec.name, spec.password, render_domain=render_domain, hd_image=spec.hd_image,
                  base_image=base_image, uri=spec.uri, xml=xml, properties={REPO_PROPERTY: VM_REPO},
                  missing_timeout=spec.start_timeout or VM_BOOT_TIMEOUT,
                  check_instance_interval=CHECK_INSTANCE_INTERVAL, build_wait_timeout=0)
    vm.init_bounded_start(settings.max_lost_workers)
    return vm


def make_worker(spec, settings):
    if spec.kind == "docker":
        return docker_worker(spec, settings)
    if spec.kind == "libvirt":
        return vm_worker(spec, settings)
    return worker.Worker(spec.name, spec.password)


def make_workers(settings):
    check_images_of_platforms(settings)
    return [make_worker(spec, settings) for spec in settings.workers]


def current_image_name(images):
    """The vm_images definition (gcc12) of <images>/current.json's current image; None if it cannot tell
    (make_worker says why)."""
    try:
        return json.loads((Path(images) / CURRENT_IMAGE).read_text())["current"]["image"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_images_of_platforms(settings):
    """Refuse, at the master's start, a container or VM worker of a [[platforms]] entry whose current image
    is not its platform's build image (pgo/platforms.toml image): its steps would say PGO_PLATFORM=debian-13
    and compile with another release's compiler, and label what they make as that release's."""
    table = platforms.load()
    for row in settings.platforms:
        wanted = table[row.platform].image
        for spec in (settings.worker(name) for name in row.workers):
            if spec.kind == "local":
                continue
            running = current_image_name(spec.images)
            if running is not None and running != wanted:
                fix = (f"make {wanted} current there (`python3 -m vm_images --images {spec.images} promote "
                       f"{wanted}`)" if wanted else f"{row.platform} has no build image yet")
                its_own = next((p.name for p in table.values() if p.image == running), None)
                other = f", or name the worker in an entry of {its_own}" if its_own else ""
                raise SettingsError(f"platform {row.name} builds for {row.platform}, whose image is "
                                    f"{wanted or 'none'}, but its worker {spec.name} runs {running} (current in "
                                    f"{spec.images}): {fix}{other}")


def host_locks(settings):
    """One lock per host, by worker name: a local worker and a container (or a VM) of one machine share
    its cores, which a per-worker lock cannot see."""
    by_host = {host: util.MasterLock(f"heavy-builds-on-{host}", maxCount=settings.heavy_builds_per_host)
               for host in sorted({w.build_host for w in settings.workers})}
    return {w.name: by_host[w.build_host] for w in settings.workers}


def heavy_build_locks(settings):
    """The locks of a heavy build (release, nightly): its worker's, and a share of its worker's host.

    Rendered for the worker Buildbot picked (its `workername` property), both when it decides whether
    the build may start and when the build takes them: a builder's workers may be on several hosts.
    The package builds take no host lock: their release holds one while it waits for them."""
    per_worker = host_locks(settings)

    @util.renderer
    def locks(props):
        host = per_worker[props.getProperty("workername")]
        return [HEAVY_BUILD.access("exclusive"), host.access("counting")]
    return locks


def same_worker_as_release(builder, workers, request):
    """Package builds read the release's work directory: run them on the release's worker."""
    wanted = request.properties.getProperty("release_worker")
    return next((w for w in workers if w.worker.workername == wanted), None)
