"""What the formats' proofs share: running a command or the product's smoke script, the smoke test set on
what a package installed, and finding the server among a package's files."""

import re
import stat
import sys
from pathlib import PurePosixPath

from pgo import PipelineError
from pgo.base import process
from pgo.base.runner import PhaseLog, say
from pgo.build import testrun
from pgo.core.config import product
from pgo.packaging import piuparts
from pgo.packaging.recipes import RECIPES

# The test set `pgo prove` runs on what a package installed (pgo/configs.toml).
SMOKE_SET = "smoke"


def only(folder, pattern):
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise PipelineError(f"{folder} holds {len(found)} files matching {pattern}, expected one")
    return found[0]


def some(folder, pattern):
    found = sorted(folder.glob(pattern))
    if not found:
        raise PipelineError(f"{folder} holds no {pattern} files")
    return found


def run(cmd, cwd=None, show=False, merged=False, reason=None):
    """Run cmd; its output, shown indented if `show`. A failure is one PipelineError: the first group of
    `reason` (a pattern) where the output has a match, else the command and its status."""
    cmd = [str(c) for c in cmd]
    done = process.run(cmd, cwd=cwd)
    output = done.stdout + done.stderr
    if show:
        for line in output.rstrip().splitlines():
            say(f"    {line}")
    if done.returncode != 0:
        if not show:
            print(output.rstrip(), file=sys.stderr)
        found = reason.search(output) if reason else None
        raise PipelineError(found.group(1) if found
                            else f"{' '.join(cmd[:2])} ... failed with status {done.returncode}")
    return output if merged else done.stdout


def smoke(info, *args, command=None):
    """Run the product's smoke script (or a command that runs it); return the version comment it reports."""
    script = RECIPES / "smoke" / f"{info['product']}.sh"
    # mmdebstrap passes its hooks' output on stderr
    output = run(command or ["sh", script, *args], show=True, merged=True, reason=REPLACE_REFUSED)
    aside = piuparts.set_aside(output)
    if aside:
        say(f"  set aside, newer than ours: the distribution's {aside}")
    for what, packages in REPLACE_LINE.findall(output):
        say(f"  the distribution's packages, {what}: {packages}")
    for line in output.splitlines():
        if line.startswith("version_comment: "):
            return line.removeprefix("version_comment: ").strip()
    raise PipelineError(f"{script.name} reported no version_comment line")


# packaging/replace-distribution.sh's lines: its reason for a refusal, and what it installed
REPLACE_REFUSED = re.compile(r"^\s*pgo-replace: refused: (.*)$", re.M)


REPLACE_LINE = re.compile(r"^\s*pgo-replace: (installed first|after ours, nothing removed): ?(.*)$", re.M)


def smoke_set(info):
    """The product's test suite and its smoke set, or (None, None) when it has none."""
    suite = product(info["product"]).tests
    if suite is None or SMOKE_SET not in suite.sets:
        return None, None
    return suite, suite.test_set(SMOKE_SET)


def test_runner(recipe, fmt, info, present):
    """Where the format's test package installs the runner: the first of the recipe's `test_runner`
    paths that `present` (a test on a path relative to the installed root) finds."""
    if "test_runner" not in recipe:
        raise PipelineError(f"packaging/{fmt}/{info['product']}.toml names no test_runner: the "
                            f"{SMOKE_SET} test set cannot run on what the packages install")
    candidates = recipe["test_runner"]
    found = next((path for path in candidates if present(path)), None)
    if found is None:
        raise PipelineError(f"no test suite in the {fmt} packages: none installs {' or '.join(candidates)}")
    return found


def run_test_set(info, tree, scratch, what, runner=None):
    """The product's smoke test set on what a package installed, as MariaDB's Buildbot tests its packages."""
    suite, chosen = smoke_set(info)
    if suite is None:
        return
    # The test user (as root) must reach the tree in this private temporary folder.
    scratch.chmod(scratch.stat().st_mode | stat.S_IXOTH)
    planned = testrun.plan_tree(suite, chosen, tree, scratch / "tests", what, "the package", runner=runner)
    log = PhaseLog(scratch / "tests.log", "prove")
    try:
        results = testrun.execute(planned, log)
    finally:
        log.close()
    report_tests(results, what)


def report_tests(results, what):
    for line in testrun.describe(results):
        say(f"  {line}")
    testrun.refuse_failures(results, SMOKE_SET, what)


def is_server(path, info):
    """Whether a package's path is the server binary: buildinfo.json's binary name in a bin/ or sbin/."""
    return PurePosixPath(path).name == info["binary"]["name"] and PurePosixPath(path).parent.name in ("bin", "sbin")
