"""The source phase: get a product's source for a version, verify it, unpack it.

A source spec is one of: "debian" (the distribution's source package, the
default, works offline against a Debian mirror), a local tarball or directory,
or a git URL with a ref (production build VMs clone the server repository).
Downloads and clones are cached; a cached download is verified, not fetched again.

Every version of one product line is built from one source tree,
<src_root>/<product>-<line> (e.g. mariadb-10.11), refreshed to the source a
build asks for under a lock (checked_out below). GCC checksums each function's
source file path and its line, and drops a function's profile when that
changed: at one path, a profile trained on 10.11.18 still applies to every
function of 10.11.19 that did not move. The price: builds of two versions of
one line on one machine take turns with the tree, and each turn may unpack it
again.

A configuration with `debian_patches = true` (`release`: what Debian builds) builds Debian's
source as `dpkg-source -x` unpacks it, its quilt patches applied, identified by the .dsc's
checksum, in a tree of its own (<product>-<line>-debian): the patched and the upstream source
never take turns in one tree, and the upstream configurations' profiles keep their source.
"""

import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pgo import PipelineError
from pgo.base import atomic, process
from pgo.base.checksums import sha256_file
from pgo.base.runner import say
from pgo.base.versions import LATEST, VERSION_RE, validate_version, version_key, version_line

# ASCII digits, the whole string: `\d` takes any script's digits and `$` a trailing newline.
APT_SOURCES = Path("/etc/apt/sources.list.d")
OS_RELEASE = Path("/etc/os-release")


@dataclass(frozen=True)
class Source:
    kind: str        # debian | tarball | directory | git
    origin: str      # what the user named: package=version, path, or URL@ref
    checksum: str    # sha256 of the tarball, of the tree, or the git commit


def kind_of(spec):
    if spec == "debian":
        return "debian"
    if "://" in spec or spec.startswith("git@"):
        return "git"
    path = Path(spec)
    if path.is_dir():
        return "directory"
    if path.is_file():
        return "dsc" if path.suffix == ".dsc" else "tarball"
    raise PipelineError(f"source '{spec}' is neither 'debian', a git URL, nor an existing .dsc, tarball or directory")


def sha256_tree(root):
    """Checksum of a source tree: every file's relative path and content, and every symbolic link's
    relative path and target, in a fixed order (tree_entries)."""
    return entries_digest(tree_entries(root))


def entries_digest(entries):
    return hashlib.sha256("".join(entries).encode("utf-8", "surrogateescape")).hexdigest()


def tree_entries(root):
    """One line per file of a tree, "path\0sha256\n", and per symbolic link, "path\0-> target\n", in a
    fixed order.

    The tree is copied with its links as links, so a link is part of it as the path it holds; where
    that path stays inside the tree, what it points to is covered as a file of the tree. A link that
    leads out of the tree (an absolute target, or '..' above the tree or into .git) is refused: the
    build would read there what no checksum covers, and what may change between two phases unseen.
    """
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        # Links to directories are among dirnames: os.walk lists them there, and does not follow them.
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        for name in sorted(filenames + links):
            path = Path(dirpath, name)
            relative = path.relative_to(root)
            if path.is_symlink():
                target = os.readlink(path)
                if leaves_tree(relative, target):
                    raise PipelineError(f"source {root} has a symbolic link {relative} -> {target} that leads out "
                                        "of the tree, so its checksum cannot cover what the build reads there: "
                                        "put the file itself there, or a link within the tree")
                entries.append(f"{relative}\0-> {target}\n")
            elif path.is_file():
                entries.append(f"{relative}\0{sha256_file(path)}\n")
    return entries


def leaves_tree(relative, target):
    """Whether a link at `relative` (to the tree's root) holding `target` points out of the tree, or
    into its .git, which is no part of the source. Read as written: a tree does not depend on what
    is outside it."""
    if os.path.isabs(target):
        return True
    parts = Path(os.path.normpath(os.path.join(os.path.dirname(relative), target))).parts
    return parts[:1] in ((os.pardir,), (".git",))


def fetch(spec, version, product, src_root, cache, git_ref=None, suite=None, log=None, patched=False):
    """Put the source of `product` `version` into its line's tree under src_root; return (Source, tree).

    The tree's path is part of the profile (see above): every build of the line
    configures from it, so a profile trained in one work directory (or on another
    VM with the same src_root, or on an earlier version) applies in another.
    """
    with prepared(spec, version, product, cache, git_ref, suite, log, patched) as (source, fill):
        with checked_out(src_root, product, version, source, fill, patched):
            pass
    return source, line_tree(src_root, product, version, patched)


