"""One MariaDB server on a private datadir and unix socket, pinned to its CPUs."""

import os
import re
import shutil
import signal
import socket
import tempfile
import time

from pgo.base import process
from pgo.bench.errors import InfraError

DATABASE = "sbtest"
START_TIMEOUT = 120
STOP_TIMEOUT = 300


def common_options(buffer_pool, max_threads, extra):
    """Server options both builds get, so that only the binary differs.

    The buffer pool is fixed (its _max too: newer servers reserve address space for growth,
    which valgrind cannot map), and filled by an explicit prewarm, not by a background load
    of the previous run's dump. Commits flush the log once a second: the benchmark measures
    the server's code paths, not the disk's fsync latency.
    """
    return [
        f"--innodb-buffer-pool-size={buffer_pool}",
        f"--loose-innodb-buffer-pool-size-max={buffer_pool}",
        "--innodb-buffer-pool-load-at-startup=OFF",
        "--innodb-buffer-pool-dump-at-shutdown=OFF",
        "--innodb-log-file-size=256M",
        "--innodb-flush-log-at-trx-commit=2",
        f"--max-connections={max_threads + 50}",
        "--max-prepared-stmt-count=1048576",
        *extra,
    ]


class Server:
    def __init__(self, build, root, logs, cpus, options):
        self.build = build
        self.root = root
        self.datadir = root / "data"
        self.cpus = cpus
        self.options = options
        self.logs = logs
        self.error_log = logs / f"server-{build.label}.err"
        self.console_log = logs / f"server-{build.label}.console"
        self.process = None
        self.socket_dir = None
        self.socket = None

    @property
    def name(self):
        return f"server {self.build.label}"

    def install(self):
        shutil.rmtree(self.datadir, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        cmd = [str(self.build.install_db), "--no-defaults", f"--basedir={self.build.basedir}",
               f"--datadir={self.datadir}", "--auth-root-authentication-method=normal", *as_root()]
        log = self.logs / f"install-db-{self.build.label}.log"
        with open(log, "w") as out:
            code = process.run_into(cmd, out, error=InfraError)
        if code != 0:
            raise InfraError(f"{self.name}: mariadb-install-db failed (exit {code}): {last_line(log)}")

    def start(self, wrapper=(), timeout=START_TIMEOUT, extra_options=()):
        """Start under taskset (and a wrapper such as valgrind); return when it accepts clients."""
        # Unix socket paths are limited to ~107 bytes; a short private directory always fits.
        self.socket_dir = tempfile.mkdtemp(prefix="pgo-bench-")
        self.socket = os.path.join(self.socket_dir, f"{self.build.label}.sock")
        init_file = self.root / "init.sql"
        init_file.write_text(f"CREATE DATABASE IF NOT EXISTS {DATABASE};\n")
        cmd = ["taskset", "-c", self.cpus, *wrapper, str(self.build.server), "--no-defaults",
               f"--basedir={self.build.basedir}", f"--datadir={self.datadir}",
               f"--socket={self.socket}", "--skip-networking", f"--pid-file={self.root / 'server.pid'}",
               f"--log-error={self.error_log}", f"--init-file={init_file}", *as_root(),
               *self.options, *extra_options]
        # Both logs are appended to by every start: what this one wrote comes after these sizes.
        written = {path: size_of(path) for path in (self.error_log, self.console_log)}
        self.console = open(self.console_log, "a")
        self.process = process.start(cmd, stdout=self.console, stderr=process.STDOUT, error=InfraError)
        deadline = time.monotonic() + timeout
        while not self.accepts_clients():
            if self.process.poll() is not None:
                code = self.process.returncode
                self.cleanup()
                raise InfraError(f"{self.name} did not start (exit {code}): {self.why_not_started(written)}")
            if time.monotonic() > deadline:
                self.stop(check=False)
                raise InfraError(f"{self.name} did not accept clients within {timeout} s; "
                                 f"see {self.error_log.name}")
            time.sleep(0.2)

    def accepts_clients(self):
        """True once the server sends its greeting on the socket."""
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(self.socket)
                return bool(s.recv(4))
        except OSError:
            return False

    @property
    def pid(self):
        return self.process.pid

    def stop(self, check=True, timeout=STOP_TIMEOUT):
        """Clean shutdown: mariadbd treats SIGTERM as SHUTDOWN."""
        if self.process is None:
            return
        proc, self.process = self.process, None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            if not process.ended(proc, timeout):
                proc.kill()
                proc.wait()
                self.cleanup()
                if check:
                    raise InfraError(f"{self.name} did not shut down within {timeout} s")
                return
        self.cleanup()
        if check and proc.returncode != 0:
            raise InfraError(f"{self.name} shut down uncleanly (exit {proc.returncode}): "
                             f"{self.last_error()}")

    def cleanup(self):
        self.console.close()
        if self.socket_dir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
            self.socket_dir = None

    def last_error(self, since=0):
        """The server log's last [ERROR] line, else its last line (of what it wrote after `since` bytes)."""
        said = new_lines(self.error_log, since)
        said = [line for line in said if "[ERROR]" in line] or said
        return said[-1] if said else ""

    def why_not_started(self, written):
        """This start's last_error(); else the console's last line (a wrapper that gave up before the
        server wrote its log: valgrind), named after its file."""
        said = self.last_error(written[self.error_log])
        if said:
            return said
        console = [VALGRIND_PREFIX.sub("", line) for line in new_lines(self.console_log, written[self.console_log])]
        console = [line for line in console if line]
        return f"{console[-1]} ({self.console_log.name})" if console else f"no log line ({self.console_log.name})"


def as_root():
    return ["--user=root"] if os.geteuid() == 0 else []


# valgrind's lines start with ==<pid>== (its messages) or --<pid>-- (its own warnings).
VALGRIND_PREFIX = re.compile(r"^(?:==\d+==|--\d+--)\s*")


def size_of(path):
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def new_lines(path, offset):
    """The non-empty lines written to path after its first `offset` bytes."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:         # not written (yet), or unreadable: no lines to name
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]


def last_line(path):
    lines = new_lines(path, 0)
    return lines[-1] if lines else ""
