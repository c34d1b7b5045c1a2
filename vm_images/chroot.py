"""Run a command inside an image's root filesystem (a chroot here; the VM itself in production).

The command runs in a private mount namespace (unshare): /proc, /dev, /sys and the
bind mounts exist only there and vanish with it, so an interrupted run leaves no
mounts behind. With `scratch`, the image is the lower layer of an overlay and every
write goes to the scratch folder, deleted afterwards: a test never changes the image
it tests; what a command must keep it writes into a writable bind mount.
"""

import os
import shlex
import shutil
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from pgo.base import process
from vm_images import ImageError

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TAIL_LINES = 20


@dataclass(frozen=True)
class Bind:
    source: Path       # on this machine
    target: str        # inside the image, absolute
    writable: bool = False


@dataclass(frozen=True)
class Result:
    returncode: int
    tail: str          # the last lines of the output, for the one-line reason of a failure

    @property
    def ok(self):
        return self.returncode == 0


def require_root():
    if os.geteuid() != 0:
        raise ImageError("building and entering images needs root (chroot, mounts, device files)")


def run(rootfs, argv, log, *, user=None, binds=(), env=None, cwd="/", scratch=None, echo=None):
    """Run argv in rootfs; full output appended to log, lines prefixed with echo also to the console."""
    require_root()
    rootfs = Path(rootfs)
    if not (rootfs / "usr").is_dir():
        raise ImageError(f"{rootfs} is no root filesystem (no usr/)")
    if scratch is not None:
        scratch = Path(scratch)
        shutil.rmtree(scratch, ignore_errors=True)
        for part in ("upper", "work", "merged"):
            (scratch / part).mkdir(parents=True)
        root = scratch / "merged"
        layer = [f"mount -t overlay overlay -o lowerdir={q(rootfs)},upperdir={q(scratch / 'upper')},"
                 f"workdir={q(scratch / 'work')} {q(root)}"]
    else:
        root, layer = rootfs, []
    home = f"/home/{user}" if user else "/root"
    environment = {"PATH": PATH, "HOME": home, "LANG": "C.UTF-8", "USER": user or "root",
                   # the repository is mounted read-only: no __pycache__ into it
                   "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    script = [
        "set -e",
        *layer,
        f"mount -t proc proc {q(root / 'proc')}",
        f"mount -t sysfs sysfs {q(root / 'sys')}",
        f"mount --rbind /dev {q(root / 'dev')}",
        # name resolution as on this machine, for downloads (pip, apt-get source)
        f"cp -L /etc/resolv.conf {q(root / 'etc/resolv.conf')}",
    ]
    for bind in binds:
        target = root / bind.target.lstrip("/")
        script += [f"mkdir -p {q(target)}", f"mount --bind {q(bind.source)} {q(target)}"]
        if not bind.writable:
            script.append(f"mount -o remount,bind,ro {q(target)}")
    userspec = f"--userspec={user}:{user} " if user else ""
    inner = f"cd {q(cwd)} && exec {' '.join(q(a) for a in argv)}"
    script.append(f"exec chroot {userspec}{q(root)} env -i "
                  + " ".join(q(f"{k}={v}") for k, v in environment.items()) + f" sh -c {q(inner)}")
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    tail = deque(maxlen=TAIL_LINES)
    with open(log, "a", encoding="utf-8", errors="replace") as out:
        where = f"{rootfs.parent.parent.name}/{rootfs.parent.name}" + (f" as {user}" if user else "")
        out.write(f"$ [{where}] {' '.join(map(str, argv))}\n")
        out.flush()
        proc = process.start(["unshare", "--mount", "--propagation", "private", "--fork", "sh", "-c",
                              "\n".join(script)],
                             stdout=process.PIPE, stderr=process.STDOUT, text=True, new_session=True, error=ImageError)
        try:
            for line in proc.stdout:
                out.write(line)
                tail.append(line.rstrip("\n"))
                if echo:
                    print(f"[{echo}] {line.rstrip()}", flush=True)
            proc.wait()
        except BaseException:
            os.killpg(proc.pid, 9)
            proc.wait()
            raise
        finally:
            if scratch is not None:
                # the namespace is gone, so are its mounts: the writes go with the scratch folder
                shutil.rmtree(scratch, ignore_errors=True)
    return Result(proc.returncode, "\n".join(tail))


def q(value):
    return shlex.quote(str(value))