@contextmanager
def held(record, spec, version, product, src_root, cache, git_ref=None, suite=None, log=None, patched=False):
    """The line's tree holding the source `record` (a work directory's source.json) names, for the block.

    Another build may have put another version into the tree since the source
    phase ran: then it is put back, from the cache, and must have the recorded checksum.
    """
    def refill(dest):
        with prepared(spec, version, product, cache, git_ref, suite, log, patched) as (source, fill):
            if source.checksum != record["checksum"]:
                raise PipelineError(f"source {source.origin} is no longer what phase source took "
                                    f"({record['checksum'][:12]}, now {source.checksum[:12]}): "
                                    "run phase source again and the phases after it")
            fill(dest)

    wanted = Source(record["kind"], record["origin"], record["checksum"])
    with checked_out(src_root, product, version, wanted, refill, patched) as tree:
        yield tree


@contextmanager
def prepared(spec, version, product, cache, git_ref=None, suite=None, log=None, patched=False):
    """What the source is (downloaded, verified, cloned as needed) and how to put it into a directory.

    patched: Debian's source package as Debian builds it, its patches applied (only from Debian's archive)."""
    kind = kind_of(spec)
    if patched and kind not in ("debian", "dsc"):
        raise PipelineError(f"the configuration builds Debian's patched source (debian_patches), and --source "
                            f"{spec} is not Debian's source package: leave --source out, or give its .dsc")
    if kind in ("debian", "dsc"):
        if not product.debian_source:
            raise PipelineError(f"product '{product.name}' has no Debian source package; give --source")
        if kind == "dsc":
            tarball, origin, dsc = given_source_package(Path(spec), product.debian_source, version, cache / "debian")
            kind = "debian"         # Debian's source package all the same: its labels and debs read it so
        else:
            tarball, origin, dsc = debian_source_package(product.debian_source, version, cache / "debian", suite,
                                                         log)
        if patched:
            yield Source(kind, origin, sha256_file(dsc)), lambda dest: unpack_dsc(dsc, dest)
        else:
            yield Source(kind, origin, sha256_file(tarball)), lambda dest: unpack_tarball(tarball, dest)
    elif kind == "tarball":
        yield (Source(kind, str(Path(spec).resolve()), sha256_file(spec)),
               lambda dest: unpack_tarball(Path(spec), dest))
    elif kind == "directory":
        # Before reading or copying anything: a directory that is not this version's source (a mistyped
        # path, `/`) is refused as it is.
        require_version(Path(spec), version, str(Path(spec).resolve()))
        yield (Source(kind, str(Path(spec).resolve()), sha256_tree(spec)),
               lambda dest: shutil.copytree(spec, dest, symlinks=True, ignore=shutil.ignore_patterns(".git")))
    else:
        ref = git_ref or f"{product.name}-{version}"
        # In the cache, beside the trees: the checkout is renamed into place, never copied. Its hidden
        # folder names this process, so a killed clone's is swept by the next one.
        with atomic.scratch(ensure_dir(cache) / "git-checkout") as checkout:
            tree = checkout / "tree"
            commit = git_checkout(spec, ref, tree, cache / "git", log)
            yield Source(kind, f"{spec}@{ref}", f"git:{commit}"), lambda dest: tree.rename(dest)


def check_available(spec, version, config, base):
    """Refuse a version the source does not have, without downloading anything.

    A release checks this before it starts, on whatever machine it is started
    from, so only what that machine can see is checked: Debian's archive (when
    apt knows versions of the line) and a directory's VERSION file (a relative path
    is relative to base). A tarball, a git ref, or a path this machine lacks is
    left to fetch(), which checks every source.
    """
    config.require_version(version)
    product = config.product
    if spec == "debian":
        if not product.debian_source:
            raise PipelineError(f"product '{product.name}' has no Debian source package; give a source")
        versions = debian_versions(product.debian_source)
        if of_line(versions, version_line(version)):
            package = product.debian_source
            require_served(package, matching_debian_version(package, version, versions))
        return
    tree = Path(base, spec)
    if "://" not in spec and tree.is_dir():
        require_version(tree, version, spec)


def require_version(tree, version, origin):
    found = source_version(tree)
    if found != version:
        raise PipelineError(f"source {origin} is version {found}, not the requested {version}")


