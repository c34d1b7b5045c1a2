"""What a profile holds, and what the optimising compiler said about it.

GCC writes one .gcda per object that ran, named after the object's path with
'/' mangled to '#'. With -fprofile-prefix-path the name is relative to the
build tree; objects outside it (configure checks, the training program) keep
an absolute name, which starts with '#'.
"""

import hashlib
import json
import os
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from pgo import PipelineError
from pgo.base import process
from pgo.base.protocol import MIN_TRACED, SUM_MAX_RULE, WORKING_SET_RULE

MISSING_PROFILE_SAID = "profile count data file not found"
MISSING_PROFILE = re.compile(r"‘?'?([^\s‘’']+\.gcda)’?'? " + MISSING_PROFILE_SAID)
COVERAGE_MISMATCH = "[-Wcoverage-mismatch]"
# A function whose source lines or source file path changed since training:
# measured with GCC 12, such an object compiles exactly as with no profile at
# all (ctype-utf8.c.o of MariaDB 10.11.18: 37814 bytes of .text either way,
# 31278 with its profile). It counts as a discarded profile like the others, though a small C file
# compiled from a copy in another folder keeps its profile (docs/release-lto-10.11.18-release/): counting
# it errs towards refusing a build, never towards a label without the profile.
SOURCE_MOVED = "have changed, the profile data may be out of date"
# A function the .gcda has no counters for: the .gcda is another object's, or
# another build's. Its object compiles as without a profile, however many
# functions of it there are.
FUNCTION_WITHOUT_PROFILE = re.compile(r"^(\S+?):\d+:\d+: warning: profile for function ‘?'?([^’']+)’?'? "
                                      r"not found in profile data", re.M)


def gcda_files(profile_dir):
    return sorted(Path(profile_dir).glob("*.gcda"))


def object_of(gcda_name):
    """'sql#CMakeFiles#sql.dir#sql_parse.cc.gcda' -> 'sql/CMakeFiles/sql.dir/sql_parse.cc'."""
    return gcda_name.removesuffix(".gcda").replace("#", "/")


def in_dir(obj, directory):
    return obj == directory or obj.startswith(directory.rstrip("/") + "/")


def compiled_objects(build_dir):
    """Objects of a build tree, named as their .gcda would be (relative, without '.o')."""
    root = Path(build_dir)
    return sorted(str(p.relative_to(root)).removesuffix(".o") for p in root.rglob("*.o"))


def profile_id(profile_dir, version):
    digest = hashlib.sha256()
    for path in gcda_files(profile_dir):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"{version}-{digest.hexdigest()[:12]}"


def trained_version(name):
    """The version a profile id says its profile was trained on; `name` may be an archive entry's name,
    which ends in the id."""
    return name.rsplit("/", 1)[-1].rsplit("-", 1)[0]


# GCC's --param hot-bb-count-fraction: without LTO a block is hot when its count reaches
# the sum_max of its object's summary divided by this (with LTO, see quality()).
HOT_BB_COUNT_FRACTION = 10000


def batches(items, size=200):
    """Consecutive slices of at most size items: the files one gcov-dump or gcov command line takes."""
    return (items[start:start + size] for start in range(0, len(items), size))


def gcov_dump_output(paths, gcov_dump="gcov-dump", *options):
    """(batch, text) for each batch of files gcov-dump read: every line of text starts with its
    file's path and a colon."""
    for batch in batches([str(p) for p in paths]):
        result = process.run([gcov_dump, *options, *batch])
        if result.returncode != 0:
            raise PipelineError(f"{gcov_dump} cannot read the profile: {result.stderr.strip()[-300:]}")
        yield batch, result.stdout


def read_counters(gcda_paths, gcov_dump="gcov-dump"):
    """Per .gcda, what GCC decides hotness from, read with `gcov-dump -l`.

    {path: {"runs", "sum_max", "total", "functions": [(hottest counter, ran), ...]}}: runs and
    sum_max are the object's summary; total is the sum of its arc counters; a function ran when
    its first-execution timestamp (time_profiler) is set, and its hottest counter is the largest
    of its arc counters (an object counts only what it compiled, so the sizes are comparable).
    """
    counters = {}
    for batch, text in gcov_dump_output(gcda_paths, gcov_dump, "-l"):
        for path, figures in _parse_dump(text, batch):
            counters[path] = figures
    return counters


