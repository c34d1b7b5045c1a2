"""Build-VM images: definition validation, the images folder and pointer, and the rollout's
decisions. The rollout's logic, store and pointer are real; only the slow external part
(building an image, running builds inside it) is replaced by scripted outcomes. Building
and testing a real image takes minutes and root: set VM_IMAGES_REAL=1 to run that too."""

import copy
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

from pgo import PipelineError
from vm_images import ImageError, definition
from vm_images.manifest import diff
from vm_images.rollout import GIVEN_SOURCE_IN_IMAGE, Outcome, Rollout, libraries_for_baseline, rollback
from vm_images.store import Store

REAL = os.environ.get("VM_IMAGES_REAL") == "1"


def run_cli(*args, check=None):
    result = subprocess.run([sys.executable, "-m", "vm_images", *map(str, args)], cwd=REPO,
                            capture_output=True, text=True)
    if check is not None and result.returncode != check:
        raise AssertionError(f"vm_images {' '.join(map(str, args))} exited {result.returncode}:\n"
                             f"{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture
def data():
    return copy.deepcopy(definition.load())


def image_error(name, data, requirements="no-such-file"):
    with pytest.raises(ImageError) as e:
        definition.image(name, data, requirements=requirements)
    return str(e.value)


# --- definitions ---------------------------------------------------------------

def test_the_shipped_definitions_are_valid_and_pin_exact_compilers():
    images, canaries = definition.validate_all()
    by_name = {i.name: i for i in images}
    assert by_name["gcc11"].compiler.version == "11.3.0"
    assert by_name["gcc12"].compiler.version == "12.2.0"
    for image in images:
        assert all("=" in pin and "*" not in pin for pin in image.compiler.pins())
        assert "linux-image-amd64" in image.packages and "cmake" in image.packages
        assert "valgrind" in image.packages              # the release benchmark's --callgrind
        assert image.worker.user != "root"
    assert {c.name for c in canaries} >= {"minimal", "fixture"}
    # The canary's threshold and budget are the canary gate policy's (pgo/bench/policy.py).
    assert {c.name: c.policy for c in canaries if c.gate == "bench"} == {"minimal": "canary",
                                                                          "minimal-11.8": "canary"}


def test_validate_command_lists_images_and_exits_zero():
    result = run_cli("validate", check=0)
    assert "gcc11: debian bookworm, gcc-11 11.3.0" in result.stdout
    assert "valid" in result.stdout


@pytest.mark.parametrize("change, message", [
    (lambda d: d["images"]["gcc11"]["compiler"]["packages"].update({"gcc-11": ">= 11"}), "not an exact version"),
    (lambda d: d["images"]["gcc11"]["compiler"]["packages"].update({"gcc-11": "11.4.0-1"}),
     "gcc-11 11.4.0-1 is GCC 11.4.0, but the compiler version says 11.3.0"),
    (lambda d: d["images"]["gcc11"]["compiler"].update({"version": "11"}), "not an exact GCC version"),
    (lambda d: d["images"]["gcc11"]["compiler"].update({"cc": "gcc-13"}), "gcc-13 is not among the pinned packages"),
    (lambda d: d["images"]["gcc11"]["compiler"].pop("cxx"), "missing setting 'cxx'"),
    (lambda d: d["package_sets"]["worker"].append("gcc-11"), "gcc-11 is pinned by the compiler"),
    (lambda d: d["package_sets"]["worker"].append("cmake>=3"), "'cmake>=3' is not a package name"),
    (lambda d: d["images"]["gcc11"].update({"package_sets": ["nosuch"]}), "unknown package set 'nosuch'"),
    (lambda d: d["images"]["gcc11"].update({"relase": "trixie"}), "unknown setting 'relase'"),
    (lambda d: d["images"]["gcc11"].update({"base": "nosuch"}), "unknown base 'nosuch'"),
    (lambda d: d["images"]["gcc11"].update({"family": "rpm", "bootstrap": "dnf"}),
     "family 'rpm' (bootstrap dnf --installroot) is planned but not implemented yet"),
    (lambda d: d["images"]["gcc11"].update({"family": "apk"}), "unknown family 'apk'"),
    (lambda d: d["images"]["gcc11"].update({"bootstrap": "debootstrap"}), "bootstrapped with 'mmdebstrap'"),
    (lambda d: d["images"]["gcc11"].update({"mirror": "deb.debian.org"}), "not an http(s) URL"),
    (lambda d: d["images"]["gcc11"].update({"disk_gib": "40G"}), "disk_gib must be a whole number"),
    (lambda d: d["images"]["gcc11"].update({"source_suites": "trixie"}), "source_suites must be a list"),
    (lambda d: d["images"]["gcc11"].update({"worker": {"user": "root"}}), "unprivileged user name"),
    (lambda d: d["images"]["gcc11"].update({"worker": {"buildbot_worker": "latest"}}), "not an exact version"),
])
def test_bad_definitions_are_refused_with_the_reason(data, change, message):
    change(data)
    error = image_error("gcc11", data)
    assert message in error
    assert error.startswith("image 'gcc11'")


def test_the_worker_can_fetch_the_source_packages_of_its_source_suites(monkeypatch, tmp_path):
    from vm_images import build
    commands = []
    monkeypatch.setattr(build, "run_logged", lambda command, log: commands.append(command))
    build.bootstrap(definition.image("gcc12"), tmp_path, None)
    entries = [arg for arg in map(str, commands[0]) if arg.startswith("deb")]
    # Debian 13's source packages (the 11.8 line), never its binary packages.
    assert {e for e in entries if "trixie" in e} == {
        "deb-src http://deb.debian.org/debian trixie main", "deb-src http://deb.debian.org/debian trixie-updates main",
        "deb-src http://deb.debian.org/debian-security trixie-security main"}
    assert "deb http://deb.debian.org/debian bookworm main" in entries


def test_unknown_image_names_the_known_ones(data):
    assert image_error("gcc99", data) == "unknown image 'gcc99' (known: gcc11, gcc12, gcc14)"


def test_the_trixie_definition_pins_gcc_14_and_trixies_package_names():
    gcc14 = definition.image("gcc14")
    assert (gcc14.distribution, gcc14.release, gcc14.source_suites) == ("debian", "trixie", ())
    assert (gcc14.compiler.cc, gcc14.compiler.cxx, gcc14.compiler.version) == ("gcc-14", "g++-14", "14.2.0")
    # GCC 14's compiler proper is in per-target packages, pinned with the front ends.
    assert dict(gcc14.compiler.packages) == {name: "14.2.0-19" for name in (
        "gcc-14", "g++-14", "cpp-14", "gcc-14-x86-64-linux-gnu", "g++-14-x86-64-linux-gnu", "cpp-14-x86-64-linux-gnu")}
    # MariaDB 11.8's Build-Depends in trixie: a JDK for CONNECT's JDBC, no libpmem-dev; pkgconf by name.
    assert {"default-jdk", "dh-package-notes", "libnet-ssleay-perl", "pkgconf"} <= set(gcc14.packages)
    assert not {"libpmem-dev", "pkg-config"} & set(gcc14.packages)
    # Debian 12's images keep Debian 12's set.
    gcc12 = definition.image("gcc12")
    assert "libpmem-dev" in gcc12.packages and "default-jdk" not in gcc12.packages


def test_the_trixie_image_fetches_its_own_sources_only(monkeypatch, tmp_path):
    from vm_images import build
    commands = []
    monkeypatch.setattr(build, "run_logged", lambda command, log: commands.append(command))
    build.bootstrap(definition.image("gcc14"), tmp_path, None)
    entries = [arg for arg in map(str, commands[0]) if arg.startswith("deb")]
    assert "deb http://deb.debian.org/debian-security trixie-security main" in entries
    assert not [e for e in entries if "bookworm" in e]
    assert "--include=" in " ".join(map(str, commands[0])) and "gcc-14=14.2.0-19" in str(commands[0])


@pytest.mark.parametrize("change, message", [
    (lambda t: t.update(image="gcc99"), "platform 'debian-13' (platforms.toml): image 'gcc99' is not defined"),
    (lambda t: t.update(image="gcc12"), "image 'gcc12' is debian bookworm, not debian trixie"),
    (lambda t: t.update(compiler={"cc": "gcc-13", "cxx": "g++-13", "version": "13.3.0"}),
     "image 'gcc14' pins gcc-14 g++-14 14.2.0, the platform says gcc-13 g++-13 13.3.0"),
    (lambda t: t.update(source_suites=["forky"]), "image 'gcc14' has no deb-src entries of forky"),
])
def test_a_platforms_image_must_be_of_its_release_and_compiler(change, message):
    import tomllib

    from pgo.base import platforms
    raw = tomllib.loads(platforms.PLATFORMS_FILE.read_text())
    change(raw["platforms"]["debian-13"])
    table = {name: platforms.parse(name, entry) for name, entry in raw["platforms"].items()}
    with pytest.raises(ImageError) as e:
        definition.validate_all(platform_table=table)
    assert message in str(e.value)


def test_worker_must_match_the_masters_buildbot(data, tmp_path):
    requirements = tmp_path / "master.txt"
    requirements.write_text("# master\nTwisted==24.11.0\nbuildbot==4.2.1\n")
    assert "buildbot_worker is 4.3.0 but" in image_error("gcc11", data, requirements)
    requirements.write_text("buildbot==4.3.0\n")
    assert definition.image("gcc11", data, requirements=requirements).worker.buildbot_worker == "4.3.0"


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update({"gate": "vibes"}), "unknown gate 'vibes'"),
    (lambda c: c.pop("compare"), "gate 'same-output' needs compare"),
    (lambda c: c.update({"version": "latest"}), "not MAJOR.MINOR.PATCH"),
    (lambda c: c.pop("config"), "missing setting 'config'"),
    (lambda c: c.update({"policy": "canary"}), "policy is for gate 'bench'"),
    (lambda c: c.update({"gate": "bench", "compare": []}), "gate 'bench' needs policy, the name of a gate policy"),
    (lambda c: c.update({"gate": "bench", "compare": [], "policy": "lenient"}), "(canary, release), not 'lenient'"),
    (lambda c: c.update({"min_speedup": 0.9}), "unknown setting 'min_speedup'"),
    (lambda c: c.update({"bench_options": ["--pairs", "6"]}), "bench_options is for gate 'bench'"),
])
def test_bad_canaries_are_refused(data, change, message):
    change(data["canaries"]["fixture"])
    with pytest.raises(ImageError, match="canary 'fixture'") as e:
        definition.canary("fixture", data)
    assert message in str(e.value)


