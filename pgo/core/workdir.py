"""A build's work directory: its settings, which phases are done, and where everything lives."""

import fcntl
import json
import os
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from pgo import PipelineError
from pgo.base.atomic import write_json
from pgo.base.protocol import DEFAULT_TEST_SET, MAX_MISMATCH, MIN_HOT_COVERAGE, SETTINGS, STAGE, STATE, Variant

# Characters a build's paths cannot hold (CMake 3.25, Ninja 1.11): CMake writes the work directory's
# paths into the compile commands the shell runs, and into its own lists (';'), unquoted; each of
# these broke a fixture build, in CMake's compiler checks, in Ninja, or in the compiled-in profile
# path ('$'). Control characters (a newline) too: they also break every one-line message.
UNUSABLE_IN_PATHS = set(';"\'\\$`()&|<>') | {chr(c) for c in range(32)} | {"\x7f"}


def cache_root(chosen=None):
    """The download cache: `chosen` (a --cache option), or ~/.cache/pgo ($XDG_CACHE_HOME/pgo)."""
    if chosen:
        return Path(chosen).resolve()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pgo"


@dataclass(frozen=True)
class Settings:
    version: str
    config: str
    pgo: str                 # "on" (train, then optimise) or "off" (the plain baseline)
    source: str = "debian"
    git_ref: str | None = None
    cc: str = "gcc"
    cxx: str = "g++"
    profile_dir: str | None = None
    cache: str | None = None
    max_mismatch: int = MAX_MISMATCH
    min_hot_coverage: float = MIN_HOT_COVERAGE
    archive: str | None = None        # profile archive root (pgo/archive/store.py)
    archive_kind: str = "release"     # release (kept) or nightly (pruned)
    profile_from: str | None = None   # archive entry reused instead of training
    tests: str = DEFAULT_TEST_SET     # the test set the test phase runs (configs.toml), or "off"
    # CMake options a package format's own build adds (MariaDB's -DRPM=<target>):
    # they choose the install layout, not the code, so the configuration's profile
    # still applies, and the optimised phase checks that it did.
    cmake_extra: tuple[str, ...] = ()


class Workdir:
    def __init__(self, root):
        self.root = Path(root).resolve()

    # layout
    src = property(lambda self: self.root / "src")
    stage = property(lambda self: self.root / STAGE)
    logs = property(lambda self: self.root / "logs")
    train = property(lambda self: self.root / "train")
    bolt = property(lambda self: self.root / "bolt")
    settings_file = property(lambda self: self.root / SETTINGS)
    state_file = property(lambda self: self.root / STATE)

    def build(self, variant):
        """The build tree of a variant. The instrumented and the optimised build share one path:
        GCC checksums each function's source path, and sources generated into the build tree
        (MariaDB's SQL parser, yy_mariadb.cc) would otherwise lose their profile."""
        return self.root / "build" / ("pgo" if variant in (Variant.INSTRUMENTED, Variant.OPTIMIZED) else variant)

    def install(self, variant):
        return self.root / "build" / f"{variant}-install"

    def profile(self, settings):
        return Path(settings.profile_dir).resolve() if settings.profile_dir else self.root / "profile"

    def cache(self, settings):
        return cache_root(settings.cache)

    # settings: written by the first `pgo build`, read by every later phase
    def require(self):
        """Refuse, in one line that says what the path is, a work directory that is no folder."""
        if not self.root.is_dir():
            what = "is not a folder" if self.root.exists() else "does not exist"
            raise PipelineError(f"work directory {self.root} {what}: name the folder `pgo build --workdir` made")

    def load_settings(self):
        if not self.settings_file.is_file():
            raise PipelineError(f"{self.root} is not a work directory of `pgo build` (no settings.json)")
        data = read_json(self.settings_file)
        try:
            return Settings(**dict(data, cmake_extra=tuple(data.get("cmake_extra", ()))))
        except (TypeError, ValueError, AttributeError) as e:
            raise PipelineError(f"{self.settings_file} holds settings this pgo does not know ({e}); "
                                "use another --workdir, or --fresh to start over") from None

    def save_settings(self, settings, fresh=False):
        if self.settings_file.is_file() and not fresh:
            old = self.load_settings()
            if old != settings:
                diff = ", ".join(f"{k} {getattr(old, k)!r} -> {v!r}" for k, v in asdict(settings).items()
                                 if getattr(old, k) != v)
                raise PipelineError(f"work directory {self.root} was set up differently ({diff}); "
                                    "use another --workdir, or --fresh to start over")
        self.root.mkdir(parents=True, exist_ok=True)
        if fresh:
            self.state_file.unlink(missing_ok=True)
        write_json(self.settings_file, asdict(settings))

    # state: which phases are done (pgo/core/contract.py says what each record holds) and which failed
    def state(self):
        state = read_json(self.state_file) if self.state_file.is_file() else {}
        if not isinstance(state, dict) or not all(isinstance(state.get(key, {}), dict) for key in ("done", "failed")):
            raise PipelineError(f"{self.state_file} holds no phase records: start over with `pgo build --fresh`")
        return {"done": {}, "failed": {}, **state}

    def mark_done(self, phase, seconds, record):
        state = self.state()
        state["done"][phase] = dict(record, seconds=round(seconds, 1),
                                    finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        write_json(self.state_file, state)

    def mark_failed(self, phase, error):
        state = self.state()
        state["failed"][phase] = {"error": error, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        write_json(self.state_file, state)

    def forget(self, phases):
        state = self.state()
        for name in phases:
            state["done"].pop(name, None)
            state["failed"].pop(name, None)
        write_json(self.state_file, state)

    @contextmanager
    def locked(self):
        """One pgo command at a time per work directory: two would rebuild and record over each other."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "?"
                raise PipelineError(f"work directory {self.root} is in use by another pgo command "
                                    f"(pid {holder}); wait for it to finish") from None
            lock.truncate(0)
            lock.write(str(os.getpid()))
            lock.flush()
            yield


def require_usable_path(path, option):
    """Refuse, before anything is written, a path the build's commands would break on."""
    bad = sorted(set(str(path)) & UNUSABLE_IN_PATHS)
    if bad:
        raise PipelineError(f"{option} {str(path)!r} holds {' '.join(map(repr, bad))}, which CMake and Ninja "
                            "cannot take in a build's paths: choose a path without it")
    return path


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise PipelineError(f"{path} is missing: run the phase that writes it first") from None
    except ValueError as e:
        # pgo writes whole files only (pgo/base/atomic.py): this one was changed, or damaged, outside it.
        raise PipelineError(f"{path} is not valid JSON ({e}): it was changed or damaged outside pgo") from None
