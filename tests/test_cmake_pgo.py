"""cmake/pgo.cmake (issue 46): PGO from a project's own CMake build, on the fixture, which carries
the module in its own tree (tests/fixture/cmake/pgo.cmake) as MariaDB would. Real cmake, real GCC.

`cmake -DWITH_PGO=ON` + `cmake --build`: an instrumented sub-build, the fixture's training, the
check, then the tree compiled with the profile; `-DPGO_PROFILE=<entry>`: a profile the pipeline
archived, checked and used; each refusal one line and a failed configure or build.
"""

import json
import os
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest
from conftest import FIXTURE, REPO, refused, run_pgo

from pgo.base import platforms
from pgo.base.checksums import SUMS, sha256_file
from pgo.core import proof

MODULE = REPO / "cmake" / "pgo.cmake"
HOT_OBJECT = Path("CMakeFiles/hot.dir/src/hot.c.o")
MAIN_OBJECT = Path("CMakeFiles/fixture.dir/src/main.c.o")
GCC_VERSION = subprocess.run(["gcc", "-dumpfullversion"], capture_output=True, text=True).stdout.strip()


def cmake_environment():
    """The environment without what would give the builds other flags or tools than the test names:
    the profile's flags must match word for word."""
    dropped = ("CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "CC", "CXX", "GCOV_PREFIX", "GCOV_PREFIX_STRIP")
    return {name: value for name, value in os.environ.items()
            if name not in dropped and not name.startswith("CMAKE_")}


def cmake(*args, env=None):
    return subprocess.run(["cmake", *map(str, args)], capture_output=True, text=True,
                          env={**cmake_environment(), **(env or {})})


def configure(build, *options, source=FIXTURE, generator="Ninja", env=None):
    return cmake("-S", source, "-B", build, "-G", generator, "-DCMAKE_BUILD_TYPE=Release", *options, env=env)


def build_tree(build):
    return cmake("--build", build)


def succeeded(result):
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def cmake_refused(result, *phrases):
    """A refusal: a failed configure or build, whose one error line (indented, "PGO: ...") names
    every phrase; the last phrase ends it, so CMake did not wrap it."""
    assert result.returncode != 0, result.stdout
    lines = [line for line in (result.stdout + result.stderr).splitlines()
             if line.startswith(" ") and line.strip().startswith("PGO: ")]
    assert len(lines) == 1, f"{result.stdout}\n{result.stderr}"
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    assert lines[0].endswith(phrases[-1]), lines[0]
    return lines[0]


def report_line(output):
    lines = [line for line in output.splitlines() if line.startswith("-- PGO: ") and "hot objects" in line]
    assert lines, output
    return lines[-1]


def states(obj):
    """What each compile that made an object had in effect, from its own record of its options."""
    return [proof.in_effect(proof.options_of(record)) for record in proof.records(obj)]


def read_with_profile(build):
    """The tree's hot object was compiled with the profile in this build's pgo/profile, and its
    code shows the profile was read (hot code laid out in .text.hot)."""
    for state in states(build / HOT_OBJECT):
        assert state[proof.USE] == f"-fprofile-use={build / 'pgo' / 'profile'}", state
        assert state["profile-correction"] == "-fprofile-correction"
        assert state["profile-partial-training"] == "-fprofile-partial-training"
        assert state["profile-prefix-path"] == f"-fprofile-prefix-path={build}"
    assert states(build / HOT_OBJECT)
    assert proof.profile_trace(build / HOT_OBJECT)


def test_the_fixture_carries_the_module_as_it_is():
    """The fixture includes the module from its own tree, as MariaDB would include cmake/pgo.cmake;
    the copy is the module."""
    assert (FIXTURE / "cmake" / "pgo.cmake").read_bytes() == MODULE.read_bytes()


@pytest.mark.parametrize("generator", ["Ninja", "Unix Makefiles"])
def test_with_pgo_one_build_trains_and_compiles_with_the_profile(tmp_path, generator):
    source, build = tmp_path / "src", tmp_path / "build"
    shutil.copytree(FIXTURE, source)
    succeeded(configure(build, "-DWITH_PGO=ON", source=source, generator=generator))
    output = succeeded(build_tree(build))
    assert "PGO: trained profile" in output
    assert "CMakeFiles/hot.dir 1 of 1 objects ran, CMakeFiles/fixture.dir 1 of 1 objects ran" in output
    assert ("2 of 2 hot objects (100%) compiled with their .gcda, 1 of them with code laid out hot"
            in report_line(output))
    assert json.loads((build / "pgo" / "report.json").read_text())["with_profile"] == 2
    # The .gcda names are relative to the build trees: the instrumented tree's profile is this tree's.
    assert sorted(p.name for p in (build / "pgo" / "profile").iterdir()) == [
        "CMakeFiles#fixture.dir#src#main.c.gcda", "CMakeFiles#hot.dir#src#hot.c.gcda"]
    read_with_profile(build)
    assert version_comment(build) == "fixture 1.0.0 (fixture build, PGO build, trained in this build)\n"
    instrumented = build / "pgo" / "instrumented"
    assert states(instrumented / HOT_OBJECT)[0]["profile-generate"] == \
        f"-fprofile-generate={build / 'pgo' / 'training'}"
    # Every compile of the tree waited for the profile.
    stamp = (build / "pgo" / "profile.id").stat().st_mtime_ns
    assert min((build / o).stat().st_mtime_ns for o in (HOT_OBJECT, MAIN_OBJECT)) >= stamp

    # Nothing changed, or only the build system (both trees configure again): no training,
    # nothing compiled.
    compiled = (build / MAIN_OBJECT).stat().st_mtime_ns
    for change in (None, "configure again"):
        if change:
            os.utime(source / "CMakeLists.txt")
        output = succeeded(build_tree(build))
        assert "PGO: training:" not in output
        assert (build / MAIN_OBJECT).stat().st_mtime_ns == compiled

    # The hot path changed: the instrumented build, the training and a new profile, and every
    # object compiles again with it, main.c's too, whose source did not change.
    hot = source / "src" / "hot.c"
    hot.write_text(hot.read_text() + "\nint fixture_added(int x) { return x * 3; }\n")
    output = succeeded(build_tree(build))
    assert "PGO: training:" in output and "unchanged" not in output
    assert (build / MAIN_OBJECT).stat().st_mtime_ns > compiled
    read_with_profile(build)


def test_without_pgo_the_build_is_what_it_was(tmp_path):
    build = tmp_path / "build"
    succeeded(configure(build))
    succeeded(build_tree(build))
    assert not (build / "pgo").exists()
    assert not proof.profile_trace(build / HOT_OBJECT)
    assert version_comment(build) == "fixture 1.0.0 (fixture build)\n"
    for state in states(build / HOT_OBJECT):
        assert not any(proof.positive(state.get(family)) for family in proof.PROFILE_FAMILIES), state


def archived(folder, config):
    """The fixture's profile as the pipeline archives it, built by a configuration: its entry folder."""
    archive = {"PGO_ARCHIVE": str(folder / "archive")}
    run_pgo("build", "--version", "1.0.0", "--config", config, "--source", FIXTURE, "--workdir",
            folder / "W", "--tests", "off", env=archive)
    listed = json.loads(run_pgo("archive", "list", "--json", env=archive).stdout)
    assert len(listed) == 1, listed
    return folder / "archive" / listed[0]["name"]


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    return archived(tmp_path_factory.mktemp("published"), "fixture")


def version_comment(build):
    return subprocess.run([build / "fixture", "--version"], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("given", ["entry", "profile.tar.xz"])
def test_a_published_profile_builds_without_training_and_says_how_much_applied(tmp_path, published, given):
    build = tmp_path / "build"
    profile = published if given == "entry" else published / "profile.tar.xz"
    output = succeeded(configure(build, f"-DPGO_PROFILE={profile}"))
    profile_id = published.name
    assert f"PGO: profile {profile_id} ({published}): checksums, GCC {GCC_VERSION}, fixture 1.0.0 and flags fit" \
        in output
    output = succeeded(build_tree(build))
    assert "PGO: training" not in output and not (build / "pgo" / "instrumented").exists()
    assert report_line(output).endswith(
        f"PGO: profile {profile_id}: 2 of 2 hot objects (100%) compiled with their .gcda, 1 of them with code "
        "laid out hot (.text.hot); 0 of the profile's 2 .gcda files are not of a hot object")
    read_with_profile(build)
    assert version_comment(build) == f"fixture 1.0.0 (fixture build, PGO build, profile {profile_id})\n"
    assert json.loads((build / "pgo" / "profile.manifest.json").read_text())["profile_id"] == profile_id
    # Configured again with the same profile: nothing to compile.
    compiled = (build / HOT_OBJECT).stat().st_mtime_ns
    succeeded(configure(build, f"-DPGO_PROFILE={profile}"))
    succeeded(build_tree(build))
    assert (build / HOT_OBJECT).stat().st_mtime_ns == compiled


def forged(entry, folder, change):
    """A copy of an archive entry whose manifest `change` edited, with checksums that prove it: a
    profile another build could have published."""
    copy = folder / "entry"
    shutil.copytree(entry, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    change(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest, indent=2))
    names = [line.split("  ", 1)[1] for line in (copy / SUMS).read_text().splitlines()]
    (copy / SUMS).write_text("".join(f"{sha256_file(copy / name)}  {name}\n" for name in names))
    return copy


def made_by(version):
    return lambda manifest: manifest["compiler"].update(version=version)


def of_product(product):
    return lambda manifest: manifest.update(product=product)


@pytest.mark.parametrize("change, options, phrases", [
    (made_by("11.3.0"), [],
     ["was made by GCC 11.3.0, this build's C compiler is GCC " + GCC_VERSION,
      "GCC reads only the .gcda files of its own version"]),
    (of_product("mariadb"), [], ["was trained on mariadb 1.0.0", "this is fixture 1.0.0: another product"]),
    (None, ["-DCMAKE_C_FLAGS=-fno-tree-vectorize -g -Wall"],
     ["was made with the flags '', this build's CMAKE_C_FLAGS are '-fno-tree-vectorize' (warnings, -g and an -O "
      "the build type overrides aside)", "other code, whose profile does not fit"]),
    (None, ["-DCMAKE_BUILD_TYPE=Debug"],
     ["was made with -DCMAKE_BUILD_TYPE=Release, this build has CMAKE_BUILD_TYPE=Debug",
      "other code, whose profile does not fit"]),
    (None, ["-DCMAKE_C_COMPILER_LAUNCHER=env"],
     ["was made in the build environment none, this build's is CMAKE_C_COMPILER_LAUNCHER=env (sha256 ",
      "a launcher or GCC's environment may change the code"]),
    (None, ["-DWITH_PGO=ON"], ["WITH_PGO trains a profile and PGO_PROFILE names one: give one of them"]),
], ids=["gcc-version", "product", "flags", "build-type", "launcher", "with-pgo-too"])
def test_a_profile_that_does_not_fit_is_refused_in_one_line(tmp_path, published, change, options, phrases):
    entry = forged(published, tmp_path, change) if change else published
    cmake_refused(configure(tmp_path / "build", f"-DPGO_PROFILE={entry}", *options), *phrases)


def test_flags_that_change_no_code_are_not_compared(tmp_path, published):
    """Debian's CFLAGS (debian/rules: dpkg-buildflags, CPPFLAGS added) around a profile made without
    them: debug information, warnings, and an -O that the build type's own -O comes after and
    decides change no code; the pipeline records the release configuration's flags the same way."""
    flags = "-g -O2 -Wformat -Werror=format-security -Wdate-time"
    output = succeeded(configure(tmp_path / "build", f"-DPGO_PROFILE={published}", f"-DCMAKE_C_FLAGS={flags}"))
    assert "and flags fit" in output


def test_a_damaged_profile_is_refused_in_one_line(tmp_path, published):
    entry = tmp_path / "entry"
    shutil.copytree(published, entry)
    with open(entry / "profile.tar.xz", "ab") as archive:
        archive.write(b"\0")
    cmake_refused(configure(tmp_path / "build", f"-DPGO_PROFILE={entry / 'profile.tar.xz'}"),
            f"the profile {entry}: profile.tar.xz does not match its checksum in sha256sums.txt: damaged, not used")


def test_a_profile_of_another_version_is_refused_unless_stale_is_accepted(tmp_path, published):
    source = tmp_path / "src"
    shutil.copytree(FIXTURE, source)
    (source / "VERSION").write_text("1.0.1\n")
    build = tmp_path / "build"
    cmake_refused(configure(build, f"-DPGO_PROFILE={published}", source=source),
            "was trained on fixture 1.0.0 (source directory ", "this is fixture 1.0.1: another source",
            "(-DPGO_PROFILE_ACCEPT_STALE=ON takes a profile of another version of line 1.0, for the functions "
            "that did not change)")
    output = succeeded(configure(build, f"-DPGO_PROFILE={published}", "-DPGO_PROFILE_ACCEPT_STALE=ON", source=source))
    assert f"PGO: stale profile {published.name} ({published}): trained on fixture 1.0.0, this is 1.0.1" in output
    assert f"PGO: stale profile {published.name}: 2 of 2 hot objects (100%)" in report_line(
        succeeded(build_tree(build)))
    read_with_profile(build)
    assert version_comment(build) == f"fixture 1.0.1 (fixture build, PGO build, stale profile {published.name})\n"


def without_hot_c(entry, folder):
    """A copy of an archive entry whose profile lacks hot.c's .gcda, with a manifest and checksums that
    say so: a profile that fits half of the fixture's hot objects."""
    def drop(manifest):
        manifest["files"] = [f for f in manifest["files"] if "hot.c" not in f["name"]]
    copy = forged(entry, folder, drop)
    unpacked = folder / "unpacked"
    with tarfile.open(copy / "profile.tar.xz") as tar:
        tar.extractall(unpacked, filter="data")
    for gcda in unpacked.rglob("*hot.c.gcda"):
        gcda.unlink()
    with tarfile.open(copy / "profile.tar.xz", "w:xz") as tar:
        tar.add(unpacked / "profile", "profile")
    names = [line.split("  ", 1)[1] for line in (copy / SUMS).read_text().splitlines()]
    (copy / SUMS).write_text("".join(f"{sha256_file(copy / name)}  {name}\n" for name in names))
    return copy


def test_a_build_whose_hot_objects_got_too_little_of_the_profile_fails(tmp_path, published):
    """PGO_MIN_HOT_COVERAGE (the pipeline's 30% by default): below it the build fails at its end, so
    no finished build carries the label without its profile."""
    entry = without_hot_c(published, tmp_path)
    build = tmp_path / "build"
    succeeded(configure(build, f"-DPGO_PROFILE={entry}", "-DPGO_MIN_HOT_COVERAGE=60"))
    cmake_refused(build_tree(build), f"PGO: profile {published.name}: 1 of 2 hot objects (50%) compiled with their "
                  ".gcda", "fewer than PGO_MIN_HOT_COVERAGE=60% of the hot objects, so this is no PGO build (a "
                  "profile of a reduced build, or of other code?)")
    succeeded(configure(build, f"-DPGO_PROFILE={entry}", "-DPGO_MIN_HOT_COVERAGE=50"))
    assert "1 of 2 hot objects (50%)" in report_line(succeeded(build_tree(build)))
    cmake_refused(configure(tmp_path / "other", f"-DPGO_PROFILE={entry}", "-DPGO_MIN_HOT_COVERAGE=half"),
                  "PGO_MIN_HOT_COVERAGE=half is no percentage (a whole number from 0 to 100)")


def test_a_compiler_other_than_gcc_is_refused_in_one_line(tmp_path):
    """With clang when it is installed; else with GCC behind a wrapper that defines clang's macros,
    which CMake's own compiler identification then names Clang: the module's check reads what
    CMake identified, the same either way (and the wrapper compiles the fixture without PGO)."""
    compiler = shutil.which("clang")
    if compiler is None:
        compiler = tmp_path / "clang"
        compiler.write_text('#!/bin/sh\nexec gcc -D__clang__=1 -D__clang_major__=14 -D__clang_minor__=0 '
                            '-D__clang_patchlevel__=6 "$@"\n')
        compiler.chmod(0o755)
        plain = tmp_path / "plain"
        succeeded(configure(plain, f"-DCMAKE_C_COMPILER={compiler}"))
        succeeded(build_tree(plain))
    result = configure(tmp_path / "build", f"-DCMAKE_C_COMPILER={compiler}", "-DWITH_PGO=ON")
    cmake_refused(result, f"but the C compiler {compiler} is Clang ",
            "configure with GCC (-DCMAKE_C_COMPILER=gcc), or without WITH_PGO and PGO_PROFILE")


# A project of its own for what the fixture's training does not do: install the instrumented build
# and train on the installed program (as MariaDB's training runs the installed server), and fail.
MINI = {
    "CMakeLists.txt": """cmake_minimum_required(VERSION 3.19)
project(mini C)
include(${CMAKE_CURRENT_SOURCE_DIR}/cmake/pgo.cmake)
set(MINI_TRAINING run CACHE STRING "What the training asks of the program")
set(MINI_ETC "" CACHE PATH "An absolute destination of the install")
add_library(core STATIC core.c)
# A variable set before an entry of the same name is cached, as MariaDB's mysql_release.cmake sets
# PLUGIN_FEDERATEDX=STATIC before its plugin.cmake caches the plugin's kind: a new entry replaces the
# variable, an existing one does not (policy CMP0126 unset).
set(MINI_KIND static)
set(MINI_KIND dynamic CACHE STRING "How core is built")
target_compile_definitions(core PRIVATE MINI_KIND_${MINI_KIND})
add_executable(mini main.c)
target_link_libraries(mini core)
install(TARGETS mini DESTINATION bin)
install(FILES core.c DESTINATION ${MINI_ETC})
# A part the training never runs, which the instrumented build leaves out (as MariaDB's leaves out
# the plugins its training does not load).
option(MINI_TOOLS "Build mini-tools" ON)
if(MINI_TOOLS)
  add_executable(mini-tools main.c)
  target_link_libraries(mini-tools core)
  install(TARGETS mini-tools DESTINATION bin)
endif()
# A file every build writes again, saying when, as MariaDB's Docs/INFO_BIN, and installs.
add_custom_target(info ALL COMMAND date +%s.%N > info.txt VERBATIM)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/info.txt DESTINATION share)
pgo_training(PRODUCT mini VERSION 1.0.0 HOT_DIRS CMakeFiles/core.dir INSTALL
  CMAKE_ARGS -DMINI_TOOLS=OFF
  COMMAND ${PGO_INSTRUMENTED_PREFIX}/bin/mini ${MINI_TRAINING}
  # A datadir the training wants new each time, as profile_load's.
  COMMAND mkdir ${PGO_TRAINING_WORK_DIR}/data)
""",
    "core.c": "int core(int n) { int s = 0; for (int i = 0; i < n; i++) s += i % 7 ? i : -i; return s; }\n",
    "main.c": """#include <stdio.h>
#include <string.h>
int core(int n);
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "fail") == 0) return 3;
  if (argc > 1 && strcmp(argv[1], "run") == 0) printf("%d\\n", core(1000000));
  return 0;
}
""",
}


def test_an_installed_training_and_the_training_s_failures(tmp_path):
    source, build = tmp_path / "mini", tmp_path / "build"
    (source / "cmake").mkdir(parents=True)
    shutil.copy(MODULE, source / "cmake" / "pgo.cmake")
    for name, text in MINI.items():
        (source / name).write_text(text)
    etc = Path("/etc") / f"pgo-cmake-test-{uuid.uuid4().hex[:12]}"
    try:
        succeeded(configure(build, "-DWITH_PGO=ON", "-DMINI_TRAINING=idle", f"-DMINI_ETC={etc}", source=source))
        cmake_refused(build_tree(build), "the training left no profile for the hot folder CMakeFiles/core.dir "
                      "(0 of its 1 objects ran): it did not run the instrumented build's code there")
        succeeded(configure(build, "-DMINI_TRAINING=fail", source=source))
        cmake_refused(build_tree(build), f"the training command '{build}/pgo/stage/bin/mini fail' failed (3): "
                      "no profile was made")
        succeeded(configure(build, "-DMINI_TRAINING=run", source=source))
        output = succeeded(build_tree(build))
        assert "CMakeFiles/core.dir 1 of 1 objects ran" in output
        assert "1 of 1 hot objects (100%) compiled with their .gcda" in report_line(output)
        # Installed for the training with DESTDIR: an absolute destination stays in the stage.
        assert (build / "pgo" / "stage" / etc.relative_to("/") / "core.c").is_file()
        assert not etc.exists()
        # CMAKE_ARGS reach the instrumented build only: it left mini-tools out, this tree built it.
        assert (build / "pgo" / "stage" / "bin" / "mini").is_file()
        assert not list((build / "pgo" / "stage").rglob("mini-tools"))
        assert not list((build / "pgo" / "instrumented").glob("mini-tools"))
        assert (build / "mini-tools").is_file()
        # Built again, unchanged: no training again. Changed: a new training, from an empty training folder.
        assert "PGO: training" not in succeeded(build_tree(build))
        (source / "core.c").write_text(MINI["core.c"].replace("i % 7", "i % 5"))
        output = succeeded(build_tree(build))
        assert "PGO: training" in output and "1 of 1 hot objects (100%) compiled with their .gcda" in output
    finally:
        shutil.rmtree(etc, ignore_errors=True)


def test_the_instrumented_build_is_configured_as_this_one_was(tmp_path):
    """It is given what this build was given, and makes the rest itself, as this build did: given this build's
    own entries too, a project that sets a variable before caching an entry of its name (MINI_KIND, as MariaDB's
    PLUGIN_FEDERATEDX) would configure it otherwise, and compile other code than the profile is used on."""
    source, build = tmp_path / "mini", tmp_path / "build"
    (source / "cmake").mkdir(parents=True)
    shutil.copy(MODULE, source / "cmake" / "pgo.cmake")
    for name, text in MINI.items():
        (source / name).write_text(text)
    succeeded(configure(build, "-DWITH_PGO=ON", f"-DMINI_ETC={tmp_path / 'etc'}", source=source))
    succeeded(build_tree(build))
    for tree in (build, build / "pgo" / "instrumented"):
        commands = json.loads((tree / "compile_commands.json").read_text())
        (core,) = [c["command"] for c in commands if c["file"].endswith("core.c")]
        assert "-DMINI_KIND_dynamic" in core, (tree, core)
    given = (build / "pgo" / "instrumented-cache.cmake").read_text()
    assert "SET(MINI_ETC " in given and "MINI_KIND" not in given and "MINI_TRAINING" not in given
    # An entry given on a later configure is given to the instrumented build too; what the project made, still not.
    succeeded(configure(build, "-DMINI_GIVEN_LATER=yes", source=source))
    given = (build / "pgo" / "instrumented-cache.cmake").read_text()
    assert "SET(MINI_GIVEN_LATER " in given and "MINI_KIND" not in given and "MINI_TRAINING" not in given


PATCHES = REPO / "patches"
# One patch per line the pipeline builds (each platform's `lines`): a new line needs its patch.
SERIES = [f"mariadb-{line}" for p in platforms.load().values() for line in p.lines]


def created_files(patch):
    """{path: text} of the files a git patch creates (those whose old side is /dev/null)."""
    files, path, previous = {}, None, ""
    for line in patch.splitlines(keepends=True):
        if line.startswith("diff --git "):
            path = None
        elif line.startswith("+++ b/") and previous.startswith("--- /dev/null"):
            path = line[len("+++ b/"):].rstrip("\n")
            files[path] = ""
        elif path and line.startswith("+"):
            files[path] += line[1:]
        previous = line
    return files


@pytest.mark.parametrize("series", SERIES)
def test_the_mariadb_patch_carries_the_module_the_workload_and_the_training(series):
    """patches/mariadb-<line> is made from this repository's files (patches/make-patch.sh): after a
    change of the module, of profile_load or of the training, run it again on each line's source."""
    patch, = (PATCHES / series).glob("0001-*.patch")
    text = patch.read_text()
    workload = REPO / "profile_load"
    expected = {"cmake/pgo.cmake": MODULE.read_text(),
                **{f"support-files/pgo/profile_load/{path.relative_to(workload)}": path.read_text()
                   for path in [workload / "CMakeLists.txt", workload / "README.md",
                                *sorted((workload / "src").iterdir())]}}
    assert created_files(text) == expected, \
        f"the {series} patch is out of date: run patches/make-patch.sh on a {series} source tree"
    top = text[text.index("diff --git a/CMakeLists.txt"):text.index("diff --git a/cmake/pgo.cmake")]
    added = "".join(line[1:] for line in top.splitlines(keepends=True)
                    if line.startswith("+") and not line.startswith("+++"))
    assert added == (PATCHES / "pgo-training.cmake").read_text()


# --- Debian's packaging with a published profile: DEB_BUILD_OPTIONS=pgo=<profile> ------------------

ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
PGO_DEB_VERSION = "1.0.0-1+pgo1"
DEBIAN_LINES = sorted({line for p in platforms.load().values() for line in p.lines})


def test_the_fixtures_rules_take_the_profile_as_the_debian_patch_makes_mariadb_s_do():
    """The lines tested here on the fixture's debian/rules are the ones patches/debian-<line>/ adds to
    Debian's mariadb rules (patches/make-debian-patch.sh), word for word."""
    lines = (PATCHES / "debian-rules-pgo.mk").read_text()
    assert lines in (FIXTURE / "debian" / "rules").read_text()
    for series in DEBIAN_LINES:
        patch = next((PATCHES / f"debian-{series}").glob("0001-*.patch")).read_text()
        added = "".join(line[1:] + "\n" for line in patch.splitlines() if line.startswith("+") and
                        not line.startswith("+++"))
        assert lines in added, f"patches/debian-{series} is out of date: run patches/make-debian-patch.sh"
        upstream = next((PATCHES / f"mariadb-{series}").glob("0001-*.patch")).read_text()
        assert created_files(patch)["debian/patches/pgo-cmake.patch"] == upstream, \
            f"patches/debian-{series} carries an old MariaDB patch: run patches/make-debian-patch.sh"


def debian_build(folder, options):
    """dpkg-buildpackage of the fixture as a packager runs it, its changelog given the +pgo mark (what
    `dch --local +pgo` writes); its output kept as the build log."""
    source = folder / "fixture-1.0.0"
    shutil.copytree(FIXTURE, source)
    changelog = source / "debian" / "changelog"
    changelog.write_text(f"fixture ({PGO_DEB_VERSION}) bookworm; urgency=medium\n\n  * Built with a published PGO "
                         "profile.\n\n -- PGO pipeline <pgo-release@example.org>  Sat, 28 Nov 2026 12:00:00 +0000\n\n"
                         + changelog.read_text())
    result = subprocess.run(["dpkg-buildpackage", "-b", "-uc", "-us"], cwd=source, capture_output=True, text=True,
                            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEB_BUILD_OPTIONS": options})
    (folder / "build.log").write_text(result.stdout + result.stderr)
    return result, source


@pytest.fixture(scope="module")
def debian_pgo(tmp_path_factory):
    """The fixture's profile made as its debian/rules builds (fixture-debian), and the package build with it."""
    folder = tmp_path_factory.mktemp("debian")
    entry = archived(folder / "pipeline", "fixture-debian")
    result, source = debian_build(folder, f"pgo={entry} noautodbgsym")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return entry, folder, source, result.stdout + result.stderr


def adopt(folder, source, out, changes=None):
    return run_pgo("adopt-debs", "--changes", changes or folder / f"fixture_{PGO_DEB_VERSION}_{ARCH}.changes",
                   "--build-dir", source / "builddir", "--build-log", folder / "build.log", "--out", out, check=False)


def test_debian_s_packaging_builds_with_a_published_profile_and_pgo_prove_takes_the_debs(debian_pgo, tmp_path):
    entry, folder, source, output = debian_pgo
    assert f"PGO: profile {entry.name} ({entry}): checksums, GCC {GCC_VERSION}, fixture 1.0.0 and flags fit" in output
    assert f"PGO: profile {entry.name}: 2 of 2 hot objects (100%) compiled with their .gcda" in output
    assert version_comment(source / "builddir") == f"fixture 1.0.0 (Debian build, PGO build, profile {entry.name})\n"
    out = tmp_path / "adopted"
    result = adopt(folder, source, out)
    assert result.returncode == 0, result.stdout + result.stderr
    # The package build's source is not where the pipeline trained: main.c's static function finds no
    # profile (GCC names its profile by the source's path too), which the module's count of .gcda files
    # cannot see and the pipeline's check of the compiler's warnings does; the public ones keep theirs.
    assert f"PGO: the profile {entry.name} was trained on the source in " in output
    assert "GCC finds no profile for the functions that are not public" in output
    assert ("profile check: 1 of 2 hot objects (50%) compiled with their profile, proven from their own records "
            "(the module said 2 of 2); 1 functions found no profile, 3 were warned of as moved") in result.stdout
    info = json.loads((out / "buildinfo.json").read_text())
    assert (info["profile_id"], info["package_version"], info["profile_use"]["passed"]) == \
        (entry.name, PGO_DEB_VERSION, True)
    assert sorted(info["packages"]) == sorted(p.name for p in out.glob("*.deb")) and len(info["packages"]) == 3
    if shutil.which("mmdebstrap") is None or os.geteuid() != 0:
        pytest.skip("the deb proof needs mmdebstrap and root for its chroot")
    proved = run_pgo("prove", out)
    assert f"label: profile {entry.name} used by 50% of the hot objects, GCC {GCC_VERSION}" in proved.stdout
    assert (f"proof passed: version comment 'Debian build, PGO build, profile {entry.name}'"
            in proved.stdout), proved.stdout


def test_debian_s_packaging_refuses_a_profile_made_with_other_flags(tmp_path, published):
    """The fixture configuration's profile, made without Debian's hardening flags: the package build
    stops at its configure, in one line, and makes no package."""
    result, _ = debian_build(tmp_path, f"pgo={published} noautodbgsym")
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip().startswith("PGO: ")]
    assert len(lines) == 1 and f"PGO: the profile {published} was made with the flags ''" in lines[0], lines
    assert "other code, whose profile does not fit" in lines[0]
    assert not list(tmp_path.glob("*.deb"))


def test_adopting_refuses_what_it_cannot_prove(debian_pgo, tmp_path):
    entry, folder, source, _ = debian_pgo
    # A .deb that is not the one the package build made.
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in folder.glob(f"*_{ARCH}.changes"):
        shutil.copy(path, copy / path.name)
    for path in folder.glob("*.deb"):
        shutil.copy(path, copy / path.name)
    server = copy / f"fixture_{PGO_DEB_VERSION}_{ARCH}.deb"
    with open(server, "ab") as f:
        f.write(b"\0")
    changes = copy / f"fixture_{PGO_DEB_VERSION}_{ARCH}.changes"
    refused(adopt(folder, source, tmp_path / "out", changes), f"{server} does not match its SHA-256 in "
            f"{changes.name}: not the package that build made")
    # Packages without the +pgo mark (a .changes of another version).
    (copy / "unmarked.changes").write_text(changes.read_text().replace(f"Version: {PGO_DEB_VERSION}\n",
                                                                        "Version: 1.0.0-1\n"))
    for path in folder.glob("*.deb"):
        shutil.copy(path, copy / path.name)
    refused(adopt(folder, source, tmp_path / "out", copy / "unmarked.changes"),
            "the packages' version 1.0.0-1 has no +pgo mark, which PGO packages carry (and pgo prove asks for): "
            "give the build one, e.g. `dch --local +pgo`, and build again")
    # A build tree the module did not build with a profile (a plain package build).
    (tmp_path / "plain").mkdir()
    plain, plain_source = debian_build(tmp_path / "plain", "noautodbgsym")
    assert plain.returncode == 0, plain.stderr[-2000:]
    refused(adopt(folder, plain_source, tmp_path / "out"), f"{plain_source / 'builddir'} has no pgo/report.json: "
            "not a build tree of cmake/pgo.cmake that finished")
    # The packages of that plain build, with the PGO build's tree: its server is another binary.
    plain_changes = tmp_path / "plain" / f"fixture_{PGO_DEB_VERSION}_{ARCH}.changes"
    refused(adopt(folder, source, tmp_path / "out", plain_changes), "the packaged fixture is not the build tree's",
            f"{source / 'builddir' / 'fixture'} (build-id ")
    assert not (tmp_path / "out").exists()
