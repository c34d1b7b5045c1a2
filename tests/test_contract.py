"""The work-directory contract on the fixture project: a phase takes only what a phase that succeeded
made, with the identity it is about to use; the label of a package is its binary's own passed check.

Each test is a fault a release engineer can cause by running phases by hand (`pgo phase X`,
`pgo build --phase X`): the pipeline must refuse, say why in one line, and publish nothing.
"""

import fcntl
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest
from conftest import FIXTURE, REPO, refused, run_pgo

BUILD = ["build", "--version", "1.0.0", "--config", "fixture", "--source", FIXTURE]
TRAINING_BINARY = ("build", "instrumented-install", "bin", "fixture")
HOT_GCDA = "CMakeFiles#hot.dir#src#hot.c.gcda"
MAIN_GCDA = "CMakeFiles#fixture.dir#src#main.c.gcda"


def wrap_training(workdir, after):
    """Replace the installed instrumented binary by a script that runs it, then, after the
    training proper (`fixture train`, not the setup step before it), runs `after` (shell)."""
    binary = workdir.joinpath(*TRAINING_BINARY)
    real = binary.with_name("fixture.real")
    binary.rename(real)
    binary.write_text(f'#!/bin/sh\n"{real}" "$@" || exit\n[ "$1" = train ] || exit 0\n'
                      f'cd "{workdir / "profile"}"\n{after}\n')
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)


def json_of(path):
    return json.loads(path.read_text())


def archived(archive_root):
    return list(archive_root.rglob("manifest.json"))


@pytest.fixture
def archive_root(tmp_path):
    return tmp_path / "archive"


def pgo_in(archive_root):
    """run_pgo with a private profile archive: what a test archives, it alone sees."""
    return lambda *args, **kw: run_pgo(*args, check=kw.pop("check", False),
                                       env={"PGO_ARCHIVE": str(archive_root), **kw.pop("env", {})}, **kw)


# --- a phase that failed feeds nothing ---------------------------------------------

def test_a_training_that_fails_after_writing_counters_feeds_no_later_phase(tmp_path, archive_root):
    pgo, workdir = pgo_in(archive_root), tmp_path / "w"
    assert pgo(*BUILD, "--workdir", workdir, "--phase", "source", "--phase", "instrumented").returncode == 0
    wrap_training(workdir, "exit 3")
    failed = pgo("phase", "train", "--workdir", workdir)
    refused(failed, "phase 'train' failed", "status 3")
    assert sorted(p.name for p in (workdir / "profile").iterdir()) == [MAIN_GCDA, HOT_GCDA]
    for phase in ("check", "optimized", "archive"):
        refused(pgo("phase", phase, "--workdir", workdir), "needs profile from phase train, but its last run "
                "failed (phase 'train' failed: fixture exited with status 3", "run phase train first")
    refused(pgo("phase", "stage", "--workdir", workdir), "needs build/pgo from phase optimized")
    refused(pgo(*BUILD, "--workdir", workdir, "--phase", "check", "--phase", "optimized"), "phase train")
    refused(pgo("archive", "store", "--workdir", workdir), "phase check", "not archived")
    assert archived(archive_root) == []
    assert not (workdir / "profile-check.json").exists() and not (workdir / "stage").exists()


