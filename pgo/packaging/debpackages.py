"""Debian binary packages assembled with dpkg-deb from a staged tree.

The reduced package set of packaging/deb/<product>.toml, the way MariaDB's
autobake-deb.sh trims debian/control, built from the install of the checked
build instead of a rebuild through debian/rules (which would compile the server
again, with other flags, and lose the identity with the checked binary).
Executables are stripped as dh_strip does (strip keeps the build-id), except a BOLTed one.
"""

import gzip
import hashlib
import os
import re
import shutil
import stat
import textwrap
import time
from pathlib import Path

from pgo import PipelineError
from pgo.base import process
from pgo.base.runner import say
from pgo.build.bolt import bolted
from pgo.build.source import upstream_of
from pgo.packaging.recipes import RECIPES, changelog_line, describe, is_elf, run, wrapped

RELATIONS = ("pre_depends", "depends", "recommends", "provides", "replaces", "breaks", "conflicts")
SCRIPTS = ("preinst", "postinst", "prerm", "postrm")


def deb_version(build, recipe):
    """'1:10.11.19+pgo-1': the epoch of the distribution's packages, the upstream version as
    Debian spells it, the PGO mark, our revision.

    From Debian's source package the upstream part is Debian's own, repack suffix included
    ('11.8.9+ds' of 1:11.8.9+ds-0+deb13u1): ours then sorts above every Debian revision of
    that upstream version ('+pgo' extends it; a plain build's revision 1 is above Debian's
    '0+debNNuM') and below Debian's next upstream release. `dpkg --compare-versions` agrees
    (tests/test_package.py).
    """
    epoch = recipe.get("epoch", 0)
    upstream = debian_upstream(build.info["source"]) or build.version
    version = f"{upstream}{'+' + build.label if build.label else ''}-{build.release}"
    return f"{epoch}:{version}" if epoch else version


def debian_upstream(source_record):
    """The upstream version of the Debian source package a build came from, or None."""
    kind, origin = source_record.get("kind"), source_record.get("origin", "")
    return upstream_of(origin.split("=", 1)[1]) if kind == "debian" and "=" in origin else None


def make(build, recipe, folder, scratch):
    arch = run(["dpkg", "--print-architecture"]).strip()
    multiarch = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).strip()
    version = deb_version(build, recipe)
    product_dir = RECIPES / "deb" / build.info["product"]
    origins = {"stage": build.workdir.stage, "src": build.workdir.src, "recipe": product_dir,
               "configure": build.workdir.src}
    layout = {**recipe.get("layout", {}), "VERSION": build.version}
    debian = scratch / "debian"
    debian.mkdir(parents=True)
    # dpkg-shlibdeps wants a debian/control and finds the shlibs of the
    # packages built alongside in debian/<package>/DEBIAN/shlibs.
    (debian / "control").write_text(f"Source: {recipe['source']}\n")
    claimed = set()
    debs = []
    for spec in recipe["packages"]:
        name = spec["name"]
        root = debian / name
        for rule in spec.get("files", []):
            claimed |= install_rule(rule, origins, root, name, claimed, multiarch, layout)
        for target, link in spec.get("links", []):
            make_link(root, target.format(multiarch=multiarch), link.format(multiarch=multiarch))
        install_docs(build, recipe, spec, origins, root, version)
        overrides = lintian_overrides(spec, origins, product_dir)
        if overrides:
            copy_file(overrides, root / "usr/share/lintian/overrides" / name)
        override_unstripped_bolted(root, name)
        arch_of = "all" if spec.get("architecture") == "all" else arch
        control = control_fields(build, recipe, spec, version, arch_of, root, scratch)
        write_control(root, control, spec, product_dir, version)
        deb = folder / f"{name}_{version.split(':')[-1]}_{arch_of}.deb"
        run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", root, deb])
        debs.append(deb)
    left = sorted(str(p.relative_to(build.workdir.stage)) for p in walk(build.workdir.stage)
            if p not in claimed and not (p.is_dir() and not p.is_symlink()))
    if left:
        say(f"  {len(left)} staged files are in no package of this reduced set (e.g. {', '.join(left[:3])})")
    return debs


