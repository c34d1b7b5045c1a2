"""The current image as a container image, for the master's Docker latent workers.

    python3 -m vm_images container-image     import the current image's rootfs.tar.zst into Docker

The same root filesystem the VMs boot, imported as `pgo-worker/<image>:<build>`: what the
image was built with is what a container worker builds with. The tag and what the master needs
to know of the image's layout go into current.json, which the master reads: `container_image`,
`worker_user`, `worker_cache` (where its cache volume goes) and `worker_repo` (where it mounts
this repository).

Docker 20.10 (Debian 12's docker.io) cannot read a zstd tarball (`docker import` says
"invalid tar header"), so the tarball goes through `zstd -dc` into `docker import -`. Docker
reads no /etc/environment: the pinned compiler's CC and CXX are set at import (ENV), as the
VM's worker unit sets them.
"""

import re

from pgo.base import process
from pgo.build.resume import BUILDERS_DIR
from vm_images import ImageError
from vm_images.store import ROOTFS_TARBALL

# Docker's rule for a repository name and a tag (lower case; a tag of up to 128 characters)
TAG_RE = re.compile(r"^[a-z0-9]+(?:[._/-][a-z0-9]+)*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
# provision (vm_images/build.py) writes these into the image; the container runs START.
START = "/opt/buildbot-worker/start-container"
TAC = "/opt/buildbot-worker/container.tac"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CACHE = ".cache/pgo"            # the pipeline's download and source cache, in the worker's home
WORKER_DIR = "worker"         # in the worker user's home; holds buildbot.tac once deployed


def builds_folder(user):
    """Where the worker keeps its builder folders (pgo/build/resume.py BUILDERS_DIR): a container worker's builds
    volume is mounted there."""
    return f"/home/{user}/{WORKER_DIR}/{BUILDERS_DIR}"
# This repository inside the image, read-only: where the image's tests and a container worker see it.
REPO_IN_IMAGE = "/srv/pgo"
LABEL_PREFIX = "org.pgo.image"


def container_tag(image, build_id):
    """The Docker tag of one image build: pgo-worker/<image>:<build>."""
    tag = f"pgo-worker/{image}:{build_id}"
    if not TAG_RE.match(tag):
        raise ImageError(f"'{tag}' is no valid Docker tag: image names are lower case letters, digits, '.', '-'")
    return tag


def import_changes(build):
    """docker import's --change options: the start script, the pinned compiler, the labels."""
    manifest = build.manifest
    compiler = manifest["definition"]["compiler"]
    rootfs_sha256 = manifest["artifacts"][ROOTFS_TARBALL]["sha256"]
    changes = [f'CMD ["{START}"]', f"ENV PATH={PATH}", "ENV LANG=C.UTF-8",
               f"ENV CC={compiler['cc']}", f"ENV CXX={compiler['cxx']}", "WORKDIR /",
               f"LABEL {LABEL_PREFIX}.name={build.image}", f"LABEL {LABEL_PREFIX}.build={build.build_id}",
               f"LABEL {LABEL_PREFIX}.rootfs-sha256={rootfs_sha256}"]
    return [arg for change in changes for arg in ("--change", change)]


def docker_answers(docker):
    try:
        return process.run([docker, "info"], error=ImageError, timeout=60).returncode == 0
    except ImageError:
        return False


def imported_sha256(docker, tag):
    """The rootfs checksum label of tag in Docker, or None when Docker has no such image."""
    done = process.run([docker, "image", "inspect", "--format",
                        f'{{{{index .Config.Labels "{LABEL_PREFIX}.rootfs-sha256"}}}}', tag], error=ImageError)
    return done.stdout.strip() if done.returncode == 0 else None


def import_build(build, docker="docker", say=print):
    """Import build's rootfs.tar.zst as its tag (once: an image with the same rootfs checksum stays)."""
    tag = container_tag(build.image, build.build_id)
    tarball = build.path / ROOTFS_TARBALL
    if not tarball.is_file():
        raise ImageError(f"{build.ref} has no {ROOTFS_TARBALL}: it cannot become a container image")
    expected = build.manifest["artifacts"][ROOTFS_TARBALL]["sha256"]
    if imported_sha256(docker, tag) == expected:
        say(f"container image {tag} is already imported")
        return tag
    say(f"importing {build.ref}/{ROOTFS_TARBALL} into Docker as {tag}")
    # bash for pipefail: a broken tarball must fail the import, not give an empty image
    script = 'set -o pipefail; tarball=$1 docker=$2; shift 2; zstd -dc -- "$tarball" | "$docker" import "$@"'
    done = process.run(["bash", "-c", script, "bash", tarball, docker, *import_changes(build), "-", tag],
                       error=ImageError)
    if done.returncode != 0:
        raise ImageError(f"docker import of {build.ref} failed with status {done.returncode}: "
                         f"{process.last_lines(done, 1)}")
    return tag


def worker_ids(rootfs, user):
    """The worker user's uid and gid in the image: what a folder the container writes (the
    profile archive) must let write."""
    for line in (rootfs / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise ImageError(f"the image has no user '{user}'")


def make_container_image(store, docker="docker", say=print):
    """Import the current image into Docker and name it in current.json."""
    build = store.current()
    tag = import_build(build, docker, say)
    user = build.manifest["definition"]["worker"]["user"]
    uid, gid = worker_ids(build.rootfs, user)
    builds = builds_folder(user)
    # Where a container keeps its builder folders in a volume: images made before that have no mount
    # point for it, and their containers none.
    kept = {"worker_builds": builds} if (build.rootfs / builds.lstrip("/")).is_dir() else {}
    entry = store.set_container(build, {"container_image": tag, "worker_user": user, "worker_uid": uid,
                                        "worker_gid": gid, "worker_cache": f"/home/{user}/{CACHE}",
                                        "worker_repo": REPO_IN_IMAGE, **kept})
    say(f"container image of {build.ref}: {tag} (worker user {entry['worker_user']}); pointer {store.pointer_file}")
    return entry


def follow_pointer(store, docker="docker", say=print):
    """After the pointer moved (promote, a rollout, rollback): import the image it names, when Docker
    answers here, so that container workers run it from their next build on; one line either way."""
    if not docker_answers(docker):
        say(f"no container image: `{docker} info` does not answer (once it does: "
            "python3 -m vm_images container-image)")
        return None
    return make_container_image(store, docker, say)
