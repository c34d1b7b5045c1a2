"""Files and folders made hidden next to their final place, then renamed into it: readers see all or nothing.

Every hidden name says which host and process is filling it
(`.<name>.<host>.<pid>.partial`): two writers of one file never share it, and
the next writer into the same folder removes those a killed process left
behind (a SIGKILLed `pgo package` of MariaDB leaves hundreds of MB) and leaves
those of a live one, or of another host, alone.

A folder filled by a long job that keeps it when it fails, for its log (a VM image
build: `kept`), or filled by someone else (the uploads of a Buildbot build into
its staging folder), is made visible by the same one rename (`reveal`).
"""

import errno
import json
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

SUFFIX = ".partial"


def hidden(final: str | os.PathLike) -> Path:
    """This process's hidden name for `final`, in the same folder (so that the rename is atomic)."""
    final = Path(final)
    return final.parent / f".{final.name}.{socket.gethostname()}.{os.getpid()}{SUFFIX}"


def place(final: str | os.PathLike, fill: Callable[[Path], object]) -> bool:
    """Call fill(path) to make the folder `path` hidden, then rename it to `final`.

    Returns False, keeping nothing, when `final` appeared meanwhile (another
    writer was first); a non-empty folder is never replaced. On any failure
    nothing is left behind. `path` may be a file too (a tool's output whose
    name says its format, as mmdebstrap's `.tar.gz`), which replaces `final`.
    """
    final = Path(final)
    with scratch(final) as folder:
        fill(folder / final.name)
        try:
            (folder / final.name).rename(final)
        except OSError:
            if not final.is_dir():
                raise
            return False
        return True


def kept(final: str | os.PathLike) -> Path:
    """The hidden name of a folder a long job fills in place and keeps when it fails, for its log:
    `.<name>.partial`, without host and pid, so that sweep leaves it alone (its owner decides)."""
    final = Path(final)
    return final.parent / f".{final.name}{SUFFIX}"


def reveal(folder: str | os.PathLike, final: str | os.PathLike) -> None:
    """Make the complete `folder` visible as `final` by one rename (both on one file system): readers
    see all of it or nothing. Never replaces what is there: FileExistsError when `final` exists."""
    final = Path(final)
    if final.exists():
        raise FileExistsError(errno.EEXIST, "already exists", str(final))
    final.parent.mkdir(parents=True, exist_ok=True)
    os.rename(folder, final)


@contextmanager
def scratch(final: str | os.PathLike) -> Iterator[Path]:
    """A hidden folder of this process next to `final`, for what is renamed out of it; removed at the end."""
    folder = hidden(final)
    sweep(folder.parent)
    remove(folder)      # this process's own, from an earlier failed try
    try:
        folder.mkdir(parents=True)
        yield folder
    finally:
        remove(folder)


def write(path: str | os.PathLike, data: bytes) -> None:
    """Replace the file `path` by `data` (bytes), synced: readers see the old file or the new one."""
    path = Path(path)
    sweep(path.parent)
    partial = hidden(path)
    try:
        with open(partial, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def copy(source: str | os.PathLike, path: str | os.PathLike) -> None:
    """Replace the file `path` by a copy of `source`, its mode kept (an executable stays one): readers
    see the old file or the new one."""
    path = Path(path)
    sweep(path.parent)
    partial = hidden(path)
    try:
        shutil.copy2(source, partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def write_json(path: str | os.PathLike, data: object) -> None:
    write(path, json_bytes(data))


def json_bytes(data: object) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def sweep(parent: str | os.PathLike) -> list[Path]:
    """Remove the hidden files and folders in parent whose process on this host is gone; return them."""
    removed = []
    for path in sorted(Path(parent).glob(f".*{SUFFIX}")):
        pid = local_writer(path)
        if pid is not None and not alive(pid):
            remove(path)
            removed.append(path)
    return removed


def local_writer(path: str | os.PathLike) -> int | None:
    """The pid of the process on this host that fills the hidden `path`; None when another host's
    (a pid there says nothing here) or not a hidden name of this module."""
    writer, _, pid = Path(path).name.removesuffix(SUFFIX).rpartition(".")
    if Path(path).name.endswith(SUFFIX) and writer.endswith(f".{socket.gethostname()}") and pid.isdigit():
        return int(pid)
    return None


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
