"""`pgo compare-debs`: our .deb set beside Debian's own binary packages of the same source (issue 29).

    pgo compare-debs --ours DIR --debian-version 1:10.11.19-0+deb12u1 --out DIR
    pgo compare-debs --ours DIR --reference DIR --out DIR

Issue 29's .deb set is to have Debian's package names, split and relations. This shows a release
engineer how near it is: for each package, matched by name, its version, Architecture, files,
installed size, relation fields, maintainer scripts and conffiles on each side, and the paths only
one side installs; compare.json holds every figure, report.md a table and then each package that
differs.

Debian's set is downloaded once with apt: `apt-get download NAME=VERSION` of each binary package
that the source package's Binary list (apt-cache showsrc) names and apt serves at that version
(apt-cache madison), into <cache>/debian-binaries/<source>_<version>/, made whole out of sight
and renamed into place.

What differs by design is compared apart, and the report says how: ours is a PGO build of
another release, so relations are compared by the package names they relate (a constraint that
alone differs is listed, not counted), and the upstream release a path names is `<version>` on
each side. File contents are not compared (every binary and changelog.Debian.gz differ by
build), nor directories.
"""

import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pgo import PipelineError
from pgo.base import atomic, process
from pgo.base.checksums import sha256_file
from pgo.base.readers import read_json
from pgo.base.runner import say
from pgo.build import source
from pgo.core.workdir import cache_root
from pgo.packaging.debpackages import dpkg_deb, installed_paths

RELATIONS = ("Pre-Depends", "Depends", "Recommends", "Suggests", "Conflicts", "Breaks", "Replaces", "Provides")
SCRIPTS = ("preinst", "postinst", "prerm", "postrm", "config", "templates", "triggers")
# What makes two packages of one name differ; the version never does (ours is another build).
ASPECTS = ("architecture", "files", "relations", "scripts", "conffiles")
RECORD, REPORT = "compare.json", "report.md"
# In a downloaded set: what apt was asked for and what it served. Its presence marks the set whole.
DOWNLOAD = "download.json"
SHOWN = 10                  # paths of each side the report lists per package; the record has all
FOLDER_DEPTH = 5            # a long list is also counted by folder: /usr/share/mysql/mysql-test/plugin
DOWNLOAD_SECONDS = 1800     # MariaDB's 29 packages are about 150 MB
VERSION_MARK = "<version>"
# [epoch:]upstream[-revision] (Debian Policy 5.6.12); it names a folder of the cache too.
DEBIAN_VERSION = re.compile(r"(?:[0-9]+:)?[0-9][A-Za-z0-9.+~-]*")


@dataclass
class Deb:
    file: str
    name: str
    version: str
    architecture: str
    source: str
    installed_size: int | None
    relations: dict            # field: its text, of the RELATIONS the package has
    scripts: dict              # maintainer script: its SHA-256
    conffiles: list
    paths: dict                # every installed path but directories: file | symlink


def register(subparsers):
    command = subparsers.add_parser(
        "compare-debs", help="compare a folder of our .debs with Debian's own binary packages of the same source "
        "(names, files, relations, maintainer scripts): compare.json and report.md")
    command.add_argument("--ours", required=True, metavar="DIR", help="a folder of .debs (pgo package --format deb)")
    theirs = command.add_mutually_exclusive_group(required=True)
    theirs.add_argument("--reference", metavar="DIR", help="a folder of the .debs to compare with")
    theirs.add_argument("--debian-version", metavar="VERSION",
                        help="Debian's version of the source, e.g. 1:10.11.19-0+deb12u1: its binary packages "
                        "downloaded with apt (once, into the cache)")
    command.add_argument("--out", required=True, metavar="DIR", help="where compare.json and report.md go")
    command.add_argument("--cache", help="download cache (default: ~/.cache/pgo)")
    command.set_defaults(func=lambda args: compare_debs(args.ours, args.out, reference=args.reference,
                                                        debian_version=args.debian_version, cache=args.cache))


def compare_debs(ours_dir, out, reference=None, debian_version=None, cache=None):
    """Compare the .debs in ours_dir with a reference folder's or Debian's `debian_version`; write
    compare.json and report.md into `out` once both are complete, and say the summary."""
    ours = read_set(ours_dir, "--ours")
    if reference:
        folder, download = Path(reference), None
        debian = read_set(folder, "--reference")
    else:
        folder, download = debian_set(ours, debian_version, cache_root(cache))
        debian = read_set(folder, "Debian's download")
    record = compare(ours, debian)
    record["ours"]["folder"] = str(Path(ours_dir).resolve())
    record["debian"].update(folder=str(folder.resolve()), download=download)
    text = report(record)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_json(out / RECORD, record)
    atomic.write(out / REPORT, text.encode())
    say(f"[compare-debs] {summary_line(record)}; report: {out / REPORT}")


