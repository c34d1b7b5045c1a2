"""Issue 28, the label's proof: an optimised build is a PGO build only where its own objects show
that the compiler had the profile in effect, and what changes the code from outside the pipeline's
flags is part of every build phase's identity.

The faults are made with the real GCC on the fixture project, the way an environment makes them:
a compiler launcher (CMAKE_C_COMPILER_LAUNCHER, as ccache and distcc setups use) that adds options
to the compiles it runs.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURE, refused, run_pgo

from pgo.base import lines

BUILD = ["build", "--version", "1.0.0", "--config", "fixture", "--source", FIXTURE]
TRAINED = [arg for phase in ("source", "instrumented", "train", "check") for arg in ("--phase", phase)]
HOT = "CMakeFiles/hot.dir/src/hot.c"
NOT_IN_EFFECT = ".o was not compiled with the profile in effect: "


def pgo(*args, env=None):
    return run_pgo(*args, check=False, env=env)


def json_of(path):
    return json.loads(path.read_text())


def smart_launcher(folder):
    """A launcher that adds the options in its file `extra` to the optimised build's compiles (those
    with -fprofile-use=) and runs every other compile as it is. Its script, so its checksum, stays
    the same whatever it adds: only the objects can tell."""
    folder.mkdir(parents=True, exist_ok=True)
    script, extra = folder / "launcher", folder / "extra"
    extra.write_text("")
    script.write_text(f'#!/bin/sh\ncase " $* " in *" -fprofile-use="*) exec "$@" $(cat "{extra}");; esac\n'
                      'exec "$@"\n')
    script.chmod(0o755)
    return {"CMAKE_C_COMPILER_LAUNCHER": str(script)}, extra


def appending_launcher(folder, options):
    """A launcher that adds `options` to every compile it runs."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "launcher"
    script.write_text(f'#!/bin/sh\nexec "$@" {options}\n')
    script.chmod(0o755)
    return script


# --- the optimised build: each object's own record ------------------------------------

def test_a_launcher_that_compiles_without_the_profile_fails_the_optimised_phase(tmp_path):
    """The issue's case: -O0 -fno-profile-use added to every compile passed the check (exit 0, and a
    +pgo tarball of -O0 code). The objects' records name the object and the options."""
    workdir, out = tmp_path / "w", tmp_path / "bintar"
    env = {"CMAKE_C_COMPILER_LAUNCHER": str(appending_launcher(tmp_path / "bin", "-O0 -fno-profile-use"))}
    refused(pgo(*BUILD, "--workdir", workdir, env=env), "hot object CMakeFiles/",
            NOT_IN_EFFECT + "-fno-profile-use cancels -fprofile-use, -O0 instead of -O3")
    use = json_of(workdir / "profile-use.json")
    assert use["passed"] is False and use["hot_in_effect"] == 0 and use["hot_coverage"] == 0
    assert [fault["object"] for fault in use["proof"]["faults"]] == ["CMakeFiles/fixture.dir/src/main.c", HOT]
    assert not (workdir / "stage").exists()
    refused(pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out, env=env),
            "never packaged as PGO")
    assert not out.exists()


def remote_compiler(folder, hide_warnings):
    """Compilers named gcc, cc, g++ and c++ for the first place on PATH that keep every option, but
    compile the optimised build's objects (those with -fprofile-use) to another output path and copy
    them back, as a remote-compile tool (distcc, icecc) does in effect: GCC then looks for a .gcda
    named after that path, finds none, and compiles without the profile; its record of its options
    is the same. hide_warnings adds -w, which silences even `profile count data file not found`."""
    folder.mkdir(parents=True, exist_ok=True)
    real = {name: shutil.which(name) for name in ("gcc", "cc", "g++", "c++")}
    for name, path in real.items():
        script = folder / name
        script.write_text(f"""#!{sys.executable}
import os, shutil, subprocess, sys, tempfile
args = sys.argv[1:]
if any(a.startswith("-fprofile-use") for a in args) and "-c" in args and "-o" in args:
    at = args.index("-o") + 1
    out = args[at]
    with tempfile.TemporaryDirectory() as elsewhere:
        args[at] = os.path.join(elsewhere, os.path.basename(out))
        done = subprocess.run([{path!r}, *args{', "-w"' if hide_warnings else ''}])
        if done.returncode == 0:
            shutil.copyfile(args[at], out)
        sys.exit(done.returncode)
os.execv({path!r}, [{path!r}, *args])
""")
        script.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize("hide_warnings", [False, True], ids=["warned", "with -w"])
