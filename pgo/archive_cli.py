"""`pgo archive ...`: store, promote, list, show, verify and prune the profile archive (pgo/archive/store.py);
add, wants and pick move an entry between a worker and the master, which holds the archive of record."""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from pgo import PipelineError
from pgo.archive import model as archive_model, store as archive
from pgo.archive.model import DAMAGE, KINDS, Gone, build_root, damage, root_of, trained_by, workload_version
from pgo.archive.store import (
    add,
    archived_entry,
    entries,
    find,
    kind_of,
    pack,
    promote,
    prune,
    store,
    sweep_leftovers,
    unpack_sent,
    verify,
)
from pgo.base.atomic import write_json
from pgo.base.errors import fail
from pgo.base.versions import validate_version
from pgo.build.reuse import chosen, read_wants, unpublished_kind, wanted
from pgo.core import toolchain
from pgo.core.workdir import Workdir

ARCHIVE_HELP = "\n".join(module.__doc__ for module in (archive_model, archive))


def register(subparsers):
    archive = subparsers.add_parser("archive", help="the profile archive: store, promote, list, show, verify, prune",
                                    description=ARCHIVE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = archive.add_subparsers(metavar="action")

    def action(name, func, help, archive=True):
        parser = commands.add_parser(name, help=help)
        if archive:
            parser.add_argument("--archive", help="archive directory (default: $PGO_ARCHIVE or "
                                "~/.local/share/pgo/profiles)")
        parser.set_defaults(func=func)
        return parser

    store_cmd = action("store", cmd_store, "archive the profile of a trained work directory")
    store_cmd.add_argument("--workdir", required=True)
    store_cmd.add_argument("--kind", choices=KINDS,
                           help="release (kept forever), pending (a release not yet published) or nightly "
                           "(pruned); default: pending for a release build (promote it once published), "
                           "nightly for a nightly")
    promote_cmd = action("promote", cmd_promote, "raise an archived profile's kind, e.g. to release once published")
    promote_cmd.add_argument("name", nargs="?", help="entry name or profile id")
    promote_cmd.add_argument("--workdir", help="instead of a name: the profile the work directory archived "
                             "(default --archive: the work directory's)")
    promote_cmd.add_argument("--kind", choices=KINDS, default="release", help="default: release")
    list_cmd = action("list", cmd_list, "list the archived profiles")
    list_cmd.add_argument("--json", action="store_true")
    show = action("show", cmd_show, "print an archived profile's manifest")
    show.add_argument("name", help="entry name or profile id")
    verify_cmd = action("verify", cmd_verify, "check checksums, manifest and every .gcda of one or all entries")
    verify_cmd.add_argument("name", nargs="?", help="entry name or profile id (default: all)")
    prune_cmd = action("prune", cmd_prune, "remove old nightly profiles (releases are always kept)")
    prune_cmd.add_argument("--keep", type=int, default=10, help="nightlies kept per product line (default 10)")
    prune_cmd.add_argument("--dry-run", action="store_true")
    add_cmd = action("add", cmd_add, "store the entry of a one-entry archive folder (a worker's upload) or of a "
                     "file `pick` made, checked first; a damaged one is refused and nothing is stored")
    add_cmd.add_argument("--from", dest="source", required=True, metavar="DIR|FILE",
                         help="a folder holding an archive of one entry, or the file `pick` made")
    add_cmd.add_argument("--sha256", help="the file's checksum as `pick` recorded it (needed with a file)")
    add_cmd.add_argument("--record", metavar="FILE", help="also write the stored entry's name and kind to FILE, "
                         "as JSON (what the Buildbot step reads)")
    wants_cmd = action("wants", cmd_wants, "write what a build that reuses a profile matches it on (product, "
                       "line, target, GCC version, flags fingerprint), for `pick` on another machine", archive=False)
    wants_cmd.add_argument("--config", required=True, help="named configuration from pgo/configs.toml")
    wants_cmd.add_argument("--version", required=True, help="the version built, MAJOR.MINOR.PATCH")
    wants_cmd.add_argument("--profile", required=True, metavar="NAME|latest",
                           help="the entry name or profile id to reuse, or 'latest', as for pgo build --profile-from")
    toolchain.add_compiler_arguments(wants_cmd)
    wants_cmd.add_argument("--out", required=True, metavar="FILE", help="where to write them (JSON)")
    pick_cmd = action("pick", cmd_pick, "choose the entry a build's wants name (as pgo build --profile-from "
                      "would) and put it in one file to send, with its sha256")
    pick_cmd.add_argument("--wants", required=True, metavar="FILE", help="what `pgo archive wants` wrote")
    pick_cmd.add_argument("--out", required=True, metavar="FILE", help="the file to send (for `add --from`)")
    pick_cmd.add_argument("--record", metavar="FILE", help="also write the entry's name and the file's sha256 to "
                          "FILE, as JSON (what the Buildbot step reads)")
    archive.set_defaults(func=lambda args: archive.print_help() or 2)


def cmd_store(args):
    workdir = Workdir(args.workdir)
    settings = workdir.load_settings()
    # As --help says, not the work directory's archive: storing there is what its archive phase did.
    store(workdir, root_of(args.archive), args.kind or unpublished_kind(settings))


def cmd_promote(args):
    if bool(args.name) == bool(args.workdir):
        raise PipelineError("give the archived profile's name or --workdir (one of them)")
    if args.name:
        promote(root_of(args.archive), args.name, args.kind)
        return
    # Without --archive, the archive the work directory's build stored into and reused from: a copy of it in
    # $PGO_ARCHIVE's (a mirror, an upload) keeps its own kinds.
    workdir = Workdir(args.workdir)
    root = root_of(args.archive) if args.archive else build_root(workdir.load_settings())
    promote(root, archived_entry(workdir, "promoted"), args.kind)


def cmd_list(args):
    """Every entry, the damaged ones too (kind "damaged" and what is wrong): one bad entry hides no other."""
    root = root_of(args.archive)
    leftovers = sweep_leftovers(root)
    rows = []
    for entry in entries(root):
        try:
            m = entry.manifest()
            rows.append({"name": entry.name, "kind": kind_of(entry), "config": m["config"], "created": m["created"],
                         "workload_version": workload_version(m), "gcda_files": len(m["files"]),
                         "builder": m["built_by"].get("builder")})
        except Gone:
            continue
        except DAMAGE as e:
            rows.append({"name": entry.name, "kind": "damaged", "problem": damage(entry, e)})
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"no archived profiles in {root}")
    for row in [] if args.json else rows:
        trained = f"workload {row['workload_version'] or '?':<3}" if "created" in row else ""
        print(f"{row['name']:<70} {row['kind']:<8} {row.get('config', '-'):<10} {trained:<12} "
              f"{row.get('created', row.get('problem'))}")
    # Beside the JSON, not in it: what parses the rows gets entries only.
    for line in leftovers:
        print(line, file=sys.stderr if args.json else sys.stdout)
    damaged = [row["problem"] for row in rows if row["kind"] == "damaged"]     # each names its entry
    if damaged:
        return fail("pgo", f"{len(damaged)} of {len(rows)} archived profiles damaged: {'; '.join(damaged)} "
                           "(see `pgo archive verify`)")
    return 0