SUMMARY = re.compile(r"OBJECT_SUMMARY runs=(\d+), sum_max=(\d+)")
COUNTERS = re.compile(r"COUNTERS (\w+) \d+ counts")
VALUES = re.compile(r"^\d+:((?:\s+-?\d+)+)$")


def _parse_dump(text, paths):
    """Read `gcov-dump -l` output (gcov_dump_output)."""
    # per object: runs, sum_max and total counts, and each function's (hottest counter, whether it ran)
    by_path: dict[str, dict[str, Any]] = {p: {"runs": 0, "sum_max": 0, "total": 0, "functions": []} for p in paths}
    kind, hottest = None, 0
    for line in text.splitlines():
        path, _, rest = line.partition(":")
        figures = by_path.get(path)
        if figures is None:
            continue
        rest = rest.strip()
        if kind and (row := VALUES.match(rest)):     # "0: 200000 1700000 ...": the last COUNTERS' values
            values = [int(v) for v in row.group(1).split()]
            if kind == "arcs":
                hottest = max(hottest, *values)
                figures["total"] += sum(values)
            elif kind == "time_profiler":
                figures["functions"].append((hottest, any(values)))
        elif "FUNCTION ident=" in rest:
            kind, hottest = None, 0
        elif counters := COUNTERS.search(rest):
            kind = counters.group(1)
        elif summary := SUMMARY.search(rest):
            figures["runs"], figures["sum_max"] = int(summary.group(1)), int(summary.group(2))
    return by_path.items()


def check(profile_dir, build_dir, hot_dirs, version, gcov_dump="gcov-dump", setup_dir=None, lto=False,
          trained_dirs=()):
    """Count the profile's data and require data in every hot directory, and in every directory the
    configuration's training must reach (trained_dirs: its engines, not judged for hot coverage).

    Returns the figures as a dict, with the profile's quality (see quality(); lto: the builds
    link with LTO); setup_dir holds the counters of setup runs kept out of the profile, if any.
    Raises PipelineError when there is no data where there must be data.
    """
    files = gcda_files(profile_dir)
    names = {object_of(p.name) for p in files if p.stat().st_size > 0}
    own = {n for n in names if not n.startswith("/")}
    objects = compiled_objects(build_dir)
    counters = read_counters([p for p in files if object_of(p.name) in own], gcov_dump)
    by_object = {object_of(Path(path).name): figures for path, figures in counters.items()}

    def reached(directory):
        compiled = [o for o in objects if in_dir(o, directory)]
        profiled = [o for o in compiled if o in own]
        functions = [f for o in profiled for f in by_object[o]["functions"]]
        return {"objects": len(compiled), "with_profile": len(profiled),
                "share": round(len(profiled) / len(compiled), 3) if compiled else 0.0,
                "functions": len(functions), "functions_run": sum(1 for _, ran in functions if ran)}
    hot = {directory: reached(directory) for directory in hot_dirs}
    trained = {directory: reached(directory) for directory in trained_dirs}
    setup_counts = (sum(f["total"] for f in read_counters(sorted(Path(setup_dir).rglob("*.gcda")), gcov_dump).values())
                    if setup_dir else None)
    figures = {
        "gcda_files": len(files),
        "empty_gcda_files": len(files) - len(names),
        "build_objects_with_profile": len(own),
        "build_objects": len(objects),
        "hot_dirs": hot,
        "trained_dirs": trained,
        "quality": quality(by_object, hot_dirs, setup_counts, lto),
        "profile_id": profile_id(profile_dir, version) if files else None,
    }
    if not files:
        raise PipelineError(f"the training wrote no profile data into {profile_dir}: "
                            "did the server shut down cleanly?")
    for what, dirs in (("hot objects", hot), ("the objects the configuration trains", trained)):
        empty = [d for d, h in dirs.items() if h["with_profile"] == 0]
        if empty:
            detail = ", ".join(f"{d} ({dirs[d]['objects']} objects)" for d in empty)
            raise PipelineError(f"no profile data for {what} in {detail}: the training did not reach them")
    return figures