@pytest.mark.parametrize("options, message", [
    ("--pairs 6", "bench_options must be a list of pgo bench arguments"),
    (["--pairs", 6], "bench_options must be a list of pgo bench arguments"),
    (["--pairs", "6", "--min-speedup", "0.5"], "bench_options cannot set --min-speedup: the rollout sets it"),
    (["--policy=release"], "bench_options cannot set --policy: the rollout sets it"),
    (["--out=/tmp/elsewhere"], "bench_options cannot set --out: the rollout sets it"),
])
def test_bench_options_leave_the_gate_to_the_rollout(data, options, message):
    data["canaries"]["minimal"]["bench_options"] = options
    with pytest.raises(ImageError, match="canary 'minimal'") as e:
        definition.canary("minimal", data)
    assert message in str(e.value)


def test_building_an_unknown_image_fails_before_anything_starts(tmp_path):
    result = run_cli("--images", tmp_path, "build", "gcc99", check=1)
    assert result.stderr.strip() == "vm_images: error: unknown image 'gcc99' (known: gcc11, gcc12, gcc14)"
    assert not any(tmp_path.iterdir())


# --- the images folder, manifests and the pointer --------------------------------

def fake_build(store, image, build_id, packages=None, version=None):
    """A finished build as the builder leaves it, minus the large files nobody reads here."""
    real = definition.image(image).as_dict()
    if version:
        real["compiler"]["version"] = version
    folder = store.root / image / build_id
    folder.mkdir(parents=True)
    manifest = {"image": image, "build": build_id, "definition": real,
                "packages": packages or {real["compiler"]["cc"]: next(iter(real["compiler"]["packages"].values()))},
                "python_packages": {"buildbot-worker": "4.3.0"}, "kernel_cmdline": "root=/dev/vda"}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return store.build(f"{image}/{build_id}")


