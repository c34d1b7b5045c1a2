"""The whole pipeline on the fixture project: instrumented build, training, profile check,
optimised build that provably used the profile, staging; and its failure modes."""

import json
import os
import shutil
import subprocess

import pytest
from conftest import FIXTURE

BUILD = ["build", "--version", "1.0.0", "--config", "fixture", "--source", FIXTURE]


def fixture_binary(workdir, *args):
    return subprocess.run([workdir / "stage" / "bin" / "fixture", *args], capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from conftest import run_pgo
    workdir = tmp_path_factory.mktemp("pgo") / "w"
    result = run_pgo(*BUILD, "--workdir", workdir)
    return workdir, result.stdout


def test_every_phase_announces_itself_and_is_timed(trained):
    workdir, out = trained
    for step, name in enumerate(["source", "instrumented", "train", "check", "optimized", "archive", "stage",
                                 "test"], 1):
        assert f"== phase {step} of 8: {name}:" in out
        assert (workdir / "logs" / f"{name}.log").is_file()
    assert "timing summary:" in out and "whole PGO build / one build" in out
    assert "[instrumented] compile 4/4" in out


def test_each_phase_records_what_its_commands_cost(trained):
    """CPU seconds and the largest process's peak memory: what LTO costs a build, for one."""
    workdir, out = trained
    done = json.loads((workdir / "state.json").read_text())["done"]
    for phase in ("instrumented", "optimized"):
        assert done[phase]["cpu_seconds"] > 0 and done[phase]["peak_rss_mib"] > 0, done[phase]
    assert done["train"]["peak_rss_mib"] > 0
    assert "peak_rss_mib" not in done["check"]        # it reads the profile itself, runs no command
    optimized = done["optimized"]
    assert (f"  {'optimized':<13} {optimized['seconds']:8.0f} s, CPU {optimized['cpu_seconds']:.0f} s, "
            f"largest process {optimized['peak_rss_mib']} MiB") in out


def test_profile_check_counts_the_hot_objects(trained):
    workdir, _ = trained
    check = json.loads((workdir / "profile-check.json").read_text())
    assert check["gcda_files"] == 2
    assert all(hot["with_profile"] == hot["objects"] == 1 for hot in check["hot_dirs"].values())
    # Function level, read back with gcov-dump: the training never runs cold_digest.
    assert check["hot_dirs"]["CMakeFiles/hot.dir"]["functions"] == 2  # is_word is inlined early
    assert check["hot_dirs"]["CMakeFiles/hot.dir"]["functions_run"] == 1
    # Named relative to the build tree (-fprofile-prefix-path), so they apply in any tree.
    assert sorted(p.name for p in (workdir / "profile").iterdir()) == [
        "CMakeFiles#fixture.dir#src#main.c.gcda", "CMakeFiles#hot.dir#src#hot.c.gcda"]


def test_profile_check_reports_what_decides_the_gain(trained):
    workdir, out = trained
    quality = json.loads((workdir / "profile-check.json").read_text())["quality"]
    # One training run: the setup step's counters went to setup-counters/, not into the profile.
    assert quality["runs"] == 1
    assert quality["setup_counts"] > 0 and quality["setup_share"] < 0.01
    # hot_digest's loop is the largest counter, in hot.c and (inlined) in main.c; the program's
    # sum_max is that counter, and so is every object's.
    largest = quality["largest"]
    assert {o["object"] for o in largest} == {"CMakeFiles/hot.dir/src/hot.c", "CMakeFiles/fixture.dir/src/main.c"}
    assert largest[0]["counter"] == largest[0]["sum_max"] == largest[1]["sum_max"] > 1_000_000
    assert largest[0]["runs"] == 1 and largest[0]["hot_threshold"] == largest[0]["sum_max"] // 10000
    # main and hot_digest ran, each as hot as its object's threshold; cold_digest never ran.
    assert quality["functions_run"] == 2 and quality["hot_functions"] == 2 and quality["hot_share"] == 1.0
    assert quality["threshold_rule"] == "sum_max/10000"
    assert (f"[check] quality: 1 runs; largest counter {largest[0]['counter'] / 1e6:.1f}M in "
            f"{largest[0]['object']} (hot from {largest[0]['hot_threshold']} = sum_max/10000); 2 of 2 trained "
            "functions hot (100%); setup kept out: 0% of counts") in out


def test_training_counts_name_the_functions_the_training_entered(trained):
    workdir, out = trained
    counts = json.loads((workdir / "training-counts.json").read_text())
    # From the .gcno notes of the instrumented build (gcov): the training called hot_digest again
    # and again, main ran once; cold_digest never ran, and is_word is inlined early: neither is named.
    assert list(counts["functions"]) == ["hot_digest", "main"]
    assert counts["functions"]["hot_digest"] > 1000 and counts["functions"]["main"] == 1
    check = json.loads((workdir / "profile-check.json").read_text())
    assert counts["identity"]["profile_id"] == check["profile_id"]
    assert "[check] training counts: 2 functions entered, from 2 objects (training-counts.json)" in out


def test_optimised_build_used_the_profile(trained):
    workdir, _ = trained
    use = json.loads((workdir / "profile-use.json").read_text())
    assert use["hot_coverage"] == 1.0 and use["missing_profile"] == 0 and use["coverage_mismatch"] == 0
    # The compiler agrees: recompiling the hot object exactly as the build did, with a
    # missing profile made an error, succeeds; pointed at an empty profile, it fails.
    build = workdir / "build" / "pgo"
    obj = "CMakeFiles/hot.dir/src/hot.c.o"
    command = subprocess.run(["ninja", "-C", build, "-t", "commands", obj], capture_output=True,
                             text=True, check=True).stdout.strip().splitlines()[-1]
    strict = command + " -Werror=missing-profile -Werror=coverage-mismatch"
    subprocess.run(strict, shell=True, cwd=build, check=True)
    empty = workdir / "no-profile"
    empty.mkdir(exist_ok=True)
    profile_dir = str(workdir / "profile")
    failed = subprocess.run(strict.replace(f"-fprofile-use={profile_dir}", f"-fprofile-use={empty}"),
                            shell=True, cwd=build, capture_output=True, text=True)
    assert failed.returncode != 0 and "profile count data file not found" in failed.stderr


def test_staged_binary_names_its_profile(trained):
    workdir, _ = trained
    info = json.loads((workdir / "build-info.json").read_text())
    assert info["pgo"] == "on" and info["profile_id"].startswith("1.0.0-")
    assert f"PGO build, profile {info['profile_id']}" in fixture_binary(workdir, "--version")
    assert fixture_binary(workdir, "digest", "SELECT 1") == fixture_binary(workdir, "digest", "SELECT 1")


def test_rerun_resumes_and_a_rerun_phase_invalidates_later_ones(trained, pgo):
    workdir, _ = trained
    again = pgo(*BUILD, "--workdir", workdir)
    assert "already done" in again.stdout and "== phase" not in again.stdout
    stale = workdir / "profile" / "stale#object.gcda"
    stale.write_bytes(b"junk")
    pgo("phase", "train", "--workdir", workdir)
    assert not stale.exists(), "training must start from an empty profile"
    state = json.loads((workdir / "state.json").read_text())["done"]
    assert "train" in state and "check" not in state and "optimized" not in state
    resumed = pgo(*BUILD, "--workdir", workdir)
    assert "== phase 4 of 8: check" in resumed.stdout and "phase 2 of 8" not in resumed.stdout
    # The optimised build replaced the shared tree and its notes: the check says so, and leaves
    # no counts file that would read as "the training entered nothing".
    assert ("[check] training counts: not taken, the instrumented build's notes (.gcno) are gone; "
            "run the instrumented phase again for them") in resumed.stdout
    assert not (workdir / "training-counts.json").exists()


def test_plain_build_is_the_same_configuration_without_profile(tmp_path, pgo, trained):
    result = pgo(*BUILD, "--pgo", "off", "--workdir", tmp_path / "plain")
    assert "phase 3 of 4: stage" in result.stdout
    assert not (tmp_path / "plain" / "profile").exists()
    assert "plain build (no PGO)" in fixture_binary(tmp_path / "plain", "--version")
    workdir, _ = trained
    plain_args = json.loads((tmp_path / "plain" / "build" / "plain" / "pgo-configure.json").read_text())
    pgo_args = json.loads((workdir / "build" / "pgo" / "pgo-configure.json").read_text())
    differing = {a.split("=")[0] for a in set(plain_args) ^ set(pgo_args)}
    assert differing <= {"-S", "-B", "-DCMAKE_C_FLAGS", "-DCMAKE_CXX_FLAGS", "-DBUILD_COMMENT",
                         "-DCMAKE_EXE_LINKER_FLAGS", "-DCMAKE_SHARED_LINKER_FLAGS",
                         "-DCMAKE_MODULE_LINKER_FLAGS"} | {str(tmp_path / "plain" / "src"),
                                                           str(tmp_path / "plain" / "build" / "plain")} | {
        str(workdir / "src"), str(workdir / "build" / "pgo")}


def test_optimised_build_whose_profile_vanished_is_refused(tmp_path, pgo):
    workdir = tmp_path / "w"
    pgo(*BUILD, "--workdir", workdir, "--phase", "source", "--phase", "instrumented", "--phase", "train",
        "--phase", "check")
    for gcda in (workdir / "profile").iterdir():
        gcda.unlink()
    result = pgo("phase", "optimized", "--workdir", workdir, check=False)
    assert result.returncode == 1
    assert "phase optimized would use profile id None, but phase train made its input with 1.0.0-" in result.stderr


def test_training_that_writes_nothing_fails_the_check(tmp_path, pgo):
    workdir = tmp_path / "w"
    pgo(*BUILD, "--workdir", workdir, "--phase", "source", "--phase", "instrumented")
    # A server that exits without writing its counters (killed, say): the training itself passes.
    binary = workdir / "build" / "instrumented-install" / "bin" / "fixture"
    binary.unlink()
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    pgo("phase", "train", "--workdir", workdir)
    result = pgo("phase", "check", "--workdir", workdir, check=False)
    assert result.returncode == 1 and "wrote no profile data" in result.stderr


def test_failing_phase_names_itself_and_its_log(tmp_path, pgo):
    src = tmp_path / "broken"
    shutil.copytree(FIXTURE, src)
    (src / "src" / "hot.c").write_text("this is not C\n")
    result = pgo("build", "--version", "1.0.0", "--config", "fixture", "--source", src,
                 "--workdir", tmp_path / "w", check=False)
    assert result.returncode == 1
    assert "phase 'instrumented' failed" in result.stderr
    assert str(tmp_path / "w" / "logs" / "instrumented.log") in result.stderr
    assert "error" in result.stderr  # the compiler's own lines are shown


@pytest.mark.parametrize("args, message", [
    (["--version", "1.0"], "invalid version '1.0'"),
    (["--version", "1.0.0\n"], "invalid version '1.0.0\\n'"),
    (["--version", "1.0.\u0661"], "invalid version '1.0.\u0661'"),        # ARABIC-INDIC DIGIT ONE
    (["--version", "\uff11.0.0"], "invalid version '\uff11.0.0'"),        # FULLWIDTH DIGIT ONE
    (["--version", "2.0.0"], "is version 1.0.0, not the requested 2.0.0"),
    (["--version", "1.0.0", "--cc", "no-such-gcc"], "compiler 'no-such-gcc' not found"),
    (["--version", "1.0.0", "--config", "huge"], "unknown configuration 'huge'"),
    (["--version", "1.0.0", "--source", "/nonexistent/src"], "neither 'debian', a git URL"),
    (["--version", "1.0.0", "--git-ref", "fixture-1.0.1"], "--git-ref applies only to a git URL --source"),
    (["--version", "latest", "--source", "/nonexistent/src"], "neither 'debian', a git URL"),
    (["--version", "11.8.9", "--config", "minimal"],
     "configuration 'minimal' builds mariadb 10.11; 11.8.9 is of line 11.8 (configurations for it: minimal-11.8, "
     "minimal-11.8-lto, release-11.8)"),
])
def test_bad_input_gets_one_clear_line(tmp_path, pgo, args, message):
    base = ["build", "--config", "fixture", "--source", FIXTURE, "--workdir", tmp_path / "w"]
    result = pgo(*base, *args, check=False)
    assert result.returncode != 0
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("option, name", [
    *(("--workdir", f"a{char}b") for char in ["\n", "\r", "\t", "\x01", ";", '"', "'", "\\", "$", "`", "(", ")", "&",
                                                "|", "<", ">"]),
    ("--profile-dir", "a\nb"), ("--cache", "a$b")])
def test_a_path_the_build_cannot_take_is_refused_up_front(tmp_path, pgo, option, name):
    """Each of these characters broke a fixture build (CMake's compiler checks, Ninja, or the profile
    path compiled into the instrumented binary), after the source phase, with several lines."""
    paths = {"--workdir": tmp_path / "w", "--profile-dir": tmp_path / "profile", "--cache": tmp_path / "cache"}
    paths[option] = tmp_path / name / "x"
    result = pgo(*BUILD, *(arg for item in paths.items() for arg in item), check=False)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"pgo: error: {option} ") and "cannot take in a build's paths" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing is written before the refusal"