FUNCTION_RECORD = re.compile(r"FUNCTION (ident=\d+, lineno_checksum=0x[0-9a-f]+, cfg_checksum=0x[0-9a-f]+)")


def function_records(paths, gcov_dump="gcov-dump"):
    """{path: the set of function records (ident and checksums) of a .gcda or .gcno}."""
    records = {}
    for batch, text in gcov_dump_output(paths, gcov_dump):
        found: dict[str, set[str]] = {path: set() for path in batch}
        for line in text.splitlines():
            path, _, rest = line.partition(":")
            if path in found and (record := FUNCTION_RECORD.search(rest)):
                found[path].add(record.group(1))
        records.update(found)
    return records


def function_entries(profile_dir, build_dir, gcov="gcov", gcov_dump="gcov-dump"):
    """How often the training entered each function, and from how many objects gcov read it.

    {"functions": {demangled name: entries}, "objects": N, "unread": M}. gcov reads each .gcda
    with the .gcno the instrumented build wrote beside its object (-ftest-coverage;
    pgo/core/toolchain.py). A name compiled into several objects (an inline function of a header, or
    static functions that share a name) adds up. Functions inlined everywhere before
    instrumentation have no entries of their own and do not appear. A .gcda that does not fit its
    notes (another object's, another build's) is unread: these counts are a diagnosis, and the
    optimised build's check judges the fit.
    """
    root = Path(build_dir)
    pairs = [(gcda, root / f"{object_of(gcda.name)}.gcno") for gcda in gcda_files(profile_dir)
             if not object_of(gcda.name).startswith("/") and gcda.stat().st_size > 0]
    pairs = [(gcda, notes) for gcda, notes in pairs if notes.is_file()]
    # gcov skips, without a word, the functions of a .gcda that its notes do not have, and its
    # stamp check passes two objects compiled in the same millisecond: so a .gcda fits when
    # every function it has counters for is one of its notes', with the same checksums.
    records = function_records([path for pair in pairs for path in pair], gcov_dump)
    fitting = [(gcda, notes) for gcda, notes in pairs if records[str(gcda)] <= records[str(notes)]]
    entries: Counter[str] = Counter()
    unread = len(pairs) - len(fitting)
    with tempfile.TemporaryDirectory(prefix="pgo-gcov-") as scratch:
        # gcov pairs a .gcda with the .gcno of the same name: give each pair one short name.
        for number, (gcda, notes) in enumerate(fitting):
            os.symlink(gcda.resolve(), Path(scratch, f"{number}.gcda"))
            os.symlink(notes.resolve(), Path(scratch, f"{number}.gcno"))
        names = [f"{number}.gcda" for number in range(len(fitting))]
        for batch in batches(names):
            result = process.run([gcov, "--json-format", "--stdout", *batch], cwd=scratch)
            # One JSON document per .gcda; "N.gcda:<why>" on stderr for each that does not fit its
            # notes after all (a stamp of another build: gcov then fails the run, and counts
            # nothing of that file).
            documents = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
            if result.returncode != 0 and not documents:
                raise PipelineError(f"{gcov} cannot read the profile with its notes: "
                                    f"{result.stderr.strip()[-300:]}")
            unread += len(set(re.findall(r"^(\d+)\.gcda:", result.stderr, re.M)))
            for source in (source for document in documents for source in document["files"]):
                for function in source["functions"]:
                    entries[function.get("demangled_name") or function["name"]] += function["execution_count"]
    return {"functions": {name: count for name, count in entries.items() if count > 0},
            "objects": len(pairs), "unread": unread}