def test_a_failed_optimised_build_is_neither_staged_nor_packaged(tmp_path, archive_root):
    pgo, workdir = pgo_in(archive_root), tmp_path / "w"
    cache = tmp_path / "cache"     # its own shared source tree
    trained = tmp_path / "trained"
    assert pgo(*BUILD, "--workdir", trained, "--cache", cache, "--tests", "off").returncode == 0
    # The profile of that source, taken for another control flow of it: a build the profile does not fit.
    changed = tmp_path / "changed"
    shutil.copytree(FIXTURE, changed)
    hot = changed / "src" / "hot.c"
    loop = "h = (h << 5) | (h >> 27);"
    hot.write_text(hot.read_text().replace(loop, loop + " if (h & 1) words++;"))
    build = ["build", "--version", "1.0.0", "--config", "fixture", "--source", changed, "--workdir", workdir,
             "--cache", cache, "--profile-from", json_of(trained / "profile-check.json")["profile_id"]]
    refused(pgo(*build), "coverage-mismatch warnings")
    refused(pgo("phase", "stage", "--workdir", workdir), "phase optimized", "its last run failed")
    refused(pgo(*build, "--phase", "stage"), "phase optimized")
    out = tmp_path / "out"
    refused(pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out),
            "coverage-mismatch warnings", "never packaged as PGO", "--as-plain")
    assert not out.exists()
    assert not (workdir / "build-info.json").exists() and not (workdir / "stage").exists()
    # The rejected tree's verdict is kept, for the engineer, as a failed one.
    use = json_of(workdir / "profile-use.json")
    assert use["passed"] is False and use["coverage_mismatch"] >= 1
    # Asked to, it ships as what it is without a profile: a plain build of the configuration.
    assert pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out, "--as-plain").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["buildinfo.json", "fixture-1.0.0-linux-x86_64.tar.gz",
                                                   "sha256sums.txt"]
    assert json_of(out / "buildinfo.json")["profile_id"] is None
    proof = pgo("prove", out)
    assert proof.returncode == 0 and "plain build (no PGO)" in proof.stdout, proof.stderr


def test_a_compiler_swapped_in_on_path_after_training_is_named(tmp_path, archive_root):
    pgo, workdir = pgo_in(archive_root), tmp_path / "w"
    phases = [arg for phase in ("source", "instrumented", "train", "check") for arg in ("--phase", phase)]
    assert pgo(*BUILD, "--workdir", workdir, *phases).returncode == 0
    other = tmp_path / "other-gcc"
    other.mkdir()
    for tool in ("gcc", "g++"):
        (other / tool).write_text(f'#!/bin/sh\nexec "{shutil.which(tool)}" "$@"\n')
        (other / tool).chmod(0o755)
    swapped = {"PATH": f"{other}{os.pathsep}{os.environ['PATH']}"}
    line = refused(pgo("phase", "optimized", "--workdir", workdir, env=swapped),
                   "phase optimized would use compiler", str(other / "gcc"), "phase train made its input with")
    assert os.path.realpath(shutil.which("gcc")) in line
    assert not (workdir / "profile-use.json").exists()
    refused(pgo("phase", "stage", "--workdir", workdir, env=swapped), "phase optimized")
    # The compiler that trained, back on PATH: the build goes on.
    assert pgo(*BUILD, "--workdir", workdir).returncode == 0


def test_a_profile_changed_after_its_check_is_refused(tmp_path, archive_root):
    pgo, workdir = pgo_in(archive_root), tmp_path / "w"
    phases = [arg for phase in ("source", "instrumented", "train", "check") for arg in ("--phase", phase)]
    assert pgo(*BUILD, "--workdir", workdir, *phases).returncode == 0
    checked = json_of(workdir / "profile-check.json")["profile_id"]
    shutil.copy(workdir / "profile" / MAIN_GCDA, workdir / "profile" / HOT_GCDA)
    refused(pgo("phase", "optimized", "--workdir", workdir), "phase optimized would use profile id",
            f"phase train made its input with {checked}", "run phase train again")


def test_rerunning_a_phase_removes_every_later_output(tmp_path, archive_root):
    pgo, workdir = pgo_in(archive_root), tmp_path / "w"
    assert pgo(*BUILD, "--workdir", workdir).returncode == 0
    assert pgo("phase", "train", "--workdir", workdir).returncode == 0
    for later in ("profile-check.json", "profile-use.json", "archive.json", "build-info.json", "stage"):
        assert not (workdir / later).exists(), later
    # The tree the instrumented build made (and the check reads) is still that phase's.
    assert (workdir / "build" / "pgo" / "CMakeCache.txt").is_file()
    assert set(json_of(workdir / "state.json")["done"]) == {"source", "instrumented", "train"}


def kinds(pgo):
    return {row["name"]: row["kind"] for row in json.loads(pgo("archive", "list", "--json").stdout)}


