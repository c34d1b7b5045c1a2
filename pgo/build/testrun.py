"""The test phase: the product's own test suite (MariaDB's mariadb-test-run) on the staged build.

Profile-guided optimisation and LTO change the inlining, the layout and the optimiser's
decisions in every function: a miscompile, a wrong flag or a broken plugin shows in the
server's own tests, not in the benchmark. The phase runs a named test set (configs.toml
[products.X.tests]) from the staged tree, the tree the packages are made of, and records
what happened in tests/<set>/: results.json (counts, each failed test with its first error
line and a log excerpt, the flaky ones, the staged build's token) and junit.xml (the
runner's own report). A run that completes is the phase's success, whatever failed: only
the verdict (`pgo test-verdict`) can tell a failure the profile caused from one the machine
causes, by the same set on the plain build. A run that cannot complete (no test suite in
the build, past its time limit, no room for its vardir, the runner dying) fails the phase.

mtr refuses to run as root (and main.socket_conflict fails under it): as root, the runner
runs as the unprivileged system user TEST_USER, created on first use.
"""

import math
import os
import pwd
import re
import shutil
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pgo import PipelineError
from pgo.base import lines, process
from pgo.base.atomic import write_json
from pgo.base.protocol import BASELINE_RECORD, JUNIT, SKIP_LIST, STATE, TEST_RESULTS, TEST_VERDICT
from pgo.base.runner import CommandTimedOut, PhaseLog
from pgo.core import contract
from pgo.core.config import TESTS_DIR, TestSet, TestSuite
from pgo.core.contract import PhaseContext
from pgo.core.workdir import Workdir, read_json

TEST_USER = "pgo-test"
RESULTS, VERDICT = TEST_RESULTS, TEST_VERDICT
# mtr's line for each finished test: `main.alias 'innodb'  w1 [ pass ]  12`.
OUTCOME = re.compile(r"^(?P<test>[\w.#/-]+)\s.*?\[ (?P<outcome>pass|fail|skipped|disabled|retry-pass) \]")
# mtr's closing summary: each test one of whose attempts failed, even if a retry passed (mtr then exits 1).
FAILING = re.compile(r"^Failing test\(s\): (?P<tests>.+)$")
# mtr's report of a server whose error log had a warning or error when it was shut down
SHUTDOWN_WARNINGS = re.compile(r"^\*\*\*Warnings generated in error logs during shutdown after running tests: "
                               r"(?P<tests>.+?)\s*$")
# The lines of a failure that say why, first match wins (mysqltest's and the runner's own).
WHY = (re.compile(r"^(?:mysqltest|mariadb-test|fixture-test): .+"),
       re.compile(r".*(?:[Cc]rashed|[Ss]ignal \d+|[Aa]ssertion .*failed|Got signal).*"),
       re.compile(r"^(?:---|\+\+\+|@@) .+"))
EXCERPT_LINES = 40
# The environment the runner keeps when it runs as the test user: mtr's own settings, and the
# fixture's fault switches (tests/fixture/src/main.c).
PASSED_ON = ("MTR_", "FIXTURE_")
# Seconds between two progress lines.
PROGRESS_EVERY = 5


def results_dir(workdir, set_name):
    return workdir.root / contract.TESTS / set_name


@dataclass(frozen=True)
class Plan:
    """A test run of one tree, checked before anything of an earlier run is removed."""
    suite: TestSuite
    chosen: TestSet
    minutes: float
    tree: Path
    suites: tuple[str, ...]
    out: Path
    var: Path
    runner: Path


def plan(ctx: PhaseContext):
    """What the test phase's run of a test set (the one `pgo test` asks for, else the work directory's)
    would do."""
    suite = test_suite(ctx.product)
    chosen = suite.test_set(ctx.tests.set_name or ctx.settings.tests)
    out = results_dir(ctx.workdir, chosen.name)
    return plan_tree(suite, chosen, ctx.workdir.stage, out, "the staged build",
                     f"configuration {ctx.config.name}", ctx.tests.minutes, ctx.tests.vardir)


