"""`pgo baseline`: what a release's benchmark compares its PGO build with (issue 47).

    pgo baseline --candidate work --workdir work-plain [--choice auto|distribution|plain]

A release's question is "is this faster than what I would install?". When the configuration builds the
server as the distribution builds its own (`distribution_baseline`, pgo/configs.toml) and the
distribution's archive serves its binary packages of the very source the release built (the .dsc
whose checksum the release's source phase recorded, at the version the archive lists for this
machine's release), that server is the baseline: the packages are downloaded with apt, checked
(package, version, source), and unpacked as the baseline's staged tree (`<workdir>/stage`, where the
benchmark looks for the plain build's). Our plain build of such a configuration is the same code as
Debian's, and measures the same (docs/baseline-debian-10.11.18/), so the release then makes no plain
build: about 0.85 T of it.

Otherwise the baseline is the plain build, and the record says why. `--choice distribution` fails
instead (one line); `--choice plain` asks for the plain build. The record (`<workdir>/baseline.json`,
protocol.BASELINE_RECORD) is what the release's later steps go by: `kind` "distribution" (with the
packages, their checksums and the server's version) or "plain" (with `why`).

A folder that already holds a plain build (an interrupted release resumed) keeps it: nothing built is
thrown away for a download.
"""

import re
import shutil
from pathlib import Path

from pgo import PipelineError
from pgo.base import atomic, lines, process, protocol
from pgo.base.checksums import sha256_file
from pgo.base.readers import read_json
from pgo.base.runner import say
from pgo.build import source
from pgo.core.config import server_binary
from pgo.core.contract import resolved_config
from pgo.core.workdir import Workdir

DEBS = "debs"               # the downloaded packages, kept beside the staged tree they were unpacked into
CHOICES = ("auto", "distribution", "plain")
DISTRIBUTION, PLAIN = "distribution", "plain"
DOWNLOAD_SECONDS = 900      # MariaDB's five packages are about 15 MB
# The unpacked packages' tree that is the staged tree: they install under /usr, as the DEB layout does.
PREFIX = "usr"
ORIGIN = re.compile(r"debian:(?P<package>[a-z0-9][a-z0-9.+-]*)=(?P<version>\S+)")


def register(sub):
    command = sub.add_parser("baseline", help="the release's baseline: the distribution's packages of the version "
                             "it built, when served and built as ours, else the plain build")
    command.add_argument("--candidate", required=True, help="the PGO build's work directory (after its source phase)")
    command.add_argument("--workdir", required=True, help="the baseline's work directory (the plain build's)")
    command.add_argument("--choice", choices=CHOICES, default="auto",
                         help="auto (default): the distribution's packages when they are served, else the plain "
                         "build; distribution: those or fail; plain: the plain build")
    command.set_defaults(func=cmd_baseline)


def cmd_baseline(args):
    choose(Path(args.candidate), Path(args.workdir), args.choice)


def choose(candidate, out, choice="auto"):
    """Decide the baseline, make it ready if it is the distribution's, write and return the record."""
    if choice not in CHOICES:
        raise PipelineError(f"--choice {choice!r}: one of {', '.join(CHOICES)}")
    out.mkdir(parents=True, exist_ok=True)
    kept = earlier(out)
    if kept is not None:
        record = kept
    elif choice == PLAIN:
        record = plain("asked for (--choice plain)")
    else:
        why, wanted = distribution_wanted(candidate)
        if why:
            if choice == DISTRIBUTION:
                raise PipelineError(f"no distribution baseline: {why}")
            record = plain(why)
        else:
            try:
                record = unpacked(out, **wanted)
            except PipelineError as e:
                # Nothing of theirs is left where the plain build goes.
                shutil.rmtree(out / protocol.STAGE, ignore_errors=True)
                shutil.rmtree(out / DEBS, ignore_errors=True)
                if choice == DISTRIBUTION:
                    raise
                record = plain(f"the distribution's packages could not be used: {e}")
    atomic.write_json(out / protocol.BASELINE_RECORD, record)
    say(lines.baseline_summary(record).rstrip(";"))
    return record


def plain(why):
    return {"kind": PLAIN, "why": why}


def earlier(out):
    """What a resumed release's folder already is: its plain build, or the distribution's packages unpacked
    whole (their record and the staged tree); None for a folder to decide anew."""
    if (out / protocol.STATE).is_file():
        return plain("this release's plain build is already here (resumed)")
    record_path = out / protocol.BASELINE_RECORD
    if record_path.is_file() and (out / protocol.STAGE).is_dir():
        record = read_json(record_path, "baseline record")
        if record.get("kind") == DISTRIBUTION:
            say(f"[baseline] unpacked before: {out / protocol.STAGE}")
            return record
    return None