def test_a_reused_profile_is_archived_and_promoted_only_after_its_optimised_build_passed(tmp_path, archive_root):
    """A build that reuses an archived profile stores and promotes the entry it reused (Buildbot's
    release-profile and promote-profile steps): only when its optimised build passed with it, as a
    trained profile is archived only after its check and optimised build passed."""
    pgo, trained = pgo_in(archive_root), tmp_path / "trained"
    assert pgo(*BUILD, "--workdir", trained).returncode == 0
    [name] = kinds(pgo)
    changed = tmp_path / "changed"       # 1.0.0 again, but the hot loop's control flow differs
    shutil.copytree(FIXTURE, changed)
    hot = changed / "src" / "hot.c"
    loop = "h = (h << 5) | (h >> 27);"
    hot.write_text(hot.read_text().replace(loop, loop + " if (h & 1) words++;"))
    reuse, published = tmp_path / "reuse", tmp_path / "release-profile"
    reusing = [*BUILD[:-1], changed, "--workdir", reuse, "--profile-from", name]
    assert pgo(*reusing, "--phase", "source", "--phase", "import").returncode == 0
    for command, use in ((["archive", "store", "--archive", published], "archived"),
                         (["archive", "promote"], "promoted")):
        refused(pgo(*command, "--workdir", reuse), "phase optimized", "has not succeeded",
                f"its profile is not proven, so it is not {use}")
    refused(pgo(*reusing), "coverage-mismatch warnings")
    for command, use in ((["archive", "store", "--archive", published], "archived"),
                         (["archive", "promote"], "promoted")):
        refused(pgo(*command, "--workdir", reuse), "phase optimized", f"so it is not {use}")
    assert not published.exists() and kinds(pgo) == {name: "pending"}
    # The same profile on its own source: the optimised build passes, and its entry is the release's.
    passed = tmp_path / "passed"
    assert pgo(*BUILD, "--workdir", passed, "--profile-from", name).returncode == 0
    assert pgo("archive", "store", "--workdir", passed, "--archive", published).returncode == 0
    assert pgo("archive", "promote", "--workdir", passed).returncode == 0
    assert kinds(pgo) == {name: "release"} and archived(published)


# --- the label is the binary's own check ----------------------------------------------

def test_a_gcda_holding_another_objects_counters_is_not_full_coverage(tmp_path, archive_root):
    pgo, workdir = pgo_in(archive_root), tmp_path / "w"
    assert pgo(*BUILD, "--workdir", workdir, "--phase", "source", "--phase", "instrumented").returncode == 0
    # A training that leaves the hot object's .gcda holding main.c's counters: both objects have data.
    wrap_training(workdir, f"cp '{MAIN_GCDA}' '{HOT_GCDA}'")
    assert pgo(*BUILD, "--workdir", workdir).returncode == 0
    use = json_of(workdir / "profile-use.json")
    assert use["functions_without_profile"] == 2           # hot_digest and cold_digest
    # The check's training counts read what fits its notes, and say what did not.
    counts = json_of(workdir / "training-counts.json")
    assert (counts["objects"], counts["unread"], list(counts["functions"])) == (2, 1, ["main"])
    assert use["missing_hot_objects"] == ["CMakeFiles/hot.dir/src/hot.c"] and use["hot_coverage"] == 0.5
    strict = tmp_path / "strict"
    assert pgo(*BUILD, "--workdir", strict, "--min-hot-coverage", "0.9", "--phase", "source",
               "--phase", "instrumented").returncode == 0
    wrap_training(strict, f"cp '{MAIN_GCDA}' '{HOT_GCDA}'")
    refused(pgo(*BUILD, "--workdir", strict, "--min-hot-coverage", "0.9"),
            "only 50% of the hot objects got a profile")


def linked_fixture(tmp_path):
    """The fixture with src/hot.c a link to variants/hot-a.c; variants/hot-b.c has another control flow."""
    src = tmp_path / "linked"
    shutil.copytree(FIXTURE, src)
    hot, variants = src / "src" / "hot.c", src / "variants"
    variants.mkdir()
    text = hot.read_text()
    loop = "h = (h << 5) | (h >> 27);"
    (variants / "hot-a.c").write_text(text)
    (variants / "hot-b.c").write_text(text.replace(loop, loop + " if (h & 1) words++;"))
    hot.unlink()
    hot.symlink_to("../variants/hot-a.c")
    return src, hot


