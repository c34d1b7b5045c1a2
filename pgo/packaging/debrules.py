"""Debian binary packages made by a Debian source package's own debian/rules from the checked build tree.

`debian/rules binary BUILDDIR=<tree>` after writing debian/debhelper-build-stamp: dh then skips
configure, build and test (the build is the pipeline's, checked), runs the rules' install override
on our tree and every packaging step after it. So the packages have the source package's names,
split, relations, maintainer scripts and checks: dh_install fails on a file the build did not
install, dh_missing --fail-missing on one no package takes. What the skipped
override_dh_auto_configure does besides configuring (a substvar, a version in the maintainer
scripts) the recipe's [rules] table says, and this module does it in its copy of debian/, the one
change besides the new changelog entry. Never dpkg-buildpackage: it would run `debian/rules clean`
first (which removes $(BUILDDIR)) and apply the quilt patches through the symlinks into the shared
source tree. docs/plan-issue29.md section 2.
"""

import email.utils
import os
import re
import shutil
import textwrap
import time
from pathlib import Path

from pgo import PipelineError
from pgo.base.process import output_of, run as run_tool
from pgo.base.runner import say
from pgo.base.versions import version_line
from pgo.build.source import source_package_name, verify_dsc
from pgo.packaging.debpackages import deb_version
from pgo.packaging.recipes import changelog_line

STAMP = "debhelper-build-stamp"
# nocheck: the rules' test target would run the product's suite (the test phase ran it on this build);
# noautodbgsym: no -dbgsym packages.
BUILD_OPTIONS = "nocheck noautodbgsym"
# What `dh binary` must not run once the stamp is written: configuring, building or testing.
BUILD_STEP = re.compile(r"\b(?:override_)?(dh_auto_configure|dh_auto_build|dh_auto_test|dh_autoreconf"
                        r"|dh_update_autotools_config)\b|\bcreate-stamp\b")
MISSING_INSTALL = re.compile(r"dh_install: warning: (\S+) missing files: (.+)")
NOT_INSTALLED = re.compile(r"dh_missing: warning: (\S+) exists in debian/tmp but is not installed to anywhere")
TOOL_ERROR = re.compile(r"^(\S+): error: (.+)$", re.M)
MAKE_FAILED = re.compile(r"make(?:\[\d+\])?: \*\*\* \[(.+?)\] Error \d+")


def make(build, recipe, folder, scratch):
    """Package build.tree through the debian/ the recipe's [rules] names; return the .debs moved into folder."""
    rules = recipe.get("rules")
    product = build.info["product"]
    if not rules or "debian" not in rules:
        raise PipelineError(f"configuration '{build.info['config']}' packages debs through debian/rules, but "
                            f"packaging/deb/{product}.toml has no [rules] table naming its debian/")
    if build.info.get("bolt"):
        raise PipelineError("a BOLTed build cannot go through debian/rules yet: dh_strip would strip the "
                            "binary BOLT rewrote, which binutils' strip breaks (pgo/build/bolt.py)")
    version = deb_version(build, recipe)
    work = build.workdir.root / "package-deb"
    if work.exists():
        shutil.rmtree(work)
    src = work / "src"
    src.mkdir(parents=True)
    link_source(build.workdir.src.resolve(), src)
    debian = place_debian(rules["debian"], build, src)
    values = {"version": version, "line": version_line(build.version)}
    add_changelog_entry(debian, build, recipe, version)
    write_substvars(debian, rules.get("substvars", []), values)
    substitute(src, rules.get("substitute", []), values)
    packages = output_of(["dh_listpackages"], cwd=src).split()
    (debian / STAMP).write_text("".join(f"{p}\n" for p in packages))
    require_no_build_step(src)
    before = objects_of(build.tree)
    started = time.monotonic()
    say(f"  debian/rules binary BUILDDIR={build.tree} ({len(packages)} packages, {version}; "
        f"DEB_BUILD_OPTIONS={BUILD_OPTIONS})")
    run_rules(src, build.tree, work / "rules.log")
    require_unchanged(build.tree, before)
    debs = sorted(work.glob("*.deb"))
    built = {deb.name.split("_", 1)[0] for deb in debs}
    if sorted(built) != sorted(packages):
        raise PipelineError(f"debian/rules binary made {', '.join(sorted(built)) or 'no package'}; debian/control "
                            f"lists {', '.join(packages)} (log: {work / 'rules.log'})")
    say(f"  {len(debs)} packages in {time.monotonic() - started:.0f} s")
    return [Path(shutil.move(deb, folder / deb.name)) for deb in debs]


