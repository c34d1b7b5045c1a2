"""BOLT after the PGO+LTO build (issue 30), on the fixture (`bolt = true`: fixture-lto-bolt).

The bolt phase trains BOLT's instrumented copy of the optimised binary with the fixture's own
training, its check reads BOLT's report into bolt.json and fails with one line on a profile that
is not the binary's, the label says PGO+BOLT only from a passed check, and the BOLTed program
computes what the fixture computes.
"""

import ctypes
import json
import os
import shutil
import subprocess
import tarfile

import pytest
from conftest import FIXTURE, build_fixture, refused, run_pgo

from pgo import PipelineError
from pgo.base import lines
from pgo.base.checksums import sha256_file
from pgo.base.runner import PhaseLog
from pgo.build import bolt
from pgo.build.phases import context, pipeline_of, run_phases
from pgo.core.config import build_config
from pgo.core.proof import elf_section
from pgo.core.toolchain import BOLT_COMPILE_FLAGS, BOLT_LINK_FLAGS, config_flags, fingerprint
from pgo.core.workdir import Workdir
from pgo.packaging import debpackages
from pgo.packaging.recipes import RECIPES


def bolt_missing():
    try:
        bolt.tools()
    except PipelineError as e:
        return str(e)
    return None


needs_bolt = pytest.mark.skipif(bolt_missing() is not None, reason=str(bolt_missing()))


def build(workdir, *extra, config="fixture-lto-bolt", check=True):
    return build_fixture(workdir, *extra, config=config, check=check)


