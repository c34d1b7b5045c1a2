"""Run a phase's commands: full output into the phase's log, progress onto the console."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

from pgo import PipelineError
from pgo.base import lines

# A build tool's progress: Ninja's `[N/M] `, CMake's Makefiles' `[ 45%] ` (make counts no edges).
NINJA_PROGRESS = re.compile(r"^\[(?P<done>\d+)/(?P<total>\d+)\] ")
MAKE_PROGRESS = re.compile(r"^\[ *(?P<percent>\d+)%\] ")
TAIL_LINES = 25
# A compile silent this long (a whole server's link takes minutes) says what it waits on, and again each time.
WAITING_SAY_SECONDS = 60


class CommandFailed(PipelineError):
    pass


class CommandTimedOut(CommandFailed):
    """The command ran past its time limit; it and every process it started were killed."""


def say(line):
    print(line, flush=True)


class PhaseLog:
    """One log file per phase; every command the phase runs appends to it.

    It also sums what its commands cost: CPU seconds, and the largest peak memory (resident set)
    of any one process they ran, such as an LTO link's lto1 (not the sum of processes that ran
    side by side).
    """

    def __init__(self, path, phase):
        self.path = path
        self.phase = phase
        self.cpu_seconds = 0.0
        self.peak_rss_kib = 0
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "w", encoding="utf-8", errors="replace")

    def usage(self):
        """What the commands cost, for the phase's record in state.json; nothing if it ran none."""
        if not self.peak_rss_kib:
            return {}
        return {"cpu_seconds": round(self.cpu_seconds, 1), "peak_rss_mib": max(1, round(self.peak_rss_kib / 1024))}

    def close(self):
        self.file.close()

    def note(self, line):
        self.file.write(line + "\n")
        self.file.flush()

    def run(self, cmd, cwd=None, echo=False, check=True, timeout=None, watch=None, progress=NINJA_PROGRESS,
            env=None):
        """Run cmd, its output into the log (and onto the console with echo); return its exit status.

        Lines that match progress (Ninja's [N/M], or make's [ P%]: MAKE_PROGRESS) become
        `compile N/M` (`compile P%`) progress, at most every 2 seconds; watch, if given, sees
        every line. check: a non-zero exit is an error. timeout (seconds): past
        it the command and every process it started (its session) are killed, CommandTimedOut.
        env: variables added to this process's environment for the command.
        """
        cmd = [str(c) for c in cmd]
        self.note(f"$ {' '.join(cmd)}")
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=None if env is None else {**os.environ, **env},
                                    text=True, errors="replace", bufsize=1, start_new_session=timeout is not None)
        except OSError as e:
            raise CommandFailed(f"{self.phase}: cannot run {cmd[0]}: {e.strerror} (log: {self.path})") from e
        timer = threading.Timer(timeout, kill_session, (proc,)) if timeout is not None else None
        if timer:
            timer.start()
        tail: list[str] = []
        shown, said, top = 0.0, None, -1
        waiting = Waiting(self.phase)
        assert proc.stdout is not None                  # stdout=PIPE
        for line in proc.stdout:
            waiting.line(line, progress)
            self.file.write(line)
            if watch:
                watch(line)
            tail = (tail + [line.rstrip("\n")])[-TAIL_LINES:]
            step = progress.match(line) if progress else None
            if step:
                step = step.groupdict()
                last = step["percent"] == "100" if "percent" in step else step["done"] == step["total"]
                text = (lines.compile_percent(self.phase, step["percent"]) if "percent" in step
                        else lines.compile_progress(self.phase, step["done"], step["total"]))
                now = time.monotonic()
                # make repeats its share ("[100%] Built target ..." for each target), and with -j its
                # targets' shares arrive out of order (13%, 11%, 13%): say each share once, rising.
                share = int(step["percent"]) if "percent" in step else None
                if text != said and (now - shown >= 2 or last) and (share is None or share > top):
                    say(text)
                    shown, said = now, text
                    top = share if share is not None else top
            elif echo:
                say(lines.tagged(self.phase, line.rstrip()))
        waiting.stop()
        self.wait(proc)
        self.file.flush()
        if timer:
            timer.cancel()
            if getattr(proc, "killed", False):
                self.note(f"killed after its time limit of {timeout:.0f} s")
                raise CommandTimedOut(f"phase '{self.phase}': {os.path.basename(cmd[0])} ran past its time limit "
                                      f"of {timeout:.0f} s (full log: {self.path})")
        if proc.returncode != 0 and check:
            print("\n".join(tail), file=sys.stderr)
            raise CommandFailed(f"phase '{self.phase}' failed: {os.path.basename(cmd[0])} exited with "
                                f"status {proc.returncode} (last lines above; full log: {self.path})")
        return proc.returncode

    def wait(self, proc):
        """Reap the command with its resource usage: the kernel's figures for it and every process
        below it that was waited for (ninja's compilers and linkers, the linker's LTO jobs)."""
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_seconds += usage.ru_utime + usage.ru_stime
        self.peak_rss_kib = max(self.peak_rss_kib, usage.ru_maxrss)


class Waiting:
    """While a compile prints nothing, say every WAITING_SAY_SECONDS what it started last and for how long
    (`[optimized] compile 1555/1556: linking CXX executable sql/mariadbd for 3 min`, or with make
    `compile 99%: ...`), so that its step's progress moves."""

    def __init__(self, phase, every=None):
        self.phase, self.every = phase, every or WAITING_SAY_SECONDS
        self.edge = self.progress = None
        self.since = time.monotonic()
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def line(self, line, progress):
        """A line the command printed: a Ninja edge or a make target starting becomes what the compile
        waits on."""
        match = progress.match(line) if progress in (NINJA_PROGRESS, MAKE_PROGRESS) else None
        with self.lock:
            self.since = time.monotonic()
            if match:
                self.edge = line[match.end():].strip()
                step = match.groupdict()
                self.progress = (lines.compile_percent(self.phase, step["percent"]) if "percent" in step
                                 else lines.compile_progress(self.phase, step["done"], step["total"]))

    def watch(self):
        while not self.done.wait(self.every):
            with self.lock:
                silent = time.monotonic() - self.since
                if self.edge and silent >= self.every:
                    say(lines.compile_waiting(self.progress, self.edge, int(silent // 60)))

    def stop(self):
        self.done.set()
        self.thread.join()


def kill_session(proc):
    """Kill a command and everything it started (it leads its own session), e.g. mtr and its servers."""
    proc.killed = True
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
