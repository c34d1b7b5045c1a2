"""What the worker side (pgo/), the Buildbot master (buildmaster/) and the VM images (vm_images/) agree on.

The master never builds: it runs `python3 -m pgo` on a worker, names the work directories, reads
back what the phases wrote there and uploads it. So the names in a work directory, the
environment a step gives the worker, the policy defaults both sides apply and the records the
master reads are written here, once, and both sides import them. Standard library only, nothing
of pgo/ above it: the master and the build VMs import it alike.
"""

import json
from enum import StrEnum
from typing import Any


class Variant(StrEnum):
    """A configuration's three builds: the instrumented one trains, the optimised one ships (PGO), the
    plain one is the baseline it is measured against. Each names its own phase too."""
    INSTRUMENTED = "instrumented"
    OPTIMIZED = "optimized"
    PLAIN = "plain"


class PhaseName(StrEnum):
    """The pipeline's phases (pgo/build/phases.py PHASES defines them, in this order); the Buildbot steps that
    run them have their names."""
    SOURCE = "source"
    INSTRUMENTED = "instrumented"
    TRAIN = "train"
    CHECK = "check"
    OPTIMIZED = "optimized"
    BOLT = "bolt"
    ARCHIVE = "archive"
    IMPORT = "import"
    PLAIN = "plain"
    STAGE = "stage"
    TEST = "test"


# --- a work directory: <workdir>/<name> (pgo/core/contract.py: who writes and reads each) ------------

SETTINGS = "settings.json"
STATE = "state.json"
SOURCE_RECORD = "source.json"
# The build's configuration resolved once, by the source phase: the product, the phases its pipeline runs.
# The master decides from it which steps run (bolt, the benchmark), never from its own checkout's copy.
PLAN = "plan.json"
PROFILE_CHECK = "profile-check.json"
PROFILE_USE = "profile-use.json"
TRAINING_COUNTS = "training-counts.json"
BOLT_CHECK = "bolt.json"
ARCHIVE_RECORD = "archive.json"
BUILD_INFO = "build-info.json"
# ... in a release's baseline work directory (`pgo baseline`): what the baseline is, the distribution's
# packages or the plain build
BASELINE_RECORD = "baseline.json"
# What a phase proved (optimized, plain, bolt) or installed (stage), by checksum: every ELF file and
# static archive of its tree. What stage installs, the tests run and `pgo package` ships must still be it.
OPTIMIZED_OUTPUTS, PLAIN_OUTPUTS, BOLT_OUTPUTS, STAGE_OUTPUTS = (
    f"{phase}-outputs.json" for phase in (PhaseName.OPTIMIZED, PhaseName.PLAIN, PhaseName.BOLT, PhaseName.STAGE))
PROFILE = "profile"     # the profile directory: <workdir>/profile, or wherever --profile-dir puts it
STAGE = "stage"         # the installed tree the packagers, the tests and the benchmark take
TESTS = "tests"         # tests/<set>/: the test phase's results, one folder per test set
RPM_TREE = "rpm-tree"   # `pgo package --format rpm`'s configured, never compiled, RPM-layout tree
BINTAR_TREE = "bintar-tree"   # the bintar's standalone tree of a build whose layout installs to absolute paths
# ... in a build tree: the CMake command (and environment) it was configured with
CONFIGURE_RECORD = "pgo-configure.json"
# ... in tests/<set>/ (pgo/build/testrun.py)
TEST_RESULTS, JUNIT, SKIP_LIST, TEST_VERDICT = "results.json", "junit.xml", "skip.list", "verdict.json"
# ... in a folder `pgo package` published, beside its packages
PACKAGE_INFO = "buildinfo.json"

# What a release publishes of its work directory and of its test set's folder.
BUILD_INFO_FILES = (BUILD_INFO, SOURCE_RECORD, PROFILE_CHECK, PROFILE_USE)
TEST_REPORTS = (JUNIT, TEST_RESULTS, SKIP_LIST)


def staged(workdir: str) -> str:
    """The staged tree of a work directory named as another machine sees it."""
    return f"{workdir}/{STAGE}"


def test_results(workdir: str, test_set: str) -> str:
    """The folder of a test set's results in a work directory named as another machine sees it."""
    return f"{workdir}/{TESTS}/{test_set}"


# --- the VM images' store (vm_images/store.py) and the master's latent workers (buildmaster/workers.py) ---

CURRENT_IMAGE = "current.json"      # <images>/current.json: the image a rollout made current

# --- the master's Buildbot stack ------------------------------------------------------------------

# Its pins, relative to the repository: ./release installs them, and a VM image's worker is pinned to
# the same stack.
MASTER_REQUIREMENTS = "requirements/master.txt"

# --- the environment a Buildbot step gives `python3 -m pgo` --------------------------------------

# The build that ran the command, recorded in an archived profile's manifest (pgo/archive/store.py).
BUILDER_ENV = "PGO_BUILDER"
BUILD_NUMBER_ENV = "PGO_BUILD_NUMBER"


def step_environment(builder: Any, build_number: Any) -> dict[str, Any]:
    """What every pgo step's command gets: its output unbuffered (the master reads it live), and
    which build ran it (builder and number: values, or Buildbot renderables of them)."""
    return {"PYTHONUNBUFFERED": "1", BUILDER_ENV: builder, BUILD_NUMBER_ENV: build_number}


# --- defaults and policy both sides apply ---------------------------------------------------------

# The optimised build's limits (pgo build --max-mismatch, --min-hot-coverage): coverage-mismatch
# warnings allowed, and the share of hot objects that must have used the profile.
MAX_MISMATCH = 0
MIN_HOT_COVERAGE = 0.3
# The share of the hot objects whose profile has hot code that must show it in their code (.text.hot):
# below it the compiles did not read the profile, whatever their options say (pgo/core/proof.py traces).
# Each one that does not is not covered either; the share guards a build none of whose compiles read it.
MIN_TRACED = 0.5
DEFAULT_TEST_SET = "release"        # pgo/configs.toml's test set a build runs unless told otherwise

# --- records the master reads -------------------------------------------------------------------

VERSION_RECORD = "version.json"     # `pgo latest --record`: {"version": ..., "how": ...}
BENCH_RESULT = "result.json"        # in `pgo bench --out`'s folder: the measurements, the analysis, the verdict
# How the profile check (profile-check.json `threshold_rule`) says GCC decided what is hot: without LTO
# from the largest counter, with it from the whole program's working set (pgo/core/profile.py).
SUM_MAX_RULE = "sum_max/10000"
WORKING_SET_RULE = "LTO working set"


def version_record(version: str, how: str) -> dict[str, str]:
    """Which version 'latest' is, and how the worker knows."""
    return {"version": version, "how": how}


def read_record(text: str | bytes | None, name: str) -> dict[str, Any]:
    """A JSON record the master fetched from a worker; ValueError naming it when it is not one."""
    if text is None:
        raise ValueError(f"{name} could not be read from the worker")
    try:
        record = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{name} is not JSON: {e}") from None
    if not isinstance(record, dict):
        raise ValueError(f"{name} holds no JSON object")
    return record