# --- reading a set of .debs ---------------------------------------------------

def read_set(folder, what):
    """{package name: Deb} of every .deb in folder; one error line for a folder without one, a broken
    .deb, or two of one name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise PipelineError(f"{what} {folder} is not a folder")
    files = sorted(folder.glob("*.deb"))
    if not files:
        raise PipelineError(f"{what} {folder} holds no .deb")
    debs = {}
    for path in files:
        deb = read_deb(path)
        if deb.name in debs:
            raise PipelineError(f"{what} {folder} holds two packages {deb.name}: {debs[deb.name].file} and {path.name}")
        debs[deb.name] = deb
    return debs


def read_deb(path):
    with tempfile.TemporaryDirectory(prefix="pgo-compare-debs-") as tmp:
        control = Path(tmp) / "control"
        dpkg_deb(path, "--control", path, control)
        paragraphs = source.control_paragraphs((control / "control").read_text(errors="replace"))
        if not paragraphs or "Package" not in paragraphs[0]:
            raise PipelineError(f"{path} is not a readable .deb: its control file names no Package and Version")
        fields = paragraphs[0]
        scripts = {name: sha256_file(control / name) for name in SCRIPTS if (control / name).is_file()}
        conffiles = (control / "conffiles").read_text().splitlines() if (control / "conffiles").is_file() else []
    size = fields.get("Installed-Size", "")
    return Deb(file=path.name, name=fields["Package"], version=fields["Version"],
               architecture=fields.get("Architecture", ""),
               source=fields.get("Source", fields["Package"]).split()[0],
               installed_size=int(size) if size.isdigit() else None,
               relations={name: fields[name] for name in RELATIONS if fields.get(name)},
               scripts=scripts, conffiles=sorted(line.strip() for line in conffiles if line.strip()),
               paths=installed_paths(path))


def source_of(debs):
    """The one source package a set of ours is built from."""
    sources = sorted({deb.source for deb in debs.values()})
    if len(sources) != 1:
        raise PipelineError(f"--ours holds packages of the sources {', '.join(sources)}: compare one source's set")
    return sources[0]


# --- Debian's set, downloaded with apt ------------------------------------------

def debian_set(ours, version, cache):
    """(folder, download record) of Debian's binary packages of our packages' source at `version`,
    downloaded once into the cache."""
    name = source_of(ours)
    if not DEBIAN_VERSION.fullmatch(version):
        raise PipelineError(f"{version!r} is no Debian version (such as 1:10.11.19-0+deb12u1)")
    folder = cache / "debian-binaries" / f"{name}_{version.split(':', 1)[-1]}"
    if folder.exists() and not (folder / DOWNLOAD).is_file():
        raise PipelineError(f"{folder} holds no {DOWNLOAD}: it is no download of pgo compare-debs; remove it")
    if not folder.exists():
        binaries, listed_by = binary_names(name, version, ours)
        served = served_names(name, binaries, version)
        record = {"source": name, "version": version, "binary_list": binaries, "binary_list_from": listed_by,
                  "served": served, "not_served": [b for b in binaries if b not in served]}
        say(f"[compare-debs] downloading Debian's {name} {version} with apt: {len(served)} binary packages "
            f"into {folder}")

        def download(partial):
            partial.mkdir()
            source.apt_download(served, version, partial, name, DOWNLOAD_SECONDS)
            atomic.write_json(partial / DOWNLOAD, record)

        folder.parent.mkdir(parents=True, exist_ok=True)
        atomic.place(folder, download)      # or another run downloaded it meanwhile: the same set
    else:
        say(f"[compare-debs] Debian's {name} {version}: {folder} (downloaded before)")
    return folder, read_json(folder / DOWNLOAD, "download record")


def binary_names(name, version, ours):
    """(the binary packages of source `name` at `version`, where that list is from): its Binary list in
    apt-cache showsrc; without a source paragraph of that version (no deb-src entry), our packages'
    names, and the report says that Debian's packages we do not build are not looked for."""
    shown = process.run(["apt-cache", "showsrc", name]).stdout
    for paragraph in source.control_paragraphs(shown):
        if paragraph.get("Package") == name and paragraph["Version"] == version:
            binaries = [b.strip() for b in paragraph.get("Binary", "").split(",") if b.strip()]
            return binaries, f"the Binary list of apt-cache showsrc {name}"
    return sorted(ours), (f"our packages' names: apt knows no source {name} {version} (no deb-src entry?), so "
                          "Debian's packages we do not build are not looked for")


