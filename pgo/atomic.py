"""Folders made hidden next to their final place, then renamed into it: readers see all or nothing.

The hidden folder's name says which host and process is filling it
(`.<name>.<host>.<pid>.partial`), so the next writer into the same parent
removes those a killed process left behind (a SIGKILLed `pgo package` of
MariaDB leaves hundreds of MB) and leaves those of a live one alone.
"""

import os
import shutil
import socket
from pathlib import Path

SUFFIX = ".partial"


def place(final, fill):
    """Call fill(path) to make `path` in a hidden folder, then rename it to `final`.

    Returns False, keeping nothing, when `final` appeared meanwhile (another
    writer was first); a non-empty folder is never replaced. On any failure
    nothing is left behind.
    """
    final = Path(final)
    sweep(final.parent)
    hidden = final.parent / f".{final.name}.{socket.gethostname()}.{os.getpid()}{SUFFIX}"
    shutil.rmtree(hidden, ignore_errors=True)    # this process's own, from an earlier failed try
    try:
        hidden.mkdir(parents=True)
        fill(hidden / final.name)
        try:
            (hidden / final.name).rename(final)
        except OSError:
            if not final.is_dir():
                raise
            return False
        return True
    finally:
        shutil.rmtree(hidden, ignore_errors=True)


def sweep(parent):
    """Remove the hidden folders in parent whose process on this host is gone."""
    for path in Path(parent).glob(f".*{SUFFIX}"):
        writer, _, pid = path.name.removesuffix(SUFFIX).rpartition(".")
        if writer.endswith(f".{socket.gethostname()}") and pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