# --- the packaging tree -------------------------------------------------------

def link_source(shared, src):
    """The shared source's top-level folders as symlinks: the rules read it (docs, examples), never write
    it. Its top-level files are copied: debhelper copies a file a debian/*.docs names as it finds it, and a
    symlink would ship as a link to this machine's source (mariadb-client's README.md did)."""
    for entry in sorted(shared.iterdir()):
        if entry.name in ("debian", ".pc"):     # ours is placed next; .pc: dpkg-source's record of the patches
            continue
        if entry.is_file():
            # A link to a file is copied as the file it names, or it too would ship as a link here.
            shutil.copy2(entry, src / entry.name)
        else:
            os.symlink(entry, src / entry.name)


def place_debian(origin, build, src):
    """A copy of the debian/ the recipe names: "src:debian", the source tree's own; "debian-source",
    the .debian.tar.* of the Debian source package the build came from (MariaDB's upstream tarball
    has MariaDB's own debian/, not Debian's)."""
    if origin == "src:debian":
        theirs = build.workdir.src / "debian"
        if not (theirs / "rules").is_file():
            raise PipelineError(f"the source has no debian/rules ({theirs}), which the deb recipe's [rules] "
                                "debian = 'src:debian' names")
        shutil.copytree(theirs, src / "debian", symlinks=True)
    elif origin == "debian-source":
        output_of(["tar", "-xf", debian_tarball(build), "-C", src])
    else:
        raise PipelineError(f"the deb recipe's [rules] debian = {origin!r} is neither 'src:debian' nor 'debian-source'")
    debian = src / "debian"
    if not (debian / "rules").is_file() or not (debian / "control").is_file():
        raise PipelineError(f"{debian} has no rules or no control file: not a Debian source package's debian/")
    return debian


def debian_tarball(build):
    """The cached .debian.tar.* of the Debian source package the source phase downloaded for this build."""
    record = build.info["source"]
    origin = record.get("origin", "")
    if record.get("kind") != "debian" or "=" not in origin:
        raise PipelineError(f"the deb recipe takes debian/ from Debian's source package, but this build's source "
                            f"is {origin or 'unknown'}: build from Debian's source (--source debian)")
    package, full = origin.split(":", 1)[1].split("=", 1)
    name = source_package_name(package, full)
    folder = build.workdir.cache(build.workdir.load_settings()) / "debian" / name
    if not verify_dsc(folder / f"{name}.dsc", quiet=True):
        raise PipelineError(f"{folder} does not hold a verified {name}.dsc: run the source phase again")
    tarballs = sorted(folder.glob(f"{name}.debian.tar.*"))
    if not tarballs:
        raise PipelineError(f"{folder} has no {name}.debian.tar.*: a native source package has no separate debian/")
    return tarballs[0]


# --- what the skipped configure step did --------------------------------------

def source_name(debian):
    match = re.search(r"^Source:\s*(\S+)", (debian / "control").read_text(), re.M)
    if not match:
        raise PipelineError(f"{debian / 'control'} names no Source")
    return match.group(1)


