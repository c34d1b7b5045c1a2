import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pgo.base import atomic

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixture"


def run_pgo(*args, cwd=REPO, check=True, env=None):
    """Run the pgo CLI as a user would (env: variables to add); return the CompletedProcess."""
    result = subprocess.run([sys.executable, "-m", "pgo", *map(str, args)], cwd=cwd,
                            capture_output=True, text=True, env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"pgo {' '.join(map(str, args))} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


def build_fixture(workdir, *extra, config="fixture", check=True):
    """`pgo build` of the fixture project (version 1.0.0) with a configuration of it."""
    return run_pgo("build", "--version", "1.0.0", "--config", config, "--source", FIXTURE, "--workdir", workdir,
                   *extra, check=check)


def free_port():
    """A TCP port on the loopback that nothing listens on now (the tests' masters, their workers, downloads)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def refused(result, *phrases):
    """A refusal whose one error line (the last: a failed command shows its output above) names every phrase."""
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("pgo: error:"), result.stderr
    for phrase in phrases:
        assert phrase in lines[-1], lines[-1]
    return lines[-1]


@pytest.fixture(autouse=True, scope="session")
def private_archive_and_cache(tmp_path_factory):
    """Tests archive profiles and keep source trees in temporary folders, never the user's."""
    os.environ["PGO_ARCHIVE"] = str(tmp_path_factory.mktemp("profile-archive"))
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(autouse=True)
def the_tests_modules_stay():
    """master.cfg drops pgo/ and buildmaster/ from sys.modules so that `buildbot reconfig` imports them
    afresh; a test that loads it would leave the next test's `pytest.raises(PipelineError)` comparing
    the class it imported with a second copy. Put the modules the test started with back."""
    def ours(name):
        return name.split(".")[0] in ("pgo", "buildmaster")
    before = {name: module for name, module in sys.modules.items() if ours(name)}
    yield
    for name in [n for n in sys.modules if ours(n) and n not in before]:
        del sys.modules[name]
    sys.modules.update(before)


KEEP_SESSIONS = 3


def searchable(folder):
    folder.chmod(folder.stat().st_mode | stat.S_IXOTH)
    return folder


def session_running(folder):
    """Whether the pytest session that made `folder` (pytest-pgo-<uid>-<pid>-<random>) still runs."""
    pid = folder.name.split("-")[3]
    return pid.isdigit() and len(folder.name.split("-")) > 4 and atomic.alive(int(pid))


class SearchableTempPathFactory(pytest.TempPathFactory):
    """Temporary folders the test user can search.

    The test phase runs the suite as an unprivileged user when the tests run as root (mtr
    refuses root, pgo/build/testrun.py), and that user must reach the staged trees in the temporary
    folders. pytest makes them private (0700), and resets its shared root to 0700 whenever a
    session starts; so each session has a folder of its own in the system's temporary folder,
    searchable by others (not listable), and the newest KEEP_SESSIONS of the finished ones are kept
    for a look.
    """

    def getbasetemp(self):
        if self._basetemp is None:
            # Never a running session's (two sessions on one machine): its folder names its pid.
            old = sorted((f for f in Path(tempfile.gettempdir()).glob(f"pytest-pgo-{os.getuid()}-*")
                          if not session_running(f)), key=os.path.getmtime)
            for folder in old[:max(0, len(old) - KEEP_SESSIONS + 1)]:
                shutil.rmtree(folder, ignore_errors=True)
            prefix = f"pytest-pgo-{os.getuid()}-{os.getpid()}-"
            self._basetemp = searchable(Path(tempfile.mkdtemp(prefix=prefix)).resolve())
        return self._basetemp

    def mktemp(self, basename, numbered=True):
        return searchable(super().mktemp(basename, numbered))


@pytest.hookimpl(trylast=True)     # after pytest's own tmpdir plugin made its factory
def pytest_configure(config):
    if config.option.basetemp is None:
        config._tmp_path_factory = SearchableTempPathFactory.from_config(config, _ispytest=True)


@pytest.fixture
def pgo():
    return run_pgo


def step_output(api, step):
    """What a step printed (its stdio log's out and err lines)."""
    said = []
    for log in api.get(f"steps/{step['stepid']}/logs")["logs"]:
        chunks = api.get(f"logs/{log['logid']}/contents")["logchunks"]
        said += [line[1:] for line in "".join(c["content"] for c in chunks).splitlines() if line[:1] in "oe"]
    return said


def held_source(source, version, gate, only_with=""):
    """The fixture as version in the folder source, whose configure waits (at most 2 min) while the file
    gate (the path its build sees) is missing; with only_with, only a configure whose C flags hold it
    (-fprofile-use: the optimised build's)."""
    shutil.copytree(FIXTURE, source)
    (source / "VERSION").write_text(f"{version}\n")
    (source / "hold.sh").write_text(f'case "$1" in *"{only_with}"*) ;; *) exit 0 ;; esac\n'
                                    f'for i in $(seq 600); do [ -e "{gate}" ] && exit 0; sleep 0.2; done\n')
    cmake = source / "CMakeLists.txt"
    cmake.write_text(cmake.read_text().replace(
        "project(fixture C)\n",
        'project(fixture C)\nexecute_process(COMMAND sh ${CMAKE_SOURCE_DIR}/hold.sh "${CMAKE_C_FLAGS}")\n'))
    return source