def distribution_wanted(candidate):
    """(why not, None), or (None, what to download) for the candidate's build."""
    workdir = Workdir(candidate)
    config = resolved_config(workdir)
    if not config.distribution_baseline:
        return f"configuration '{config.name}' is not built as the distribution builds its own", None
    packages = config.product.baseline_packages
    if not packages:
        return f"product '{config.product.name}' names no baseline_packages", None
    record = read_json(candidate / protocol.SOURCE_RECORD, "source record")
    found = ORIGIN.fullmatch(record.get("origin", ""))
    if record.get("kind") != "debian" or not found:
        return f"the source ({record.get('origin')}) is not a Debian source package", None
    name, version = found["package"], found["version"]
    archived = archive_dsc_sha256(name, version)
    if archived is None:
        return f"apt lists no source {name} {version} (its .dsc's checksum is the source's identity)", None
    if archived != record.get("checksum"):
        return f"the source's .dsc is not the archive's {name} {version} (sha256 {record.get('checksum')})", None
    host = source.host_suite()
    served = source.served_versions(packages, host)
    missing = [p for p in packages if version not in served.get(p, ())]
    if missing:
        listed = sorted(set().union(*served.values())) if served else []
        return (f"apt serves no {', '.join(missing)} {version} for {host or 'this machine'}'s release (it lists "
                f"{', '.join(listed) or 'none'})"), None
    return None, {"product": config.product.name, "source_name": name, "version": version, "packages": packages}


def archive_dsc_sha256(package, version):
    """The SHA-256 apt lists for the archive's .dsc of package=version, or None."""
    done = process.run(["apt-get", "source", "--print-uris", f"{package}={version}"])
    found = re.search(r"^'[^']+\.dsc' \S+ [0-9]+ SHA256:([0-9a-f]{64})$", done.stdout, re.M)
    return found.group(1) if done.returncode == 0 and found else None


def unpacked(out, product, source_name, version, packages):
    """Download the packages, check each, unpack them as out/stage; the distribution's record."""
    shutil.rmtree(out / protocol.STAGE, ignore_errors=True)
    shutil.rmtree(out / DEBS, ignore_errors=True)
    say(f"[baseline] downloading {source_name} {version} with apt: {', '.join(packages)}")
    debs = []

    def download(partial):
        partial.mkdir()
        for package, deb in source.apt_download(packages, version, partial, source_name, DOWNLOAD_SECONDS).items():
            fields = deb_fields(deb)
            built_from = fields.get("Source", package).split()[0]
            if fields.get("Package") != package or fields.get("Version") != version or built_from != source_name:
                raise PipelineError(f"{deb.name} is {fields.get('Package')} {fields.get('Version')} of source "
                                    f"{built_from}, not {package} {version} of {source_name}")
            debs.append({"package": package, "file": deb.name, "sha256": sha256_file(deb)})

    atomic.place(out / DEBS, download)

    def unpack(partial):
        root = partial.parent / f"{partial.name}.root"
        try:
            for deb in debs:
                process.output_of(["dpkg-deb", "-x", out / DEBS / deb["file"], root])
            (root / PREFIX).rename(partial)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    atomic.place(out / protocol.STAGE, unpack)
    # Where the product's server is in a staged tree (packaging/products.toml): the packages install under /usr.
    staged = server_binary(product)["staged_binary"]
    server = next((out / protocol.STAGE / path for path in staged if (out / protocol.STAGE / path).is_file()), None)
    if server is None:
        raise PipelineError(f"the packages {', '.join(packages)} hold no {' or '.join(f'/usr/{p}' for p in staged)}")
    done = process.run([server, "--version"], timeout=60)
    if done.returncode != 0:
        raise PipelineError(f"the distribution's {server.name} does not run here: "
                            f"{process.last_lines(done, 1) or 'status ' + str(done.returncode)}")
    said = done.stdout.strip()
    return {"kind": DISTRIBUTION, "source": source_name, "version": version, "packages": debs,
            "server_version": said[said.find("Ver "):] if "Ver " in said else said}


def deb_fields(path):
    """The control fields of a .deb."""
    text = process.output_of(["dpkg-deb", "-f", path])
    paragraphs = source.control_paragraphs(text)
    return paragraphs[0] if paragraphs else {}