def plan_tree(suite, chosen, tree, out, what, maker, minutes=None, vardir=None, runner=None):
    """A run of a test set on a tree (a staged build, an unpacked package); refuse what cannot work.

    The runner is at one of the suite's staged places in the tree, or at `runner` (its place in a package)."""
    places = [runner] if runner else suite.staged_runners()
    runner = next((tree / place for place in places if (tree / place).is_file()), tree / places[0])
    if not runner.is_file():
        raise PipelineError(f"no test suite in {what}: {runner} is missing "
                            f"({maker} installs no {runner.relative_to(tree)})")
    missing = [s for s in chosen.suites if not has_suite(runner.parent, suite, s)]
    if missing:
        raise PipelineError(f"test set {chosen.name} runs suite {missing[0]}, which {what} lacks "
                            f"(looked for {', '.join(suite.suite_dirs)} in {runner.parent})")
    var = Path(vardir).resolve() / f"pgo-{chosen.name}" if vardir else out / "var"
    check_room(var, chosen)
    suites = (*chosen.suites, *(s for s in chosen.optional_suites if has_suite(runner.parent, suite, s)))
    return Plan(suite, chosen, chosen.minutes if minutes is None else minutes, tree, suites, out, var, runner)


def run_tests(ctx: PhaseContext, log):
    """The test phase: run a test set on the staged tree; record and print the results."""
    p = plan(ctx)
    results = execute(p, log)
    results.update(junit=str((p.out / JUNIT).relative_to(ctx.workdir.root)), build_token=staged_token(ctx.workdir))
    write_json(p.out / RESULTS, results)
    for line in describe(results):
        say_test(log, line)
    return results


def execute(p, log):
    """Run a planned test run to its end: the results, from the runner's JUnit report (copied to p.out)."""
    suite, chosen = p.suite, p.chosen
    shutil.rmtree(p.out, ignore_errors=True)
    p.out.mkdir(parents=True)
    shutil.rmtree(p.var, ignore_errors=True)
    p.var.mkdir(parents=True)
    skip_list = p.out / SKIP_LIST
    skip_list.write_text(skip_text(chosen))
    user = unprivileged(log)
    if user:
        # The runner writes only into its vardir and reads the tree and the skip list.
        for path in (p.out, p.var, skip_list):
            os.chown(path, user.pw_uid, user.pw_gid)
        check_readable(user, [p.runner, p.runner.parent, p.var, skip_list])
    report = p.var / JUNIT
    command = runner_command(suite, chosen, p.runner, p.suites, p.var, report, skip_list, p.minutes)
    if user:
        command = as_user(user.pw_uid, user.pw_gid, command, HOME=p.var, PATH=os.environ.get("PATH", "/usr/bin:/bin"),
                          **{k: v for k, v in os.environ.items() if k.startswith(PASSED_ON)})
    say_test(log, f"{suite.name} {chosen.name}: suites {', '.join(p.suites)}, as "
                  f"{user.pw_name if user else 'this user'}, at most {p.minutes:g} min")
    progress = Progress()
    started = time.monotonic()
    try:
        # mtr must start in its own folder (mysql-test/).
        status = log.run(command, cwd=p.runner.parent, check=False, timeout=p.minutes * 60, watch=progress.line)
    except CommandTimedOut:
        raise PipelineError(f"{suite.name} {chosen.name} ran past its time limit of {p.minutes:g} min, "
                            f"stopped after {progress.done} tests; its vardir is kept in {p.var}") from None
    seconds = time.monotonic() - started
    if not report.is_file():
        raise PipelineError(disk_full(p.var, log.path) or f"{suite.name} {chosen.name} exited with status {status} "
                            f"and wrote no report: {last_error(log.path)} (log: {log.path})")
    shutil.copyfile(report, p.out / JUNIT)
    results = shutdown_failures(summarise(read_junit(p.out / JUNIT)), progress.shutdown)
    if status != 0 and not results["failed"]:
        if progress.failing and only_flaky(progress.failing, results["flaky"]):
            # mtr names a test that failed an attempt among the failing ones and exits 1, although it passed
            # on a retry: the flaky list records it, the verdict reports it.
            say_test(log, f"{suite.name} {chosen.name} exited with status {status} for {', '.join(progress.failing)}, "
                          "which passed on a retry (flaky)")
        else:
            raise PipelineError(f"{suite.name} {chosen.name} exited with status {status} although no test failed: "
                                f"{disk_full(p.var, log.path) or last_error(log.path)} (log: {log.path})")
    results.update(set=chosen.name, suites=list(p.suites), seconds=round(seconds, 1), exit_status=status,
                   runner=suite.name, vardir=str(p.var), max_environment_failures=chosen.max_environment_failures)
    return results