def test_a_work_directory_with_characters_the_build_takes_builds(tmp_path, pgo):
    """'=' (the fixture's setup step ran through env, which took it for a variable) and ' -' (GCC's
    record of the options separates them with spaces) are fine in a path."""
    workdir = tmp_path / "a=b -c#d" / "w"
    pgo(*BUILD, "--workdir", workdir)
    use = json.loads((workdir / "profile-use.json").read_text())
    assert use["hot_coverage"] == 1.0 and use["hot_in_effect"] == 2


@pytest.mark.parametrize("tree", ["not a source tree", "another version"])
def test_a_rejected_source_directory_is_not_copied_into_the_cache(tmp_path, pgo, tree):
    src = tmp_path / "src"
    if tree == "another version":
        shutil.copytree(FIXTURE, src)
        (src / "VERSION").write_text("2.0.0\n")
    else:
        src.mkdir()
        (src / "big-file").write_bytes(b"\0" * 4096)
    cache = tmp_path / "cache"
    result = pgo(*BUILD[:-1], src, "--workdir", tmp_path / "w", "--cache", cache, check=False)
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1
    assert not cache.exists() or not [p for p in cache.rglob("*") if p.is_file()]


def test_an_os_error_in_a_phase_is_one_line(tmp_path, pgo):
    workdir = tmp_path / "w"
    workdir.mkdir()
    (workdir / "logs").write_text("a file where the logs folder goes\n")
    result = pgo(*BUILD, "--workdir", workdir, check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [f"pgo: error: File exists: {workdir / 'logs'}"]


def test_source_that_is_not_mariadb(tmp_path, pgo):
    (tmp_path / "notmariadb").mkdir()
    (tmp_path / "notmariadb" / "CMakeLists.txt").write_text("project(x)\n")
    result = pgo(*BUILD[:-1], tmp_path / "notmariadb", "--workdir", tmp_path / "w", check=False)
    assert result.returncode == 1 and "not a MariaDB (or fixture) source tree" in result.stderr


def test_profile_dir_that_is_not_writable(tmp_path, pgo):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = pgo(*BUILD, "--workdir", tmp_path / "w", "--profile-dir", blocker / "profile", check=False)
    assert result.returncode == 1 and "is not writable" in result.stderr


def test_workdir_set_up_differently_is_refused(trained, pgo):
    workdir, _ = trained
    result = pgo(*BUILD, "--workdir", workdir, "--pgo", "off", check=False)
    assert result.returncode == 1 and "was set up differently (pgo 'on' -> 'off')" in result.stderr


def test_phases_are_data(pgo):
    phases = json.loads(pgo("phases", "--json").stdout)
    assert [p["name"] for p in phases] == ["source", "instrumented", "train", "check", "optimized", "archive",
                                          "stage", "test"]
    produced = {o for p in phases for o in p["outputs"]}
    assert all(i in produced for p in phases for i in p["inputs"])


def test_the_contract_names_every_path_the_phases_use(pgo):
    items = {row["path"]: row for row in json.loads(pgo("phases", "--files", "--json").stdout)}
    for pipeline in ("on", "off", "reuse"):
        for phase in json.loads(pgo("phases", "--pgo", pipeline, "--json").stdout):
            assert all(path in items for path in phase["inputs"] + phase["outputs"])
    # Two different files, two different writers: the work directory's and the published folder's.
    assert items["build-info.json"]["written_by"] == ["stage"]
    # The training's report goes into the archived manifest: the check reads it from the training that succeeded.
    assert (items["train"]["written_by"], items["train"]["read_by"]) == (["train"], ["check"])
    assert items["buildinfo.json"]["written_by"] == ["pgo package"]
    assert "every phase" in items["state.json"]["written_by"]
    assert "written by stage; read by test, pgo package" in pgo("phases", "--files").stdout


def test_latest_is_resolved_once_and_said(tmp_path, pgo):
    result = pgo("build", "--version", "latest", "--config", "fixture", "--source", FIXTURE,
                 "--workdir", tmp_path / "w", "--phase", "source")
    assert result.stdout.splitlines()[0] == f"[version] latest is 1.0.0: the version of {FIXTURE}"
    assert json.loads((tmp_path / "w" / "settings.json").read_text())["version"] == "1.0.0"
    assert json.loads((tmp_path / "w" / "source.json").read_text())["version"] == "1.0.0"


def test_phase_alone_needs_its_inputs(tmp_path, pgo):
    result = pgo(*BUILD, "--workdir", tmp_path / "w", "--phase", "optimized", check=False)
    assert result.returncode == 1 and "needs src from phase source: run phase source first" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="Debian source lookups add a deb-src entry as root")
def test_unknown_debian_version_lists_what_exists(tmp_path, pgo):
    result = pgo("build", "--version", "10.11.99", "--workdir", tmp_path / "w",
                 "--phase", "source", check=False)
    assert result.returncode == 1
    assert "unknown version 10.11.99: Debian's archive has mariadb" in result.stderr