def test_partial_builds_are_invisible_and_latest_is_newest(tmp_path):
    store = Store(tmp_path)
    fake_build(store, "gcc11", "20250101T000000Z")
    fake_build(store, "gcc11", "20250102T000000Z")
    (tmp_path / "gcc11" / ".20250103T000000Z.partial").mkdir()
    assert store.build("gcc11").build_id == "20250102T000000Z"
    with pytest.raises(ImageError, match="no build gcc11/20250103T000000Z"):
        store.build("gcc11/20250103T000000Z")
    with pytest.raises(ImageError, match="no finished build of image 'gcc12'"):
        store.build("gcc12")


def test_diff_names_every_changed_package_and_setting(tmp_path):
    store = Store(tmp_path)
    a = fake_build(store, "gcc12", "20250101T000000Z", {"gcc-12": "12.2.0-14", "cmake": "3.25.1-1"}).manifest
    b = fake_build(store, "gcc12", "20250102T000000Z", {"gcc-12": "12.2.0-14+deb12u1", "zstd": "1.5.4"}).manifest
    b["definition"]["disk_gib"] = 80
    lines = diff(a, b)
    assert "~ package gcc-12 12.2.0-14 -> 12.2.0-14+deb12u1" in lines
    assert "- package cmake 3.25.1-1 (only in gcc12/20250101T000000Z)" in lines
    assert "+ package zstd 1.5.4 (only in gcc12/20250102T000000Z)" in lines
    assert "~ definition disk_gib: 40 -> 80" in lines
    assert diff(a, a) == []


def test_diff_command_exits_one_on_differences(tmp_path):
    store = Store(tmp_path)
    fake_build(store, "gcc11", "20250101T000000Z")
    fake_build(store, "gcc12", "20250101T000000Z")
    same = run_cli("--images", tmp_path, "diff", "gcc11", "gcc11/20250101T000000Z", check=0)
    assert "no differences" in same.stdout
    different = run_cli("--images", tmp_path, "diff", "gcc11", "gcc12", check=1)
    assert "~ definition compiler:" in different.stdout


# --- the rollout -------------------------------------------------------------------

class ScriptedOperations:
    """The rollout's external steps with outcomes set by the test; records what ran."""

    def __init__(self, store, fail=()):
        self.store = store
        self.fail = set(fail)
        self.calls = []
        self.built_in = {}

    def outcome(self, step):
        self.calls.append(step)
        return Outcome(step not in self.fail, f"{step} {'failed' if step in self.fail else 'passed'}")

    def build(self, image):
        self.calls.append("build")
        if "build" in self.fail:
            raise ImageError("mmdebstrap failed with status 1: E: Unable to locate package gcc-12")
        return fake_build(self.store, image.name, "20250201T000000Z")

    def test(self, build):
        return self.outcome("test")

    def canary_build(self, build, canary, role, folder):
        self.built_in[role] = build.ref
        return self.outcome(role)

    def gate(self, build, current, canary, folder):
        return self.outcome("gate")


@pytest.fixture
def on_gcc11(tmp_path):
    store = Store(tmp_path)
    store.point_to(fake_build(store, "gcc11", "20250101T000000Z"), "first setup")
    return store


def roll(store, fail=(), **kwargs):
    ops = ScriptedOperations(store, fail)
    lines = []
    promoted = Rollout(store, ops, definition.canary("fixture"), say=lines.append).run("gcc12", **kwargs)
    record = json.loads(next(store.rollouts.glob("*/rollout.json")).read_text())
    return promoted, ops, record, "\n".join(lines)


