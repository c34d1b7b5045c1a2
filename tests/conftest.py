import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.fixture
def pgo():
    return run_pgo