@pytest.fixture(scope="module")
def bolted(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bolt") / "w"
    return workdir, build(workdir).stdout


def fixture_runs(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, check=True).stdout


# --- the configuration ----------------------------------------------------------

def test_bolt_flags_are_in_every_variant_and_the_fingerprint():
    with_bolt, without = build_config("fixture-lto-bolt"), build_config("fixture-lto")
    assert with_bolt.bolt and with_bolt.lto and not without.bolt
    for variant in ("instrumented", "optimized", "plain"):
        compile_flags, link_flags = config_flags(variant, with_bolt)
        assert set(BOLT_COMPILE_FLAGS) <= set(compile_flags) and set(BOLT_LINK_FLAGS) <= set(link_flags)
        assert not set(BOLT_LINK_FLAGS) & set(config_flags(variant, without)[1])
    assert fingerprint(with_bolt) != fingerprint(without)
    assert "bolt" not in run_pgo("phases").stdout.split()
    assert [row["name"] for row in json.loads(run_pgo("phases", "--config", "fixture-lto-bolt", "--pgo", "reuse",
                                                      "--json").stdout)] == \
        ["source", "import", "optimized", "bolt", "stage", "test"]


# --- the phase and its check ------------------------------------------------------

@needs_bolt
def test_the_bolt_phase_runs_after_the_optimised_build_and_its_check_passes(bolted):
    workdir, out = bolted
    done = json.loads((workdir / "state.json").read_text())["done"]
    settings = Workdir(workdir).load_settings()
    pipeline = pipeline_of(settings, build_config(settings.config))
    assert pipeline.index("bolt") == pipeline.index("optimized") + 1
    assert set(pipeline) <= set(done)
    check = json.loads((workdir / "bolt.json").read_text())
    assert check["passed"] and check["problems"] == []
    # The training's two runs (the setup's and the workload's), each its own profile.
    assert check["fdata_files"] == 2
    assert check["relocations"] and check["profiled_functions"] >= 2 and check["stale_share"] == 0
    assert check["hot_text_bytes"] > 0 and check["layout_changed_functions"] >= 1
    assert check["taken_branches"]["after"] < check["taken_branches"]["before"]
    assert check["identity"] == done["optimized"]["identity"]
    # The flags BOLT needs reached the link.
    configure = (workdir / "build" / "pgo" / "pgo-configure.json").read_text()
    assert "-Wl,--emit-relocs" in configure and "-fno-reorder-blocks-and-partition" in configure
    # BOLT's check is printed, and its record (bolt.json) is the Buildbot step's summary.
    assert lines.bolt_check(check) in out.splitlines()
    assert lines.bolt_check_summary(check) == (
        f"BOLT passed: {check['profiled_functions']} of {check['functions']} functions profiled, 0% stale, "
        f"{check['hot_text_bytes']} bytes of hot text;")


@needs_bolt
def test_the_staged_binary_is_the_bolted_one_and_computes_what_the_fixture_computes(bolted):
    workdir, _ = bolted
    check = json.loads((workdir / "bolt.json").read_text())
    staged, linked = workdir / "stage" / "bin" / "fixture", workdir / "build" / "pgo" / "fixture.pre-bolt"
    assert bolt.bolted(staged) and not bolt.bolted(linked)
    assert sha256_file(staged) == check["sha256"] == sha256_file(workdir / "build" / "pgo" / "fixture")
    info = json.loads((workdir / "build-info.json").read_text())
    assert info["bolt"] == check
    assert "PGO+BOLT build, profile 1.0.0-" in fixture_runs(staged, "--version")
    for args in (("train",), ("digest", "SELECT c FROM sbtest1 WHERE id = 42"), ("digest", "x 'quoted' y\n"),
                 ("digest", ""), ("cold", "SELECT 1")):
        assert fixture_runs(staged, *args) == fixture_runs(linked, *args), args
    # The fixture's own test suite passed on the staged BOLTed build.
    results = json.loads((workdir / "tests" / "release" / "results.json").read_text())
    assert results["counts"]["failed"] == 0 and results["counts"]["passed"] >= 2


def packaged_binary(fmt, folder, into):
    """The fixture binary a published folder's package holds, unpacked into `into`."""
    into.mkdir()
    if fmt == "bintar":
        with tarfile.open(next(folder.glob("*.tar.gz"))) as archive:
            member = next(m for m in archive.getmembers() if m.name.endswith("/bin/fixture"))
            (into / "fixture").write_bytes(archive.extractfile(member).read())
        (into / "fixture").chmod(0o755)
        return into / "fixture"
    if fmt == "deb":
        subprocess.run(["dpkg-deb", "-x", next(folder.glob("fixture_*.deb")), into], check=True)
    else:
        rpm = next(folder.glob("fixture-server-*.rpm"))
        subprocess.run(f"rpm2cpio '{rpm}' | cpio -idm --quiet", shell=True, cwd=into, check=True)
    return into / "usr" / "bin" / "fixture"


@needs_bolt
@pytest.mark.parametrize("fmt", ["bintar", "rpm", "deb"])
def test_the_packages_carry_the_bolted_binary_unstripped_and_say_so(bolted, tmp_path, fmt):
    workdir, _ = bolted
    out = tmp_path / fmt
    run_pgo("package", "--workdir", workdir, "--format", fmt, "--out", out)
    packaged = json.loads((out / "buildinfo.json").read_text())
    assert packaged["package_version"] == "1.0.0+pgo+bolt" and packaged["bolt"]["passed"]
    assert all("+pgo+bolt" in path.name for path in out.glob("fixture*") if path.suffix != ".json")
    binary = packaged_binary(fmt, out, tmp_path / "unpacked")
    # Unstripped: binutils' strip breaks BOLT's layout (the stripped fixture crashes at start). The rpm
    # is its own build, BOLTed by its own bolt phase: the same program, not the same bytes.
    assert bolt.bolted(binary) and elf_section(binary, b".symtab") is not None
    assert fixture_runs(binary, "digest", "SELECT 1") == fixture_runs(workdir / "stage" / "bin" / "fixture",
                                                                      "digest", "SELECT 1")
    # It keeps its PT_GNU_STACK header: glibc gives a program without one executable thread stacks.
    headers = subprocess.run(["readelf", "-l", "-W", binary], capture_output=True, text=True, check=True).stdout
    assert "GNU_STACK" in headers and "RWE" not in headers.split("GNU_STACK", 1)[1].splitlines()[0]
    if fmt == "deb":
        # What pgo prove's lintian would refuse without the package's override.
        subprocess.run(["lintian", "--fail-on", "error", "--suppress-tags", "bad-distribution-in-changes-file",
                        *out.glob("*.deb")], check=True, capture_output=True)
    else:
        assert "proof passed: version comment 'fixture 1.0.0 fixture-lto-bolt, PGO+BOLT build, profile 1.0.0-" \
            in run_pgo("prove", out).stdout


@pytest.fixture(scope="module")
def linked_for_bolt(tmp_path_factory):
    """A shared library and a static archive built as a `bolt = true` build links: with BOLT's flags."""
    folder = tmp_path_factory.mktemp("emit-relocs")
    (folder / "triple.c").write_text("int triple(int x) { return 3 * x; }\n"
                                     "int triple_plus_one(int x) { return triple(x) + 1; }\n")
    compile_ = ["gcc", "-O2", "-fPIC", *BOLT_COMPILE_FLAGS]
    subprocess.run([*compile_, "-shared", *BOLT_LINK_FLAGS, folder / "triple.c", "-o", folder / "libtriple.so"],
                   check=True)
    subprocess.run([*compile_, "-c", folder / "triple.c", "-o", folder / "triple.o"], check=True)
    subprocess.run(["ar", "rcs", folder / "libtriple.a", folder / "triple.o"], check=True)
    return folder


@pytest.mark.parametrize("fmt", ["deb", "rpm"])
def test_a_library_linked_for_bolt_ships_stripped_and_still_loads(linked_for_bolt, tmp_path, fmt):
    """--emit-relocs keeps a library's static relocations, and strip keeps every symbol they name:
    lintian refused the BOLT build's libmariadb.so.3 and plugins as unstripped. Both strippers, the
    deb's and the rpm's %__strip, take the relocations first; the dynamic ones stay."""
    library = tmp_path / "libtriple.so"
    shutil.copyfile(linked_for_bolt / "libtriple.so", library)
    assert elf_section(library, b".rela.text") is not None and elf_section(library, b".symtab") is not None
    if fmt == "deb":
        debpackages.strip(library)
    else:
        subprocess.run([RECIPES / "strip-unless-bolted.sh", "--strip-unneeded", library], check=True)
    assert elf_section(library, b".symtab") is None and elf_section(library, b".rela.text") is None
    assert ctypes.CDLL(str(library)).triple_plus_one(2) == 7


def test_the_rpm_stripper_keeps_a_static_archives_relocations(linked_for_bolt, tmp_path):
    """rpmbuild strips static archives with %__strip -g too: their relocations are what a link needs."""
    archive = tmp_path / "libtriple.a"
    shutil.copyfile(linked_for_bolt / "libtriple.a", archive)
    subprocess.run([RECIPES / "strip-unless-bolted.sh", "-g", archive], check=True)
    (tmp_path / "main.c").write_text('#include <stdio.h>\nint triple_plus_one(int);\n'
                                     'int main(void) { printf("%d\\n", triple_plus_one(4)); return 0; }\n')
    subprocess.run(["gcc", tmp_path / "main.c", archive, "-o", tmp_path / "main"], check=True)
    assert fixture_runs(tmp_path / "main") == "13\n"


@needs_bolt
def test_a_binary_changed_after_its_check_is_never_staged(bolted, tmp_path):
    workdir, _ = bolted
    binary = workdir / "build" / "pgo" / "fixture"
    kept = binary.read_bytes()
    try:
        binary.write_bytes((workdir / "build" / "pgo" / "fixture.pre-bolt").read_bytes())
        refused(run_pgo("phase", "stage", "--workdir", workdir, check=False),
                "is not the binary phase bolt made and checked: run phase bolt again")
    finally:
        binary.write_bytes(kept)
    assert "resuming" in build(workdir).stdout      # stage and test again, for the tests after this one


# --- a profile that is not the binary's ---------------------------------------------

@pytest.fixture(scope="module")
def foreign_profile(tmp_path_factory):
    """BOLT's profile of another binary: the fixture compiled at -O0, instrumented and trained."""
    folder = tmp_path_factory.mktemp("foreign")
    other = folder / "fixture-O0"
    subprocess.run(["gcc", "-O0", "-fno-reorder-blocks-and-partition", "-Wl,--emit-relocs",
                    '-DFIXTURE_VERSION="1.0.0"', '-DBUILD_COMMENT="another binary"',
                    FIXTURE / "src" / "main.c", FIXTURE / "src" / "hot.c", "-o", other], check=True)
    log = PhaseLog(folder / "bolt.log", "bolt")
    try:
        bolt.instrument(bolt.tools(), other, folder / "instrumented", folder / "profile", log)
    finally:
        log.close()
    subprocess.run([folder / "instrumented", "train"], check=True, capture_output=True)
    return next(folder.glob("profile.*.fdata"))


@pytest.fixture(scope="module")
def optimised(tmp_path_factory):
    """A work directory built up to its optimised binary, for the bolt phase to run on."""
    workdir = tmp_path_factory.mktemp("broken") / "w"
    build(workdir, "--phase", "source", "--phase", "instrumented", "--phase", "train", "--phase", "check",
          "--phase", "optimized")
    return Workdir(workdir)


def run_bolt(workdir):
    ctx = context(workdir, workdir.load_settings())
    with workdir.locked():
        run_phases(ctx, pipeline_of(ctx.settings, ctx.config), ["bolt"])


@needs_bolt
@pytest.mark.parametrize("profile, phrases", [
    ("empty", ("BOLT found no profile data in ", "the training ran no code of fixture")),
    ("of no function here", ("BOLT's profile matched none of the ", " functions of fixture: it is no profile of "
                             "this binary")),
    ("of another binary", ("100% of BOLT's profile samples are in functions of fixture whose profile does not "
                           "match them (", "stale functions; at most 5%): a profile of another binary")),
])
def test_a_profile_that_is_not_the_binarys_fails_the_phase_with_one_line(optimised, foreign_profile, monkeypatch,
                                                                         profile, phrases):
    texts = {"empty": "", "of no function here": "1 nosuch 0 1 nosuch 10 0 5\n",
             "of another binary": foreign_profile.read_text()}
    # In place of the training's merged profile, the broken one.
    monkeypatch.setattr(bolt, "merge", lambda tools, files, merged, log: merged.write_text(texts[profile]))
    with pytest.raises(PipelineError) as failed:
        run_bolt(optimised)
    assert all(phrase in str(failed.value) for phrase in phrases) and "\n" not in str(failed.value)
    monkeypatch.undo()
    # Nothing BOLTed is labelled: the tree keeps its linked binary, stage refuses, and the CLI says why in one line.
    assert not bolt.bolted(optimised.build("optimized") / "fixture")
    if profile != "empty":
        check = json.loads((optimised.root / "bolt.json").read_text())
        assert not check["passed"] and check["problems"] == [str(failed.value)]
    line = refused(run_pgo("phase", "stage", "--workdir", optimised.root, check=False), "phase stage needs")
    assert "phase bolt" in line and "its last run failed" in line


@needs_bolt
def test_after_a_failed_check_the_phase_runs_again_with_the_training(optimised):
    run_bolt(optimised)
    assert json.loads((optimised.root / "bolt.json").read_text())["passed"]
    assert bolt.bolted(optimised.build("optimized") / "fixture")
    # And again, from the linked binary BOLT's input was: BOLT refuses a binary it rewrote.
    run_bolt(optimised)
    assert json.loads((optimised.root / "bolt.json").read_text())["passed"]
    assert os.path.isfile(optimised.build("optimized") / "fixture.pre-bolt")
    assert not bolt.bolted(optimised.build("optimized") / "fixture.pre-bolt")


def test_bolts_report_is_read_from_its_own_lines():
    said = ["BOLT-INFO: enabling relocation mode",
            "BOLT-INFO: 6 out of 9 functions in the binary (66.7%) have non-empty execution profile",
            "BOLT-WARNING: 1 (16.7% of all profiled) function have invalid (possibly stale) profile. Use -report-stale",
            "BOLT-WARNING: 320011 out of 320019 samples in the binary (100.0%) belong to functions with invalid "
            "(possibly stale) profile.",
            "BOLT-INFO: basic block reordering modified layout of 1 functions (16.67% of profiled, 4.55% of total)",
            "BOLT-INFO: splitting separates 823 hot bytes from 313 cold bytes (72.45% of split functions is hot).",
            "             4560012 : taken branches", "             3180010 : taken branches (-30.3%)",
            "BOLT-INFO: setting __hot_start to 0x200000", "BOLT-INFO: setting __hot_end to 0x2005a4"]
    figures = bolt.report(said)
    assert (figures["profiled_functions"], figures["functions"], figures["stale_functions"]) == (6, 9, 1)
    assert figures["stale_share"] == 320011 / 320019 and figures["hot_text_bytes"] == 0x5a4
    assert (figures["hot_bytes"], figures["cold_bytes"], figures["layout_changed_functions"]) == (823, 313, 1)
    assert figures["taken_branches"] == {"before": 4560012, "after": 3180010} and figures["relocations"]
    without_relocations = bolt.report([line for line in said if "relocation" not in line])
    assert not without_relocations["relocations"]


def test_a_machine_without_bolt_is_told_what_to_install(monkeypatch):
    monkeypatch.setattr(bolt.shutil, "which", lambda name: None)
    with pytest.raises(PipelineError, match=r"^BOLT is not installed: no llvm-bolt or llvm-bolt-19 on PATH "
                                            r"\(tools/install-deps.sh installs bolt-19 and libbolt-19-dev\)$"):
        bolt.tools()


def test_pgo_prove_refuses_a_bolt_mark_its_binary_has_no_passed_check_for():
    from pgo.packaging.prove import check_label, check_mark
    use = {"passed": True, "profile_id": "1.0.0-abc", "identity": {"compiler": {"version": "12.2.0"}},
           "hot_coverage": 1.0}
    info = {"profile_id": "1.0.0-abc", "profile_use": use, "compiler": {"version": "12.2.0"},
            "package_version": "1.0.0+pgo+bolt", "bolt": None}
    with pytest.raises(PipelineError, match=r"is marked BOLT \(\+bolt\), but its binary has no passed BOLT check"):
        check_label(info)
    with pytest.raises(PipelineError, match=r"is not marked BOLT \(\+bolt\), but its binary has a passed BOLT check"):
        check_label(dict(info, package_version="1.0.0+pgo", bolt={"passed": True, "profiled_functions": 6}))
    check_label(dict(info, bolt={"passed": True, "profiled_functions": 6}))
    with pytest.raises(PipelineError, match="lacks the mark 'PGO\\+BOLT build' with profile 1.0.0-abc"):
        check_mark("fixture 1.0.0 fixture-lto-bolt, PGO build, profile 1.0.0-abc", dict(info, bolt={"passed": True}))
    with pytest.raises(PipelineError, match="lacks the mark 'PGO build'"):
        check_mark("fixture 1.0.0 fixture-lto-bolt, PGO+BOLT build, profile 1.0.0-abc", info)
