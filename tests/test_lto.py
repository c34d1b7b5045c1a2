"""LTO, a configuration's setting (`lto = true` in pgo/configs.toml): a PGO build of the fixture
with it is really link-time optimised, its profile is never mixed with one made without LTO, and
the profile check names the rule GCC decides hotness by. `lto = "server"`: only the server binary is
an LTO link's, every other program links the objects' machine code, and the profile is the one of
the configuration without LTO."""

import json
import subprocess
import tarfile

import pytest
from conftest import FIXTURE, run_pgo

from pgo import PipelineError
from pgo.base import lines
from pgo.core.config import build_config
from pgo.core.proof import link_time_optimised, records
from pgo.core.toolchain import fingerprint


def build(workdir, config="fixture-lto", *extra, check=True):
    return run_pgo("build", "--version", "1.0.0", "--config", config, "--source", FIXTURE,
                   "--workdir", workdir, *extra, check=check)


@pytest.fixture(scope="module")
def lto_build(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("lto") / "w"
    return workdir, build(workdir).stdout


def sections(path):
    out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True, check=True).stdout
    return {word for line in out.splitlines() for word in line.split() if word.startswith(".")}


def global_symbols(path):
    """The global symbols a file defines: a program linked without LTO keeps its libraries' functions
    global; the LTO link sees the whole program, and makes them local or inlines them away."""
    out = subprocess.run(["nm", "-g", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def configured(build_dir):
    """The CMake cache settings the pipeline configured a build tree with."""
    args = json.loads((build_dir / "pgo-configure.json").read_text())
    return dict(arg[2:].split("=", 1) for arg in args if arg.startswith("-D"))


def test_every_variant_compiles_and_links_with_lto(lto_build, tmp_path):
    workdir, _ = lto_build
    plain = tmp_path / "plain"
    build(plain, "fixture-lto", "--pgo", "off")
    instrumented = [line for line in (workdir / "logs" / "instrumented.log").read_text().splitlines()
                    if line.startswith("$ cmake -S")]
    assert instrumented and "-fprofile-generate=" in instrumented[0]
    for settings in (configured(workdir / "build" / "pgo"), configured(plain / "build" / "plain")):
        for variable in ("CMAKE_C_FLAGS", "CMAKE_EXE_LINKER_FLAGS", "CMAKE_SHARED_LINKER_FLAGS"):
            assert settings[variable].endswith("-flto=auto -ffat-lto-objects"), variable
        # Static libraries are archived by GCC's own wrapper, which sees the LTO objects' symbols.
        assert "gcc-ar" in settings["CMAKE_AR"].rsplit("/", 1)[-1]
    assert "-DCMAKE_EXE_LINKER_FLAGS=-fprofile-generate=" in instrumented[0]
    assert "-flto=auto -ffat-lto-objects" in instrumented[0].split("-DCMAKE_EXE_LINKER_FLAGS=", 1)[1]
    for info in (json.loads((d / "build-info.json").read_text()) for d in (workdir, plain)):
        assert info["config"] == "fixture-lto" and info["flags"][-2:] == ["-flto=auto", "-ffat-lto-objects"]
    assert "hot_digest" not in global_symbols(plain / "stage" / "bin" / "fixture")


def test_the_binary_is_link_time_optimised(lto_build):
    workdir, _ = lto_build
    tree = workdir / "build" / "pgo"
    # The objects and the static library carry LTO bytecode (fat: machine code too); the linked
    # program does not: the link compiled it from that bytecode.
    assert any(name.startswith(".gnu.lto_") for name in sections(tree / "CMakeFiles" / "hot.dir" / "src" / "hot.c.o"))
    assert any(name.startswith(".gnu.lto_") for name in sections(tree / "libhot.a"))
    assert ".text" in sections(tree / "CMakeFiles" / "hot.dir" / "src" / "hot.c.o")
    binary = workdir / "stage" / "bin" / "fixture"
    assert not any(name.startswith(".gnu.lto_") for name in sections(binary))
    # hot_digest and cold_digest, global functions of libhot.a, are not global in the program.
    assert {"hot_digest", "cold_digest"} <= global_symbols(tree / "libhot.a")
    assert "main" in global_symbols(binary) and not {"hot_digest", "cold_digest"} & global_symbols(binary)
    run = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    assert "fixture-lto, PGO build, profile 1.0.0-" in run.stdout


def test_an_lto_profile_is_never_taken_for_a_build_without_lto(lto_build, tmp_path):
    workdir, _ = lto_build
    assert fingerprint(build_config("fixture-lto")) != fingerprint(build_config("fixture"))
    state = json.loads((workdir / "state.json").read_text())["done"]
    assert state["optimized"]["identity"]["flags_fingerprint"] == fingerprint(build_config("fixture-lto"))
    profile_id = json.loads((workdir / "profile-check.json").read_text())["profile_id"]
    refused = build(tmp_path / "plain-lto-less", "fixture", "--profile-from", profile_id, check=False)
    assert refused.returncode == 1 and "flags fingerprint: profile " in refused.stderr
    assert not (tmp_path / "plain-lto-less").exists()


def test_the_check_names_the_rule_the_link_decides_hotness_by(lto_build):
    workdir, _ = lto_build
    quality = json.loads((workdir / "profile-check.json").read_text())["quality"]
    assert quality["threshold_rule"] == "LTO working set"
    assert quality["hot_functions"] is None and quality["largest"][0]["hot_threshold"] is None
    assert quality["functions_run"] == 2 and quality["runs"] == 1
    summary = lines.profile_check_summary(json.loads((workdir / "profile-check.json").read_text()))
    assert "; hot from the LTO working set, largest counter " in summary
    assert summary.endswith(", 2 trained functions, 1 runs;")
    # The notes are written at compile time, with LTO too: the training counts name what ran.
    counts = json.loads((workdir / "training-counts.json").read_text())
    assert list(counts["functions"]) == ["hot_digest", "main"] and counts["unread"] == 0


def test_packages_carry_the_static_librarys_machine_code_without_its_lto_bytecode(lto_build, tmp_path):
    workdir, _ = lto_build
    run_pgo("package", "--workdir", workdir, "--format", "bintar", "--out", tmp_path / "bintar")
    with tarfile.open(next((tmp_path / "bintar").glob("*.tar.gz"))) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("/lib/libhot.a"))
        (tmp_path / "libhot.a").write_bytes(archive.extractfile(member).read())
    packed, built = tmp_path / "libhot.a", workdir / "build" / "pgo" / "libhot.a"
    # The build tree's archive keeps its bytecode (the LTO link of the program reads it)...
    assert any(name.startswith(".gnu.lto_") for name in sections(built))
    # ...the packaged one has only the machine code, which any compiler's link can use.
    assert not any(name.startswith((".gnu.lto_", ".gnu.debuglto_")) for name in sections(packed))
    assert ".text" in sections(packed) and {"hot_digest", "cold_digest"} <= global_symbols(packed)


@pytest.fixture(scope="module")
def server_lto_build(tmp_path_factory):
    """fixture-unit (PGO, its unit test program too) and fixture-lto-server from that build's profile."""
    root = tmp_path_factory.mktemp("lto-server")
    build(root / "unit", "fixture-unit")
    profile_id = json.loads((root / "unit" / "profile-check.json").read_text())["profile_id"]
    return root / "lto", build(root / "lto", "fixture-lto-server", "--profile-from", profile_id).stdout, profile_id


def test_with_lto_for_the_server_one_profile_serves_both_builds(server_lto_build):
    workdir, out, profile_id = server_lto_build
    assert fingerprint(build_config("fixture-lto-server")) == fingerprint(build_config("fixture-unit"))
    assert fingerprint(build_config("fixture-lto-server")) != fingerprint(build_config("fixture-lto"))
    use = json.loads((workdir / "profile-use.json").read_text())
    assert use["passed"] and use["profile_id"] == profile_id and use["link_time_optimised"] is True
    assert use["coverage_mismatch"] == 0 and use["hot_coverage"] == 1.0
    assert f"profile {profile_id} used: 100% of " in out and "; the server binary is an LTO link" in out
    run = subprocess.run([workdir / "stage" / "bin" / "fixture", "--version"], capture_output=True, text=True,
                         check=True)
    assert f"fixture-lto-server, PGO build, profile {profile_id}" in run.stdout


def test_with_lto_for_the_server_only_its_link_is_link_time_optimised(server_lto_build, tmp_path):
    workdir, _, _ = server_lto_build
    settings = configured(workdir / "build" / "pgo")
    assert settings["CMAKE_C_FLAGS"].endswith("-flto=auto -ffat-lto-objects")
    assert settings["CMAKE_EXE_LINKER_FLAGS"].endswith("-flto=auto -ffat-lto-objects -fno-lto")
    assert settings["FIXTURE_LDFLAGS"] == "-flto" and "gcc-ar" in settings["CMAKE_AR"].rsplit("/", 1)[-1]
    tree = workdir / "build" / "pgo"
    server, unit_test = tree / "fixture", tree / "digest-t"
    # The server: compiled by the link from the bytecode; the library's functions are no longer global.
    assert link_time_optimised(server) and not {"hot_digest", "cold_digest"} & global_symbols(server)
    # The unit test: the fat objects' machine code, as each object's compile made it (with the profile).
    assert not link_time_optimised(unit_test) and {"hot_digest", "cold_digest"} <= global_symbols(unit_test)
    assert all(r.startswith("GNU C") and "-ffat-lto-objects" in r for r in records(unit_test))
    assert any("-fprofile-use=" in r for r in records(unit_test))
    assert subprocess.run([unit_test], capture_output=True, text=True, check=True).stdout.startswith("ok 1")
    # A fixture build without LTO links no LTO program: the records are no fake.
    assert not link_time_optimised(workdir.parent / "unit" / "build" / "pgo" / "fixture")


def test_with_lto_for_the_server_the_instrumented_build_is_the_one_without_lto(server_lto_build):
    workdir, _, _ = server_lto_build
    unit = json.loads((workdir.parent / "unit" / "build" / "pgo" / "pgo-configure.json").read_text())
    lto = build_config("fixture-lto-server")
    assert not lto.lto_in("instrumented") and lto.lto_in("optimized") and lto.lto_in("plain")
    # The instrumented variant's configure, as the fixture-unit build ran it (its tree is the optimised one's now).
    line = next(line for line in (workdir.parent / "unit" / "logs" / "instrumented.log").read_text().splitlines()
                if line.startswith("$ cmake -S"))
    assert "-flto" not in line and "gcc-ar" not in line and "FIXTURE_LDFLAGS" not in line
    assert not any("-flto" in arg for arg in unit)


def test_lto_for_the_server_needs_a_product_that_names_its_servers_link_flags(tmp_path):
    data = {"products": {"p": {"comment_variable": "C", "hot_dirs": ["x"], "train": [["true"]]}},
            "configs": {"c": {"product": "p", "lto": "server"}, "d": {"product": "p", "lto": "servers"}}}
    with pytest.raises(PipelineError, match="names no link_flags_variable of product 'p'"):
        build_config("c", data)
    with pytest.raises(PipelineError, match=r"lto = 'servers' is not true or false \(or \"server\"\)"):
        build_config("d", data)