def ensure_dir(path):
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


# --- latest -----------------------------------------------------------------

def resolve_version(requested, spec, config, base=".", git_ref=None, log=None, on_worker=True):
    """(version, how it was found): the requested version, or for 'latest' the newest of the
    configuration's line that the source has.

    on_worker: where the build runs, the suite's deb-src entry may be added and its lists
    refreshed, and a source that is not there is an error. Elsewhere (the master) only what
    this machine already sees counts, and None says it cannot tell.
    """
    if requested != LATEST:
        return config.require_version(validate_version(requested)), "as requested"
    product, line = config.product, config.line
    if spec == "debian":
        if not product.debian_source:
            raise PipelineError(f"product '{product.name}' has no Debian source package; give a source")
        found = newest_debian_version(product.debian_source, line, config.debian_suite, log, on_worker)
        if found is None:
            return None
        release, full, skipped = found
        if skipped:
            return release, (f"the newest {product.name} {line or 'version'} whose source Debian's archive "
                             f"serves: {full} (not {'; '.join(skipped)})")
        return release, f"the newest {product.name} {line or 'version'} in Debian's archive: {full}"
    if "://" in spec or spec.startswith("git@"):
        if git_ref:
            raise PipelineError(f"--git-ref {git_ref} names one commit: give its version instead of 'latest'")
        return newest_git_tag(spec, product, line), f"the newest {product.name}-* tag of {spec}"
    path = Path(base, spec)
    if not path.exists():
        if on_worker:
            kind_of(spec)     # raises: what the spec is not
        return None
    if path.is_dir():
        version = source_version(path)
    elif path.suffix == ".dsc":
        version = release_of(dsc_field(path, "Version"))
    else:
        version = tarball_version(path)
    return config.require_version(version), f"the version of {spec}"


def newest_debian_version(package, line, suite, log=None, add_entry=True):
    """(release, Debian's full version, skipped) of the newest Debian version of `line` whose source
    the archive serves; None when apt knows none and add_entry is False. With add_entry, the suite's
    deb-src entry is added, or its lists refreshed, first (as root).

    apt's lists can name a version whose source the mirror does not have (a security update on a
    mirror that carries only its binaries): 'latest' is then the newest served one, and skipped
    says which versions it passed over and why."""
    if add_entry:
        try:
            refresh_deb_src(suite, log)
        except PipelineError as e:     # apt's lock held, the mirror away: the lists apt has still count
            print(f"pgo: warning: cannot refresh the deb-src lists of {suite or 'this machine'}, "
                  f"taking apt's lists as they are: {e}", file=sys.stderr)
    versions = of_line(debian_versions(package), line)
    if not versions and add_entry:
        ensure_deb_src(suite, log)
        versions = of_line(debian_versions(package), line)
        if not versions:
            where = f"suite {suite}" if suite else "this machine's suites"
            raise PipelineError(f"Debian's archive ({where}) has no {package} {line or 'version'}")
    if not versions:
        return None
    skipped = []
    for release in sorted({release_of(v) for v in versions}, key=version_key, reverse=True):
        full = matching_debian_version(package, release, versions)
        why = unserved(package, full)
        if not why:
            return release, full, skipped
        skipped.append(f"{full}, listed but not served: {why}")
    raise PipelineError(f"Debian's archive lists {package} {line or 'versions'} but serves none of their sources: "
                        + "; ".join(skipped) + " (give a source you have with --source: a tarball or a directory)")


def served_versions(binaries, suite=None):
    """{binary package: [the versions apt serves of it]} (apt-cache madison), from any suite, or only from
    `suite` and its updates (bookworm, bookworm-security, ...)."""
    shown = process.run(["apt-cache", "madison", *binaries]).stdout
    served = {}
    for line in shown.splitlines():
        row = [cell.strip() for cell in line.split("|")]
        if len(row) != 3 or not row[2].endswith(" Packages"):
            continue
        parts = row[2].split()
        where = parts[1].split("/")[0] if len(parts) > 1 else ""
        if suite is None or where == suite or where.startswith(suite + "-"):
            served.setdefault(row[0], []).append(row[1])
    return served