def test_a_passing_rollout_promotes_and_records_every_step(on_gcc11):
    promoted, ops, record, output = roll(on_gcc11, from_image="gcc11")
    assert promoted
    assert ops.calls == ["build", "test", "canary", "baseline", "gate"]
    assert ops.built_in == {"canary": "gcc12/20250201T000000Z", "baseline": "gcc11/20250101T000000Z"}
    current = on_gcc11.pointer()["current"]
    assert (current["image"], current["build"]) == ("gcc12", "20250201T000000Z")
    assert current["compiler"]["version"] == "12.2.0"
    assert current["disk"] == "gcc12/20250201T000000Z/disk.qcow2"
    assert [s["step"] for s in record["steps"]] == ["build", "test", "canary", "baseline", "gate", "promote"]
    assert all(s["result"] == "passed" for s in record["steps"])
    assert record["decision"] == "promoted"
    assert record["steps"][-1]["details"]["profiles_not_reusable"] == "11.3.0"
    assert "profiles archived with GCC 11.3.0 are not reusable with GCC 12.2.0" in output
    assert "== step 5 of 6: gate" in output


@pytest.mark.parametrize("failing, ran", [
    ("build", ["build"]),
    ("test", ["build", "test"]),
    ("canary", ["build", "test", "canary"]),
    ("baseline", ["build", "test", "canary", "baseline"]),
    ("gate", ["build", "test", "canary", "baseline", "gate"]),
])
def test_a_failing_step_stops_the_rollout_and_keeps_the_current_image(on_gcc11, failing, ran):
    before = on_gcc11.pointer()
    promoted, ops, record, output = roll(on_gcc11, fail=[failing])
    assert not promoted
    assert ops.calls == ran
    assert on_gcc11.pointer() == before
    assert record["decision"] == "stopped"
    assert record["steps"][-1]["step"] == failing and record["steps"][-1]["result"] == "failed"
    assert record["reason"].startswith(f"step {failing} failed:")
    assert "the current image is unchanged" in output


def test_a_build_failure_is_recorded_with_its_message(on_gcc11):
    _, _, record, _ = roll(on_gcc11, fail=["build"])
    assert "Unable to locate package gcc-12" in record["steps"][0]["summary"]


def test_rollout_refuses_a_wrong_starting_point(tmp_path, on_gcc11):
    with pytest.raises(ImageError, match="the current image is gcc11/20250101T000000Z, not gcc10"):
        Rollout(on_gcc11, ScriptedOperations(on_gcc11), definition.canary("fixture")).run("gcc12", "gcc10")
    with pytest.raises(ImageError, match="gcc11/20250101T000000Z is already the current image"):
        Rollout(on_gcc11, ScriptedOperations(on_gcc11), definition.canary("fixture")).run(
            "gcc11", reuse_build="20250101T000000Z")
    with pytest.raises(ImageError, match="no finished build of image .gcc12."):
        Rollout(on_gcc11, ScriptedOperations(on_gcc11), definition.canary("fixture")).run(
            "gcc12", reuse_build="20990101T000000Z")
    empty = Store(tmp_path / "empty")
    with pytest.raises(ImageError, match="no image is current.*vm_images promote"):
        Rollout(empty, ScriptedOperations(empty), definition.canary("fixture")).run("gcc12")
    assert not on_gcc11.rollouts.exists()


def test_a_rebuild_of_the_current_image_is_rolled_out_like_any_other(tmp_path):
    store = Store(tmp_path)
    store.point_to(fake_build(store, "gcc12", "20250101T000000Z"), "first setup")
    promoted, ops, _, _ = roll(store)
    assert ops.built_in == {"canary": "gcc12/20250201T000000Z", "baseline": "gcc12/20250101T000000Z"}
    assert promoted and store.pointer()["current"]["build"] == "20250201T000000Z"


def test_rollout_can_take_a_finished_build_instead_of_building(on_gcc11):
    fake_build(on_gcc11, "gcc12", "20250105T000000Z")
    promoted, ops, _, _ = roll(on_gcc11, reuse_build="20250105T000000Z")
    assert promoted and ops.calls == ["test", "canary", "baseline", "gate"]
    assert on_gcc11.pointer()["current"]["build"] == "20250105T000000Z"


def test_rollback_restores_the_previous_image_and_deletes_nothing(on_gcc11):
    roll(on_gcc11)
    files_before = sorted(p for p in on_gcc11.root.rglob("*") if p.name != "current.json")
    entry = rollback(on_gcc11, "canary looked fine, production did not", say=lambda line: None)
    assert (entry["image"], entry["build"]) == ("gcc11", "20250101T000000Z")
    pointer = on_gcc11.pointer()
    assert [(h["image"], h["reason"]) for h in pointer["history"]] == [
        ("gcc11", "first setup"), ("gcc12", pointer["history"][1]["reason"])]
    assert pointer["current"]["reason"].startswith("rollback from gcc12/20250201T000000Z")
    assert sorted(p for p in on_gcc11.root.rglob("*") if p.name != "current.json") == files_before


def test_promote_status_and_rollback_commands(tmp_path):
    store = Store(tmp_path)
    fake_build(store, "gcc11", "20250101T000000Z")
    fake_build(store, "gcc12", "20250101T000000Z")
    nothing = run_cli("--images", tmp_path, "rollback", check=1)
    assert "no image is current" in nothing.stderr
    promoted = run_cli("--images", tmp_path, "promote", "gcc11", "--docker", tmp_path / "no-docker", check=0)
    assert promoted.stdout.splitlines()[-1] == (f"no container image: `{tmp_path / 'no-docker'} info` does not "
                                                "answer (once it does: python3 -m vm_images container-image)")
    alone = run_cli("--images", tmp_path, "rollback", check=1)
    assert "the only image ever current" in alone.stderr
    run_cli("--images", tmp_path, "promote", "gcc12", "--reason", "by hand", "--no-container", check=0)
    run_cli("--images", tmp_path, "rollback", "--no-container", check=0)
    status = run_cli("--images", tmp_path, "status", check=0).stdout
    assert status.startswith("current: gcc11/20250101T000000Z (gcc-11 11.3.0)")
    assert "before: gcc12/20250101T000000Z (gcc-12 12.2.0)" in status
    pointer = json.loads((tmp_path / "current.json").read_text())
    assert pointer["current"]["kernel_cmdline"] == "root=/dev/vda"