def cmd_show(args):
    print(json.dumps(find(root_of(args.archive), args.name).manifest(), indent=2, sort_keys=True))


def cmd_verify(args):
    root = root_of(args.archive)
    for line in sweep_leftovers(root):
        print(line)
    chosen = [find(root, args.name)] if args.name else entries(root)
    if not chosen:
        raise PipelineError(f"no archived profiles in {root}")
    failed = 0
    for entry in chosen:
        try:
            manifest = verify(entry)
            print(f"ok      {entry.name} ({len(manifest['files'])} .gcda files, {manifest['functions']} functions, "
                  f"trained by {trained_by(manifest)})")
        except Gone as e:
            print(f"gone    {entry.name}: {e}")
        except PipelineError as e:
            failed += 1
            print(f"FAILED  {entry.name}: {e}")
    if failed:
        return fail("pgo", f"{failed} of {len(chosen)} archived profiles failed verification")
    return 0


def cmd_prune(args):
    if args.keep < 1:
        raise PipelineError("--keep must be at least 1")
    removed = prune(root_of(args.archive), args.keep, args.dry_run)
    print(f"{'would remove' if args.dry_run else 'removed'} {len(removed)} nightly profiles")


def cmd_add(args):
    root, source = root_of(args.archive), Path(args.source)
    if source.is_dir():
        if args.sha256:
            raise PipelineError("--sha256 checks a file `pick` made; a folder's entry is checked by its "
                                "sha256sums.txt")
        entry = add(source, root)
    elif source.is_file():
        if not args.sha256:
            raise PipelineError(f"--from {source} is a file: give its --sha256, as the master sent it")
        with tempfile.TemporaryDirectory(prefix="pgo-add-") as scratch:
            unpack_sent(source, args.sha256, Path(scratch))
            entry = add(Path(scratch), root)
    else:
        raise PipelineError(f"--from {source}: no such folder or file")
    if args.record:
        write_json(args.record, {"entry": entry.name, "kind": kind_of(entry)})


def cmd_wants(args):
    wants = wanted(config=args.config, cc=args.cc, cxx=args.cxx, version=validate_version(args.version),
                   profile_from=args.profile)
    write_json(args.out, wants)
    print(f"wants profile {wants['profile']} of {wants['product']} {wants['line']}.x up to {wants['version']}, "
          f"built by GCC {wants['compiler_version']} for {wants['target']} with flags {wants['flags_fingerprint']}")


def cmd_pick(args):
    root = root_of(args.archive)
    entry = chosen(root, read_wants(args.wants))
    sha256 = pack(entry, args.out)
    print(f"picked {entry.name} ({kind_of(entry)}); sent as {args.out}, sha256 {sha256}")
    if args.record:
        write_json(args.record, {"entry": entry.name, "sha256": sha256})