def apt_download(packages, version, folder, source_name, timeout):
    """{package: its .deb} of `apt-get download package=version` of each package into folder (the
    binary packages of source `source_name`); one error line when apt fails, or writes no .deb, or
    more than one, of a package."""
    done = process.run(["apt-get", "download", "-q", *(f"{p}={version}" for p in packages)], cwd=folder,
                       timeout=timeout, what="apt-get download")
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if line.startswith("E:")]
        raise PipelineError(f"apt-get download of {source_name} {version} failed: "
                            f"{(errors or done.stderr.strip().splitlines() or ['no message'])[-1]}")
    written = {p: sorted(Path(folder).glob(f"{p}_*.deb")) for p in packages}
    missing = [p for p, files in written.items() if not files]
    if missing:
        raise PipelineError(f"apt-get download of {source_name} {version} wrote no .deb of {', '.join(missing)}")
    twice = [p for p, files in written.items() if len(files) > 1]
    if twice:
        raise PipelineError(f"apt-get download of {source_name} {version} wrote more than one .deb of "
                            f"{', '.join(twice)}")
    return {p: files[0] for p, files in written.items()}


def require_served(package, full):
    """Refuse a version asked for by name whose source apt lists but the archive does not serve."""
    why = unserved(package, full)
    if why:
        raise PipelineError(f"{package} {full} is listed by apt, but Debian's archive does not serve its "
                            f"source ({why}); 'python3 -m pgo latest' names the newest it serves")


def unserved(package, full):
    """Why Debian's archive does not serve the source package `package`=`full` (None: it does, or
    this machine cannot tell, and the download will say). Asks for the .dsc's headers only."""
    result = process.run(["apt-get", "source", "--print-uris", f"{package}={full}"])
    uris = re.findall(r"^'([^']+\.dsc)'", result.stdout, re.M)
    if result.returncode != 0 or not uris:
        return None
    try:
        with urllib.request.urlopen(urllib.request.Request(uris[0], method="HEAD"), timeout=20):
            return None
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code} for {urllib.parse.unquote(uris[0].rsplit('/', 1)[-1])}"
    except (urllib.error.URLError, OSError):
        return None


def newest_git_tag(url, product, line):
    """The newest version with a tag <product>-MAJOR.MINOR.PATCH in the repository, of `line` if given."""
    result = process.run(["git", "ls-remote", "--tags", "--refs", url, f"refs/tags/{product.name}-*"])
    if result.returncode != 0:
        raise PipelineError(f"cannot list the tags of {url}: {result.stderr.strip()[-300:]}")
    prefix = f"refs/tags/{product.name}-"
    versions = [ref.removeprefix(prefix) for ref in re.findall(r"\t(\S+)$", result.stdout, re.M)
                if ref.startswith(prefix)]
    versions = [v for v in versions if VERSION_RE.fullmatch(v) and (line is None or version_line(v) == line)]
    if not versions:
        raise PipelineError(f"{url} has no tag {product.name}-{line + '.' if line else ''}N")
    return max(versions, key=version_key)


def tarball_version(tarball):
    """The version in a release tarball's VERSION file (at the top, or in its one top-level folder)."""
    for pattern in ("*/VERSION", "VERSION"):
        result = process.run(["tar", "-xOf", tarball, "--wildcards", "--no-wildcards-match-slash", pattern])
        if result.returncode == 0 and result.stdout.strip():
            with tempfile.TemporaryDirectory() as scratch:
                Path(scratch, "VERSION").write_text(result.stdout)
                return source_version(scratch)
    raise PipelineError(f"{tarball} has no VERSION file: give the version it holds")


# --- the line's tree ----------------------------------------------------------

def line_tree(src_root, product, version, patched=False):
    return Path(src_root) / f"{product.name}-{version_line(version)}{'-debian' if patched else ''}"


# Trees this process holds, and the source in each: a refresh while one is held here would wait for itself.
_HELD = {}