def source_package(folder, source="mariadb", version="1:11.8.6-0+deb13u1"):
    """A Debian source package as apt-get source leaves it: a .dsc and the files it lists, with checksums."""
    import hashlib
    folder.mkdir(parents=True, exist_ok=True)
    upstream = version.split(":")[-1].rsplit("-", 1)[0]
    tarball = folder / f"{source}_{upstream}.orig.tar.gz"
    tarball.write_bytes(b"not really a tarball, but what the .dsc says it is")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    dsc = folder / f"{source}_{upstream}-0+deb13u1.dsc"
    dsc.write_text(f"Format: 3.0 (quilt)\nSource: {source}\nVersion: {version}\nChecksums-Sha256:\n"
                   f" {digest} {tarball.stat().st_size} {tarball.name}\n")
    return dsc


class RecordingOperations(ScriptedOperations):
    """Also records the source each canary build was given, and whether its copy was there."""

    def canary_build(self, build, canary, role, folder):
        copy = folder / "work" / canary.source.removeprefix("/srv/out/")
        self.built_from = getattr(self, "built_from", {}) | {role: (canary.source, copy.is_file())}
        return super().canary_build(build, canary, role, folder)


def test_a_canary_source_given_as_its_dsc_is_copied_and_built_in_both_images(on_gcc11, tmp_path):
    dsc = source_package(tmp_path / "downloads")
    ops, lines = RecordingOperations(on_gcc11, fail=["gate"]), []
    rollout = Rollout(on_gcc11, ops, definition.canary("minimal-11.8"), say=lines.append, source=dsc)
    assert not rollout.run("gcc12")
    in_image = f"{GIVEN_SOURCE_IN_IMAGE}/{dsc.name}"
    assert ops.built_from == {"canary": (in_image, True), "baseline": (in_image, True)}
    folder = next(on_gcc11.rollouts.iterdir())
    copied = folder / "work" / "source"
    assert sorted(f.name for f in copied.iterdir()) == sorted([dsc.name, "mariadb_11.8.6.orig.tar.gz"])
    record = json.loads((folder / "rollout.json").read_text())
    assert record["canary"]["source"] == in_image and record["canary_source"] == str(dsc)
    # The given files may go: a resume builds (or keeps the builds of) the copy in the rollout's folder.
    for f in dsc.parent.iterdir():
        f.unlink()
    ops = RecordingOperations(on_gcc11)
    assert Rollout(on_gcc11, ops, definition.canary("minimal-11.8")).run("gcc12", resume=record["id"])
    assert ops.calls == ["gate"]
    resumed = json.loads((folder / "rollout.json").read_text())
    assert resumed["canary"]["source"] == in_image and resumed["decision"] == "promoted"


def test_a_resume_does_not_take_another_canary_source(on_gcc11, tmp_path):
    dsc = source_package(tmp_path / "downloads")
    Rollout(on_gcc11, ScriptedOperations(on_gcc11, fail=["gate"]), definition.canary("minimal-11.8"),
            source=dsc).run("gcc12")
    stopped = next(on_gcc11.rollouts.iterdir()).name
    with pytest.raises(ImageError, match=f"rollout {stopped} builds the source it copied into its folder"):
        Rollout(on_gcc11, ScriptedOperations(on_gcc11), definition.canary("minimal-11.8"),
                source=dsc).run("gcc12", resume=stopped)


def corrupt(dsc):
    (dsc.parent / "mariadb_11.8.6.orig.tar.gz").write_bytes(b"changed")


@pytest.mark.parametrize("given, canary, message", [
    (lambda d: d.with_suffix(".txt"), "minimal-11.8", r"--canary-source .*\.txt: not a Debian source package's .dsc"),
    (lambda d: d.parent / "absent.dsc", "minimal-11.8", "absent.dsc: not a Debian source package's .dsc"),
    (lambda d: d, "minimal", r"is the source of mariadb 11\.8\.6, not of canary 'minimal': mariadb 10\.11\.18"),
    (lambda d: source_package(d.parent / "other", source="mysql"), "minimal-11.8",
     "is the source of mysql 11.8.6, not of canary 'minimal-11.8'"),
    (lambda d: corrupt(d) or d, "minimal-11.8", "does not match the checksum in .*: corrupted download"),
    (lambda d: d, "fixture", "canary 'fixture' builds fixture, which has no Debian source package"),
])
def test_a_canary_source_that_does_not_fit_is_refused_before_anything_is_written(on_gcc11, tmp_path, given,
                                                                                   canary, message):
    dsc = source_package(tmp_path / "downloads")
    wrong = given(dsc)
    if wrong.suffix == ".txt":
        wrong.write_text("Source: mariadb\n")
    with pytest.raises(PipelineError, match=message):
        Rollout(on_gcc11, ScriptedOperations(on_gcc11), definition.canary(canary), source=wrong).run("gcc12")
    assert not on_gcc11.rollouts.exists()


