"""The lines the worker-side CLI prints, and the build summaries the Buildbot steps make of its records.

A Buildbot step (buildmaster/buildsteps.py) shows progress lines as its live summary, parsed
here beside the code that prints them (and a test feeds what the CLI prints to that parser, so
a reworded line cannot silently leave a summary blank). A command's result reaches the build's
summary from the JSON record it wrote (pgo/base/protocol.py), never from a printed line: each result
line a person reads and the summary the master makes of the same record stand here together.
"""

import re
from collections.abc import Mapping
from typing import Any

from pgo.base.protocol import SUM_MAX_RULE, WORKING_SET_RULE, PhaseName

# Colours and cursor moves (systemd's on a VM's serial console: `\x1b[0;32m`, `\x1b[?25l`).
TERMINAL_CODE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def without_terminal_codes(text: str) -> str:
    """text as a person reads it on a terminal, for the checks that read a VM's console."""
    return TERMINAL_CODE.sub("", text)


def first_line(text: object) -> str:
    """The first line of text (an error, a console) that is not blank, stripped; "" for none."""
    return next((line.strip() for line in str(text).splitlines() if line.strip()), "")


def tagged(tag: str, text: object) -> str:
    """A line of a phase (or of the benchmark) on the console: `[tag] text`."""
    return f"[{tag}] {text}"


# --- progress: the step's live summary -------------------------------------------------------

def compile_progress(phase, done, total):
    return tagged(phase, f"compile {done}/{total}")


def compile_percent(phase, percent):
    """A Makefiles build's progress: make counts no steps, CMake's rules print their share done."""
    return tagged(phase, f"compile {percent}%")


def compile_waiting(progress, edge, minutes):
    """A compile that printed nothing for a while (a whole server's link): its last progress line, what
    it started last (Ninja's description: `Linking CXX executable sql/mariadbd`) and for how long."""
    return f"{progress}: {edge[:1].lower()}{edge[1:]} for {minutes} min"


def bench_pair(pair, max_pairs, workload, threads, minutes, max_minutes, place=None):
    """One interleaved pair of the benchmark starts; max_pairs is the most this point gets; place, where it
    stands in the whole plan (`sweep 14 of 36`: the fixed sweep, then `more single-thread pairs`)."""
    where = f"{place}, " if place else ""
    # The minutes bound only the single-thread pairs added after the sweep; a long sweep outlasts them.
    clock = (f"minute {minutes:.0f} of {max_minutes:g}" if minutes <= max_minutes else
             f"minute {minutes:.0f} (no pairs added after minute {max_minutes:g})")
    return tagged("bench", f"pair {pair} (max {max_pairs}): {workload} N={threads}, {where}{clock}")


def test_progress(done, failed):
    """The test phase's progress (pgo/build/testrun.py): how many tests finished, how many failed."""
    return tagged("test", f"{done} tests run, {failed} failed")


# The training workload (profile_load/src/main.c, in C) prints `pass N of M: engine=...`
# before each pass; the train phase echoes its output tagged `[train]`.
# The bolt phase runs the same training against BOLT's instrumented binary.
PROGRESS = re.compile(r"^\[[\w-]+\] (compile \d+(?:/\d+|%)(?:: .+ for \d+ min)?)\s*$"
                      r"|^\[bench\] (pair \d+ \(max \d+\): .+?)\s*$|^\[(?:train|bolt)\] (pass \d+ of \d+)\b"
                      r"|^\[test\] (\d+ tests run, \d+ failed)$")


def progress(line: str) -> str | None:
    """The step summary a progress line stands for ("compile 345/1198", "compile 45%", "pass 3 of 24"), or None."""
    match = PROGRESS.match(line)
    return next(group for group in match.groups() if group) if match else None


# --- results: printed for people, summed up from their records for the build ----------------

def profile_check(figures):
    """The profile check's headline (pgo/build/phases.py prints it tagged [check])."""
    return (f"{figures['gcda_files']} .gcda files, {figures['build_objects_with_profile']} of "
            f"{figures['build_objects']} build objects have data; profile {figures['profile_id']}")