def skip_text(chosen):
    """The test set's skip lists as one file, as the runner reads it."""
    return "".join((TESTS_DIR / name).read_text() for name in chosen.skip_lists)


def runner_command(suite, chosen, runner, suites, var, report, skip_list, minutes):
    """The runner's command line: the same on a staged tree and in a chroot with the packages installed."""
    return [*suite.runner[:-1], str(runner), *suite.options, f"--suite={','.join(suites)}", *chosen.args,
            f"--vardir={var}", f"--xml-report={report}", f"--parallel={os.cpu_count() or 1}",
            f"--skip-test-list={skip_list}", f"--suite-timeout={math.ceil(minutes) + 1}"]


def as_user(uid, gid, command, **env):
    """command run as uid:gid without this process's groups or environment, only with env: the runner on
    a staged tree as the test user, and in a package proof's chroot as nobody."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--reset-env", "--",
            "env", *(f"{k}={v}" for k, v in env.items()), *command]


def refuse_failures(results, set_name, what):
    """A short set run on what a package installed must pass whole: its failure, in one line."""
    if results["failed"] or not results["counts"]["passed"]:
        first = results["failed"][0] if results["failed"] else None
        raise PipelineError(f"the {set_name} test set failed on {what}: " + (
            f"{first['test']}: {first['first_error']}" if first else "no test passed"))


def test_suite(product):
    if product.tests is None:
        raise PipelineError(f"product {product.name} has no test suite in pgo/configs.toml")
    return product.tests


def chosen_set(product, settings, asked=None):
    """The test set a command means: the one asked for, else the work directory's, else the product's default."""
    suite = test_suite(product)
    return suite.test_set(asked or (settings.tests if settings.tests != "off" else suite.default_set))


def has_suite(runner_dir, suite, name):
    return any(path.is_dir() for pattern in suite.suite_dirs for path in runner_dir.glob(pattern.format(suite=name)))


def check_room(var, chosen):
    existing = next(folder for folder in (var, *var.parents) if folder.exists())
    free = shutil.disk_usage(existing).free // 2**20
    if free < chosen.min_free_mib:
        raise PipelineError(f"the test vardir {var} has {free} MiB free; test set {chosen.name} needs "
                            f"{chosen.min_free_mib} MiB: free some, or put the vardir elsewhere (--vardir)")


def unprivileged(log):
    """The user to run the tests as: None when this is not root, else TEST_USER (created if missing)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pass
    process.output_of(["useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
                       "--comment", "runs the PGO pipeline's test suites (mtr refuses root)", TEST_USER])
    log.note(f"created the system user {TEST_USER}: the test suite runs unprivileged")
    return pwd.getpwnam(TEST_USER)


def check_readable(user, paths):
    """The unprivileged user must reach the staged tree: every folder above it searchable by others."""
    for path in paths:
        probe = process.run(as_user(user.pw_uid, user.pw_gid, ["test", "-r", path]))
        if probe.returncode != 0:
            raise PipelineError(f"the test user {user.pw_name} cannot read {path}: the folders above it must be "
                                "searchable by others (chmod o+x), or run pgo as an unprivileged user")