def test_a_canary_an_image_cannot_fetch_is_refused_before_anything_is_built(on_gcc11, tmp_path):
    """The minimal canary's 10.11 is bookworm's source: a trixie image (gcc14) fetches trixie's. 11.8 is
    trixie's, which the bookworm images fetch too (their source_suites)."""
    ops = ScriptedOperations(on_gcc11)
    with pytest.raises(ImageError, match="canary 'minimal' builds Debian's source of mariadb 10.11, which is "
                       "bookworm's, and image gcc14 fetches sources of trixie: choose another canary"):
        Rollout(on_gcc11, ops, definition.canary("minimal")).run("gcc14")
    assert ops.calls == [] and not on_gcc11.rollouts.exists()
    assert Rollout(on_gcc11, ops, definition.canary("minimal-11.8"), say=lambda line: None).run("gcc14")
    assert ops.built_in == {"canary": "gcc14/20250201T000000Z", "baseline": "gcc11/20250101T000000Z"}
    # gcc11 is no platform's image (gcc12 is debian-12's): nothing to say of a platform there.
    record = json.loads(next(on_gcc11.rollouts.glob("*/rollout.json")).read_text())
    assert "platform" not in record["steps"][-1]["summary"]


def test_a_promotion_to_another_platforms_image_says_what_it_means_for_the_workers(tmp_path):
    store = Store(tmp_path)
    store.point_to(fake_build(store, "gcc12", "20250101T000000Z"), "first setup")
    ops, lines = ScriptedOperations(store), []
    assert Rollout(store, ops, definition.canary("minimal-11.8"), say=lines.append).run("gcc14")
    assert ("gcc14 is platform debian-13's image, gcc12 was debian-12's: this folder's workers build for "
            "debian-13 now (the master refuses them in a [[platforms]] entry of debian-12: give those a folder "
            "of their own)") in "\n".join(lines)


def test_rollout_command_refuses_a_wrong_canary_source_in_one_line(on_gcc11, tmp_path):
    result = run_cli("--images", on_gcc11.root, "rollout", "--to", "gcc12", "--canary-config", "minimal-11.8",
                     "--canary-source", tmp_path / "nothing.dsc", check=1)
    assert result.stderr.strip().splitlines() == [
        f"vm_images: error: --canary-source {tmp_path / 'nothing.dsc'}: not a Debian source package's .dsc "
        "(its files beside it)"]


def compile_c(path, code, *args):
    source = path.with_name(path.name.split(".")[0] + ".c")
    source.write_text(code)
    subprocess.run(["gcc", "-o", path, source, *map(str, args)], check=True, capture_output=True)
    source.unlink()


def test_the_gate_lends_the_baseline_what_the_new_image_lacks_from_the_image_it_was_built_in(tmp_path):
    """As bookworm's libaio.so.1 (trixie's is libaio.so.1t64): a real program and real libraries, the host
    as the new image, a folder as the old one holding two libraries the host lacks, one needing the other."""
    old = tmp_path / "old-image" / "usr/lib/x86_64-linux-gnu"
    old.mkdir(parents=True)
    compile_c(old / "libbar.so.2.0.1", "int bar(void) { return 40; }", "-shared", "-fPIC", "-Wl,-soname,libbar.so.2")
    (old / "libbar.so.2").symlink_to("libbar.so.2.0.1")
    compile_c(old / "libfoo.so.1", "int bar(void); int foo(void) { return bar() + 2; }", "-shared", "-fPIC",
              "-Wl,-soname,libfoo.so.1", f"-L{old}", "-l:libbar.so.2")
    stage = tmp_path / "stage"
    (stage / "lib").mkdir(parents=True)
    (stage / "bin").mkdir()
    compile_c(stage / "lib" / "libown.so.1", "int own(void) { return 0; }", "-shared", "-fPIC",
              "-Wl,-soname,libown.so.1")
    compile_c(stage / "bin" / "server", "int foo(void); int own(void); int main(void) { return foo() + own(); }",
              f"-L{old}", f"-L{stage / 'lib'}", "-l:libfoo.so.1", "-l:libown.so.1", f"-Wl,-rpath-link,{old}")
    target = tmp_path / "work" / "gate-libraries"
    copied = libraries_for_baseline(stage, tmp_path / "old-image", Path("/"), target)
    assert [(soname, user.name) for soname, user in copied] == [("libbar.so.2", "libfoo.so.1"),
                                                                 ("libfoo.so.1", "server")]
    assert sorted(f.name for f in target.iterdir()) == ["libbar.so.2", "libfoo.so.1"]
    assert not (target / "libbar.so.2").is_symlink()       # the library itself, not the old image's link
    ran = subprocess.run([stage / "bin" / "server"], env={"LD_LIBRARY_PATH": f"{target}:{stage / 'lib'}"})
    assert ran.returncode == 42
    # What the new image has is taken from it: nothing to lend, and an earlier attempt's loan is gone.
    assert libraries_for_baseline(stage / "lib", tmp_path / "old-image", Path("/"), target) == []
    assert not target.exists()
    (old / "libbar.so.2").unlink()
    with pytest.raises(ImageError, match="the baseline's libfoo.so.1 needs libbar.so.2, which neither image has"):
        libraries_for_baseline(stage, tmp_path / "old-image", Path("/"), target)


# --- the container image ------------------------------------------------------------

FAKE_DOCKER = """#!/bin/sh
# docker as far as container-image uses it: info, image inspect (the checksum label), import
echo "$*" >> "$0.calls"
eval tag=\\${$#}
label="$0.label.$(echo "$tag" | tr /: __)"
case "$1" in
  info) exit 0 ;;
  image) [ -f "$label" ] && cat "$label" || exit 1 ;;
  import) cat > "$0.stdin"; for a; do case "$a" in LABEL*rootfs-sha256=*) echo "${a##*=}" > "$label";; esac; done ;;
esac
"""


