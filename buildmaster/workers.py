"""Workers, and the locks that keep one heavy build per worker and per host (heavy_builds_per_host).

A local worker is a buildbot-worker process on this machine (`./release` starts
it). A libvirt worker is a latent VM, booted for a build from the image that
vm_images/ made current (its current.json) and shut down after it. A docker
worker is a latent container of the same image (`python3 -m vm_images promote`
imports it into Docker), started for a release on the host's network, reaching
the master on 127.0.0.1, and removed after it.
"""

import json
from pathlib import Path
from xml.sax.saxutils import escape

from buildbot.plugins import util, worker

from buildmaster.settings import DOCKER_HOST, SettingsError
from pgo import REPO, platforms
from pgo.protocol import CURRENT_IMAGE

# Missing VMs and lost connections must end, not hang a release.
VM_BOOT_TIMEOUT = 20 * 60
VM_IDLE_SHUTDOWN = 10 * 60
# A container's worker connects within seconds (plus its apt-get update); a daemon that cannot
# start it must not hold a release for the VMs' twenty minutes.
CONTAINER_START_TIMEOUT = 5 * 60
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


CONTAINER_FIELDS = ("container_image", "worker_user", "worker_uid", "worker_gid", "worker_cache", "worker_repo")


def current_container(images):
    """The current image's container image and its layout, from <images>/current.json."""
    pointer = Path(images) / CURRENT_IMAGE
    try:
        current = json.loads(pointer.read_text())["current"]
        return {key: current[key] for key in CONTAINER_FIELDS}
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


@util.renderer
def running_image(props):
    """The image the build's container runs (None on other workers), for the builds it triggers."""
    started = getattr(props.getBuild().workerforbuilder.worker, "instance", None) or {}
    return props.getProperty(IMAGE_PROPERTY) or started.get("image")


def container_volumes(spec, layout, settings):
    """The checkout read-only, and the worker's cache volume at the same path every time (the pipeline's
    source tree lives there, and the profile's paths). No profile archive: the master keeps it, and a
    build uploads and downloads its profile (buildmaster/factories.py)."""
    return [f"{REPO}:{layout['worker_repo']}:ro", f"pgo-cache-{spec.name}:{layout['worker_cache']}"]


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
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    try:
        client.inspect_image(image)
        return "present"
    except docker.errors.ImageNotFound:
        return "missing"
    except (docker.errors.DockerException, requests.RequestException) as e:
        return str(e).splitlines()[0] if str(e) else type(e).__name__
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


def docker_worker(spec, settings):
    layout = current_container(spec.images)
    check_image_on_docker_host(spec, layout["container_image"])
    hostconfig = {"network_mode": "host", "init": True, "shm_size": "1g", "mem_limit": f"{spec.memory_mib}m",
                  "nano_cpus": spec.cpus * 10**9, "tmpfs": hidden_settings(settings, layout)}
    return worker.DockerLatentWorker(
        spec.name, spec.password, docker_host=spec.docker_host, image=container_image(spec.images),
        masterFQDN=master_address(settings), hostconfig=hostconfig, volumes=container_volumes(spec, layout, settings),
        properties={REPO_PROPERTY: layout["worker_repo"]}, missing_timeout=CONTAINER_START_TIMEOUT,
        build_wait_timeout=0)


def domain_xml(spec, image):
    values = {"name": spec.name, "memory_mib": spec.memory_mib, "cpus": spec.cpus, "kernel": image["kernel"],
              "initrd": image["initrd"], "cmdline": image["kernel_cmdline"], "hd_image": spec.hd_image}
    return DOMAIN_XML.format(**{k: escape(str(v), {'"': "&quot;"}) for k, v in values.items()})


def make_worker(spec, settings):
    if spec.kind == "docker":
        return docker_worker(spec, settings)
    if spec.kind == "libvirt":
        image = current_image(spec.images)
        return worker.LibVirtWorker(spec.name, spec.password, hd_image=spec.hd_image, base_image=image["disk"],
                                    uri=spec.uri, xml=domain_xml(spec, image),
                                    missing_timeout=VM_BOOT_TIMEOUT, build_wait_timeout=VM_IDLE_SHUTDOWN)
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
