"""Files and folders made hidden next to their final place, then renamed into it: readers see all or nothing.

Every hidden name says which host and process is filling it
(`.<name>.<host>.<pid>.partial`): two writers of one file never share it, and
the next writer into the same folder removes those a killed process left
behind (a SIGKILLed `pgo package` of MariaDB leaves hundreds of MB) and leaves
those of a live one, or of another host, alone.
"""

import json
import os
import shutil
import socket
from contextlib import contextmanager
from pathlib import Path

SUFFIX = ".partial"


def hidden(final):
    """This process's hidden name for `final`, in the same folder (so that the rename is atomic)."""
    final = Path(final)
    return final.parent / f".{final.name}.{socket.gethostname()}.{os.getpid()}{SUFFIX}"


def place(final, fill):
    """Call fill(path) to make the folder `path` hidden, then rename it to `final`.

    Returns False, keeping nothing, when `final` appeared meanwhile (another
    writer was first); a non-empty folder is never replaced. On any failure
    nothing is left behind.
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


@contextmanager
def scratch(final):
    """A hidden folder of this process next to `final`, for what is renamed out of it; removed at the end."""
    folder = hidden(final)
    sweep(folder.parent)
    remove(folder)      # this process's own, from an earlier failed try
    try:
        folder.mkdir(parents=True)
        yield folder
    finally:
        remove(folder)


def write(path, data):
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


def write_json(path, data):
    write(path, json_bytes(data))


def json_bytes(data):
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def sweep(parent):
    """Remove the hidden files and folders in parent whose process on this host is gone; return them."""
    removed = []
    for path in sorted(Path(parent).glob(f".*{SUFFIX}")):
        pid = local_writer(path)
        if pid is not None and not alive(pid):
            remove(path)
            removed.append(path)
    return removed


def local_writer(path):
    """The pid of the process on this host that fills the hidden `path`; None when another host's
    (a pid there says nothing here) or not a hidden name of this module."""
    writer, _, pid = Path(path).name.removesuffix(SUFFIX).rpartition(".")
    if Path(path).name.endswith(SUFFIX) and writer.endswith(f".{socket.gethostname()}") and pid.isdigit():
        return int(pid)
    return None


def remove(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