# --- files --------------------------------------------------------------------

def install_rule(rule, origins, root, package, claimed, multiarch, layout):
    """["stage:bin/mariadbd", "usr/sbin/"]: copy what the glob matches into the directory.

    Origins: stage (the staged tree), src (the source), recipe (packaging/deb/<product>/),
    configure (a source template whose @NAME@ values come from the recipe's [layout]:
    scripts configured for the Debian paths, as a DEB-layout build would configure them).

    A destination without a trailing '/' names the file itself; {multiarch}
    is the architecture's library directory name, {parent} the name of the
    matched file's directory. Files an earlier package claimed are skipped. A
    leading '?' marks a pattern that may match nothing (a part some
    configurations do not build); any other pattern must match.
    """
    pattern, dest = rule
    optional = pattern.startswith("?")
    origin, _, glob = pattern.lstrip("?").partition(":")
    if origin not in origins:
        raise PipelineError(f"package {package}: unknown origin '{origin}' in '{pattern}' "
                            f"(known: {', '.join(origins)})")
    base = origins[origin]
    matches = [p for p in sorted(base.glob(glob)) if p not in claimed]
    if not matches and not optional:
        raise PipelineError(f"package {package}: '{pattern}' matches nothing in {base}")
    copied = set()
    for path in matches:
        directory = dest.format(multiarch=multiarch, parent=path.parent.name)
        target = root / directory / path.name if dest.endswith("/") else root / directory
        tree = [path, *walk(path)] if path.is_dir() and not path.is_symlink() else [path]
        for source in tree:
            at = target / source.relative_to(path) if source != path else target
            if source.is_symlink():
                # lintian refuses spurious segments (mtr's `mtr -> ./mariadb-test-run.pl`)
                make_symlink(at, os.path.normpath(os.readlink(source)))
            elif source.is_dir():
                at.mkdir(parents=True, exist_ok=True)
            elif origin == "configure":
                configure(source, at, layout, package)
            else:
                copy_file(source, at)
                if origin == "recipe":
                    at.write_text(at.read_text().replace("@MULTIARCH@", multiarch))
            copied.add(source)
    return copied


def lintian_overrides(spec, origins, product_dir):
    """The package's lintian overrides: the recipe's `lintian_overrides` ("src:debian/X.lintian-overrides",
    MariaDB's own where it has them), else packaging/deb/<product>/<package>.lintian-overrides if present."""
    if "lintian_overrides" not in spec:
        default = product_dir / f"{spec['name']}.lintian-overrides"
        return default if default.is_file() else None
    origin, _, name = spec["lintian_overrides"].partition(":")
    path = origins.get(origin, Path("/nonexistent")) / name
    if not path.is_file():
        raise PipelineError(f"package {spec['name']}: lintian_overrides '{spec['lintian_overrides']}' is missing")
    return path


def configure(template, target, values, package):
    text = template.read_text()
    for name in sorted(set(re.findall(r"@([A-Za-z_]+)@", text))):
        if name not in values:
            raise PipelineError(f"package {package}: {template.name} needs @{name}@, which the "
                                "recipe's [layout] does not set")
        text = text.replace(f"@{name}@", values[name])
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    os.chmod(target, 0o755)


def walk(directory):
    return [p for p in sorted(Path(directory).rglob("*"))] if Path(directory).is_dir() else []