def served_names(name, binaries, version):
    """The binaries apt serves at `version` (apt-cache madison); none: an error that names the versions
    apt serves."""
    versions = source.served_versions(binaries)
    served = {name for name, listed in versions.items() if version in listed}
    if not served:
        known = sorted({v for listed in versions.values() for v in listed}) or ["none"]
        raise PipelineError(f"apt serves no binary package of {name} {version} (apt-cache madison of its "
                            f"packages lists {', '.join(known)}; a new upload needs apt-get update)")
    return [b for b in binaries if b in served]


# --- comparing ------------------------------------------------------------------

def compare(ours, debian):
    """The record of two sets: each package side by side, and what differs."""
    packages = [compare_package(name, ours.get(name), debian.get(name)) for name in sorted(ours.keys() | debian.keys())]
    both = [p for p in packages if p["side"] == "both"]
    return {
        "ours": side_record(ours),
        "debian": side_record(debian),
        "summary": {
            "in_both": len(both),
            "alike": [p["name"] for p in both if not p["differs"]],
            "only_ours": [p["name"] for p in packages if p["side"] == "ours"],
            "only_debian": [p["name"] for p in packages if p["side"] == "debian"],
            "differ": {aspect: [p["name"] for p in both if aspect in p["differs"]] for aspect in ASPECTS},
            "constraints_alone_differ": sum(len(d["constraints_differ"])
                                            for p in both for d in p["relations"].values()),
            "paths_matched_by_version": sum(len(p["files"]["matched_by_version"]) for p in both),
        },
        "packages": packages,
    }


def side_record(debs):
    return {"packages": len(debs), "sources": sorted({d.source for d in debs.values()}),
            "versions": sorted({d.version for d in debs.values()}),
            "releases": sorted({source.release_of(d.version) or d.version for d in debs.values()})}


def compare_package(name, ours, debian):
    record = {"name": name, "side": "both" if ours and debian else "ours" if ours else "debian",
              "ours": described(ours), "debian": described(debian), "differs": []}
    if not (ours and debian):
        return record
    record.update(files=compare_paths(ours, debian), relations=compare_relations(ours.relations, debian.relations),
                  scripts=compare_names(ours.scripts, debian.scripts),
                  conffiles=compare_names(ours.conffiles, debian.conffiles))
    record["scripts"]["text_differs"] = sorted(s for s in ours.scripts.keys() & debian.scripts.keys()
                                               if ours.scripts[s] != debian.scripts[s])
    files, relations = record["files"], record["relations"]
    differs = {"architecture": ours.architecture != debian.architecture,
               "files": bool(files["only_ours"] or files["only_debian"] or files["kind_differs"]),
               "relations": any(d["only_ours"] or d["only_debian"] for d in relations.values()),
               "scripts": bool(record["scripts"]["only_ours"] or record["scripts"]["only_debian"]),
               "conffiles": bool(record["conffiles"]["only_ours"] or record["conffiles"]["only_debian"])}
    record["differs"] = [aspect for aspect in ASPECTS if differs[aspect]]
    return record


def described(deb):
    if deb is None:
        return None
    return {"file": deb.file, "version": deb.version, "architecture": deb.architecture,
            "installed_size_kib": deb.installed_size, "files": len(deb.paths), "relations": deb.relations,
            "scripts": [s for s in SCRIPTS if s in deb.scripts], "conffiles": deb.conffiles}


def compare_names(ours, debian):
    return {"only_ours": sorted(set(ours) - set(debian)), "only_debian": sorted(set(debian) - set(ours))}


def compare_paths(ours, debian):
    """The paths only one side installs, those of another kind (a file here, a symlink there), and
    those that matched only with the release they name as <version>."""
    mine, theirs = normalised(ours), normalised(debian)
    common = sorted(mine.keys() & theirs.keys())
    return {"only_ours": sorted(mine[k][0] for k in mine.keys() - theirs.keys()),
            "only_debian": sorted(theirs[k][0] for k in theirs.keys() - mine.keys()),
            "kind_differs": [{"path": mine[k][0], "ours": mine[k][1], "debian": theirs[k][1]}
                             for k in common if mine[k][1] != theirs[k][1]],
            "matched_by_version": [{"ours": mine[k][0], "debian": theirs[k][0]}
                                   for k in common if mine[k][0] != theirs[k][0]]}


def normalised(deb):
    """{path, with the upstream release it names as <version>: (path, kind)} of a package's paths."""
    release = source.release_of(deb.version)
    return {(path.replace(release, VERSION_MARK) if release else path): (path, kind)
            for path, kind in deb.paths.items()}