def test_objects_compiled_elsewhere_never_read_the_profile_and_are_never_pgo(tmp_path, hide_warnings):
    """Issue 43, case 1: the records said `-fprofile-use=<profile>`, hot coverage was 100% and `pgo
    package` published fixture-1.0.0+pgo of code that had read no profile. The code itself shows
    it: no hot object holds code laid out as hot (.text.hot), and without -w the compiler's
    `profile count data file not found` names each object whose compile printed it."""
    workdir, out = tmp_path / "w", tmp_path / "bintar"
    env = remote_compiler(tmp_path / "bin", hide_warnings)
    if hide_warnings:
        refused(pgo(*BUILD, "--workdir", workdir, env=env), "the profile left no trace in the code: 0 of the 1 "
                "hot objects whose profile has hot code hold any (.text.hot", f"{HOT}.o has none",
                "so their compiles did not read it")
        use = json_of(workdir / "profile-use.json")
        assert use["traces"]["traced"] == 0 and use["traces"]["untraced"] == [HOT]
        # main.c's hot loop is in main, startup code: it is not judged, and is the one covered object.
        assert use["hot_coverage"] == 0.5 and use["missing_hot_objects"] == [] and use["traces"]["startup"] == 1
    else:
        # Each compile said it, for a .gcda named after the other path: the object it was compiling is named.
        refused(pgo(*BUILD, "--workdir", workdir, env=env), "no hot object got a profile")
        use = json_of(workdir / "profile-use.json")
        assert use["hot_coverage"] == 0 and use["missing_hot_objects"] == ["CMakeFiles/fixture.dir/src/main.c", HOT]
    assert use["passed"] is False
    refused(pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out, env=env),
            "never packaged as PGO")
    assert not out.exists()


def test_the_profile_shows_in_the_code_of_a_good_build(tmp_path):
    """The other side of the same proof: the fixture's hot object holds code laid out as hot; main.c's hot
    code is main's, startup code whatever the profile says, so it is not judged; the build passes. The
    plain build's hot object has none."""
    workdir = tmp_path / "w"
    assert pgo(*BUILD, "--workdir", workdir, "--tests", "off").returncode == 0
    use = json_of(workdir / "profile-use.json")
    assert use["passed"] and use["hot_coverage"] == 1.0
    assert use["traces"] == {"expected": 1, "traced": 1, "startup": 1, "min_share": 0.5, "untraced": []}
    plain = tmp_path / "plain"
    assert pgo(*BUILD, "--workdir", plain, "--pgo", "off", "--tests", "off").returncode == 0
    from pgo.core import proof
    assert proof.profile_trace(workdir / "build" / "pgo" / f"{HOT}.o")
    assert not proof.profile_trace(plain / "build" / "plain" / f"{HOT}.o")


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """A work directory trained through the smart launcher, which added nothing to any compile so far."""
    root = tmp_path_factory.mktemp("launched")
    env, extra = smart_launcher(root / "bin")
    workdir = root / "w"
    run_pgo(*BUILD, "--workdir", workdir, *TRAINED, env=env)
    return workdir, env, extra