@contextmanager
def checked_out(src_root, product, version, source, fill, patched=False):
    """Hold the line's tree with `source` in it, shared with builds of the same source, for the block.

    The tree is only replaced under an exclusive lock, which waits for every
    build using it; a build of another source waits for the replacement. A
    marker beside the tree names the source in it; it is removed before a
    replacement and written after, so a tree cut short is never taken for one.
    """
    tree = line_tree(ensure_dir(src_root), product, version, patched)
    held_here = _HELD.setdefault(tree, [])
    if held_here:
        # Held already by this command, which checked it on the way in and checks it on the way out.
        if held_here[-1] != source.checksum:
            raise PipelineError(f"{tree} holds {held_here[-1][:12]} for this command, which also needs "
                                f"{source.checksum[:12]} there")
        yield tree
        return
    with open(tree.with_name(f".{tree.name}.lock"), "a+") as lock:
        take(lock, fcntl.LOCK_SH, tree)
        while tree_change(tree, source.checksum) != "":
            fcntl.flock(lock, fcntl.LOCK_UN)
            take(lock, fcntl.LOCK_EX, tree)
            changed = tree_change(tree, source.checksum)
            if changed != "":
                if changed:
                    say(f"the source tree {tree} changed since {source.origin} was put there ({changed}): "
                        f"putting it back; the changed tree is kept as {kept_changes(tree)}")
                replace_tree(tree, source, version, fill, keep_old=bool(changed))
            # Not atomic (flock(2)): another build may swap the tree between the two calls; look again.
            fcntl.flock(lock, fcntl.LOCK_SH)
        held_here.append(source.checksum)
        try:
            yield tree
        finally:
            held_here.pop()
        # What was read must be what was checked on the way in: an edit while the block read the tree
        # (a build compiles for minutes) would go into what it made under the recorded checksum.
        changed = tree_change(tree, source.checksum)
        if changed:
            raise PipelineError(f"the source tree {tree} changed while this command read it ({changed}), so what it "
                                f"made is not of {source.origin}: run it again (it puts the tree back first)")


def take(lock, mode, tree):
    try:
        fcntl.flock(lock, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        marker = read_marker(tree)
        held_by = f" (it holds {marker['origin']})" if marker else ""
        say(f"waiting for the source tree {tree}: another build is using it{held_by}")
        fcntl.flock(lock, mode)


def marker_of(tree):
    return tree.with_name(f".{tree.name}.source.json")


def read_marker(tree):
    try:
        return json.loads(marker_of(tree).read_text())
    except (OSError, ValueError):
        return None


def in_tree(tree):
    marker = read_marker(tree)
    return marker["checksum"] if marker and tree.is_dir() else None


def listing_of(tree):
    """Beside the tree: its tree_entries as they were when it was put there, to name what changed since."""
    return tree.with_name(f".{tree.name}.files")


def kept_changes(tree):
    return tree.with_name(f".{tree.name}.changed")


def tree_change(tree, checksum):
    """None when the tree holds another source (or none); else what changed in its files since that source
    was put there ("" for nothing): an edit in the shared tree would be built under the recorded checksum."""
    marker = read_marker(tree)
    if not marker or marker["checksum"] != checksum or not tree.is_dir() or "tree" not in marker:
        return None
    entries = tree_entries(tree)
    if entries_digest(entries) == marker["tree"]:
        return ""
    try:
        then = dict(line.rstrip("\n").split("\0", 1) for line in listing_of(tree).read_text().splitlines(True))
    except (OSError, ValueError):
        return "its files' checksum differs"
    now = dict(line.rstrip("\n").split("\0", 1) for line in entries)
    differ = sorted(path for path in then.keys() | now.keys() if then.get(path) != now.get(path))
    first = differ[0]
    how = "is new" if first not in then else "is gone" if first not in now else "changed"
    return f"{first} {how}" + (f", and {len(differ) - 1} more" if len(differ) > 1 else "")


def replace_tree(tree, source, version, fill, keep_old=False):
    """Fill a hidden folder, check its version, and swap it in for the line's tree (exclusive lock held).
    keep_old: keep the tree it replaces (someone changed it) as kept_changes(tree), not remove it."""
    filling, old = tree.with_name(f".{tree.name}.filling"), tree.with_name(f".{tree.name}.old")
    for leftover in (filling, old):
        shutil.rmtree(leftover, ignore_errors=True)
    try:
        fill(filling)
        require_version(filling, version, source.origin)
        entries = tree_entries(filling)
    except BaseException:
        shutil.rmtree(filling, ignore_errors=True)
        raise
    marker_of(tree).unlink(missing_ok=True)
    if tree.exists():
        tree.rename(old)
    filling.rename(tree)
    atomic.write(listing_of(tree), "".join(entries).encode("utf-8", "surrogateescape"))
    atomic.write(marker_of(tree), (json.dumps({"checksum": source.checksum, "origin": source.origin,
                                               "version": version, "tree": entries_digest(entries)}) + "\n").encode())
    if keep_old and old.exists():
        shutil.rmtree(kept_changes(tree), ignore_errors=True)
        old.rename(kept_changes(tree))
    shutil.rmtree(old, ignore_errors=True)


def source_version(tree):
    """The version a source tree says it is: MariaDB's VERSION file, or a bare version line."""
    path = Path(tree, "VERSION")
    if not path.is_file():
        raise PipelineError(f"{tree} has no VERSION file: not a MariaDB (or fixture) source tree")
    text = path.read_text(errors="replace")
    parts = dict(re.findall(r"^MYSQL_VERSION_(MAJOR|MINOR|PATCH)=(\d+)", text, re.M))
    if len(parts) == 3:
        return f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}"
    first = text.strip().splitlines()[0] if text.strip() else ""
    if VERSION_RE.fullmatch(first):
        return first
    raise PipelineError(f"{path} names no version: not a MariaDB (or fixture) source tree")