def compare_relations(ours, debian):
    """{field: its differences} of the relation fields that differ: the relations only one side has,
    by the package names they relate, and those whose constraints alone differ."""
    found = {}
    for field in RELATIONS:
        mine, theirs = relation_items(ours.get(field, "")), relation_items(debian.get(field, ""))
        common = sorted(mine.keys() & theirs.keys())
        differences = {"only_ours": [mine[k] for k in sorted(mine.keys() - theirs.keys())],
                       "only_debian": [theirs[k] for k in sorted(theirs.keys() - mine.keys())],
                       "constraints_differ": [{"names": k, "ours": mine[k], "debian": theirs[k]}
                                              for k in common if mine[k] != theirs[k]]}
        if any(differences.values()):
            found[field] = differences
    return found


def relation_items(text):
    """{the package names a relation relates, alternatives joined by ' | ': the relation as written} of
    one relation field; version constraints and architecture qualifiers (`perl:any`) are no names."""
    items = {}
    for relation in filter(None, (r.strip() for r in text.split(","))):
        names = " | ".join(re.match(r"[^\s(\[<:]*", alt.strip()).group(0) for alt in relation.split("|"))
        items[names] = f"{items[names]}, {relation}" if names in items else relation
    return items


# --- the summary and the report ---------------------------------------------------

ALIKE = "alike in name, Architecture, files, relations, maintainer scripts and conffiles"
ASPECT_NAMES = {"architecture": "Architecture", "files": "files", "relations": "relations",
                "scripts": "maintainer scripts", "conffiles": "conffiles"}


def summary_line(record):
    s = record["summary"]
    counts = [(len(s["only_debian"]), "only in Debian's set"), (len(s["only_ours"]), "only in ours"),
              *((len(s["differ"][aspect]), f"differ in {ASPECT_NAMES[aspect]}") for aspect in ASPECTS)]
    differences = ", ".join(f"{n} {what}" for n, what in counts if n) or "none"
    return (f"{record['debian']['packages']} packages in Debian's set, {record['ours']['packages']} in ours, "
            f"{len(s['alike'])} {ALIKE}; differences: {differences}")


def report(record):
    ours, debian, s = record["ours"], record["debian"], record["summary"]
    lines = ["# Our .deb packages beside Debian's", "",
             f"- ours: {ours['packages']} packages of {', '.join(ours['sources'])} {', '.join(ours['versions'])}, "
             f"in `{ours['folder']}`",
             debian_line(debian), "", f"{summary_line(record)}.", "",
             "## What differs by design, and how it is compared", "",
             f"- The versions: ours {', '.join(ours['versions'])}, Debian's {', '.join(debian['versions'])}. "
             "Relations are compared by the package names they relate; a relation whose version constraint "
             "alone differs is listed under its package, never counted as a difference "
             f"({s['constraints_alone_differ']} such relations).",
             f"- A path that names its package's upstream release ({', '.join(ours['releases'])} in ours, "
             f"{', '.join(debian['releases'])} in Debian's) is compared with `{VERSION_MARK}` in its place "
             f"({s['paths_matched_by_version']} paths matched so).",
             *([f"- The releases differ ({', '.join(ours['releases'])} / {', '.join(debian['releases'])}): what one "
                "release adds or removes (a test, a man page) shows as a difference of files; compare sets of one "
                "release to see the packaging's differences alone."] if ours["releases"] != debian["releases"] else []),
             "- Files are regular files, hard links and symlinks (`dpkg-deb --contents`); directories are left "
             "out. Contents are not compared: every binary, and each `changelog.Debian.gz`, differs by build.",
             "- Maintainer scripts are compared by presence; a script both sides have whose text differs is "
             "listed under its package, not counted.", "",
             "## Side by side", "",
             "| package | ours files | Debian files | only ours | only Debian | relations differ | scripts differ |",
             "|---|---:|---:|---:|---:|---|---|",
             *(table_row(p) for p in record["packages"])]
    for package in record["packages"]:
        if package["side"] == "both" and (package["differs"] or package["relations"]
                                          or package["scripts"]["text_differs"]):
            lines += ["", *package_section(package)]
    for side, title in (("ours", "Only in ours"), ("debian", "Only in Debian's set")):
        alone = [p[side] | {"name": p["name"]} for p in record["packages"] if p["side"] == side]
        if alone:
            lines += ["", f"## {title}", "",
                      *(f"- {d['name']} {d['version']} {d['architecture']}: {d['files']} files" for d in alone)]
    return "\n".join(lines) + "\n"