def with_rootfs(build, tmp_path, sha256):
    """A fake build with a small rootfs.tar.zst (and the checksum its manifest records)."""
    tree = tmp_path / f"tree-{build.image}"
    tree.mkdir()
    (tree / "hello").write_text("hello\n")
    tarball = build.path / "rootfs.tar.zst"
    subprocess.run(["tar", "--create", "--zstd", "--file", tarball, "-C", tree, "."], check=True)
    (build.rootfs / "etc").mkdir(parents=True)
    (build.rootfs / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n"
                                             "buildbot:x:1000:1001::/home/buildbot:/bin/sh\n")
    manifest = build.manifest
    manifest["artifacts"] = {"rootfs.tar.zst": {"bytes": tarball.stat().st_size, "sha256": sha256}}
    (build.path / "manifest.json").write_text(json.dumps(manifest))
    return build


@pytest.fixture
def fake_docker(tmp_path):
    docker = tmp_path / "docker"
    docker.write_text(FAKE_DOCKER)
    docker.chmod(0o755)
    return docker


def imports(docker):
    return [c for c in docker.with_name("docker.calls").read_text().splitlines() if c.startswith("import ")]


def test_an_image_with_the_builds_folder_names_it_for_the_builds_volume(tmp_path, fake_docker):
    """provision makes ~/worker/builds; the layout names it, and the master mounts the worker's builds
    volume there (an interrupted release resumes in the next container)."""
    store = Store(tmp_path / "images")
    build = with_rootfs(fake_build(store, "gcc12", "20250101T000000Z"), tmp_path, "abc123")
    (build.rootfs / "home/buildbot/worker/builds").mkdir(parents=True)
    run_cli("--images", store.root, "promote", "gcc12", "--docker", fake_docker, check=0)
    assert store.pointer()["current"]["worker_builds"] == "/home/buildbot/worker/builds"


def test_container_image_imports_the_current_rootfs_once_and_names_it(tmp_path, fake_docker):
    store = Store(tmp_path / "images")
    with_rootfs(fake_build(store, "gcc12", "20250101T000000Z"), tmp_path, "abc123")
    docker = fake_docker
    promoted = run_cli("--images", store.root, "promote", "gcc12", "--docker", docker, check=0)
    assert promoted.stdout.splitlines()[-1].startswith(
        "container image of gcc12/20250101T000000Z: pgo-worker/gcc12:20250101T000000Z (worker user buildbot)")
    current = store.pointer()["current"]
    assert {k: current[k] for k in ("container_image", "worker_user", "worker_uid", "worker_gid", "worker_cache",
                                    "worker_repo")} == {
        "container_image": "pgo-worker/gcc12:20250101T000000Z", "worker_user": "buildbot", "worker_uid": 1000,
        "worker_gid": 1001, "worker_cache": "/home/buildbot/.cache/pgo", "worker_repo": "/srv/pgo"}
    # An image made before the builds volume has no mount point for it: its containers get none.
    assert "worker_builds" not in current
    # Docker 20.10 cannot read zstd: the tar goes in decompressed, with the compiler and labels.
    assert subprocess.run(["tar", "-tf", f"{docker}.stdin"], capture_output=True, text=True).stdout.split() == [
        "./", "./hello"]
    (imported,) = imports(docker)
    for change in ('CMD ["/opt/buildbot-worker/start-container"]', "ENV CC=gcc-12", "ENV CXX=g++-12",
                   "LABEL org.pgo.image.name=gcc12", "LABEL org.pgo.image.build=20250101T000000Z",
                   "LABEL org.pgo.image.rootfs-sha256=abc123"):
        assert f"--change {change}" in imported
    assert imported.endswith(" - pgo-worker/gcc12:20250101T000000Z")
    again = run_cli("--images", store.root, "container-image", "--docker", docker, check=0)
    assert "is already imported" in again.stdout
    assert len(imports(docker)) == 1


def test_a_rollback_names_the_previous_images_container(tmp_path, fake_docker):
    store = Store(tmp_path / "images")
    with_rootfs(fake_build(store, "gcc11", "20250101T000000Z"), tmp_path, "sum-11")
    with_rootfs(fake_build(store, "gcc12", "20250201T000000Z"), tmp_path, "sum-12")
    run_cli("--images", store.root, "promote", "gcc11", "--docker", fake_docker, check=0)
    run_cli("--images", store.root, "promote", "gcc12", "--docker", fake_docker, check=0)
    assert store.pointer()["current"]["container_image"] == "pgo-worker/gcc12:20250201T000000Z"
    run_cli("--images", store.root, "rollback", "--docker", fake_docker, check=0)
    assert store.pointer()["current"]["container_image"] == "pgo-worker/gcc11:20250101T000000Z"
    assert len(imports(fake_docker)) == 2            # gcc11's import is still in Docker


def test_container_image_without_docker_is_one_line(tmp_path):
    refused = run_cli("--images", tmp_path, "container-image", "--docker", tmp_path / "no-docker", check=1)
    assert refused.stderr.strip() == (f"vm_images: error: `{tmp_path / 'no-docker'} info` does not answer: is the "
                                      "Docker daemon running, and may this user use it?")