def test_a_link_pointed_elsewhere_in_the_source_is_another_source(tmp_path, archive_root):
    """A link's target is part of the tree: with src/hot.c pointing at another file of the tree, the
    profile trained before is stale, in source.json, build-info.json and buildinfo.json alike."""
    pgo, (src, hot) = pgo_in(archive_root), linked_fixture(tmp_path)
    build = [*BUILD[:-1], src]
    assert pgo(*build, "--workdir", tmp_path / "trained").returncode == 0
    [name] = kinds(pgo)
    hot.unlink()
    hot.symlink_to("../variants/hot-b.c")
    reuse = tmp_path / "reuse"
    result = pgo(*build, "--workdir", reuse, "--profile-from", name, "--accept-stale")
    assert result.returncode == 0, result.stderr
    assert "[import] stale: trained on fixture 1.0.0 source" in result.stdout
    assert pgo("package", "--workdir", reuse, "--format", "bintar", "--out", tmp_path / "bintar").returncode == 0
    trained = json_of(tmp_path / "trained" / "build-info.json")["source"]["checksum"]
    now = json_of(reuse / "source.json")["checksum"]
    assert trained != now == json_of(reuse / "build-info.json")["source"]["checksum"]
    assert json_of(tmp_path / "bintar" / "buildinfo.json")["source"]["checksum"] == now


@pytest.mark.parametrize("target", ["absolute", "../../outside.c", "../.git/hot.c"])
def test_a_source_directory_with_a_link_out_of_the_tree_is_refused(tmp_path, archive_root, target):
    """What a link out of the tree points at is no part of the tree's checksum, and may change between
    two phases unseen: such a source is refused, in one line, before anything is built."""
    src, hot = linked_fixture(tmp_path)
    outside = tmp_path / "outside.c"
    shutil.copy(src / "variants" / "hot-a.c", outside)
    (src / ".git").mkdir()
    shutil.copy(outside, src / ".git" / "hot.c")
    hot.unlink()
    hot.symlink_to(outside if target == "absolute" else target)
    workdir = tmp_path / "w"
    result = pgo_in(archive_root)(*BUILD[:-1], src, "--workdir", workdir)
    line = refused(result, f"has a symbolic link src/hot.c -> {hot.readlink()} that leads out of the tree")
    assert len(result.stderr.strip().splitlines()) == 1, line
    assert not (workdir / "build").exists()


@pytest.mark.parametrize("limit, message", [
    (["--min-hot-coverage", "0"], "expected a share above 0 and at most 1"),
    (["--min-hot-coverage", "7"], "expected a share above 0 and at most 1"),
    (["--max-mismatch", "-3"], "expected a number of functions, 0 or more"),
])
def test_limits_that_pass_a_build_without_profile_or_none_are_refused_before_building(
        tmp_path, archive_root, limit, message):
    """A minimum hot coverage of 0 would label a build that used no profile PGO; one above 1, or a
    negative mismatch limit, fails every build, but only after the training and both builds."""
    workdir = tmp_path / "w"
    result = pgo_in(archive_root)(*BUILD, "--workdir", workdir, *limit)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr and limit[0] in result.stderr
    assert not workdir.exists()

@pytest.fixture(scope="module")
def published(tmp_path_factory):
    root = tmp_path_factory.mktemp("published")
    run_pgo(*BUILD, "--workdir", root / "w")
    run_pgo("package", "--workdir", root / "w", "--format", "bintar", "--out", root / "bintar")
    return root


def relabelled(published, tmp_path, change):
    folder = tmp_path / "relabelled"
    shutil.copytree(published / "bintar", folder)
    info = json_of(folder / "buildinfo.json")
    change(info)
    (folder / "buildinfo.json").write_text(json.dumps(info))
    from pgo.base.checksums import write_sha256sums
    write_sha256sums(folder)
    return folder


@pytest.mark.parametrize("fault, message", [
    ("check failed", "did not pass a profile check"),
    ("no check", "did not pass a profile check"),
    ("other profile", "its binary's profile check says profile"),
    ("other compiler", "GCC 11.9.9, but its binary's profile check says"),
])
def test_prove_takes_the_label_from_the_binarys_own_check(published, tmp_path, fault, message):
    def change(info):
        if fault == "check failed":
            info["profile_use"]["passed"] = False
        elif fault == "no check":
            info["profile_use"] = None
        elif fault == "other profile":
            info["profile_id"] = "1.0.0-000000000000"
        else:
            info["compiler"]["version"] = "11.9.9"
    refused(run_pgo("prove", relabelled(published, tmp_path, change), check=False), message)