class Progress:
    """Counts the runner's finished tests for the step's live summary, and keeps what mtr reports about
    the servers' logs at shutdown (shutdown_failures)."""

    def __init__(self):
        self.done = self.failed = 0
        self.failing = []           # the tests mtr's closing summary names as failing ("Failing test(s): ...")
        self.shown = 0.0
        self.shutdown = []          # (the tests of that server, the lines mtr printed after its header)
        self.reading = False        # the lines are a shutdown report's, until the next test's line

    def line(self, text):
        warned = SHUTDOWN_WARNINGS.match(text)
        if warned:
            self.shutdown.append((warned["tests"].split(), []))
            self.reading = True
            return
        failing = FAILING.match(text)
        if failing:
            # "main.a main.b 'innodb'": a combination, quoted, belongs to the name before it
            for word in failing["tests"].split():
                if word.startswith("'") and self.failing:
                    self.failing[-1] += f" {word}"
                else:
                    self.failing.append(word)
            return
        match = OUTCOME.match(text)
        if text.startswith("-----"):             # mtr's closing summary follows
            self.reading = False
        if not match:
            if self.reading and text.strip() and len(self.shutdown[-1][1]) < EXCERPT_LINES:
                self.shutdown[-1][1].append(text.rstrip())
            return
        self.reading = False
        self.done += 1
        self.failed += match["outcome"] == "fail"
        now = time.monotonic()
        if now - self.shown >= PROGRESS_EVERY:
            self.shown = now
            print(lines.test_progress(self.done, self.failed), flush=True)


def only_flaky(named, flaky):
    """Whether every test the runner named as failing passed on a retry."""
    return all(name in flaky for name in named)