def test_the_container_worker_takes_its_password_out_of_the_environment(tmp_path):
    """What the image's container.tac does with the credentials DockerLatentWorker gives it."""
    from vm_images.build import CONTAINER_TAC, PASSWORD_FILE, container_start

    start = container_start(definition.image("gcc12"))
    assert "env -u WORKERPASS" in start and "setpriv --reuid=buildbot" in start
    (tmp_path / "worker").mkdir()
    (tmp_path / "worker" / PASSWORD_FILE).write_text("s3cret")
    tac = tmp_path / "container.tac"
    tac.write_text(CONTAINER_TAC + "import json\nprint(json.dumps([password, os.environ.get('WORKERPASS')]))\n")
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"], "WORKERPASS": "s3cret", "BUILDMASTER": "127.0.0.1",
           "BUILDMASTER_PORT": "9989", "WORKERNAME": "c1"}
    ran = subprocess.run([sys.executable, tac], env=env, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == ["s3cret", None]
    assert not (tmp_path / "worker" / PASSWORD_FILE).exists()


# --- a real image (minutes, root, network) ------------------------------------------

@pytest.mark.skipif(not REAL, reason="building a real image takes minutes: set VM_IMAGES_REAL=1")
def test_a_real_image_builds_and_passes_its_test_inside(tmp_path):
    run_cli("--images", tmp_path, "build", "gcc12", check=0)
    tested = run_cli("--images", tmp_path, "test", "gcc12", check=0)
    assert "PASS compiler version: gcc-12 12.2.0, g++-12 12.2.0" in tested.stdout
    assert "PASS fixture PGO pipeline" in tested.stdout
    manifest = Store(tmp_path).build("gcc12").manifest
    assert manifest["packages"]["gcc-12"] == "12.2.0-14+deb12u1"
    assert manifest["artifacts"]["disk.qcow2"]["virtual_bytes"] == 40 << 30


def test_a_stopped_rollout_resumes_with_its_passed_steps_kept(on_gcc11):
    promoted, _, record, _ = roll(on_gcc11, fail=["gate"])
    assert not promoted and record["steps"][0]["details"]["build"] == "gcc12/20250201T000000Z"
    ops, lines = ScriptedOperations(on_gcc11), []
    rollout = Rollout(on_gcc11, ops, definition.canary("fixture"), say=lines.append)
    assert rollout.run("gcc12", resume=record["id"])
    assert ops.calls == ["gate"]                   # no image build, no test, no canary or baseline build
    resumed = json.loads((on_gcc11.rollouts / record["id"] / "rollout.json").read_text())
    assert [(s["step"], s["result"]) for s in resumed["steps"]] == [
        ("build", "passed"), ("test", "passed"), ("canary", "passed"), ("baseline", "passed"),
        ("gate", "passed"), ("promote", "passed")]
    assert resumed["decision"] == "promoted" and resumed["steps"][2] == record["steps"][2]
    assert resumed["attempts"] == [{k: record[k] for k in ("canary", "steps", "decision", "reason", "started",
                                                            "finished")}]
    assert "== step 3 of 6: canary: kept from the stopped attempt: canary passed" in "\n".join(lines)
    assert on_gcc11.pointer()["current"]["image"] == "gcc12"


def test_only_a_stopped_rollout_from_the_current_image_resumes(on_gcc11):
    _, _, stopped, _ = roll(on_gcc11, fail=["canary"])

    def resume(canary="fixture", **kwargs):
        Rollout(on_gcc11, ScriptedOperations(on_gcc11), definition.canary(canary)).run(
            "gcc12", resume=stopped["id"], **kwargs)

    with pytest.raises(ImageError, match="tested gcc12/20250201T000000Z, not gcc12/20990101T000000Z"):
        resume(reuse_build="20990101T000000Z")
    with pytest.raises(ImageError, match="the canary's name changed since rollout .*: start a new rollout"):
        resume(canary="minimal")
    with pytest.raises(ImageError, match="the canary's version changed since rollout"):
        changed = dataclasses.replace(definition.canary("fixture"), version="1.0.1")
        Rollout(on_gcc11, ScriptedOperations(on_gcc11), changed).run("gcc12", resume=stopped["id"])
    resume()
    with pytest.raises(ImageError, match="is promoted: only a stopped rollout resumes"):
        resume()
    record = on_gcc11.rollouts / stopped["id"] / "rollout.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "decision": "stopped"}))
    with pytest.raises(ImageError, match="now the current image is gcc12/20250201T000000Z: start a new rollout"):
        resume()


def test_resume_of_an_unknown_rollout_is_refused(on_gcc11):
    result = run_cli("--images", on_gcc11.root, "rollout", "--resume", "20990101T000000Z-gcc11-to-gcc12", check=1)
    assert "rollout 20990101T000000Z-gcc11-to-gcc12" in result.stderr and "Traceback" not in result.stderr


def test_a_resume_may_measure_with_corrected_gate_settings(on_gcc11):
    _, _, stopped, _ = roll(on_gcc11, fail=["gate"])
    corrected = dataclasses.replace(definition.canary("fixture"), compare=("bin/fixture", "train", "--twice"))
    ops = ScriptedOperations(on_gcc11)
    assert Rollout(on_gcc11, ops, corrected).run("gcc12", resume=stopped["id"])
    assert ops.calls == ["gate"]
    record = json.loads((on_gcc11.rollouts / stopped["id"] / "rollout.json").read_text())
    assert record["canary"]["compare"] == ["bin/fixture", "train", "--twice"]
    assert record["attempts"][0]["canary"]["compare"] == ["bin/fixture", "train"]
