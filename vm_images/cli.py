"""vm_images: build-VM images with pinned compilers, their tests, and the compiler upgrade rollout.

    python3 -m vm_images validate                       check vm_images/images.toml
    python3 -m vm_images build gcc12                    build an image (root, ~3 min)
    python3 -m vm_images test gcc12                     pinned compiler + fixture pipeline inside it
    python3 -m vm_images diff gcc12/BUILD1 gcc12/BUILD2 what changed between two builds
    python3 -m vm_images promote gcc11                  make an image current (first setup), and import it
                                                        into Docker when `docker info` answers
    python3 -m vm_images container-image                import the current image into Docker (pgo-worker/IMAGE:BUILD)
    python3 -m vm_images rollout --to gcc12             build, test, canary, then promote
    python3 -m vm_images rollout --to gcc14 --canary-config minimal-11.8 --canary-source mariadb_11.8.6-0+deb13u1.dsc
                                                        the canary from a Debian source package's .dsc
    python3 -m vm_images rollout --resume ROLLOUT       a stopped rollout again, its passed steps kept
    python3 -m vm_images rollback                       back to the previous image
    python3 -m vm_images status                         the current image and its history
"""

import argparse
import json

from pgo.base.errors import run_command
from vm_images import DEFAULT_IMAGES, ImageError, definition
from vm_images.store import ROLLOUT_RECORD, Store, read_json


def main(argv=None):
    return run_command(make_parser(), argv, "vm_images")


def make_parser():
    parser = argparse.ArgumentParser(prog="python3 -m vm_images", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", default=str(DEFAULT_IMAGES),
                        help="the images folder (default: run/images in the repository)")
    sub = parser.add_subparsers(metavar="command")

    validate = sub.add_parser("validate", help="check every image and canary definition")
    validate.set_defaults(func=cmd_validate)

    listing = sub.add_parser("list", help="the defined images and their builds")
    listing.set_defaults(func=cmd_list)

    build = sub.add_parser("build", help="build an image into the images folder")
    build.add_argument("image")
    build.set_defaults(func=cmd_build)

    test = sub.add_parser("test", help="test a build inside its root filesystem")
    test.add_argument("build", help="IMAGE (its latest build) or IMAGE/BUILD")
    test.set_defaults(func=cmd_test)

    diff = sub.add_parser("diff", help="compare two builds' manifests (exit 1 when they differ)")
    diff.add_argument("a", help="IMAGE, IMAGE/BUILD or a manifest.json")
    diff.add_argument("b")
    diff.set_defaults(func=cmd_diff)

    promote = sub.add_parser("promote", help="make a build the current image, without a rollout")
    promote.add_argument("build", help="IMAGE (its latest build) or IMAGE/BUILD")
    promote.add_argument("--reason", default="promoted by hand")
    container_options(promote)
    promote.set_defaults(func=cmd_promote)

    container = sub.add_parser("container-image", help="import the current image into Docker, for container "
                               "workers, and name it in current.json")
    container.add_argument("--docker", default="docker", help="the Docker client (default: docker on PATH)")
    container.set_defaults(func=cmd_container_image)

    rollout = sub.add_parser("rollout", help="move the build VMs to another image: build, test, canary, promote")
    rollout.add_argument("--to", dest="to_image", help="the new image, e.g. gcc12")
    rollout.add_argument("--from", dest="from_image",
                         help="the image expected to be current (refuses if another one is)")
    rollout.add_argument("--build", dest="reuse_build",
                         help="use this finished build of the new image instead of building one")
    rollout.add_argument("--canary-config",
                         help="canary from vm_images/images.toml (default minimal; minimal-11.8 for an image of "
                         "Debian 13; fixture for a quick run)")
    rollout.add_argument("--canary-source", metavar="DSC",
                         help="build the canary from this Debian source package's .dsc (its files beside it), "
                         "for a mirror that no longer lists the canary's version; verified and copied into the "
                         "rollout's folder, so both images build the same bytes")
    rollout.add_argument("--resume", metavar="ROLLOUT",
                         help="continue this stopped rollout (e.g. a gate disturbed by noise): the steps it "
                         "passed are kept, the rest run again")
    container_options(rollout)
    rollout.set_defaults(func=cmd_rollout)

    rollback = sub.add_parser("rollback", help="make the previous image current again (deletes nothing)")
    rollback.add_argument("--reason", default="rolled back by hand")
    container_options(rollback)
    rollback.set_defaults(func=cmd_rollback)

    status = sub.add_parser("status", help="the current image and the pointer's history")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    return parser


