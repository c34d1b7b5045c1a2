"""The one way the commands of this repository run a tool (pgo, pgo.bench, vm_images, ./release).

A tool whose output a command takes whole (a packaging tool, apt, git, gcc, readelf, sysbench)
runs to its end with `run` or `output_of`, its output captured; one whose output goes into a log
or onto the terminal, with `run_into`; one that runs beside the command (a server, a VM, a tool
whose output is read as it comes), with `start`. Each way, a tool that cannot start, or that runs
past its time limit, is one error (the caller's class: PipelineError, InfraError, ImageError) that
says so. The phases' long commands, logged and shown as they run, go through pgo/base/runner.py's
PhaseLog, which is built on the same terms.
"""

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from pgo.base.errors import PipelineError

# A working folder as the callers give it: a path, a string or none (this process's own).
Folder = str | os.PathLike[str] | None

# Where start's and run_into's output goes, besides an open file: subprocess's own constants.
PIPE, STDOUT, DEVNULL = subprocess.PIPE, subprocess.STDOUT, subprocess.DEVNULL


def run(cmd: Sequence[object], *, cwd: Folder = None, env: Mapping[str, str] | None = None,
        error: type[Exception] = PipelineError, timeout: float | None = None,
        what: str | None = None) -> subprocess.CompletedProcess:
    """Run cmd to its end, stdout and stderr captured as text (undecodable bytes replaced), env
    added to this process's environment; the caller judges the exit status. A tool that cannot be
    started raises error("cannot run TOOL: why"); past timeout (seconds) it is
    killed and error("WHAT did not finish within N s") raised (what: the tool's name unless told)."""
    args = [str(c) for c in cmd]
    try:
        return subprocess.run(args, cwd=cwd, env=environment(env), capture_output=True, text=True, errors="replace",
                              timeout=timeout)
    except OSError as e:
        raise error(cannot_run(args, e)) from e
    except subprocess.TimeoutExpired:
        raise error(f"{what or os.path.basename(args[0])} did not finish within {timeout:g} s") from None


def output_of(cmd: Sequence[object], *, cwd: Folder = None, env: Mapping[str, str] | None = None,
              error: type[Exception] = PipelineError, tail: int = 20, timeout: float | None = None) -> str:
    """cmd's standard output; error("CMD ... failed with status N:" and its last `tail` lines of
    output) when it fails."""
    done = run(cmd, cwd=cwd, env=env, error=error, timeout=timeout)
    if done.returncode != 0:
        raise error(f"{' '.join(map(str, cmd[:3]))} ... failed with status {done.returncode}:\n"
                    f"{last_lines(done, tail)}")
    return done.stdout


def last_lines(done: subprocess.CompletedProcess, count: int) -> str:
    """The last lines of a finished tool's output (stdout, then stderr)."""
    return "\n".join((done.stdout + done.stderr).strip().splitlines()[-count:])


def run_into(cmd: Sequence[object], out: IO[Any] | None = None, *, cwd: Folder = None,
             env: Mapping[str, str] | None = None, error: type[Exception] = PipelineError) -> int:
    """Run cmd to its end, its output (stdout and stderr) into the open file `out` (a log), or onto
    this process's own output without one (a tool whose progress the user watches); its exit status."""
    args = [str(c) for c in cmd]
    try:
        return subprocess.run(args, cwd=cwd, env=environment(env), stdout=out,
                              stderr=None if out is None else STDOUT).returncode
    except OSError as e:
        raise error(cannot_run(args, e)) from e


def start(cmd: Sequence[object], *, stdout: Any = None, stderr: Any = None, text: bool = False,
          cwd: Folder = None, env: Mapping[str, str] | None = None, new_session: bool = False,
          error: type[Exception] = PipelineError) -> subprocess.Popen:
    """Start cmd beside this process and return it: a server, a VM, a tool whose output the caller
    reads as it comes (stdout=PIPE). stdout and stderr: an open file, PIPE, STDOUT or DEVNULL, or
    this process's own (None); text: the pipe as text, undecodable bytes replaced; new_session:
    it leads its own session, so that it and everything it started can be killed together."""
    args = [str(c) for c in cmd]
    try:
        return subprocess.Popen(args, cwd=cwd, env=environment(env), stdout=stdout, stderr=stderr, text=text,
                                errors="replace" if text else None, bufsize=1 if text else -1,
                                start_new_session=new_session)
    except OSError as e:
        raise error(cannot_run(args, e)) from e


def ended(proc: subprocess.Popen, timeout: float) -> bool:
    """Wait up to timeout seconds for a started process to end; whether it did."""
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


def wrote(proc: subprocess.Popen, path: Any, text: str, timeout: float, interval: float = 0.2) -> bool:
    """Wait up to timeout seconds, while a started process runs, for text to appear in the file at
    path that it writes (a VM's serial console); whether it did. False as soon as the process ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if path.is_file() and text in path.read_text(errors="replace"):
            return True
        time.sleep(interval)
    return False


def stopped(proc: subprocess.Popen) -> subprocess.Popen:
    """Kill a started process that still runs, and reap it (its pipes read to their end)."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate()
    return proc


def environment(env: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if env is None else {**os.environ, **env}


def cannot_run(cmd: Sequence[str], e: OSError) -> str:
    hint = " (is it installed?)" if isinstance(e, FileNotFoundError) else ""
    return f"cannot run {cmd[0]}: {e.strerror}{hint}"