def test_package_buildinfo_carries_the_check_it_was_labelled_from(published):
    info = json_of(published / "bintar" / "buildinfo.json")
    check = json_of(published / "w" / "profile-use.json")
    assert info["profile_use"] == check and check["passed"] is True
    assert info["profile_id"] == check["profile_id"] == check["identity"]["profile_id"]
    assert info["compiler"] == check["identity"]["compiler"]


def test_a_staged_build_whose_tree_was_rebuilt_is_not_packaged(published, tmp_path):
    workdir = tmp_path / "w"
    shutil.copytree(published / "w", workdir, symlinks=True)
    (workdir / "build" / "pgo" / "pgo-build-token").write_text('"another build"\n')
    out = tmp_path / "out"
    refused(run_pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out, check=False),
            "the staged build is not the optimized build now in")
    assert not out.exists()


def test_a_tree_rebuilt_with_other_flags_after_its_proof_is_neither_staged_nor_packaged(tmp_path, archive_root):
    """Issue 43, case 2: `cmake -DCMAKE_C_FLAGS=-O2 . && ninja` in build/pgo after a good build, then
    `pgo phase stage` (exit 0) and `pgo package` published +pgo objects that never read the profile.
    What phase optimized proved (its compiled files, by checksum) must be what stage installs."""
    workdir, out = tmp_path / "w", tmp_path / "out"
    assert pgo_in(archive_root)(*BUILD, "--workdir", workdir, "--tests", "off").returncode == 0
    tree = workdir / "build" / "pgo"
    subprocess.run(["cmake", "-DCMAKE_C_FLAGS=-O2", "."], cwd=tree, check=True, capture_output=True)
    subprocess.run(["ninja"], cwd=tree, check=True, capture_output=True)
    refused(run_pgo("phase", "stage", "--workdir", workdir, check=False),
            "changed since phase optimized proved the tree", "run phase optimized again")
    refused(run_pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out, check=False))
    assert not out.exists()


@pytest.mark.parametrize("where", [("build/pgo", "stage"), ("stage",)], ids=["tree and stage", "stage"])
def test_a_plain_binary_copied_over_the_proven_one_is_not_packaged(published, tmp_path, where):
    """Issue 43, case 2: the plain build's binary copied over the build tree's and the staged copy (same
    build-id on both sides) was published as +pgo with a buildinfo.json naming the profile."""
    workdir, out = tmp_path / "w", tmp_path / "out"
    shutil.copytree(published / "w", workdir, symlinks=True)
    plain = tmp_path / "plain"
    run_pgo(*BUILD, "--workdir", plain, "--pgo", "off", "--tests", "off")
    for folder in where:
        shutil.copyfile(plain / "stage" / "bin" / "fixture",
                        workdir / folder / ("fixture" if folder == "build/pgo" else "bin/fixture"))
    line = refused(run_pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out, check=False),
                   "fixture changed since phase")
    assert ("proved the tree" if "build/pgo" in where else "installed the tree") in line
    assert not out.exists()
    if where == ("stage",):
        refused(run_pgo("phase", "test", "--workdir", workdir, check=False), "installed the tree",
                "rerun phase stage")


# --- the source a build read is the source it names --------------------------------------

def test_a_source_edited_between_phases_is_put_back_before_the_next_phase_reads_it(tmp_path, archive_root):
    """Issue 43, case 3: a constant edited in the line's shared source tree after `source` ran was
    built (the build resumed, exit 0), failed a test, and published +pgo under the original source's
    checksum. The next phase that reads the tree finds it changed, names the file, keeps the edit
    aside and puts the recorded source back; what is built, tested and shipped is that source."""
    workdir, out = tmp_path / "w", tmp_path / "out"
    pgo = pgo_in(archive_root)
    assert pgo(*BUILD, "--workdir", workdir, *[a for p in ("source", "instrumented", "train", "check")
                                                for a in ("--phase", p)]).returncode == 0
    tree = (workdir / "src").resolve()
    hot = tree / "src" / "hot.c"
    original = hot.read_text()
    hot.write_text(original.replace("16777619u", "16777620u"))
    result = pgo(*BUILD, "--workdir", workdir)
    assert result.returncode == 0, result.stderr
    assert f"the source tree {tree} changed since" in result.stdout and "(src/hot.c changed): putting it back" \
        in result.stdout
    assert hot.read_text() == original
    kept = tree.with_name(f".{tree.name}.changed") / "src" / "hot.c"
    assert "16777620u" in kept.read_text()
    assert json_of(workdir / "tests" / "release" / "results.json")["failed"] == []
    assert pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out).returncode == 0