def debian_line(debian):
    download = debian["download"]
    if download is None:
        return (f"- Debian's (a reference folder): {debian['packages']} packages of {', '.join(debian['sources'])} "
                f"{', '.join(debian['versions'])}, in `{debian['folder']}`")
    unserved = f"; not served: {', '.join(download['not_served'])}" if download["not_served"] else ""
    return (f"- Debian's: {download['source']} {download['version']}, {debian['packages']} packages downloaded with "
            f"apt into `{debian['folder']}` (from {download['binary_list_from']}: {len(download['binary_list'])} "
            f"packages, {len(download['served'])} served here{unserved})")


def table_row(package):
    name, side = package["name"], package["side"]
    if side != "both":
        files = package[side]["files"]
        mine, theirs = (files, "—") if side == "ours" else ("—", files)
        return f"| {name} (only {'ours' if side == 'ours' else 'in Debian'}) | {mine} | {theirs} | — | — | — | — |"
    files, relations, scripts = package["files"], package["relations"], package["scripts"]
    by_name = [field for field, d in relations.items() if d["only_ours"] or d["only_debian"]]
    relation_cell = ", ".join(by_name) or ("constraints only" if relations else "no")
    script_cell = "; ".join(f"only {who}: {', '.join(scripts[key])}"
                            for key, who in (("only_ours", "ours"), ("only_debian", "Debian")) if scripts[key]) or "no"
    return (f"| {name} | {package['ours']['files']} | {package['debian']['files']} | {len(files['only_ours'])} | "
            f"{len(files['only_debian'])} | {relation_cell} | {script_cell} |")


def package_section(package):
    ours, debian = package["ours"], package["debian"]
    files, scripts, conffiles = package["files"], package["scripts"], package["conffiles"]
    lines = [f"### {package['name']}", "",
             f"- version: ours {ours['version']}, Debian's {debian['version']}; Architecture: ours "
             f"{ours['architecture']}, Debian's {debian['architecture']}; installed size: ours "
             f"{kib(ours['installed_size_kib'])}, Debian's {kib(debian['installed_size_kib'])}"
             + ("" if "architecture" not in package["differs"] else " (Architecture differs)"),
             f"- files: ours {ours['files']}, Debian's {debian['files']}; only ours {len(files['only_ours'])}, "
             f"only Debian's {len(files['only_debian'])}"
             + (f" (the first {SHOWN} of each; all in {RECORD})"
                if max(len(files["only_ours"]), len(files["only_debian"])) > SHOWN else "")]
    for key, who in (("only_ours", "only ours"), ("only_debian", "only Debian's")):
        if len(files[key]) > SHOWN:
            counts = ", ".join(f"`{folder}` {n}" for folder, n in by_folder(files[key]))
            lines.append(f"  - {who}, by folder: {counts}")
        lines += [f"  - {who}: `{path}`" for path in files[key][:SHOWN]]
    kinds = files["kind_differs"]
    lines += [f"  - a {k['ours']} in ours, a {k['debian']} in Debian's: `{k['path']}`" for k in kinds[:SHOWN]]
    if len(kinds) > SHOWN:
        lines.append(f"  - and {len(kinds) - SHOWN} more of another kind on each side")
    for field, d in package["relations"].items():
        parts = [f"{who}: {', '.join(f'`{r}`' for r in d[key])}"
                 for key, who in (("only_ours", "only ours"), ("only_debian", "only Debian's")) if d[key]]
        parts += [f"constraint alone differs: `{c['ours']}` / `{c['debian']}`" for c in d["constraints_differ"]]
        lines.append(f"- {field}: {'; '.join(parts)}")
    if scripts["only_ours"] or scripts["only_debian"] or scripts["text_differs"]:
        lines.append(f"- maintainer scripts: ours {', '.join(ours['scripts']) or 'none'}; Debian's "
                     f"{', '.join(debian['scripts']) or 'none'}"
                     + (f"; text differs: {', '.join(scripts['text_differs'])}" if scripts["text_differs"] else ""))
    for key, who in (("only_ours", "only ours"), ("only_debian", "only Debian's")):
        if conffiles[key]:
            lines.append(f"- conffiles {who}: {', '.join(f'`{c}`' for c in conffiles[key])}")
    return lines


def kib(size):
    return "not given" if size is None else f"{size} KiB"


def by_folder(paths, depth=FOLDER_DEPTH, most=SHOWN // 2):
    """The `most` folders (their first `depth` levels) that hold most of `paths`, with their counts."""
    counts = Counter(str(PurePosixPath(*PurePosixPath(path).parent.parts[:depth + 1])) for path in paths)
    return counts.most_common(most)
