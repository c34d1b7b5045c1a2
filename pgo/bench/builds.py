"""Turn what the user names as a build into a basedir with a server and an install-db script.

A build is given as an installed tree (a basedir), a binary tarball, or a CMake build tree
(staged with `cmake --install`, exactly as packaging does).
"""

import shutil
from dataclasses import dataclass
from pathlib import Path

from pgo.base import process
from pgo.bench.errors import InfraError, UsageError

SERVER_NAMES = ("mariadbd", "mysqld")
INSTALL_DB_NAMES = ("mariadb-install-db", "mysql_install_db")


@dataclass
class Build:
    label: str          # "A" (baseline) or "B" (candidate)
    source: str         # what the user gave
    kind: str           # "basedir", "bintar" or "cmake-tree"
    basedir: Path
    server: Path
    install_db: Path
    version: str


def find_in(basedir, subdirs, names):
    for sub in subdirs:
        for name in names:
            path = basedir / sub / name
            if path.is_file():
                return path
    return None


def from_basedir(label, source, kind, basedir):
    server = find_in(basedir, ("bin", "sbin", "libexec"), SERVER_NAMES)
    install_db = find_in(basedir, ("scripts", "bin"), INSTALL_DB_NAMES)
    if server is None or install_db is None:
        missing = "mariadbd" if server is None else "mariadb-install-db"
        raise UsageError(f"build {label}: no {missing} under {basedir} (expected an installed "
                         "tree with bin/ or sbin/, scripts/ and share/)")
    done = process.run([server, "--version"], error=InfraError, timeout=60, what=f"build {label}: {server}")
    if done.returncode != 0:
        # A server that cannot even say its version (a library it was linked with is missing, as a build
        # of another Debian release in this one) cannot be benchmarked: say why now, not after a failed
        # mariadb-install-db.
        raise InfraError(f"build {label}: {server} --version failed with status {done.returncode}: "
                         f"{process.last_lines(done, 1) or 'no output'}")
    version = done.stdout.strip()
    # "<path>  Ver 10.11.19-MariaDB ...": the path says nothing the report does not already.
    version = version[version.find("Ver "):] if "Ver " in version else version
    return Build(label, source, kind, basedir, server, install_db, version)


def resolve(label, source, workdir):
    """Build for source; bintars are unpacked and build trees staged under workdir."""
    path = Path(source).resolve()
    if not path.exists():
        raise UsageError(f"build {label}: {source} does not exist")
    if path.is_file() and path.name.endswith((".tar.gz", ".tgz")):
        return from_basedir(label, source, "bintar", unpack(label, path, workdir / f"unpacked-{label}"))
    if path.is_dir() and (path / "CMakeCache.txt").is_file():
        return from_basedir(label, source, "cmake-tree", stage(label, path, workdir / f"staged-{label}"))
    if path.is_dir():
        return from_basedir(label, source, "basedir", path)
    raise UsageError(f"build {label}: {source} is neither a directory nor a .tar.gz bintar")


def unpack(label, tarball, dest):
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    # GNU tar refuses '..' names and writes through symlinks on every Python (tarfile's filters need 3.11.4)
    result = process.run(["tar", "-xf", tarball, "-C", dest, "--no-same-owner"], error=InfraError)
    if result.returncode != 0:
        raise InfraError(f"build {label}: cannot unpack {tarball}: {'; '.join(result.stderr.splitlines())}")
    tops = [p for p in dest.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise UsageError(f"build {label}: {tarball} should hold exactly one top folder")
    return tops[0]


def stage(label, tree, prefix):
    cmake = shutil.which("cmake")
    if cmake is None:
        raise InfraError(f"build {label}: cmake is needed to stage the build tree {tree}")
    shutil.rmtree(prefix, ignore_errors=True)
    # With DESTDIR, so that a layout's absolute destinations (/etc in Debian's, -DDEB) land inside the
    # staged tree too, never in this machine's.
    result = process.run([cmake, "--install", tree, "--prefix", "/"], env={"DESTDIR": str(prefix)}, error=InfraError)
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InfraError(f"build {label}: cmake --install {tree} failed: {last[0]}")
    return prefix