# {elsewhere}: a folder that does not exist (a profile there would be read, and be another build's).
@pytest.mark.parametrize("options, faults", [
    ("-fno-profile-use", ["-fno-profile-use cancels -fprofile-use"]),
    ("-fprofile-use={elsewhere}", ["-fprofile-use={elsewhere} instead of -fprofile-use={profile}"]),
    ("-fprofile-dir={elsewhere}", ["-fprofile-dir={elsewhere} instead of -fprofile-use={profile}"]),
    ("-fno-branch-probabilities", ["-fno-branch-probabilities leaves the profile unread"]),
    ("-fprofile-prefix-path={elsewhere}",
     ["-fprofile-prefix-path={elsewhere} instead of -fprofile-prefix-path={build}"]),
    ("-fno-profile-partial-training", ["-fno-profile-partial-training instead of -fprofile-partial-training"]),
    ("-Og", ["-Og instead of -O3, what the build asked for"]),
    ("-fno-record-gcc-switches", ["no record of the options it was compiled with"]),
])
def test_an_option_that_keeps_the_profile_from_the_code_is_named_with_its_object(launched, options, faults):
    workdir, env, extra = launched
    paths = {"profile": workdir / "profile", "build": workdir / "build" / "pgo",
             "elsewhere": workdir.parent / "elsewhere"}
    extra.write_text(options.format(**paths))
    faults = [f.format(**paths) for f in faults]
    line = refused(pgo("phase", "optimized", "--workdir", workdir, env=env), "hot object CMakeFiles/",
                   NOT_IN_EFFECT, *faults)
    assert "(its own record of its options; 2 of 2 hot objects, 0 others)" in line
    use = json_of(workdir / "profile-use.json")
    assert use["passed"] is False and use["hot_in_effect"] == 0
    refused(pgo("phase", "stage", "--workdir", workdir, env=env), "phase optimized", "its last run failed")


@pytest.mark.parametrize("options", ["", "-fno-profile-use -fprofile-use", "-fprofile-dir={profile}", "-O2 -O3"])
def test_options_that_leave_the_profile_in_effect_pass(launched, options):
    """The last of conflicting options wins, as in GCC: with these the profile is in effect again."""
    workdir, env, extra = launched
    extra.write_text(options.format(profile=workdir / "profile"))
    result = pgo("phase", "optimized", "--workdir", workdir, env=env)
    assert result.returncode == 0, result.stderr
    use = json_of(workdir / "profile-use.json")
    assert use["passed"] and use["hot_in_effect"] == use["hot_objects"] == 2 and use["hot_coverage"] == 1.0
    assert use["proof"] == {"objects": 2, "recorded": 2, "seconds": use["proof"]["seconds"], "faults": []}


@pytest.mark.parametrize("options", ["", "-fno-profile-use", "-fno-profile-use -fprofile-use",
                                     "-fno-branch-probabilities", "-fprofile-dir={elsewhere}",
                                     "-fprofile-dir={profile}", "-fprofile-use={elsewhere}",
                                     "-fprofile-use={elsewhere} -fprofile-use={profile}",
                                     "-fprofile-prefix-path={elsewhere}"])
def test_the_scan_of_the_options_agrees_with_what_gcc_reads(launched, options):
    """Each set of options added to the hot object's own compile: the proof finds the profile in effect
    exactly when GCC compiled the code the profile makes."""
    from pgo.core import proof
    from pgo.core.toolchain import pgo_flags
    workdir, env, extra = launched
    extra.write_text("")
    if not json_of(workdir / "state.json")["done"].get("optimized"):
        assert pgo("phase", "optimized", "--workdir", workdir, env=env).returncode == 0
    build, profile = workdir / "build" / "pgo", workdir / "profile"
    obj = build / f"{HOT}.o"
    command = subprocess.run(["ninja", "-C", build, "-t", "commands", obj.relative_to(build)], capture_output=True,
                             text=True, check=True).stdout.strip().splitlines()[-1]

    def compile_with(added):
        subprocess.run(f"{command} {added}", shell=True, cwd=build, check=True, capture_output=True)
        code = subprocess.run(["objdump", "-d", obj], capture_output=True, text=True, check=True).stdout
        return code, proof.records(obj)

    with_profile, _ = compile_with("")
    code, [record] = compile_with(options.format(profile=profile, elsewhere=workdir.parent / "elsewhere"))
    state = proof.in_effect(proof.options_of(record, (profile, build)))
    flags = pgo_flags("optimized", profile, build)[0]
    assert (proof.faults(state, "optimized", flags, profile, "-O3") == []) == (code == with_profile)


def test_with_lto_the_objects_prove_it_too(tmp_path):
    """With LTO the link compiles the program from the objects' bytecode, which carries the profile and
    the optimisation level each object was compiled with."""
    env, extra = smart_launcher(tmp_path / "bin")
    workdir = tmp_path / "w"
    build = ["build", "--version", "1.0.0", "--config", "fixture-lto", "--source", FIXTURE, "--workdir", workdir]
    result = pgo(*build, env=env)
    assert result.returncode == 0, result.stderr
    assert json_of(workdir / "profile-use.json")["hot_in_effect"] == 2
    extra.write_text("-O0 -fno-profile-use")
    refused(pgo("phase", "optimized", "--workdir", workdir, env=env), "hot object CMakeFiles/",
            NOT_IN_EFFECT + "-fno-profile-use cancels -fprofile-use, -O0 instead of -O3")