def replace_dir(path):
    if path.exists():
        shutil.rmtree(path)
    path.parent.mkdir(parents=True, exist_ok=True)


def unpack_tarball(tarball, dest):
    """Unpack a release tarball (one top-level folder) into dest, which must not exist."""
    with atomic.scratch(dest) as staging:
        # GNU tar, not tarfile: it refuses names with '..' and writes through symlinks on every
        # Python (tarfile's safety filters need 3.11.4; Debian 12 has 3.11.2).
        result = process.run(["tar", "-xf", tarball, "-C", staging, "--no-same-owner"])
        if result.returncode != 0:
            raise PipelineError(f"cannot unpack {tarball}: {'; '.join(result.stderr.splitlines())}")
        entries = list(staging.iterdir())
        top = entries[0] if len(entries) == 1 and entries[0].is_dir() else staging
        atomic.reveal(top, dest)


def unpack_dsc(dsc, dest):
    """Unpack a verified Debian source package into dest (which must not exist) as Debian builds it:
    the upstream tarball, debian/, and the quilt patches of debian/patches/series applied.
    --no-check: verify_dsc checked every file's checksum; the signature's keyring is not on a build VM."""
    result = process.run(["dpkg-source", "--no-check", "--no-copy", "-x", dsc, dest])
    if result.returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        said = result.stdout + result.stderr
        patch, file, hunk = (re.findall(pattern, said) for pattern in (r"info: applying (\S+)", r"patching file (\S+)",
                                                                       r"(Hunk #\d+ FAILED at \d+)"))
        if patch and hunk:
            raise PipelineError(f"cannot unpack {dsc.name}: its patch {patch[-1]} does not apply to "
                                f"{file[-1] if file else 'the source'} ({hunk[0]})")
        last = [line for line in said.splitlines() if line.strip()] or ["dpkg-source failed"]
        raise PipelineError(f"cannot unpack {dsc.name}: {last[-1].strip()}")


# --- Debian source packages -------------------------------------------------

def debian_source_package(package, version, cache, suite=None, log=None):
    """Download (once) and verify the Debian source package whose upstream version is `version`:
    (its upstream tarball, "debian:<package>=<full version>", its .dsc)."""
    full = debian_version(package, version, suite, log)

    def download(partial):
        require_served(package, full)
        partial.mkdir()
        _run(["apt-get", "source", "--download-only", f"{package}={full}"], cwd=partial, log=log)

    dsc = cached_source_package(package, full, cache, download)
    return upstream_tarball(dsc, package, upstream_of(full)), f"debian:{package}={full}", dsc


def cached_source_package(package, full, cache, fill):
    """The verified .dsc of `package`'s source package of version `full` in the cache, in
    <cache>/<package>_<version>/: kept when it verifies, else made by fill(partial) (a download, a copy)
    out of sight and revealed whole, then verified."""
    name = source_package_name(package, full)
    folder, dsc = cache / name, cache / name / f"{name}.dsc"
    if not (dsc.is_file() and verify_dsc(dsc, quiet=True)):
        replace_dir(folder)
        atomic.place(folder, fill)     # or another build filled it meanwhile: verified below
        verify_dsc(dsc)
    return dsc


def source_package_name(package, full):
    """'mariadb_11.8.6-0+deb13u1': a Debian source package's files' stem (its version without the epoch)."""
    return f"{package}_{full.split(':', 1)[-1]}"


def upstream_tarball(dsc, package, upstream):
    """The upstream tarball beside a verified .dsc (not its signature)."""
    tarballs = [t for t in sorted(dsc.parent.glob(f"{package}_{upstream}.orig.tar.*")) if not t.name.endswith(".asc")]
    if not tarballs:
        raise PipelineError(f"{dsc.name} lists no upstream tarball {package}_{upstream}.orig.tar.*")
    return tarballs[0]


