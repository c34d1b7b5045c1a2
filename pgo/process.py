"""The one way a command of this repository runs a tool whose output it takes whole (a packaging tool,
apt, git, buildbot): the tool runs to its end, its output captured, and a tool that cannot start
is one error line that says so. The phases' long commands, logged and shown as they run, go
through pgo/runner.py's PhaseLog instead.
"""

import os
import subprocess
from collections.abc import Mapping, Sequence

from pgo.errors import PipelineError


def run(cmd: Sequence[object], *, cwd: object = None, env: Mapping[str, str] | None = None,
        error: type[Exception] = PipelineError) -> subprocess.CompletedProcess:
    """Run cmd to its end, stdout and stderr captured as text (undecodable bytes replaced), env
    added to this process's environment; the caller judges the exit status. A tool that cannot be
    started raises error("cannot run TOOL: why (is it installed?)")."""
    cmd = [str(c) for c in cmd]
    try:
        return subprocess.run(cmd, cwd=cwd, env=None if env is None else {**os.environ, **env},
                              capture_output=True, text=True, errors="replace")
    except OSError as e:
        raise error(f"cannot run {cmd[0]}: {e.strerror} (is it installed?)") from e


def output_of(cmd: Sequence[object], *, cwd: object = None, env: Mapping[str, str] | None = None,
              error: type[Exception] = PipelineError, tail: int = 20) -> str:
    """cmd's standard output; error("CMD ... failed with status N:" and its last `tail` lines of
    output) when it fails."""
    done = run(cmd, cwd=cwd, env=env, error=error)
    if done.returncode != 0:
        last = "\n".join((done.stdout + done.stderr).strip().splitlines()[-tail:])
        raise error(f"{' '.join(map(str, cmd[:3]))} ... failed with status {done.returncode}:\n{last}")
    return done.stdout