@pytest.mark.parametrize("options, fault", [
    ("-fprofile-use={elsewhere}", "-fprofile-use={elsewhere} in a build without profile"),
    ("-fprofile-generate={elsewhere}", "-fprofile-generate={elsewhere} in a build without profile"),
    ("-O0", "-O0 instead of -O3, what the build asked for")])
def test_a_plain_build_compiled_with_a_profile_option_or_another_level_is_no_baseline(tmp_path, options, fault):
    options, fault = options.format(elsewhere=tmp_path / "elsewhere"), fault.format(elsewhere=tmp_path / "elsewhere")
    launcher = appending_launcher(tmp_path / "bin", options)
    env = {"CMAKE_C_COMPILER_LAUNCHER": str(launcher), "CMAKE_C_LINKER_LAUNCHER": str(launcher)}
    workdir = tmp_path / "w"
    refused(pgo(*BUILD, "--pgo", "off", "--workdir", workdir, env=env),
            "the plain build's object CMakeFiles/", "was not compiled as a build without profile", fault)
    assert not (workdir / "stage").exists()


# --- what changes the code from outside the flags: the identity ---------------------------

@pytest.mark.parametrize("variable", ["CMAKE_C_COMPILER_LAUNCHER", "CMAKE_C_LINKER_LAUNCHER", "CPATH"])
def test_a_build_environment_gone_or_changed_after_training_is_named(tmp_path, variable):
    launcher = appending_launcher(tmp_path / "bin", "")
    value = str(tmp_path) if variable == "CPATH" else str(launcher)
    workdir = tmp_path / "w"
    assert pgo(*BUILD, "--workdir", workdir, *TRAINED, env={variable: value}).returncode == 0
    named = f"{variable}={value}"
    refused(pgo("phase", "optimized", "--workdir", workdir), "phase optimized would use build environment none, "
            f"but phase train made its input with {named}", "set the environment back")
    if variable == "CPATH":
        other, changed = str(tmp_path / "bin"), f"{variable}={tmp_path / 'bin'}"
    else:
        # The same launcher, another script: what it adds may have changed.
        launcher.write_text(launcher.read_text() + "# changed\n")
        other, changed = value, f"{named} (sha256 "
    line = refused(pgo("phase", "optimized", "--workdir", workdir, env={variable: other}),
                   f"phase optimized would use build environment {changed}", f"made its input with {named}")
    assert not (workdir / "profile-use.json").exists(), line


def test_a_launcher_added_after_training_is_named(tmp_path):
    workdir = tmp_path / "w"
    assert pgo(*BUILD, "--workdir", workdir, *TRAINED).returncode == 0
    launcher = appending_launcher(tmp_path / "bin", "")
    refused(pgo("phase", "optimized", "--workdir", workdir, env={"CMAKE_CXX_COMPILER_LAUNCHER": str(launcher)}),
            f"would use build environment CMAKE_CXX_COMPILER_LAUNCHER={launcher} (sha256 ",
            "phase train made its input with none")


def test_a_profile_made_through_a_launcher_is_never_taken_without_it(tmp_path):
    env = {"CMAKE_C_COMPILER_LAUNCHER": str(appending_launcher(tmp_path / "bin", "")),
           "PGO_ARCHIVE": str(tmp_path / "archive")}
    assert pgo(*BUILD, "--workdir", tmp_path / "trained", env=env).returncode == 0
    [entry] = json.loads(pgo("archive", "list", "--json", env=env).stdout)
    assert json_of(entry_manifest(tmp_path / "archive"))["build_environment"] == {
        "CMAKE_C_COMPILER_LAUNCHER": json_of(tmp_path / "trained" / "profile-use.json")["identity"][
            "build_environment"]["CMAKE_C_COMPILER_LAUNCHER"]}
    reuse = [*BUILD, "--profile-from", entry["name"]]
    refused(pgo(*reuse, "--workdir", tmp_path / "without", env={"PGO_ARCHIVE": env["PGO_ARCHIVE"]}),
            "does not fit this build: flags fingerprint")
    assert pgo(*reuse, "--workdir", tmp_path / "with", env=env).returncode == 0