def dsc_field(dsc, name):
    found = re.search(rf"^{name}:\s*(\S+)", dsc.read_text(errors="replace"), re.M)
    if not found:
        raise PipelineError(f"{dsc} has no {name} field: not a Debian source package's .dsc")
    return found.group(1)


def given_source_package(dsc, package, version, cache):
    """A Debian source package given as its .dsc (one this mirror no longer lists, such as 11.8.6 beside the
    listed but unserved 11.8.9): verified as a downloaded one is, refused unless it is package's source of
    upstream `version`, and copied into the cache where a downloaded one lies, for the debs made from it
    (pgo/packaging/debrules.py takes debian/ from there, maybe after the given path has gone).
    (its upstream tarball, "debian:<package>=<full version>", the cached .dsc)."""
    dsc = dsc.resolve()
    source_name, full = dsc_field(dsc, "Source"), dsc_field(dsc, "Version")
    if source_name != package or release_of(full) != version:
        raise PipelineError(f"{dsc.name} is the source of {source_name} {release_of(full) or full}, not of "
                            f"{package} {version}")
    verify_dsc(dsc)

    def copy(partial):
        partial.mkdir()
        # Under its Debian name, whatever the given file's: the cache is looked up by that.
        shutil.copy2(dsc, partial / f"{source_package_name(package, full)}.dsc")
        for listed in dsc_files(dsc):
            shutil.copy2(dsc.parent / listed, partial / listed)

    cached = cached_source_package(package, full, cache, copy)
    return upstream_tarball(cached, package, upstream_of(full)), f"debian:{package}={full}", cached


def debian_version(package, version, suite=None, log=None):
    """Debian's full version of upstream `version`; adds the suite's deb-src entry when apt knows none of its line."""
    versions = debian_versions(package)
    if not of_line(versions, version_line(version)):
        ensure_deb_src(suite, log)
        versions = debian_versions(package)
    return matching_debian_version(package, version, versions)


def of_line(versions, line):
    """The Debian versions (epoch:upstream-revision) of upstream releases of `line` (None: all)."""
    return [v for v in versions if release_of(v) and (line is None or version_line(release_of(v)) == line)]


def upstream_of(debian_version):
    """'1:11.8.9+ds-0+deb13u1' -> '11.8.9+ds': Debian's upstream version (a repacked tarball adds +ds)."""
    return debian_version.split(":", 1)[-1].rsplit("-", 1)[0]


def release_of(debian_version):
    """'1:11.8.9+ds-0+deb13u1' -> '11.8.9': the upstream release a Debian version packages (None: none)."""
    match = re.match(r"[0-9]+\.[0-9]+\.[0-9]+(?![0-9.~])", upstream_of(debian_version))
    return match.group(0) if match else None


def matching_debian_version(package, version, versions):
    """The newest of Debian's versions (epoch:upstream-revision) whose upstream version is `version`."""
    matching = [v for v in versions if release_of(v) == version]
    if not matching:
        known = ", ".join(sorted(set(versions))) or "none"
        raise PipelineError(f"unknown version {version}: Debian's archive has {package} {known}")
    return sorted(matching)[-1]


def debian_versions(package):
    """Every version of the source package apt knows (apt-cache showsrc), as epoch:upstream-revision."""
    result = process.run(["apt-cache", "showsrc", package])
    return re.findall(r"^Version: (\S+)", result.stdout, re.M)


def control_paragraphs(text):
    """The paragraphs of Debian's control format that name a Version (apt-cache showsrc's, a .deb's
    control file) as {field: value}, continuation lines joined."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        fields, last = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and last:
                fields[last] += " " + line.strip()
            elif ":" in line:
                last, _, value = line.partition(":")
                fields[last] = value.strip()
        if "Version" in fields:
            paragraphs.append(fields)
    return paragraphs


def host_suite():
    """This machine's Debian release (VERSION_CODENAME), or None."""
    try:
        return re.search(r"^VERSION_CODENAME=\"?([a-z]+)", OS_RELEASE.read_text(), re.M).group(1)
    except (OSError, AttributeError):
        return None


def deb_src_entry(suite=None):
    """The pipeline's deb-src entry for a Debian suite (None: this machine's own suites)."""
    own = suite is None or suite == host_suite()
    return APT_SOURCES / ("pgo-deb-src.sources" if own else f"pgo-deb-src-{suite}.sources")