def test_a_source_edited_while_a_phase_compiles_fails_that_phase(tmp_path, archive_root):
    """An edit while a phase reads the tree (the compile takes minutes for MariaDB) would go into what
    it made under the recorded checksum: the phase fails naming the file, and run again it builds the
    recorded source."""
    workdir, flag = tmp_path / "w", tmp_path / "edit-once"
    pgo = pgo_in(archive_root)
    launcher = tmp_path / "launcher"
    # Edits the tree's hot.c once, while the optimised build compiles.
    launcher.write_text(f'#!/bin/sh\ncase " $* " in *" -fprofile-use="*) if [ -e "{flag}" ]; then rm "{flag}"; '
                        f'echo "/* edited */" >> "{workdir}/src/src/hot.c"; fi;; esac\nexec "$@"\n')
    launcher.chmod(0o755)
    env = {"CMAKE_C_COMPILER_LAUNCHER": str(launcher)}
    trained = [a for p in ("source", "instrumented", "train", "check") for a in ("--phase", p)]
    assert pgo(*BUILD, "--workdir", workdir, "--tests", "off", *trained, env=env).returncode == 0
    flag.touch()
    refused(pgo("phase", "optimized", "--workdir", workdir, env=env), "changed while this command read it",
            "src/hot.c changed", "run it again (it puts the tree back first)")
    assert not flag.exists()
    assert pgo(*BUILD, "--workdir", workdir, "--tests", "off", env=env).returncode == 0
    assert "edited" not in (workdir / "src" / "src" / "hot.c").read_text()