def profile_quality(quality):
    """The check's line of what decides the gain (pgo/core/profile.py quality()), printed after the headline.

    Without LTO it names the threshold and its rule, and the trained functions that reach it; with
    LTO the threshold is the link's to decide, so the line names the rule only.
    """
    lto = quality["threshold_rule"] == WORKING_SET_RULE
    top = quality["largest"][0] if quality["largest"] else None
    threshold = f"the {WORKING_SET_RULE}" if lto else f"{si(top['hot_threshold'])} = {SUM_MAX_RULE}" if top else ""
    largest = (f"largest counter {si(top['counter'])} in {top['object']} (hot from {threshold})" if top
               else "no counters")
    functions = (f"{quality['functions_run']} trained functions" if lto else
                 f"{quality['hot_functions']} of {quality['functions_run']} trained functions hot "
                 f"({quality['hot_share']:.0%})")
    setup = (f"; setup kept out: {quality['setup_share']:.0%} of counts"
             if quality.get("setup_share") is not None else "")
    return f"quality: {quality['runs']} runs; {largest}; {functions}{setup}"


def si(count):
    """12345678 -> '12.3M': counters span nine orders of magnitude."""
    for factor, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if count >= factor:
            return f"{count / factor:.1f}{unit}"
    return str(count)


def profile_check_summary(figures: Mapping[str, Any]) -> str:
    """The build's summary of its profile check, from the record the check wrote (profile-check.json):
    the headline (profile id, objects trained), then the quality (hot share, threshold, runs)."""
    headline = (f"profile {figures['profile_id']}: {figures['build_objects_with_profile']} of "
                f"{figures['build_objects']} objects trained;")
    quality = figures.get("quality")
    if not quality:
        return headline
    top = quality["largest"][0] if quality["largest"] else None
    where = f", largest counter {si(top['counter'])} in {top['object'].rsplit('/', 1)[-1]}" if top else ""
    if quality["threshold_rule"] == WORKING_SET_RULE:     # LTO: the link decides what is hot
        return (f"{headline} hot from the {WORKING_SET_RULE}{where}, {quality['functions_run']} trained functions, "
                f"{quality['runs']} runs;")
    threshold = f" from {si(top['hot_threshold'])}" if top else ""
    return f"{headline} {quality['hot_share']:.0%} of trained functions hot{threshold}{where}, {quality['runs']} runs;"


def profile_use(profile_id, verdict):
    """The optimised build's verdict: how much of the hot code got the profile, the compiler's
    warnings, and whether the profile was trained on other source (stale)."""
    stale = "stale " if verdict.get("stale") else ""
    traces = verdict["traces"]
    share = instrumented_share(verdict)
    share = f"{share}; " if share else ""
    return tagged(PhaseName.OPTIMIZED, f"{stale}profile {profile_id} used: {verdict['hot_coverage']:.0%} of "
                               f"{verdict['hot_objects']} hot objects (in effect in {verdict['hot_in_effect']}, "
                               f"by their own records; {share}hot code laid out in {traces['traced']} of the "
                               f"{traces['expected']} whose profile has some); {verdict['missing_profile']} objects "
                               "without profile, "
                               f"{verdict['coverage_mismatch']} coverage mismatches, "
                               f"{verdict['functions_without_profile']} functions without profile"
                               f"{'; the server binary is an LTO link' if verdict.get('link_time_optimised') else ''}")


def profile_use_summary(verdict: Mapping[str, Any]) -> str:
    """The build's summary of the optimised build's verdict, from its record (profile-use.json)."""
    stale = "stale " if verdict.get("stale") else ""
    share = instrumented_share(verdict)
    return (f"{stale}profile used by {verdict['hot_coverage']:.0%} of {verdict['hot_objects']} hot objects"
            f"{f' ({share})' if share else ''}, {verdict['coverage_mismatch']} mismatches;")


def instrumented_share(verdict: Mapping[str, Any]) -> str:
    """'N% of the M the instrumented build compiled' when a reduced instrumented build left hot objects out
    (a profile cannot reach those); '' when it compiled them all, or the record predates the figure."""
    compiled = verdict.get("hot_instrumented")
    if not compiled or compiled >= verdict["hot_objects"]:
        return ""
    return f"{verdict['hot_with_profile'] / compiled:.0%} of the {compiled} the instrumented build compiled"


def package_summary(info: Mapping[str, Any]) -> str:
    """A package build's summary, from the buildinfo.json it wrote beside its packages: what it made."""
    names = info["packages"]
    label = f"PGO, profile {info['profile_id']}" if info["pgo"] == "on" else "plain"
    made = names[0] if len(names) == 1 else f"{len(names)} packages, {names[0]} ..."
    return f"{info['format']} of {info['product']} {info['package_version']}: {made} ({label});"