def deb_src_text(host_sources, suite=None, host=None):
    """deb-src entries mirroring this machine's deb entries; for another suite, with its name
    in place of this machine's (bookworm-security -> trixie-security)."""
    text = re.sub(r"^Types: deb$", "Types: deb-src", host_sources, flags=re.M)
    if suite and suite != host:
        if not host:
            raise PipelineError(f"cannot derive deb-src entries for {suite}: /etc/os-release names no "
                                "VERSION_CODENAME for this machine's suites")
        text = re.sub(r"^Suites:.*$", lambda line: re.sub(rf"\b{host}\b", suite, line.group(0)), text, flags=re.M)
    return text


def ensure_deb_src(suite=None, log=None):
    """Add the suite's deb-src entry, mirroring the configured deb entries, then update the lists."""
    sources = APT_SOURCES / "debian.sources"
    entry = deb_src_entry(suite)
    if entry.is_file():
        refresh_deb_src(suite, log)
        return
    if not sources.is_file():
        raise PipelineError(f"no deb-src entry and no {sources} to copy one from")
    if os.geteuid() != 0:
        raise PipelineError(f"Debian source packages{' of ' + suite if suite else ''} need a deb-src entry: "
                            "run once as root, or add one as the README explains")
    entry.write_text(deb_src_text(sources.read_text(), suite, host_suite()))
    _run(["apt-get", "update"], log=log)


def refresh_deb_src(suite=None, log=None):
    """Update the package lists of the pipeline's deb-src entry for the suite, and no others
    (as root, when the entry is there): what 'latest' is depends on them."""
    entry = deb_src_entry(suite)
    if os.geteuid() != 0 or not entry.is_file():
        return False
    _run(["apt-get", "update", "-o", f"Dir::Etc::SourceList={entry}", "-o", "Dir::Etc::SourceParts=-",
          "-o", "APT::Get::List-Cleanup=0"], log=log)
    return True


def dsc_checksums(dsc):
    """{file name: SHA-256} of the files a .dsc lists; None when it has no Checksums-Sha256 section."""
    text = dsc.read_text(errors="replace") if dsc.is_file() else ""
    block = re.search(r"^Checksums-Sha256:\n((?: .+\n?)+)", text, re.M)
    if not block:
        return None
    return {name: digest for digest, _size, name in (line.split() for line in block.group(1).splitlines())}


def dsc_files(dsc):
    return list(dsc_checksums(dsc) or {})


def verify_dsc(dsc, quiet=False):
    """Check every file the .dsc lists against its SHA-256 (apt verified the .dsc's own signature chain)."""
    listed = dsc_checksums(dsc)
    if listed is None:
        if quiet:
            return False
        raise PipelineError(f"{dsc} has no Checksums-Sha256 section")
    for name, digest in listed.items():
        path = dsc.parent / name
        if not path.is_file() or sha256_file(path) != digest:
            if quiet:
                return False
            if not path.is_file():
                raise PipelineError(f"{path} is missing: {dsc.name} lists it (download it beside the .dsc)")
            raise PipelineError(f"{path} does not match the checksum in {dsc.name}: corrupted download")
    return True


# --- git --------------------------------------------------------------------

def git_checkout(url, ref, dest, cache, log=None):
    """Clone (or update) a bare mirror in the cache, then check ref out into dest with submodules."""
    mirror = cache / hashlib.sha256(url.encode()).hexdigest()[:16]
    if mirror.is_dir():
        _run(["git", "-C", mirror, "fetch", "--tags", "--force", "origin"], log=log)
    else:
        cache.mkdir(parents=True, exist_ok=True)
        _run(["git", "clone", "--mirror", url, mirror], log=log)
    replace_dir(dest)
    _run(["git", "clone", mirror, dest], log=log)
    try:
        _run(["git", "-C", dest, "checkout", "--detach", ref], log=log)
    except PipelineError as e:
        raise PipelineError(f"git ref '{ref}' not found in {url}") from e
    _run(["git", "-C", dest, "submodule", "update", "--init", "--recursive"], log=log)
    return process.output_of(["git", "-C", dest, "rev-parse", "HEAD"]).strip()


def _run(cmd, cwd=None, log=None):
    if log:
        log.run(cmd, cwd=cwd)
        return
    result = process.run(cmd, cwd=cwd)
    if result.returncode != 0:
        raise PipelineError(f"'{' '.join(map(str, cmd))}' failed: {result.stderr.strip()[-500:]}")
