"""A builder's folder at the start of a build: the work of an interrupted build of the same request is kept,
so that the build resumes after its last finished phase (`pgo build --phase NAME --resume`); any other
build starts clean.

A release of the full server takes longer than a worker may live (a session, a VM, a host's reboot): a
release whose worker was lost or stopped (`./release stop`) is started again by Buildbot from its first
step, and without this it would build everything again. What counts as the same request is what decides
the work's content: the master's (version, configuration, source, profile, the worker's image) and the
worker's own (the pipeline's code in its checkout, and its compilers). A build that ends, in success or
failure, forgets its request (`--forget`, Buildbot's last step, run even after a failure or a cancel):
only an interrupted build, whose last step never ran, is resumed. Its phases each prove what they made
as before; a phase cut off in the middle was never recorded as done, and runs again (its build tool
rebuilds what it had not finished).
"""

import argparse
import hashlib
import json
import os
import shutil
from pathlib import Path

from pgo import REPO, PipelineError
from pgo.base import process
from pgo.base.atomic import remove, write_json
from pgo.base.runner import say
from pgo.core import toolchain
from pgo.core.config import build_config

GIB = 1 << 30

REQUEST_FILE = "resume-request.json"
# Every builder's folder is <the worker's folder>/builds/<builder> (buildmaster/builders.py): on a container
# worker a volume of its own is mounted there (vm_images makes the mount point, buildmaster/workers.py mounts
# it), so that the work outlives the container, as a local worker's does.
BUILDERS_DIR = "builds"
# The worker's part of the pipeline: what a phase runs. The master's own code decides no work's content.
PIPELINE_DIRS = ("pgo", "packaging", "profile_load", "cmake")


def pipeline_digest(repo=REPO):
    """sha256 of the pipeline's files in a checkout (names and contents; bytecode caches left out)."""
    digest = hashlib.sha256()
    for top in PIPELINE_DIRS:
        for path in sorted((repo / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                digest.update(str(path.relative_to(repo)).encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def worker_request(master_request, cc, cxx, repo=REPO):
    """The whole request: the master's, and what this worker would build it with."""
    compiler = toolchain.detect(cc, cxx)
    return {**master_request, "pipeline": pipeline_digest(repo), "compiler": compiler.banner,
            "compiler_version": compiler.version}


def prepare(folder, request, keep, clean, out=say):
    """Keep `keep` (folder's entries) when folder holds an unfinished build of request, else remove them;
    remove `clean` either way; record request. Returns whether the build resumes."""
    folder = Path(folder)
    recorded = folder / REQUEST_FILE
    previous = read_request(recorded)
    kept = [name for name in keep if (folder / name).exists()]
    resumes = previous == request and bool(kept)
    if resumes:
        out(f"resuming the interrupted build of this request: keeping {', '.join(kept)}; "
            "its finished phases are not run again")
    else:
        out(f"starting clean: {why_clean(previous, request, kept)}")
        for name in keep:
            remove(folder / name)
    for name in clean:
        remove(folder / name)
    folder.mkdir(parents=True, exist_ok=True)
    write_json(recorded, request)
    return resumes


def why_clean(previous, request, kept):
    if previous is None:
        return "no interrupted build in this folder (the last one finished, or none ran)"
    changed = sorted(key for key in {*previous, *request} if previous.get(key) != request.get(key))
    if changed:
        return f"the interrupted build here was of another request (its {', '.join(changed)} differ)"
    return "the interrupted build here left no work to resume"


def read_request(path):
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"unreadable": str(path)}     # never equal to a request: start clean
    return data if isinstance(data, dict) else {"unreadable": str(path)}


def forget(folder, out=say):
    """The build ended (any result but an interruption): the next one starts clean."""
    (Path(folder) / REQUEST_FILE).unlink(missing_ok=True)
    out("the build ended: the next build in this folder starts clean")


def parse_request(text):
    try:
        request = json.loads(text)
    except ValueError as e:
        raise PipelineError(f"--request is not JSON: {e}") from e
    if not isinstance(request, dict) or not all(isinstance(k, str) for k in request):
        raise PipelineError("--request must be a JSON object")
    return request


def entry_names(names, option):
    for name in names:
        if not name or os.sep in name or name in (".", ".."):
            raise PipelineError(f"{option} {name!r}: give a name in the folder, not a path")
    return names


def require_space(folder, config_name, disk_gib, kept, out=say):
    """Refuse, in one line, a release whose folder has less free than its configuration takes (disk_gib, or
    its configuration's), the work kept for it counted: before anything is built, rather than at its
    test phase an hour later. Nothing kept is removed: the next try resumes it."""
    if disk_gib is None:
        out(f"free space not checked: configuration '{config_name}' says nothing of what a release takes "
            "(pgo/configs.toml disk_gib)")
        return
    folder = Path(folder)
    here = sum(size_of(folder / name) for name in kept)
    need, free = disk_gib * GIB - here, shutil.disk_usage(folder).free
    takes = (f"a release of configuration '{config_name}' takes about {disk_gib:.10g} GiB there"
             + (f", {size_text(here)} of it kept from the interrupted build" if here else ""))
    if free < need:
        raise PipelineError(f"{folder} has {size_text(free)} free, and {takes}: free {size_text(need - free)} first")
    out(f"free space: {size_text(free)} in {folder}; {takes}")


def size_text(size):
    return f"{size / GIB:.1f} GiB" if size >= GIB // 10 else f"{size / (1 << 20):.0f} MiB"


def size_of(path):
    """Bytes a file or folder takes on disk (du: a build tree's 100,000 files in a second or two)."""
    if not path.exists():
        return 0
    return int(process.output_of(["du", "-s", "--block-size=1", path]).split()[0])


def cmd_resume(args):
    if args.forget:
        forget(args.folder)
        return
    if args.request is None:
        raise PipelineError("give --request (or --forget)")
    request = worker_request(parse_request(args.request), args.cc, args.cxx)
    keep = entry_names(args.keep, "--keep")
    # The configuration first: one this checkout does not know is refused before anything is removed.
    disk_gib = args.disk_gib
    if disk_gib is None and "config" in request:
        disk_gib = build_config(request["config"]).disk_gib
    resumes = prepare(args.folder, request, keep, entry_names(args.clean, "--clean"))
    require_space(args.folder, request.get("config", "?"), disk_gib, keep if resumes else [])


def positive_gib(text):
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a size in GiB, above 0")
    return value


def register(sub):
    resume = sub.add_parser("resume", help="prepare a builder's folder: keep the work of an interrupted build "
                            "of the same request, else start clean")
    resume.add_argument("--folder", required=True, help="the builder's folder")
    resume.add_argument("--request", help="the master's side of the request, a JSON object")
    resume.add_argument("--keep", nargs="*", default=[], metavar="NAME",
                        help="what an interrupted build of the same request leaves to resume from")
    resume.add_argument("--clean", nargs="*", default=[], metavar="NAME", help="removed in every case")
    resume.add_argument("--forget", action="store_true", help="the build ended: the next one starts clean")
    resume.add_argument("--disk-gib", type=positive_gib, metavar="GIB",
                        help="what the release takes in the folder, instead of its configuration's disk_gib")
    toolchain.add_compiler_arguments(resume)
    resume.set_defaults(func=cmd_resume)