def container_options(command):
    """A command that moves the pointer also imports the image it names into Docker (container workers)."""
    command.add_argument("--docker", default="docker", help="the Docker client (default: docker on PATH)")
    command.add_argument("--no-container", action="store_true",
                         help="do not import the image into Docker, even when `docker info` answers")


def follow_pointer(store, args):
    if not args.no_container:
        from vm_images.container import follow_pointer
        follow_pointer(store, args.docker)


def cmd_validate(args):
    images, canaries = definition.validate_all()
    for image in images:
        print(f"{image.name}: {image.distribution} {image.release}, {image.compiler.cc} {image.compiler.version} "
              f"({', '.join(image.compiler.pins())}), {len(image.packages)} packages, "
              f"buildbot-worker {image.worker.buildbot_worker} as {image.worker.user}")
    for canary in canaries:
        print(f"canary {canary.name}: {canary.config} {canary.version} from {canary.source}, gate {canary.gate}")
    print(f"{definition.DEFINITIONS.name}: {len(images)} images, {len(canaries)} canaries, valid")


def cmd_list(args):
    store = Store(args.images)
    for name in definition.image_names():
        builds = store.builds(name)
        print(f"{name}: {', '.join(b.build_id for b in builds) or 'no builds'}")


def cmd_build(args):
    from vm_images.build import build
    build(definition.image(args.image), Store(args.images))


def cmd_test(args):
    from vm_images.checks import test_image
    store = Store(args.images)
    return 0 if test_image(store.build(args.build), store).passed else 1


def cmd_diff(args):
    from vm_images.manifest import diff, load_manifest
    store = Store(args.images)
    lines = diff(load_manifest(args.a, store), load_manifest(args.b, store))
    print("\n".join(lines) if lines else "no differences in packages, compiler or definition")
    return 1 if lines else 0


def cmd_promote(args):
    store = Store(args.images)
    entry = store.point_to(store.build(args.build), args.reason)
    print(f"current image: {entry['image']}/{entry['build']} ({entry['compiler']['cc']} "
          f"{entry['compiler']['version']}); pointer {store.pointer_file}")
    follow_pointer(store, args)


def cmd_container_image(args):
    from vm_images.container import docker_answers, make_container_image
    if not docker_answers(args.docker):
        raise ImageError(f"`{args.docker} info` does not answer: is the Docker daemon running, and may this user "
                         "use it?")
    make_container_image(Store(args.images), args.docker)


def cmd_rollout(args):
    from vm_images.rollout import ImageOperations, Rollout
    store = Store(args.images)
    to_image, canary = args.to_image, args.canary_config
    if args.resume:
        record = read_json(store.rollouts / args.resume / ROLLOUT_RECORD, f"rollout {args.resume}")
        to_image, canary = to_image or record["to"], canary or record["canary"]["name"]
    if not to_image:
        raise ImageError("rollout needs --to IMAGE (or --resume ROLLOUT)")
    rollout = Rollout(store, ImageOperations(store), definition.canary(canary or "minimal"),
                      source=args.canary_source)
    promoted = rollout.run(to_image, args.from_image, args.reuse_build, args.resume)
    if promoted:
        follow_pointer(store, args)
    return 0 if promoted else 1


def cmd_rollback(args):
    from vm_images.rollout import rollback
    store = Store(args.images)
    rollback(store, args.reason)
    follow_pointer(store, args)


def cmd_status(args):
    store = Store(args.images)
    pointer = store.pointer()
    if args.json:
        print(json.dumps(pointer, indent=2))
        return
    current = pointer["current"]
    if current is None:
        print(f"no image is current ({store.pointer_file} does not exist yet)")
        return
    print(f"current: {current['image']}/{current['build']} ({current['compiler']['cc']} "
          f"{current['compiler']['version']}) since {current['since']}: {current['reason']}")
    for entry in reversed(pointer["history"]):
        print(f"  before: {entry['image']}/{entry['build']} ({entry['compiler']['cc']} "
              f"{entry['compiler']['version']}) {entry['since']} .. {entry['replaced_at']}: {entry['reason']}")