def entry_manifest(archive):
    [manifest] = archive.rglob("manifest.json")
    return manifest


@pytest.mark.parametrize("variable, value", [("CMAKE_BUILD_TYPE", "Debug"), ("CMAKE_TOOLCHAIN_FILE", "/dev/null")])
def test_an_environment_that_would_change_the_configuration_is_refused_up_front(tmp_path, variable, value):
    result = pgo(*BUILD, "--workdir", tmp_path / "w", env={variable: value})
    refused(result, f"{variable} is set in the environment ({value!r})", "unset it")
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "w").exists()


# --- a stale profile says so ------------------------------------------------------------

def test_a_stale_profile_that_lost_a_hot_function_is_counted_and_marked(tmp_path):
    """--accept-stale builds with a profile of other source, where GCC dropped hot_digest's counters:
    its object is not covered, and the binary, build-info.json, the package name and buildinfo.json
    say the profile is stale."""
    env = {"PGO_ARCHIVE": str(tmp_path / "archive")}
    assert pgo(*BUILD, "--workdir", tmp_path / "trained", env=env).returncode == 0
    [entry] = json.loads(pgo("archive", "list", "--json", env=env).stdout)
    changed = tmp_path / "changed"
    shutil.copytree(FIXTURE, changed)
    hot = changed / "src" / "hot.c"
    loop = "h = (h << 5) | (h >> 27);"
    hot.write_text(hot.read_text().replace(loop, loop + " if (h & 1) words++;"))     # another control flow
    workdir = tmp_path / "stale"
    result = pgo(*BUILD[:-1], changed, "--workdir", workdir, "--profile-from", entry["name"], "--accept-stale", env=env)
    assert result.returncode == 0, result.stderr
    use = json_of(workdir / "profile-use.json")
    assert use["coverage_mismatch"] == 1 and use["mismatch_hot_objects"] == [HOT]
    assert use["hot_coverage"] == 0.5 and use["objects_without_profile_hot"] == [HOT]
    trained = json_of(tmp_path / "trained" / "source.json")["checksum"]
    assert use["stale"] is True and use["trained_on"] == {"version": "1.0.0", "source_checksum": trained}
    [line] = [line for line in result.stdout.splitlines() if line.startswith("[optimized] stale profile")]
    assert line.startswith(f"[optimized] stale profile {use['profile_id']} used: 50% of 2 hot objects")
    assert lines.profile_use_summary(use) == "stale profile used by 50% of 2 hot objects, 1 mismatches;"
    comment = subprocess.run([workdir / "stage" / "bin" / "fixture", "--version"], capture_output=True,
                             text=True, check=True).stdout
    assert f"PGO build, stale profile {use['profile_id']} (trained on 1.0.0 source {trained[:12]})" in comment
    assert json_of(workdir / "build-info.json")["stale_profile"] is True
    out = tmp_path / "bintar"
    assert pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out, env=env).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["buildinfo.json", "fixture-1.0.0+pgo~stale-linux-x86_64.tar.gz",
                                                   "sha256sums.txt"]
    info = json_of(out / "buildinfo.json")
    assert info["stale_profile"] is True and info["package_version"] == "1.0.0+pgo~stale"
    proved = pgo("prove", out)
    assert proved.returncode == 0 and "label: stale profile" in proved.stdout, proved.stderr
    # The same package with the mark taken off its name: its own check still says stale.
    info["package_version"] = "1.0.0+pgo"
    (out / "buildinfo.json").write_text(json.dumps(info))
    from pgo.base.checksums import write_sha256sums
    write_sha256sums(out)
    refused(pgo("prove", out), "1.0.0+pgo has no stale mark (~stale)", "trained on other source")
    deb = tmp_path / "deb"
    assert pgo("package", "--workdir", workdir, "--format", "deb", "--out", deb, env=env).returncode == 0
    version = subprocess.run(["dpkg-deb", "-f", next(deb.glob("*.deb")), "Version"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert version == "1.0.0+pgo~stale-1"
