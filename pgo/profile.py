"""What a profile holds, and what the optimising compiler said about it.

GCC writes one .gcda per object that ran, named after the object's path with
'/' mangled to '#'. With -fprofile-prefix-path the name is relative to the
build tree; objects outside it (configure checks, the training program) keep
an absolute name, which starts with '#'.
"""

import hashlib
import re
import subprocess
from pathlib import Path

from pgo import PipelineError

MISSING_PROFILE = re.compile(r"‘?'?([^\s‘’']+\.gcda)’?'? profile count data file not found")
COVERAGE_MISMATCH = "[-Wcoverage-mismatch]"
# A function whose source lines or source file path changed since training:
# measured with GCC 12, such an object compiles exactly as with no profile at
# all (ctype-utf8.c.o of MariaDB 10.11.18: 37814 bytes of .text either way,
# 31278 with its profile). It counts as a discarded profile like the others.
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


def functions_run(gcda_paths, gcov_dump="gcov-dump"):
    """(functions, functions the training ran) in these .gcda files, read with gcov-dump.

    A function ran when its first-execution timestamp (time_profiler) is set;
    object counts alone cannot tell a thorough training from one that merely
    started the server.
    """
    if not gcda_paths:
        return 0, 0
    result = subprocess.run([gcov_dump, *map(str, gcda_paths)], capture_output=True, text=True)
    if result.returncode != 0:
        raise PipelineError(f"{gcov_dump} cannot read the profile: {result.stderr.strip()[-300:]}")
    timers = [line for line in result.stdout.splitlines() if ":COUNTERS time_profiler " in line]
    return len(timers), sum(1 for line in timers if "(all zero)" not in line)


def check(profile_dir, build_dir, hot_dirs, version, gcov_dump="gcov-dump"):
    """Count the profile's data and require data in every hot directory.

    Returns the figures as a dict; raises PipelineError when there is no data
    where there must be data.
    """
    files = gcda_files(profile_dir)
    names = {object_of(p.name) for p in files if p.stat().st_size > 0}
    own = {n for n in names if not n.startswith("/")}
    objects = compiled_objects(build_dir)
    hot = {}
    for directory in hot_dirs:
        compiled = [o for o in objects if in_dir(o, directory)]
        profiled = [o for o in compiled if o in own]
        functions, ran = functions_run([Path(profile_dir, o.replace("/", "#") + ".gcda") for o in profiled],
                                       gcov_dump)
        hot[directory] = {"objects": len(compiled), "with_profile": len(profiled),
                          "share": round(len(profiled) / len(compiled), 3) if compiled else 0.0,
                          "functions": functions, "functions_run": ran}
    figures = {
        "gcda_files": len(files),
        "empty_gcda_files": len(files) - len(names),
        "build_objects_with_profile": len(own),
        "build_objects": len(objects),
        "hot_dirs": hot,
        "profile_id": profile_id(profile_dir, version) if files else None,
    }
    empty = [d for d, h in hot.items() if h["with_profile"] == 0]
    if not files:
        raise PipelineError(f"the training wrote no profile data into {profile_dir}: "
                            "did the server shut down cleanly?")
    if empty:
        detail = ", ".join(f"{d} ({hot[d]['objects']} objects)" for d in empty)
        raise PipelineError(f"no profile data for hot objects in {detail}: the training did not reach them")
    return figures


def compiler_warnings(log_text, hot_dirs, source_root, objects):
    """Count the optimising compiler's profile warnings in a build log."""
    missing = set()
    for match in MISSING_PROFILE.finditer(log_text):
        name = Path(match.group(1)).name
        missing.add(object_of(name))
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
            discarded.add(function)
            if SOURCE_MOVED in line:
                moved.add(function)
    missing_hot = sorted(o for o in missing if any(in_dir(o, d) for d in hot_dirs))
    return {"missing_profile": len(missing), "missing_profile_hot": len(missing_hot),
            "functions_without_profile": len(functions_without),
            "coverage_mismatch": len(discarded), "source_moved": len(moved),
            "missing_hot_objects": missing_hot[:50]}


def objects_by_source(objects):
    """{'sql/sql_parse.cc': ['sql/CMakeFiles/sql.dir/sql_parse.cc'], ...}: CMake's object naming reversed."""
    sources = {}
    for obj in objects:
        directory, _, rest = obj.rpartition("CMakeFiles/")
        if "/" in rest:
            sources.setdefault(directory + rest.split("/", 1)[1], []).append(obj)
    return sources


def judge_use(warnings, build_dir, hot_dirs, max_mismatch, min_hot_coverage):
    """Whether the optimised build really used its profile: the verdict, with the hot coverage and
    `passed`; `problems` says why not."""
    hot_objects = [o for o in compiled_objects(build_dir) if any(in_dir(o, d) for d in hot_dirs)]
    if not hot_objects:
        raise PipelineError(f"the optimised build has no objects in the hot directories {', '.join(hot_dirs)}")
    coverage = 1 - warnings["missing_profile_hot"] / len(hot_objects)
    problems = []
    if warnings["coverage_mismatch"] > max_mismatch:
        problems.append(f"{warnings['coverage_mismatch']} coverage-mismatch warnings (limit {max_mismatch}): "
                        "the profile does not fit this source; see the build log")
    if coverage < min_hot_coverage:
        problems.append(f"only {coverage:.0%} of the hot objects got a profile (minimum "
                        f"{min_hot_coverage:.0%}): the profile does not fit this build")
    return dict(warnings, hot_objects=len(hot_objects), hot_coverage=round(coverage, 3),
                passed=not problems, problems=problems)
