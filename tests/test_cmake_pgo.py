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
import uuid
from pathlib import Path

import pytest
from conftest import FIXTURE, REPO, run_pgo

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
    for state in states(build / HOT_OBJECT):
        assert not any(proof.positive(state.get(family)) for family in proof.PROFILE_FAMILIES), state


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """The fixture's profile as the pipeline archives it: its entry folder."""
    folder = tmp_path_factory.mktemp("published")
    archive = {"PGO_ARCHIVE": str(folder / "archive")}
    run_pgo("build", "--version", "1.0.0", "--config", "fixture", "--source", FIXTURE, "--workdir",
            folder / "W", "--tests", "off", env=archive)
    listed = json.loads(run_pgo("archive", "list", "--json", env=archive).stdout)
    assert len(listed) == 1, listed
    return folder / "archive" / listed[0]["name"]


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
add_executable(mini main.c)
target_link_libraries(mini core)
install(TARGETS mini DESTINATION bin)
install(FILES core.c DESTINATION ${MINI_ETC})
pgo_training(PRODUCT mini VERSION 1.0.0 HOT_DIRS CMakeFiles/core.dir INSTALL
  COMMAND ${PGO_INSTRUMENTED_PREFIX}/bin/mini ${MINI_TRAINING})
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
    finally:
        shutil.rmtree(etc, ignore_errors=True)


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
