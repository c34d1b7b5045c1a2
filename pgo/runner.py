"""Run a phase's commands: full output into the phase's log, progress onto the console."""

import os
import re
import subprocess
import sys
import time

from pgo import PipelineError, lines

NINJA_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] ")
TAIL_LINES = 25


class CommandFailed(PipelineError):
    pass


def say(line):
    print(line, flush=True)


class PhaseLog:
    """One log file per phase; every command the phase runs appends to it."""

    def __init__(self, path, phase):
        self.path = path
        self.phase = phase
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "w", encoding="utf-8", errors="replace")

    def close(self):
        self.file.close()

    def note(self, line):
        self.file.write(line + "\n")
        self.file.flush()

    def run(self, cmd, cwd=None, echo=False):
        """Run cmd, its output into the log (and onto the console with echo).

        Ninja's [N/M] lines become `compile N/M` progress, at most every 2 seconds.
        """
        cmd = [str(c) for c in cmd]
        self.note(f"$ {' '.join(cmd)}")
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace", bufsize=1)
        except OSError as e:
            raise CommandFailed(f"{self.phase}: cannot run {cmd[0]}: {e.strerror} (log: {self.path})") from e
        tail = []
        shown = 0.0
        for line in proc.stdout:
            self.file.write(line)
            tail = (tail + [line.rstrip("\n")])[-TAIL_LINES:]
            progress = NINJA_PROGRESS.match(line)
            if progress:
                done, total = progress.groups()
                now = time.monotonic()
                if now - shown >= 2 or done == total:
                    say(lines.compile_progress(self.phase, done, total))
                    shown = now
            elif echo:
                say(lines.tagged(self.phase, line.rstrip()))
        proc.wait()
        self.file.flush()
        if proc.returncode != 0:
            print("\n".join(tail), file=sys.stderr)
            raise CommandFailed(f"phase '{self.phase}' failed: {os.path.basename(cmd[0])} exited with "
                                f"status {proc.returncode} (last lines above; full log: {self.path})")