def bolt_check(check):
    """BOLT's check of the binary it rewrote (pgo/build/bolt.py judge): how much of its profile matched the
    binary, how much code it moved."""
    taken = check["taken_branches"]
    branches = (f", taken branches {si(taken['before'])} -> {si(taken['after'])}"
                if taken["before"] and taken["after"] is not None else "")
    return tagged("bolt", f"{check['binary'].rsplit('/', 1)[-1]} {'PASSED' if check['passed'] else 'FAILED'}: "
                          f"profile matched {check['profiled_functions']} of {check['functions']} functions, "
                          f"{check['stale_share']:.0%} of samples stale; {check['layout_changed_functions']} "
                          f"functions laid out anew, {check['hot_text_bytes']} bytes of hot text{branches}")


def bolt_check_summary(check: Mapping[str, Any]) -> str:
    """The build's summary of BOLT's check, from its record (bolt.json)."""
    return (f"BOLT {'passed' if check['passed'] else 'failed'}: {check['profiled_functions']} of "
            f"{check['functions']} functions profiled, {check['stale_share']:.0%} stale, "
            f"{check['hot_text_bytes']} bytes of hot text;")


def bench_verdict(verdict: Mapping[str, Any]) -> str:
    """The gate's decision (pgo/bench/gate.py evaluate) in one line."""
    action = "publish" if verdict["publish"] else "do not publish"
    return tagged("bench", f"verdict: {verdict['outcome'].upper()}, {action}: {verdict['summary']}")


def bench_verdict_summary(result: Mapping[str, Any]) -> str:
    """The build's summary of the gate's decision, from the benchmark's record (its result.json)."""
    verdict = result["verdict"]
    return f"{verdict['summary']} ({verdict['outcome']});"


def baseline_summary(record: Mapping[str, Any]) -> str:
    """What a release's baseline is (`pgo baseline`'s record, protocol.BASELINE_RECORD): the distribution's
    packages of the version it built, or the plain build and why."""
    if record["kind"] == "distribution":
        return (f"baseline: the distribution's {record['source']} {record['version']} ({len(record['packages'])} "
                f"packages, {record['server_version']});")
    return f"baseline: the plain build ({record['why']});"


def latest_version(version, how):
    """Which version `--version latest` is (pgo/cli.py); the Buildbot step that resolves it reads the
    record `pgo latest --record` writes (pgo/base/protocol.py version_record) instead."""
    return tagged("version", f"latest is {version}: {how}")


def test_result(results: Mapping[str, Any]) -> str:
    """A test run's counts (pgo/build/testrun.py), e.g. `mtr release: 1060 passed, 0 failed, 235 skipped, 8.2 min`."""
    counts = results["counts"]
    flaky = f", {len(results['flaky'])} flaky" if results["flaky"] else ""
    return (f"{results['runner']} {results['set']}: {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['skipped']} skipped{flaky}, {results['seconds'] / 60:.1f} min")


def test_result_summary(results: Mapping[str, Any]) -> str:
    """The build's summary of a test run, from its record (tests/<set>/results.json)."""
    return f"{test_result(results)};"


def test_verdict(verdict: Mapping[str, Any]) -> str:
    """The test verdict (pgo/build/testrun.py verdict) in one line; its problems come as the error line."""
    outcome = "PASSED" if verdict["passed"] else "REFUSED"
    return tagged("test-verdict", f"{verdict['set']} {outcome}: {verdict_body(verdict)}")


# What the test verdict compares with unless told (pgo/build/testrun.py verdict): else the distribution's packages.
PLAIN_BASELINE = "the plain build"


def verdict_body(verdict: Mapping[str, Any]) -> str:
    c, b = verdict["candidate"], verdict["baseline"]
    against = verdict.get("against", PLAIN_BASELINE)
    if against == PLAIN_BASELINE:
        plain = f"plain build {b['passed']} passed, {b['failed']} failed" if b else "no plain build"
    else:
        plain = (f"its failures again on {against}: {b['passed']} passed, {b['failed']} failed" if b else
                 f"no failure to run again on {against}")
    environment = verdict["environment_failures"]
    shared = (f"; failing on both (environment, at most {verdict['max_environment_failures']}): "
              f"{', '.join(environment)}" if environment else "")
    return f"optimised build {c['passed']} passed, {c['failed']} failed; {plain}{shared}"


def test_verdict_summary(verdict: Mapping[str, Any]) -> str:
    """The build's summary of the test verdict, from its record (tests/<set>/verdict.json)."""
    return f"tests {verdict['set']} {'passed' if verdict['passed'] else 'refused'}: {verdict_body(verdict)};"