def read_junit(path):
    """Every attempt of every test in a JUnit report as mtr writes it: (name, status, text), in order."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise PipelineError(f"the test report {path} is not XML ({e})") from None
    attempts = []
    for case in root.iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        if case.get("combinations"):
            name += f" '{case.get('combinations')}'"
        failure = case.find("failure")
        skipped = case.find("skipped") if case.find("skipped") is not None else case.find("disabled")
        if failure is not None:
            attempts.append((name, "failed", failure.text or ""))
        elif skipped is not None:
            attempts.append((name, "skipped", skipped.get("message", "")))
        else:
            attempts.append((name, "passed", ""))
    return attempts


def summarise(attempts):
    """A test passed if an attempt passed (mtr retries a failed one); flaky if one failed before."""
    by_test = {}
    for name, status, text in attempts:
        by_test.setdefault(name, []).append((status, text))
    outcomes, failed, flaky = {}, [], []
    for name, tries in by_test.items():
        statuses = [status for status, _ in tries]
        if "passed" in statuses:
            outcomes[name] = "passed"
            if "failed" in statuses:
                flaky.append(name)
        elif "failed" in statuses:
            outcomes[name] = "failed"
            text = next(text for status, text in reversed(tries) if status == "failed")
            failed.append(failure_record(name, text, len(tries)))
        else:
            outcomes[name] = "skipped"
    counts = {kind: sum(1 for o in outcomes.values() if o == kind) for kind in ("passed", "failed", "skipped")}
    return {"counts": counts, "tests": len(by_test), "failed": failed, "flaky": flaky, "outcomes": outcomes}


def shutdown_failures(results, reports):
    """The results with each server-log failure mtr found at a server's shutdown, as a failed test.

    mtr checks each server's error log when it shuts it down, and a warning or error there (a server that
    crashed after `Shutdown complete`, say) fails the run although every test passed: the JUnit report has
    no entry for it, only the runner's output (`***Warnings generated in error logs during shutdown after
    running tests: <the tests that server ran>`, then the log's lines). Each becomes a failure named
    after those tests, so that the verdict judges it as it judges a test: the optimised build's alone
    refuses the release, the plain build's is reported."""
    for tests, report in reports:
        body = "\n".join(report)
        name = f"server log at shutdown after {', '.join(tests)}"
        results["outcomes"][name] = "failed"
        results["counts"]["failed"] += 1
        results["tests"] += 1
        results["failed"].append(failure_record(name, body, 1))
    return results


def failure_record(name, text, attempts):
    """A failed test's record: its runner's text, cut to its first error line and an excerpt."""
    return {"test": name, "first_error": first_error(text), "attempts": attempts, "excerpt": excerpt(text)}


def first_error(text):
    body = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in WHY:
        found = next((line for line in body if pattern.match(line)), None)
        if found:
            return found[:300]
    return body[0][:300] if body else "(the report gives no reason)"


def excerpt(text):
    body = text.strip().splitlines()
    return "\n".join(body[:EXCERPT_LINES]) + (f"\n... ({len(body) - EXCERPT_LINES} more lines)"
                                               if len(body) > EXCERPT_LINES else "")


def describe(results):
    """The result line, then one line per failed and per flaky test."""
    yield lines.test_result(results)
    for failure in results["failed"]:
        yield f"failed: {failure['test']}: {failure['first_error']}"
    for name in results["flaky"]:
        yield f"flaky (failed, then passed on retry): {name}"


def say_test(log, text):
    log.note(text)
    print(lines.tagged("test", text), flush=True)


def staged_token(workdir):
    info = workdir.root / contract.BUILD_INFO
    return read_json(info).get("build_token") if info.is_file() else None


def disk_full(var, log_path):
    if "No space left on device" in Path(log_path).read_text(errors="replace") or shutil.disk_usage(var).free < 2**20:
        return f"the test vardir {var} ran out of room (No space left on device): free some, or use --vardir"
    return None


def last_error(log_path):
    """The runner's own last error line (mtr: `mysql-test-run: *** ERROR: ...`), else its last line."""
    text = [line.strip() for line in Path(log_path).read_text(errors="replace").splitlines() if line.strip()]
    for line in reversed(text):
        if "ERROR" in line or "error:" in line:
            return line[:300]
    return text[-1][:300] if text else "no output"


# --- the verdict ---------------------------------------------------------------------------

def load_results(workdir, set_name):
    """A work directory's results of a test set, proven to be of the build now staged there."""
    path = results_dir(workdir, set_name) / RESULTS
    if not path.is_file():
        raise PipelineError(f"{workdir.root} has no results of test set {set_name}: run its test phase "
                            f"(pgo test --workdir {workdir.root} --set {set_name})")
    if "test" not in workdir.state()["done"]:
        raise PipelineError(f"the test phase of {workdir.root} has not succeeded since its last run: "
                            "its results prove nothing")
    results = read_json(path)
    if results.get("build_token") != staged_token(workdir) or results.get("build_token") is None:
        raise PipelineError(f"the results of test set {set_name} in {workdir.root} are of another build than "
                            "the one staged there: run its test phase again")
    return results


def judge(candidate: Workdir, baseline: Workdir | None, set_name: str | None = None,
          max_environment_failures: int | None = None) -> dict[str, Any]:
    """`pgo test-verdict`: judge the candidate work directory's results of a test set (default: its own)
    against the baseline's (a work directory, or None); record the verdict beside the results, print
    it, and refuse the build it does not pass.

    A baseline that is the distribution's packages (`pgo baseline`) ran no test set: the tests that
    failed on the candidate run again on it, and only those (distribution_rerun)."""
    settings = candidate.load_settings()
    product = contract.resolved_config(candidate).product
    chosen = chosen_set(product, settings, set_name)
    limit = chosen.max_environment_failures if max_environment_failures is None else max_environment_failures
    results = load_results(candidate, chosen.name)
    distribution = distribution_baseline(baseline) if baseline else None
    if distribution:
        against = f"the distribution's build ({distribution['source']} {distribution['version']})"
        judged = verdict(results, distribution_rerun(results, baseline, test_suite(product), chosen), limit, against)
    else:
        judged = verdict(results, load_results(baseline, chosen.name) if baseline else None, limit)
    write_json(results_dir(candidate, chosen.name) / VERDICT, judged)
    print(lines.test_verdict(judged), flush=True)
    if not judged["passed"]:
        for problem in judged["problems"][1:]:
            print(lines.tagged("test-verdict", problem), flush=True)
        more = f" (and {len(judged['problems']) - 1} more above)" if len(judged["problems"]) > 1 else ""
        raise PipelineError(f"the release is refused: {judged['problems'][0]}{more}")
    return judged


def verdict(candidate, baseline, max_environment_failures, against=lines.PLAIN_BASELINE):
    """Refuse a build that fails a test the baseline (`against`: the plain build, or the distribution's)
    passes, or too many tests both fail.

    Without a baseline every failure is the build's: nothing tells it from the environment's.
    """
    plain = baseline["outcomes"] if baseline else {}
    plain_failed = {test for test, outcome in plain.items() if outcome == "failed"}
    own = [f for f in candidate["failed"] if f["test"] not in plain_failed]
    shared = [f for f in candidate["failed"] if f["test"] in plain_failed]
    problems = []
    if not candidate["counts"]["passed"]:
        problems.append(f"no test of set {candidate['set']} passed on the optimised build")
    for failure in own:
        where = (f"{against} passes it" if plain.get(failure["test"]) == "passed" else
                 f"{against} did not run it" if baseline else f"no {against.removeprefix('the ')} to compare with")
        problems.append(f"{failure['test']} fails on the optimised build ({where}): {failure['first_error']}")
    if len(shared) > max_environment_failures:
        problems.append(f"{len(shared)} tests fail on {against} too, above the limit of "
                        f"{max_environment_failures} for set {candidate['set']}: the machine is not fit to test "
                        f"on ({', '.join(f['test'] for f in shared[:5])})")
    return {"passed": not problems, "problems": problems, "set": candidate["set"], "against": against,
            "candidate": candidate["counts"], "baseline": baseline["counts"] if baseline else None,
            "build_only_failures": [f["test"] for f in own], "environment_failures": [f["test"] for f in shared],
            "flaky": candidate["flaky"], "max_environment_failures": max_environment_failures}


# --- a distribution's packages as the baseline (pgo/build/baseline.py) ---------------------------------

def distribution_baseline(baseline: Workdir) -> dict[str, Any] | None:
    """The baseline record of a folder that holds the distribution's packages instead of a plain build."""
    path = baseline.root / BASELINE_RECORD
    if (baseline.root / STATE).is_file() or not path.is_file():
        return None
    record = read_json(path)
    return record if record.get("kind") == "distribution" else None


def distribution_rerun(candidate, baseline: Workdir, suite: TestSuite, chosen: TestSet) -> dict[str, Any] | None:
    """The tests that failed on the optimised build, run again, and only they, on the distribution's packages
    unpacked in the baseline's staged tree (their mariadb-test package's runner and suites), as the test set
    runs them: its results, in the baseline's tests/<set>-rerun/. None when no test failed: nothing to ask."""
    failed = sorted({f["test"] for f in candidate["failed"]})
    if not failed:
        return None
    rerun = replace(chosen, args=(*chosen.args, *failed))
    out = results_dir(baseline, f"{chosen.name}-rerun")
    planned = plan_tree(suite, rerun, baseline.stage, out, "the distribution's packages", "the distribution")
    print(lines.tagged("test-verdict", f"running the {len(failed)} tests that failed on the optimised build on the "
                       f"distribution's packages: {', '.join(failed[:5])}{' ...' if len(failed) > 5 else ''}"),
          flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    log = PhaseLog(out.parent / f"{chosen.name}-rerun.log", "test-verdict")
    try:
        results = execute(planned, log)
    finally:
        log.close()
    write_json(out / RESULTS, results)
    return results