def test_a_workdir_that_is_a_file_and_an_out_that_is_a_dangling_link_are_one_line(published, tmp_path):
    """Issue 43, the one-line rule: `--workdir` naming a file said `does not exist`, and an --out that is a
    link to nothing created the link's target, outside where the user pointed."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    refused(run_pgo("package", "--workdir", a_file, "--format", "bintar", "--out", tmp_path / "o", check=False),
            f"work directory {a_file} is not a folder")
    link, target = tmp_path / "out", tmp_path / "elsewhere" / "bintar"
    link.symlink_to(target)
    refused(run_pgo("package", "--workdir", published / "w", "--format", "bintar", "--out", link, check=False),
            f"--out {link} is a symbolic link to {target}, which does not exist")
    assert not target.parent.exists()


def test_a_version_too_long_to_name_a_file_is_refused_before_anything_starts(tmp_path):
    """A 263-character version was accepted and failed at the packages with `File name too long`."""
    workdir = tmp_path / "w"
    result = run_pgo(*BUILD[:2], "1.0." + "0" * 259, *BUILD[3:], "--workdir", workdir, check=False)
    assert result.returncode != 0 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "expected MAJOR.MINOR.PATCH" in result.stderr and not workdir.exists()


# --- a damaged record is one line, never a traceback ---------------------------------------

def one_line(result, *phrases):
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return refused(result, *phrases)


@pytest.mark.parametrize("name, damage, message", [
    ("state.json", lambda text: text[:len(text) // 2], "state.json is not valid JSON"),
    ("state.json", lambda text: "[]", "state.json holds no phase records"),
    ("settings.json", lambda text: json.dumps(dict(json.loads(text), from_a_newer_pgo=1)),
     "settings.json holds settings this pgo does not know"),
])
def test_a_damaged_work_directory_record_is_one_line(published, tmp_path, name, damage, message):
    workdir = tmp_path / "w"
    shutil.copytree(published / "w", workdir, symlinks=True)
    (workdir / name).write_text(damage((workdir / name).read_text()))
    one_line(run_pgo("phase", "stage", "--workdir", workdir, check=False), message)
    if name == "state.json":        # what says which phases succeeded, so what may be packaged
        one_line(run_pgo("package", "--workdir", workdir, "--format", "bintar", "--out", tmp_path / "out",
                         check=False), message)
        assert not (tmp_path / "out").exists()


def test_the_work_directory_records_the_configuration_it_resolved_whole(published):
    from pgo.core import contract
    from pgo.core.config import build_config
    from pgo.core.workdir import Workdir
    assert contract.resolved_config(Workdir(published / "w")) == build_config("fixture")


@pytest.mark.parametrize("damage, message", [
    (lambda plan: None, "has no plan.json: its build never ran phase source"),
    (lambda plan: {k: v for k, v in plan.items() if k != "resolved"}, "is not a plan of this pgo"),
    (lambda plan: dict(plan, resolved=dict(plan["resolved"], from_a_newer_pgo=1)), "is not a plan of this pgo"),
])
def test_packaging_a_build_without_its_resolved_configuration_is_one_line(published, tmp_path, damage, message):
    # What `pgo package` builds and names by is the configuration the build resolved, not configs.toml's now.
    workdir = tmp_path / "w"
    shutil.copytree(published / "w", workdir, symlinks=True)
    plan = damage(json_of(workdir / "plan.json"))
    if plan is None:
        (workdir / "plan.json").unlink()
    else:
        (workdir / "plan.json").write_text(json.dumps(plan))
    one_line(run_pgo("package", "--workdir", workdir, "--format", "bintar", "--out", tmp_path / "out", check=False),
             message)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("buildinfo, message", [
    ("{not json", "buildinfo.json is not valid JSON"),
    ("[1]", "buildinfo.json is not one `pgo package` wrote"),
    ('{"format": "zip"}', "buildinfo.json is not one `pgo package` wrote"),
])
def test_proving_a_folder_pgo_package_did_not_write_is_one_line(tmp_path, buildinfo, message):
    from pgo.base.checksums import write_sha256sums
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "buildinfo.json").write_text(buildinfo)
    write_sha256sums(folder)
    one_line(run_pgo("prove", folder, check=False), message)
    one_line(run_pgo("prove", tmp_path / "nothing", check=False), "has no buildinfo.json")


# --- one work directory, one command ------------------------------------------------

def test_a_second_command_on_a_busy_work_directory_refuses(tmp_path, archive_root):
    pgo, workdir = pgo_in(archive_root), tmp_path / "w"
    workdir.mkdir()
    with open(workdir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("12345")
        lock.flush()
        result = pgo(*BUILD, "--workdir", workdir)
        refused(result, "is in use by another pgo command (pid 12345)")
        assert len(result.stderr.strip().splitlines()) == 1
        assert not (workdir / "settings.json").exists()
    assert pgo(*BUILD, "--workdir", workdir).returncode == 0
    with open(workdir / ".lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        refused(pgo("phase", "train", "--workdir", workdir), "is in use")
        refused(pgo("package", "--workdir", workdir, "--format", "bintar", "--out", tmp_path / "o"), "is in use")


def test_a_work_directory_with_a_space_in_its_path_builds(tmp_path, archive_root):
    pgo, workdir = pgo_in(archive_root), tmp_path / "work dir" / "w"
    result = pgo(*BUILD, "--workdir", workdir)
    assert result.returncode == 0, result.stderr
    assert json_of(workdir / "profile-use.json")["hot_coverage"] == 1.0


def test_packaging_sweeps_the_hidden_folders_of_killed_runs(published, tmp_path):
    """A SIGKILLed pgo package leaves its hidden folder; the next one into the same parent removes it."""
    host = socket.gethostname()
    finished = subprocess.Popen(["true"])
    finished.wait()
    killed = tmp_path / f".earlier.{host}.{finished.pid}.partial"
    running = tmp_path / f".other.{host}.{os.getpid()}.partial"
    elsewhere = tmp_path / f".other.another-host.{finished.pid}.partial"
    for folder in (killed, running, elsewhere):
        folder.mkdir()
        (folder / "fixture.tar.gz").write_bytes(b"\0" * 4096)
    assert run_pgo("package", "--workdir", published / "w", "--format", "bintar", "--out", tmp_path / "out")
    assert not killed.exists() and running.is_dir() and elsewhere.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [elsewhere.name, running.name]


def test_a_killed_package_leaves_its_scratch_only_until_the_next_run(published, tmp_path):
    """Issue 43: a SIGKILLed `pgo package` left /tmp/pgo-package-* behind for good. Its scratch is hidden
    beside --out now, named after its process, and the next run into the same folder removes it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    slow = bin_dir / "cpack"
    slow.write_text(f'#!/bin/sh\nsleep 60\nexec {shutil.which("cpack")} "$@"\n')
    slow.chmod(0o755)
    parent = tmp_path / "published"
    parent.mkdir()
    package = subprocess.Popen([sys.executable, "-m", "pgo", "package", "--workdir", published / "w", "--format",
                                "bintar", "--out", parent / "first"], cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    deadline = time.monotonic() + 60
    while not list(parent.glob(".first-scratch.*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    package.send_signal(signal.SIGKILL)
    package.wait()
    assert list(parent.glob(".first-scratch.*")), "the killed run's scratch was never seen"
    assert run_pgo("package", "--workdir", published / "w", "--format", "bintar", "--out", parent / "second")
    assert sorted(p.name for p in parent.iterdir()) == ["second"]


@pytest.fixture
def full_folder(tmp_path):
    """A folder on a filesystem of 16 KiB: room for no package."""
    folder = tmp_path / "full"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", folder], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    yield folder
    subprocess.run(["umount", folder], check=True)


@pytest.mark.parametrize("fmt", ["bintar", "deb"])
def test_a_full_out_is_one_line_naming_it(tmp_path, archive_root, full_folder, fmt):
    """Issue 43: a full --out gave dpkg-deb's three lines for a deb, and named the temporary staging
    copy, not --out, for the others."""
    workdir = tmp_path / "w"
    assert pgo_in(archive_root)(*BUILD[:4], "fixture-deb", *BUILD[5:], "--workdir", workdir,
                                "--tests", "off").returncode == 0
    result = run_pgo("package", "--workdir", workdir, "--format", fmt, "--out", full_folder / fmt, check=False)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    refused(result, f"no space left for the packages on the filesystem of --out {full_folder / fmt}",
            "nothing was published")
    assert list(full_folder.iterdir()) == []


def fixture_git_repo(tmp_path):
    """The fixture as an upstream git repository with its release tag."""
    repo = tmp_path / "upstream"
    shutil.copytree(FIXTURE, repo)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "1.0.0"], ["tag", "fixture-1.0.0"]):
        subprocess.run([*git, *command], check=True)
    return f"file://{repo}"


def test_a_killed_git_checkout_is_swept_by_the_next_source_phase(tmp_path, archive_root):
    """A git source is checked out hidden, then renamed to its tree: a source phase SIGKILLed
    while cloning leaves that hidden checkout, and the next one removes it."""
    url, cache, workdir = fixture_git_repo(tmp_path), tmp_path / "cache", tmp_path / "w"
    stalled = tmp_path / "bin"
    stalled.mkdir()
    cloning = tmp_path / "cloning"
    # The checkout's clone (of the cached mirror) stalls until the test kills the whole pgo command.
    (stalled / "git").write_text(f'#!/bin/sh\ncase "$*" in *--mirror*) ;; *clone*) touch "{cloning}"; sleep 60;; '
                                 f'esac\nexec "{shutil.which("git")}" "$@"\n')
    (stalled / "git").chmod(0o755)
    build = ["build", "--version", "1.0.0", "--config", "fixture", "--source", url, "--cache", cache,
             "--workdir", workdir, "--phase", "source"]
    command = subprocess.Popen([sys.executable, "-m", "pgo", *map(str, build)], cwd=REPO, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PGO_ARCHIVE": str(archive_root),
                                    "PATH": f"{stalled}{os.pathsep}{os.environ['PATH']}"})
    try:
        for _ in range(600):
            if cloning.exists() or command.poll() is not None:
                break
            time.sleep(0.1)
        assert cloning.exists(), "the checkout never started"
    finally:
        os.killpg(command.pid, signal.SIGKILL)
        command.wait()
    # The checkout is made in the cache, beside the line's trees, and renamed into one of them.
    def hidden():
        return sorted(p.name for p in cache.iterdir() if p.name.startswith(".") and "git-checkout" in p.name)
    assert len(hidden()) == 1           # the killed checkout's
    assert pgo_in(archive_root)(*build).returncode == 0
    assert hidden() == [] and (cache / "src" / "fixture-1.0" / "VERSION").exists()