def add_changelog_entry(debian, build, recipe, version):
    """Our version on top of the source package's changelog: dh_gencontrol takes every package's version from it."""
    change = textwrap.fill(changelog_line(build), 78, initial_indent="  * ", subsequent_indent="    ")
    entry = (f"{source_name(debian)} ({version}) {recipe['distribution']}; urgency=medium\n\n{change}\n\n"
             f" -- {recipe['maintainer']}  {email.utils.formatdate(localtime=True)}\n\n")
    changelog = debian / "changelog"
    changelog.write_text(entry + (changelog.read_text() if changelog.is_file() else ""))
    parsed = output_of(["dpkg-parsechangelog", "-l", changelog, "-S", "Version"]).strip()
    if parsed != version:
        raise PipelineError(f"{changelog} gives version {parsed!r} after our entry for {version}")


def write_substvars(debian, lines, values):
    with open(debian / "substvars", "a") as f:
        f.writelines(line.format(**values) + "\n" for line in lines)


def substitute(src, rules, values):
    """[rules] substitute = [["debian/X.post*", "__PLACEHOLDER__", "{line}"]]: as the rules' `sed -i` does."""
    for pattern, placeholder, value in rules:
        files = sorted(src.glob(pattern))
        if not files:
            raise PipelineError(f"the deb recipe's [rules] substitute names {pattern}, which matches nothing in "
                                "the source package's debian/")
        for path in files:
            path.write_text(path.read_text().replace(placeholder, value.format(**values)))


# --- running the rules --------------------------------------------------------

def require_no_build_step(src):
    """dh's own account of what `binary` would run, with the stamp written: nothing that configures or builds."""
    planned = output_of(["dh", "binary", "--no-act"], cwd=src, env={"DEB_BUILD_OPTIONS": BUILD_OPTIONS})
    steps = [line.strip() for line in planned.splitlines() if BUILD_STEP.search(line)]
    if steps:
        raise PipelineError(f"debian/rules binary would still run {', '.join(steps)} with {STAMP} written: "
                            "it would build again, not package the checked build")


def run_rules(src, tree, log):
    # One stream, in order: a failing command's message stands right above make's report of it.
    done = run_tool(["sh", "-c", 'exec "$@" 2>&1', "sh", "fakeroot", "debian/rules", "binary", f"BUILDDIR={tree}"],
                    cwd=src, env={"DEB_BUILD_OPTIONS": BUILD_OPTIONS})
    output = done.stdout
    log.write_text(output)
    if done.returncode != 0:
        raise PipelineError(f"{rules_failure(output)} (log: {log})")


def rules_failure(output):
    """One line for a failed `debian/rules binary`: the file at fault where debhelper names one."""
    missing = [(package, name) for package, names in MISSING_INSTALL.findall(output) for name in names.split()]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        package, name = missing[0]
        return f"debian/rules binary: debian/{package}.install names {name}, which the build did not install{more}"
    extra = NOT_INSTALLED.findall(output)
    if extra:
        more = f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""
        return (f"debian/rules binary: the build installed {extra[0]}, which no debian/*.install takes{more} "
                "(dh_missing --fail-missing)")
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    failed = next((i for i, line in enumerate(lines) if MAKE_FAILED.match(line)), None)
    if failed is not None:
        said = next((line for line in reversed(lines[:failed]) if not line.startswith("make")), "no output")
        return f"debian/rules binary failed in {MAKE_FAILED.match(lines[failed]).group(1)}: {said}"
    errors = TOOL_ERROR.findall(output)
    if errors:
        return f"debian/rules binary: {errors[-1][0]}: {errors[-1][1]}"
    return f"debian/rules binary failed: {lines[-1] if lines else 'no output'}"


def objects_of(tree):
    """Each object file's and linked program's identity in the build tree: what a compile would change."""
    return {path: (path.stat().st_mtime_ns, path.stat().st_size) for path in tree.rglob("*")
            if path.suffix in (".o", ".a", ".so") or (path.is_file() and os.access(path, os.X_OK))}


def require_unchanged(tree, before):
    after = objects_of(tree)
    changed = sorted(str(p.relative_to(tree)) for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    if changed:
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise PipelineError(f"debian/rules binary changed the build tree's {changed[0]}{more}: it compiled, "
                            "so the packages are not the checked build")
