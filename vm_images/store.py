"""The images folder: finished builds, the pointer to the image the build VMs use, and its history.

    <images>/<image>/<build>/         one finished build (manifest.json, disk.qcow2, ...)
    <images>/<image>/.<build>.partial  a build in progress; never read, renamed when complete
    <images>/current.json             the pointer the Buildbot master reads
    <images>/rollouts/                one log (and canary work folder) per rollout

A build is published by one rename (pgo/base/atomic.py reveal), so readers see all of it or nothing;
the pointer is rewritten atomically, and nothing here ever deletes a build.
"""

import re
import time
from dataclasses import dataclass
from pathlib import Path

from pgo.base import atomic, readers
from pgo.base.protocol import CURRENT_IMAGE
from vm_images import ImageError

BUILD_ID_RE = re.compile(r"^\d{8}T\d{6}Z$")
# A finished build's files (vm_images/build.py makes them).
MANIFEST = "manifest.json"
ROOTFS_TARBALL, DISK, KERNEL, INITRD = "rootfs.tar.zst", "disk.qcow2", "vmlinuz", "initrd.img"
ARTIFACTS = (ROOTFS_TARBALL, DISK, KERNEL, INITRD)
ROLLOUT_RECORD = "rollout.json"     # <images>/rollouts/<id>/rollout.json (vm_images/rollout.py)


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def stamp():
    """The time as a name: build ids, rollout ids, test and gate runs (BUILD_ID_RE)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def read_json(path, what):
    return readers.read_json(path, what, ImageError)


@dataclass(frozen=True)
class Build:
    image: str
    build_id: str
    path: Path

    @property
    def ref(self):
        return f"{self.image}/{self.build_id}"

    @property
    def manifest(self):
        return read_json(self.path / MANIFEST, "image manifest")

    @property
    def rootfs(self):
        return self.path / "rootfs"


class Store:
    def __init__(self, root):
        self.root = Path(root).resolve()

    @property
    def pointer_file(self):
        return self.root / CURRENT_IMAGE

    @property
    def rollouts(self):
        return self.root / "rollouts"

    def scratch(self, name):
        return self.root / "scratch" / name

    # builds
    def new_build_dir(self, image):
        build_id = stamp()
        final = self.root / image / build_id
        partial = atomic.kept(final)
        if final.exists() or partial.exists():
            raise ImageError(f"a build {image}/{build_id} already exists; wait a second and retry")
        partial.mkdir(parents=True)
        return build_id, partial, final

    def builds(self, image):
        folder = self.root / image
        if not folder.is_dir():
            return []
        return [Build(image, p.name, p) for p in sorted(folder.iterdir())
                if BUILD_ID_RE.match(p.name) and (p / MANIFEST).is_file()]

    def build(self, ref):
        """A build named IMAGE (its latest) or IMAGE/BUILD."""
        image, _, build_id = ref.partition("/")
        builds = self.builds(image)
        if not builds:
            raise ImageError(f"no finished build of image '{image}' in {self.root} "
                             f"(build one: python3 -m vm_images build {image})")
        if not build_id:
            return builds[-1]
        for build in builds:
            if build.build_id == build_id:
                return build
        raise ImageError(f"no build {ref} in {self.root} (builds of {image}: "
                         f"{', '.join(b.build_id for b in builds)})")

    # the pointer
    def pointer(self):
        if not self.pointer_file.is_file():
            return {"current": None, "history": []}
        return read_json(self.pointer_file, "image pointer")

    def current(self):
        entry = self.pointer()["current"]
        if entry is None:
            raise ImageError(f"no image is current in {self.root}: set one with "
                             "`python3 -m vm_images promote IMAGE`")
        return self.build(f"{entry['image']}/{entry['build']}")

    def point_to(self, build, reason):
        """Make build the current image; the entry it replaces goes to the history."""
        manifest = build.manifest
        pointer = self.pointer()
        if pointer["current"] is not None:
            pointer["history"].append({**pointer["current"], "replaced_at": now()})
        pointer["current"] = {
            "image": build.image,
            "build": build.build_id,
            "since": now(),
            "reason": reason,
            "compiler": {k: manifest["definition"]["compiler"][k] for k in ("cc", "cxx", "version")},
            # relative to the images folder, so the master can mount it anywhere
            "disk": f"{build.ref}/{DISK}",
            "kernel": f"{build.ref}/{KERNEL}",
            "initrd": f"{build.ref}/{INITRD}",
            "kernel_cmdline": manifest["kernel_cmdline"],
            "rootfs_tarball": f"{build.ref}/{ROOTFS_TARBALL}",
        }
        self.root.mkdir(parents=True, exist_ok=True)
        atomic.write_json(self.pointer_file, pointer)
        return pointer["current"]

    def set_container(self, build, fields):
        """Name build's container image (and its layout) in the pointer; build must be the current image."""
        pointer = self.pointer()
        current = pointer["current"]
        if current is None or (current["image"], current["build"]) != (build.image, build.build_id):
            raise ImageError(f"{build.ref} is not the current image: its container image is not named in "
                             f"{self.pointer_file}")
        current.update(fields)
        atomic.write_json(self.pointer_file, pointer)
        return current

    def previous(self):
        """The entry a rollback returns to: the newest one in the history unlike the current one."""
        pointer = self.pointer()
        current = pointer["current"]
        if current is None:
            raise ImageError("no image is current: nothing to roll back")
        for entry in reversed(pointer["history"]):
            if (entry["image"], entry["build"]) != (current["image"], current["build"]):
                return self.build(f"{entry['image']}/{entry['build']}")
        raise ImageError(f"{current['image']}/{current['build']} is the only image ever current: "
                         "nothing to roll back to")