def copy_file(source, target):
    """Copy one file the way Debian ships it: man pages compressed, ELF files stripped."""
    target.parent.mkdir(parents=True, exist_ok=True)
    executable = os.stat(source).st_mode & stat.S_IXUSR
    if is_manpage(target):
        with open(source, "rb") as src, open(f"{target}.gz", "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as dst:
                shutil.copyfileobj(src, dst)
        os.chmod(f"{target}.gz", 0o644)
        return
    shutil.copyfile(source, target)
    os.chmod(target, 0o755 if executable else 0o644)
    # A binary BOLT rewrote ships as BOLT wrote it: binutils' strip breaks its layout (pgo/build/bolt.py).
    if is_elf(target) and not bolted(target):
        strip(target)


def override_unstripped_bolted(root, package):
    """The lintian override a package's BOLTed binaries need: they ship unstripped (copy_file)."""
    bolted_files = [path.relative_to(root).as_posix() for path in walk(root)
                    if path.is_file() and not path.is_symlink() and is_elf(path) and bolted(path)]
    if not bolted_files:
        return
    overrides = root / "usr/share/lintian/overrides" / package
    overrides.parent.mkdir(parents=True, exist_ok=True)
    with open(overrides, "a") as f:
        f.write("# Rewritten by BOLT, which binutils' strip breaks (llvm-project issue 89336).\n")
        f.writelines(f"unstripped-binary-or-object [{path}]\n" for path in bolted_files)
    os.chmod(overrides, 0o644)


def is_manpage(path):
    return "usr/share/man/" in path.as_posix() and not path.name.endswith(".gz")


def strip(path):
    # dh_strip's options: symbols and .comment go, the .note.gnu.build-id stays.
    shared = ".so" in path.name
    if shared:
        # A library linked with -Wl,--emit-relocs (BOLT's flag: every link of a `bolt = true` build)
        # keeps its static relocations (.rela.text), and --strip-unneeded keeps every symbol they
        # name, so its .symtab would stay (lintian: unstripped-binary-or-object). They go first, in a
        # pass of their own: nothing at run time reads them (.rela.dyn and .rela.plt stay).
        run(["strip", "--remove-relocations=*", path])
    run(["strip", "--remove-section=.comment", "--remove-section=.note",
         *(["--strip-unneeded"] if shared else []), path])
    if shared:
        os.chmod(path, 0o644)


def make_symlink(target, pointing_to):
    target.parent.mkdir(parents=True, exist_ok=True)
    if is_manpage(target):
        target, pointing_to = Path(f"{target}.gz"), f"{pointing_to}.gz"
    target.unlink(missing_ok=True)
    os.symlink(pointing_to, target)


def make_link(root, target, link):
    """links = [["usr/sbin/mariadbd", "usr/sbin/mysqld"]]: a relative symlink, as dh_link makes."""
    link_path = root / link
    relative = os.path.relpath(root / target, link_path.parent)
    make_symlink(link_path, relative)


def install_docs(build, recipe, spec, origins, root, version):
    docs = root / "usr/share/doc" / spec["name"]
    origin, _, path = recipe["copyright"].partition(":")
    copy_file(origins[origin] / path, docs / "copyright")
    when = time.strftime("%a, %d %b %Y %H:%M:%S %z")
    change = textwrap.fill(changelog_line(build), 78, initial_indent="  * ", subsequent_indent="    ")
    entry = (f"{recipe['source']} ({version}) {recipe['distribution']}; urgency=medium\n\n"
             f"{change}\n\n -- {recipe['maintainer']}  {when}\n")
    with open(docs / "changelog.Debian.gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as f:
            f.write(entry.encode())
    os.chmod(docs / "changelog.Debian.gz", 0o644)


# --- control ------------------------------------------------------------------

def control_fields(build, recipe, spec, version, arch, root, scratch):
    relations = {key: [r.format(version=version) for r in spec.get(key, [])] for key in RELATIONS}
    shared_libs = shlib_depends(root, scratch)
    relations["depends"] = relations["depends"] + shared_libs
    fields = {
        "Package": spec["name"],
        "Source": recipe["source"],
        "Version": version,
        "Architecture": arch,
        "Maintainer": recipe["maintainer"],
        "Installed-Size": str(installed_size(root)),
    }
    for key in RELATIONS:
        if relations[key]:
            fields[key.replace("_", "-").title()] = ", ".join(relations[key])
    fields.update({"Section": spec.get("section", recipe.get("section", "misc")),
                   "Priority": "optional", "Homepage": recipe["homepage"]})
    fields["Description"] = description(spec["summary"], wrapped(describe(spec["description"], build)))
    return fields


def shlib_depends(root, scratch):
    elves = [p for p in walk(root) if p.is_file() and not p.is_symlink() and is_elf(p)]
    if not elves:
        return []
    output = run(["dpkg-shlibdeps", "-O", "--ignore-missing-info", *elves], cwd=scratch)
    for line in output.splitlines():
        if line.startswith("shlibs:Depends="):
            return [d.strip() for d in line.partition("=")[2].split(",") if d.strip()]
    return []


def installed_size(root):
    """In KiB, counted the way dpkg-gencontrol counts: per file rounded up, 1 per other entry."""
    total = 0
    for path in walk(root):
        if path.is_file() and not path.is_symlink():
            total += (path.stat().st_size + 1023) // 1024
        else:
            total += 1
    return total


def description(summary, text):
    lines = []
    for paragraph in text.strip().split("\n\n"):
        lines += [f" {line}" if line.strip() else " ." for line in paragraph.splitlines()]
        lines.append(" .")
    return summary + "\n" + "\n".join(lines[:-1])


def write_control(root, fields, spec, product_dir, version):
    control = root / "DEBIAN"
    control.mkdir(parents=True, exist_ok=True)
    (control / "control").write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    conffiles = sorted("/" + str(p.relative_to(root)) for p in walk(root / "etc")
                       if p.is_file() and not p.is_symlink())
    if conffiles:
        (control / "conffiles").write_text("".join(f"{c}\n" for c in conffiles))
    if spec.get("shlibs"):
        (control / "shlibs").write_text(spec["shlibs"].format(version=version) + "\n")
        # A shared library in a public directory needs ldconfig run after install.
        (control / "triggers").write_text("activate-noawait ldconfig\n")
    for script in SCRIPTS:
        source = product_dir / f"{spec['name']}.{script}"
        if source.is_file():
            shutil.copyfile(source, control / script)
            os.chmod(control / script, 0o755)
    for name in ("control", "conffiles", "shlibs", "triggers"):
        if (control / name).exists():
            os.chmod(control / name, 0o644)
    sums = []
    for path in walk(root):
        if path.is_file() and not path.is_symlink() and control not in path.parents:
            sums.append(f"{hashlib.md5(path.read_bytes()).hexdigest()}  {path.relative_to(root)}\n")
    (control / "md5sums").write_text("".join(sums))
    os.chmod(control / "md5sums", 0o644)
    for path in [root, *walk(root)]:
        if path.is_dir() and not path.is_symlink():
            os.chmod(path, 0o755)


# `dpkg-deb --contents`' kinds of entry that install a file: a regular file, a hard link, a symlink.
KINDS = {"-": "file", "h": "file", "l": "symlink"}


def installed_paths(path):
    """{path: file | symlink} from `dpkg-deb --contents`, whose lines read
    `-rw-r--r-- root/root 1126 2026-11-26 21:05 ./etc/mysql/mariadb.cnf` (a symlink adds ` -> TARGET`,
    a hard link ` link to TARGET`)."""
    paths = {}
    for line in dpkg_deb(path, "--contents", path).splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[0][:1] in KINDS:
            name = re.split(r" -> | link to ", parts[5], maxsplit=1)[0]
            paths["/" + name.removeprefix("./")] = KINDS[parts[0][:1]]
    return paths


def control_field(deb, name):
    """One field of a .deb's control file (Package, Version, ...)."""
    return dpkg_deb(deb, "--field", deb, name).strip()


def dpkg_deb(deb, *args):
    done = process.run(["dpkg-deb", *args])
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"dpkg-deb failed with status {done.returncode}"])[-1]
        raise PipelineError(f"{deb} is not a readable .deb: {why.removeprefix('dpkg-deb: error: ')}")
    return done.stdout
