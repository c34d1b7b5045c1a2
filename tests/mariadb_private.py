"""A throw-away MariaDB server for tests: private datadir, unix socket only, binlog on.

Uses the distribution's packaged server (basedir /usr). Never touches the system
server's socket or datadir, never listens on TCP.
"""
import os
import shutil
import signal
import subprocess
import tempfile
import time

BASEDIR = "/usr"
REQUIRED_PROGRAMS = ("mariadb", "mariadb-install-db", "mariadb_config", "cmake", "ninja")


def find_mariadbd(basedir=BASEDIR):
    for sub in ("sbin", "bin", "libexec"):
        path = os.path.join(basedir, sub, "mariadbd")
        if os.access(path, os.X_OK):
            return path
    return None


def missing_prerequisites():
    """Names of what the tests need but this machine lacks (CI installs all of them)."""
    missing = [p for p in REQUIRED_PROGRAMS if shutil.which(p) is None]
    if find_mariadbd() is None:
        missing.append("mariadbd (package mariadb-server)")
    return missing


def short_tempdir():
    """A temp dir short enough to hold a unix socket (at most 107 bytes of path)."""
    return tempfile.mkdtemp(prefix="pl-")


class PrivateServer:
    def __init__(self, options=()):
        """options: more of mariadbd's (--plugin-load-add=ha_rocksdb)."""
        self.options = list(options)
        self.workdir = short_tempdir()
        self.datadir = os.path.join(self.workdir, "data")
        self.socket = os.path.join(self.workdir, "mariadbd.sock")
        self.error_log = os.path.join(self.workdir, "mariadbd.err")
        self.process = None

    def start(self, timeout=60):
        user = ["--user=root"] if os.geteuid() == 0 else []
        subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--basedir={BASEDIR}",
             f"--datadir={self.datadir}", "--auth-root-authentication-method=normal", *user],
            check=True, capture_output=True)
        files = os.path.join(self.workdir, "files")
        os.mkdir(files)
        with open(self.error_log, "ab") as log:
            self.process = subprocess.Popen(
                [find_mariadbd(), "--no-defaults", f"--basedir={BASEDIR}",
                 f"--datadir={self.datadir}", f"--socket={self.socket}", "--skip-networking",
                 f"--secure-file-priv={files}", f"--log-error={self.error_log}",
                 "--log-bin=mariadb-bin", "--server-id=1", *self.options, *user],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mariadbd exited with {self.process.returncode}:\n"
                                   + self.log_tail())
            if self.query("SELECT 1", check=False).returncode == 0:
                return self
            time.sleep(0.2)
        self.kill()
        raise RuntimeError("mariadbd did not answer in time:\n" + self.log_tail())

    def query(self, sql, check=True):
        """Runs sql with the mariadb client; stdout is tab-separated, no header."""
        return subprocess.run(
            ["mariadb", "--no-defaults", "--protocol=socket", f"--socket={self.socket}",
             "--user=root", "--batch", "--skip-column-names", "-e", sql],
            capture_output=True, text=True, check=check)

    def rows(self, sql):
        return [line.split("\t") for line in self.query(sql).stdout.splitlines()]

    def log_tail(self, lines=30):
        try:
            with open(self.error_log, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no error log)"

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.query("SHUTDOWN", check=False)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)