# GCC's names for parts and clones of one source function (callgrind shows them as
# "f.cold", "f.part.0", "f.constprop.0", or for C++ "f() [clone .cold]"): the training counted f.
CLONE_SUFFIX = re.compile(r"( \[clone [^\]]+\])+$|(\.(cold|part|isra|constprop|lto_priv|localalias)(\.\d+)?)+$")


def entries_of(entries, function):
    """The training's entries of a function as a profiler names it; None if the training never
    entered it, or no object of the profile has it (a library function, or one inlined wherever
    it was called)."""
    return entries.get(CLONE_SUFFIX.sub("", function))


def read_training_counts(path):
    """A check's training counts (contract.TRAINING_COUNTS): {"functions": {...}, "profile_id": ...}."""
    try:
        data = json.loads(Path(path).read_text())
        functions = data["functions"]
        if not isinstance(functions, dict):
            raise TypeError("functions is not a mapping")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise PipelineError(f"{path}: not the training counts of a pgo build's check ({e})") from None
    return {"functions": functions, "profile_id": (data.get("identity") or {}).get("profile_id")}


def hot_threshold(figures):
    """The count from which GCC (without LTO) treats a block of this object as hot."""
    return max(figures["sum_max"] // HOT_BB_COUNT_FRACTION, figures["runs"] + 1)




def quality(by_object, hot_dirs, setup_counts=None, lto=False):
    """What decides the gain of a profile, per GCC's rules (docs/training-limit-10.11.18-minimal).

    Without LTO, a block is hot when its count reaches the sum_max of its object's summary / 10000.
    libgcov writes one sum_max for a whole program: the sum, over its runs, of each run's largest
    counter anywhere in the program. So one very hot loop anywhere (a collation, a bulk load)
    leaves the query path lukewarm: fewer call sites are inlined and less code is laid out as hot.
    `largest` names the objects with the largest counters (`counter`), with the threshold they
    set; `hot_functions` counts the trained functions of the hot directories whose hottest
    counter reaches it. Every process run counts in `runs` and adds its maximum to sum_max;
    `setup_share` is the share of all counts that setup runs (the bootstrap) had, kept out of
    the profile.

    With LTO (lto=True) sum_max plays no part: GCC sets one threshold for each program at its
    link (ipa-profile), the smallest count of the blocks that make 99% of the program's time
    (--param hot-bb-count-ws-permille=990), each block's count weighted by its instructions.
    The .gcda files have neither the blocks nor their instructions, so the threshold and the
    functions it makes hot (`hot_threshold`, `hot_functions`, `hot_share`) are None then;
    `threshold_rule` says which rule applies.
    """
    in_hot = {o: f for o, f in by_object.items() if any(in_dir(o, d) for d in hot_dirs)}
    ran = [(o, hottest) for o, f in in_hot.items() for hottest, did in f["functions"] if did]
    hot = None if lto else sum(1 for o, hottest in ran if hottest >= hot_threshold(in_hot[o]))
    hottest = {o: max((h for h, _ in f["functions"]), default=0) for o, f in by_object.items()}
    largest = sorted(by_object, key=lambda o: hottest[o], reverse=True)[:5]
    total = sum(f["total"] for f in by_object.values())
    # The server's objects are most of the hot ones: their number of runs is the one that counts.
    runs = Counter(f["runs"] for f in in_hot.values()).most_common(1)
    return {
        "runs": runs[0][0] if runs else 0,
        "threshold_rule": WORKING_SET_RULE if lto else SUM_MAX_RULE,
        "largest": [{"object": o, "counter": hottest[o], "sum_max": by_object[o]["sum_max"],
                     "runs": by_object[o]["runs"], "hot_threshold": None if lto else hot_threshold(by_object[o])}
                    for o in largest],
        "functions_run": len(ran),
        "hot_functions": hot,
        "hot_share": None if hot is None else round(hot / len(ran), 3) if ran else 0.0,
        "total_counts": total,
        "setup_counts": setup_counts,
        "setup_share": round(setup_counts / (setup_counts + total), 3) if setup_counts is not None and total else None,
    }


def compiler_warnings(log_text, hot_dirs, source_root, objects, moved_keeps_profile=False):
    """Count the optimising compiler's profile warnings in a build log.

    The lists name every hot object a warning took the profile from: missing_hot_objects (no
    .gcda, or a function the .gcda has no counters for), mismatch_hot_objects (GCC dropped a
    function's counters: its control flow or lines changed since training).
    moved_keeps_profile: a function whose only warning is that its "source locations ... have
    changed" counts as moved (source_moved), not as a dropped profile: a build from another folder
    than the training's (pgo adopt-debs), where GCC warns so for every function and still reads the
    counters of the public ones (those of the others it finds none of: missing, as above).
    """
    missing = missing_profile_objects(log_text, objects)
    functions_without = set(FUNCTION_WITHOUT_PROFILE.findall(log_text))
    sources = objects_by_source(objects)
    for source_file, _function in functions_without:
        path = Path(source_file).resolve()
        if path.is_relative_to(source_root):
            missing.update(sources.get(str(path.relative_to(source_root)), ()))
    # GCC repeats a function's warning once per counter kind: count functions, by location.
    discarded, moved = set(), set()
    for line in log_text.splitlines():
        if COVERAGE_MISMATCH in line:
            function = line.split(": warning:", 1)[0]
            if SOURCE_MOVED in line:
                moved.add(function)
                if moved_keeps_profile:
                    continue
            discarded.add(function)
    missing_hot = hot_only(missing, hot_dirs)
    mismatched = warned_objects(log_text, COVERAGE_MISMATCH, unless=SOURCE_MOVED if moved_keeps_profile else None)
    return {"missing_profile": len(missing), "missing_profile_hot": len(missing_hot),
            "functions_without_profile": len(functions_without),
            "coverage_mismatch": len(discarded), "source_moved": len(moved), "missing_hot_objects": missing_hot,
            "mismatch_hot_objects": hot_only(mismatched, hot_dirs)}


def missing_profile_objects(log_text, objects):
    """The objects whose compile found no .gcda: the one each `profile count data file not found` names.

    GCC names the file it looked for, and that names the object when it is one of this build's: make -j
    without --output-sync (as debian/rules builds) prints one compile's warning after another object's
    line, so the line before it proves nothing then. A file of no object here (a compile to another
    output path, as distcc and icecc do in effect) counts against the object whose compile printed it.
    """
    known = set(objects)
    found = set()
    for current, line in compile_lines(log_text):
        if MISSING_PROFILE_SAID in line:
            named = MISSING_PROFILE.search(line)
            obj = object_of(Path(named.group(1)).name) if named else None
            if obj:
                found.add(obj)
            if obj not in known and current:
                found.add(current)
    return found


def hot_only(objects, hot_dirs):
    return sorted(o for o in objects if any(in_dir(o, d) for d in hot_dirs))


# Ninja prints each command's output after the command's own line (output that is not a terminal);
# make with --output-sync prints each target's lines together, CMake's `[ 45%] Building ...` first.
BUILD_STEP = re.compile(r"^\[(?:\d+/\d+| *\d+%)\] (?:Building \S+ object (.+)\.o$)?")


def warned_objects(log_text, marker, unless=None):
    """The objects whose compile printed a line holding `marker` (and not `unless`): wherever the
    warning points (a function of a header too), it is about the object being compiled."""
    return {current for current, line in compile_lines(log_text)
            if current and marker in line and not (unless and unless in line)}


def compile_lines(log_text):
    """(the object being compiled, or None, line) for each line of a build log but its step lines."""
    current = None
    for line in log_text.splitlines():
        edge = BUILD_STEP.match(line)
        if edge:
            current = edge.group(1)
        else:
            yield current, line


def objects_by_source(objects):
    """{'sql/sql_parse.cc': ['sql/CMakeFiles/sql.dir/sql_parse.cc'], ...}: CMake's object naming reversed."""
    sources: dict[str, list[str]] = {}
    for obj in objects:
        directory, _, rest = obj.rpartition("CMakeFiles/")
        if "/" in rest:
            sources.setdefault(directory + rest.split("/", 1)[1], []).append(obj)
    return sources


def judge_use(warnings, records, traces, profile_dir, build_dir, hot_dirs, max_mismatch, min_hot_coverage):
    """Whether the optimised build really used its profile: the verdict, with the hot coverage and
    `passed`; `problems` says why not.

    Proven from the build's own output: every object's record of its options (records, from
    pgo/core/proof.py prove()) must show the profile in effect, and a hot object counts as covered only
    when, besides, its .gcda is in the profile and no warning of the compiler took its profile
    away (compiler_warnings()), a function's counters dropped for a changed control flow included.
    And the code itself must show that the compiles read the profile (traces, from pgo/core/proof.py
    traces()): options and warnings only say what the compiler was told and chose to say.
    """
    hot_objects = hot_only(compiled_objects(build_dir), hot_dirs)
    if not hot_objects:
        raise PipelineError(f"the optimised build has no objects in the hot directories {', '.join(hot_dirs)}")
    in_effect = set(records["in_effect"])
    with_data = {object_of(p.name) for p in gcda_files(profile_dir) if p.stat().st_size > 0}
    taken = set(warnings["missing_hot_objects"]) | set(warnings["mismatch_hot_objects"])
    # The objects the code must show the profile in: hot code in their profile, no warning that took it
    # away (those are not covered anyway), and not possibly all startup code.
    judged = [o for o in traces["expected"] if o not in taken and o not in traces["startup"]]
    traced = [o for o in judged if o in traces["traced"]]
    untraced = sorted(set(judged) - set(traced))
    covered = [o for o in hot_objects if o in in_effect and o in with_data and o not in taken and o not in untraced]
    coverage = len(covered) / len(hot_objects)
    problems = []
    faults = records["faults"]
    if faults:
        first = records["first_fault"]
        problems.append(f"{'hot object' if records['hot_faults'] else 'object'} {first}.o was not compiled with the "
                        f"profile in effect: {', '.join(faults[first])} (its own record of its options; "
                        f"{records['hot_faults']} of {len(hot_objects)} hot objects, "
                        f"{len(faults) - records['hot_faults']} others)")
    if warnings["coverage_mismatch"] > max_mismatch:
        problems.append(f"{warnings['coverage_mismatch']} coverage-mismatch warnings (limit {max_mismatch}): "
                        "the profile does not fit this source; see the build log")
    if coverage == 0:
        # Whatever the limits say: a build that used no profile is no PGO build.
        problems.append("no hot object got a profile: the profile does not fit this build at all")
    elif coverage < min_hot_coverage:
        problems.append(f"only {coverage:.0%} of the hot objects got a profile (minimum "
                        f"{min_hot_coverage:.0%}): the profile does not fit this build")
    if judged and len(traced) < MIN_TRACED * len(judged):
        problems.append(f"the profile left no trace in the code: {len(traced)} of the {len(judged)} hot objects "
                        f"whose profile has hot code hold any (.text.hot; minimum {MIN_TRACED:.0%}; {untraced[-1]}.o "
                        "has none), so their compiles did not read it: a compiler or wrapper that compiles elsewhere "
                        "than the object's path, or -w hiding `profile count data file not found`?")
    limited = {key: warnings[key][:50] for key in ("missing_hot_objects", "mismatch_hot_objects")}
    return dict(warnings, **limited, hot_objects=len(hot_objects), hot_in_effect=len(in_effect & set(hot_objects)),
                hot_with_profile=len(covered), hot_coverage=round(coverage, 3),
                traces={"expected": len(judged), "traced": len(traced), "startup": len(traces["startup"]),
                        "min_share": MIN_TRACED, "untraced": untraced[:50]},
                objects_without_profile_hot=sorted(set(hot_objects) - set(covered))[:50],
                proof={"objects": records["objects"], "recorded": records["recorded"],
                       "seconds": records["seconds"],
                       "faults": [{"object": o, "faults": faults[o]} for o in sorted(faults)[:50]]},
                passed=not problems, problems=problems)
