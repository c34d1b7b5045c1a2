"""Packages of the fixture project through the real recipes: bintar, rpm and deb, their
names, versions, contents, checksums and build info, the identity of the packaged binary
with the checked one, atomic publication, and the install-and-run proofs."""

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tarfile

import pytest
from conftest import FIXTURE, run_pgo

from pgo import PipelineError
from pgo.base import lines
from pgo.build import source

BUILD = ["build", "--version", "1.0.0", "--config", "fixture", "--source", FIXTURE]
ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("package")
    run_pgo(*BUILD, "--workdir", root / "pgo")
    run_pgo(*BUILD, "--workdir", root / "plain", "--pgo", "off")
    return root


@pytest.fixture(scope="module")
def published(builds):
    """The three formats of the PGO build and of the plain one."""
    folders = {}
    for kind, formats in (("pgo", ("bintar", "rpm", "deb")), ("plain", ("bintar", "rpm", "deb"))):
        for fmt in formats:
            out = builds / "out" / kind / fmt
            run_pgo("package", "--workdir", builds / kind, "--format", fmt, "--out", out)
            folders[kind, fmt] = out
    return folders


def buildinfo(folder):
    return json.loads((folder / "buildinfo.json").read_text())


def names(folder):
    return sorted(p.name for p in folder.iterdir())


def build_id(path):
    notes = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    return notes.split("Build ID: ")[1].split()[0]


def test_every_folder_has_its_packages_checksums_and_buildinfo(published):
    assert names(published["pgo", "bintar"]) == [
        "buildinfo.json", "fixture-1.0.0+pgo-linux-x86_64.tar.gz", "sha256sums.txt"]
    assert names(published["pgo", "rpm"]) == ["buildinfo.json", "fixture-common-1.0.0+pgo-1.noarch.rpm",
                                              "fixture-server-1.0.0+pgo-1.x86_64.rpm",
                                              "fixture-test-1.0.0+pgo-1.noarch.rpm", "sha256sums.txt"]
    assert names(published["pgo", "deb"]) == ["buildinfo.json", "fixture-test_1.0.0+pgo-1_all.deb",
                                              f"fixture_1.0.0+pgo-1_{ARCH}.deb", "sha256sums.txt"]
    for folder in published.values():
        listed = dict(line.split("  ")[::-1] for line in (folder / "sha256sums.txt").read_text().splitlines())
        assert sorted(listed) == [n for n in names(folder) if n != "sha256sums.txt"]
        for name, digest in listed.items():
            assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest
        assert subprocess.run(["sha256sum", "--quiet", "-c", "sha256sums.txt"], cwd=folder).returncode == 0


def test_buildinfo_names_source_compiler_flags_and_profile(builds, published):
    info = buildinfo(published["pgo", "deb"])
    build_info = json.loads((builds / "pgo" / "build-info.json").read_text())
    assert info["package_version"] == "1.0.0+pgo" and info["release"] == 1 and info["format"] == "deb"
    assert info["profile_id"] == build_info["profile_id"] and info["profile_id"].startswith("1.0.0-")
    assert info["profile_use"]["profile_id"] == info["profile_id"]
    assert info["source"]["checksum"] == build_info["source"]["checksum"]
    assert info["compiler"]["version"] == build_info["compiler"]["version"]
    assert info["config"] == "fixture" and "-fprofile-use=PROFILE_DIR" in info["flags"]
    assert info["built"] and info["packaged"]
    assert info["binary"]["build_id"] == build_id(builds / "pgo" / "build" / "pgo" / "fixture")
    plain = buildinfo(published["plain", "deb"])
    assert plain["pgo"] == "off" and plain["profile_id"] is None and plain["profile_use"] is None
    assert plain["binary"]["variant"] == "plain"
    # The package build's summary on the build page: what it made, and its label.
    assert lines.package_summary(info) == (f"deb of fixture 1.0.0+pgo: 2 packages, fixture_1.0.0+pgo-1_amd64.deb "
                                           f"... (PGO, profile {info['profile_id']});")
    assert lines.package_summary(buildinfo(published["pgo", "bintar"])).startswith(
        "bintar of fixture 1.0.0+pgo: fixture-1.0.0+pgo-linux-x86_64.tar.gz (PGO, profile 1.0.0-")
    assert lines.package_summary(plain) == ("deb of fixture 1.0.0: 2 packages, fixture_1.0.0-1_amd64.deb ... "
                                            "(plain);")


def test_bintar_holds_the_checked_binary_under_mariadbs_naming(builds, published):
    tarball = published["pgo", "bintar"] / "fixture-1.0.0+pgo-linux-x86_64.tar.gz"
    with tarfile.open(tarball) as archive:
        members = archive.getnames()
        binary = archive.extractfile("fixture-1.0.0+pgo-linux-x86_64/bin/fixture").read()
    assert "fixture-1.0.0+pgo-linux-x86_64/share/fixture/VERSION" in members
    # The bintar is unstripped, as `make package` makes it: the very bytes of the staged binary.
    assert binary == (builds / "pgo" / "stage" / "bin" / "fixture").read_bytes()


def test_rpm_metadata_and_contents(published):
    rpm = lambda part: (published["pgo", "rpm"]
                        / f"fixture-{part}-1.0.0+pgo-1.{'x86_64' if part == 'server' else 'noarch'}.rpm")
    query = lambda part, *args: subprocess.run(["rpm", "-qp", *args, rpm(part)], capture_output=True,
                                               text=True, check=True).stdout
    assert query("server", "--qf", "%{NAME} %{VERSION} %{RELEASE}") == "fixture-server 1.0.0+pgo 1"
    assert query("server", "--qf", "%{PACKAGER}") == "PGO pipeline <pgo-release@example.org>"
    assert "fixture-common" in query("server", "--requires").split()
    assert "profile 1.0.0-" in query("server", "--changelog")
    # The project's own -DRPM layout: the distribution's directories, one package each part; the
    # policy module the RPM tree built (rpm_tree_targets) with the server.
    assert query("server", "--list").split() == ["/usr/bin/fixture", "/usr/share/fixture", "/usr/share/fixture/policy",
                                                  "/usr/share/fixture/policy/selinux",
                                                  "/usr/share/fixture/policy/selinux/fixture.mod"]
    assert query("common", "--list").split() == ["/etc/fixture", "/etc/fixture/40-pgo-layout.cnf",
                                                  "/usr/share/fixture", "/usr/share/fixture/VERSION"]
    assert query("common", "--configfiles").split() == ["/etc/fixture/40-pgo-layout.cnf"]
    # The test suite, as MariaDB-test carries mtr: what `pgo prove` runs its smoke set with.
    assert "/usr/share/fixture/test/run" in query("test", "--list").split()
    assert {"fixture-server", "python3"} <= set(query("test", "--requires").split())


def test_rpm_carries_the_checked_binary_and_compiles_nothing(builds, published):
    """The -DRPM tree is configured, never compiled: its install rules package the checked build's files."""
    info = buildinfo(published["pgo", "rpm"])
    trained = json.loads((builds / "pgo" / "build-info.json").read_text())
    assert info["cmake_args"] == trained["cmake_args"] and info["profile_use"] == trained["check"]
    assert info["binary"]["build_id"] == build_id(builds / "pgo" / "build" / "pgo" / "fixture")
    tree = builds / "pgo" / "rpm-tree" / "tree"
    assert "RPM:UNINITIALIZED=generic" in (tree / "CMakeCache.txt").read_text()
    assert not list(tree.rglob("*.o")) and not (builds / "pgo" / "package-rpm").exists()
    # the checked binary itself, linked into the RPM tree
    assert (tree / "fixture").stat().st_ino == (builds / "pgo" / "build" / "pgo" / "fixture").stat().st_ino
    # the layout file, its paths the RPM tree's cache values
    cnf = (builds / "pgo" / "rpm-tree" / "40-pgo-layout.cnf").read_text()
    assert "share = /usr/share/fixture\n" in cnf and "@" not in cnf


def test_deb_control_and_contents(published):
    deb = published["pgo", "deb"] / f"fixture_1.0.0+pgo-1_{ARCH}.deb"
    field = lambda name: subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True,
                                        text=True, check=True).stdout.strip()
    assert field("Version") == "1.0.0+pgo-1"
    assert field("Depends").startswith("libc6 (>= ")
    contents = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    for path in ("./usr/bin/fixture", "./usr/share/fixture/VERSION", "./usr/share/doc/fixture/copyright",
                 "./usr/share/doc/fixture/changelog.Debian.gz"):
        assert path in contents
    assert "root/root" in contents


def test_plain_packages_never_carry_the_pgo_mark(published):
    assert "fixture-1.0.0-linux-x86_64.tar.gz" in names(published["plain", "bintar"])
    assert f"fixture_1.0.0-1_{ARCH}.deb" in names(published["plain", "deb"])
    assert "fixture-server-1.0.0-1.x86_64.rpm" in names(published["plain", "rpm"])
    assert not any("pgo" in n for fmt in ("bintar", "rpm", "deb") for n in names(published["plain", fmt]))
    # The plain rpm build stays plain: no profile to reuse, none used.
    assert buildinfo(published["plain", "rpm"])["profile_use"] is None


def newer(a, b):
    return subprocess.run(["dpkg", "--compare-versions", a, "gt", b]).returncode == 0


class Built:             # what deb_version reads of a staged build
    def __init__(self, version, label, origin, release=1):
        self.version, self.label, self.release = version, label, release
        self.info = {"source": {"kind": "debian" if origin.startswith("debian:") else "directory", "origin": origin}}


# Debian's own versions: 12 (bookworm) has 1:10.11.18-0+deb12u1 and 1:10.11.19-0+deb12u1; 13
# (trixie) repacks the upstream tarball: 1:11.8.9+ds-0+deb13u1 (apt-cache showsrc mariadb with a
# trixie deb-src entry). A later revision of one upstream release (deb12u2) is what a security fix
# without a new upstream release would be.
DEBIAN = ["1:10.11.18-0+deb12u1", "1:10.11.19-0+deb12u1", "1:10.11.19-0+deb12u2", "1:11.8.9+ds-0+deb13u1"]
NEXT_UPSTREAM = {"10.11.18": "1:10.11.19-0+deb12u1", "10.11.19": "1:10.11.20-0+deb12u1",
                 "11.8.9": "1:11.8.10+ds-0+deb13u1"}


@pytest.mark.parametrize("theirs", DEBIAN + source.debian_versions("mariadb"))
def test_deb_versions_upgrade_debians_package_of_the_same_release(theirs):
    from pgo.base import platforms
    from pgo.packaging.debpackages import deb_version
    from pgo.packaging.recipes import RECIPES, load_toml
    recipe = load_toml(RECIPES / "deb" / "mariadb.toml", platforms.platform("debian-12"))
    release = source.release_of(theirs)
    # Built from another source (a tarball, git), the upstream part is the release itself: above
    # Debian's unless Debian repacked it (only Debian's own source package spells '11.8.9+ds').
    repacked = source.upstream_of(theirs) != release
    for origin in [f"debian:mariadb={theirs}"] + ([] if repacked else ["/srv/mariadb-source"]):
        pgo, plain = (deb_version(Built(release, label, origin), recipe) for label in ("pgo", ""))
        assert newer(pgo, theirs) and newer(plain, theirs) and newer(pgo, plain), (origin, pgo, plain, theirs)
        if release in NEXT_UPSTREAM:          # Debian's next upstream release still wins
            assert newer(NEXT_UPSTREAM[release], pgo)
    built_from_debian = deb_version(Built(release, "pgo", f"debian:mariadb={theirs}"), recipe)
    assert built_from_debian == f"1:{source.upstream_of(theirs)}+pgo-1"
    assert recipe["distribution_version"].format(version="10.11.19") == "1:10.11.19-0+deb12u1"
    assert recipe["distribution"] == "bookworm"
    trixie = load_toml(RECIPES / "deb" / "mariadb.toml", platforms.platform("debian-13"))
    assert (trixie["distribution"], trixie["distribution_version"].format(version="11.8.9")) == \
        ("trixie", "1:11.8.9-0+deb13u1")


# debian/additions of Debian's source packages (tar tJf of their debian.tar.xz): 10.11.18-0+deb12u1
# and 11.8.6-0+deb13u1. 11.x renamed the clients' file and dropped mysqld_safe's.
DEBIAN_ADDITIONS = {
    "10.11": ["mariadb.cnf", "mariadb.conf.d/50-client.cnf", "mariadb.conf.d/50-mysql-clients.cnf",
              "mariadb.conf.d/50-mysqld_safe.cnf", "mariadb.conf.d/50-server.cnf", "mariadb.conf.d/60-galera.cnf"],
    "11.8": ["mariadb.cnf", "mariadb.conf.d/50-client.cnf", "mariadb.conf.d/50-mariadb-clients.cnf",
             "mariadb.conf.d/50-server.cnf", "mariadb.conf.d/60-galera.cnf"],
}


@pytest.mark.parametrize("line", DEBIAN_ADDITIONS)
def test_the_mariadb_deb_recipe_ships_the_configuration_files_of_either_line(line, tmp_path):
    """Every file of debian/additions goes into a package (Galera's: WSREP is off), none is missing."""
    from pgo.packaging.debpackages import install_rule
    from pgo.packaging.recipes import RECIPES, load_toml
    recipe = load_toml(RECIPES / "deb" / "mariadb.toml")
    additions = tmp_path / "src" / "debian" / "additions"
    for name in DEBIAN_ADDITIONS[line]:
        (additions / name).parent.mkdir(parents=True, exist_ok=True)
        (additions / name).write_text(f"# {name}\n")
    shipped = set()
    for package in recipe["packages"]:
        for rule in package["files"]:
            if rule[0].lstrip("?").startswith("src:debian/additions/"):
                shipped |= install_rule(rule, {"src": tmp_path / "src"}, tmp_path / package["name"],
                                        package["name"], shipped, "x86_64-linux-gnu", recipe["layout"])
    assert shipped == {additions / name for name in DEBIAN_ADDITIONS[line] if "galera" not in name}
    clients = next(name for name in DEBIAN_ADDITIONS[line] if name.endswith("-clients.cnf"))
    assert (tmp_path / "mariadb-client" / "etc/mysql" / clients).is_file()


@pytest.mark.parametrize("kind,fmt", [("pgo", "bintar"), ("pgo", "rpm"), ("plain", "bintar"), ("plain", "rpm")])
def test_proof_runs_the_unpacked_package_and_sees_its_mark(published, kind, fmt):
    result = run_pgo("prove", published[kind, fmt])
    mark = "PGO build, profile 1.0.0-" if kind == "pgo" else "plain build (no PGO)"
    assert "proof passed" in result.stdout and mark in result.stdout
    if fmt == "rpm":
        assert "0 errors" in result.stdout and "libc.so.6" in result.stdout
    # the smoke test set, from the package's own test suite
    assert re.search(r"fixture tests smoke: [1-9]\d* passed, 0 failed", result.stdout), result.stdout


@pytest.mark.skipif(shutil.which("mmdebstrap") is None or os.geteuid() != 0,
                    reason="the deb proof needs mmdebstrap and root for its chroot")
def test_deb_proof_installs_into_a_clean_chroot(published):
    result = run_pgo("prove", published["pgo", "deb"])
    assert "Setting up fixture (1.0.0+pgo-1)" in result.stdout
    assert "fixture 1.0.0+pgo-1 install ok installed" in result.stdout
    assert "proof passed: version comment 'fixture 1.0.0 fixture, PGO build, profile 1.0.0-" in result.stdout
    # the smoke test set from the installed fixture-test, in the chroot, as nobody
    assert "fixture-test 1.0.0+pgo-1 install ok installed" in result.stdout
    assert "from /usr/share/fixture/test/run in the chroot, as nobody" in result.stdout
    assert re.search(r"fixture tests smoke: [1-9]\d* passed, 0 failed", result.stdout), result.stdout


def test_proof_rejects_a_tampered_folder(builds, published):
    copy = builds / "tampered"
    shutil.copytree(published["pgo", "bintar"], copy)
    with open(copy / "fixture-1.0.0+pgo-linux-x86_64.tar.gz", "ab") as f:
        f.write(b"\0")
    result = run_pgo("prove", copy, check=False)
    assert result.returncode == 1 and "checksum mismatch: fixture-1.0.0+pgo-linux-x86_64.tar.gz" in result.stderr


def test_pgo_build_without_checked_profile_use_is_refused(builds):
    workdir = builds / "unchecked"
    shutil.copytree(builds / "pgo", workdir, symlinks=True)
    (workdir / "profile-use.json").unlink()
    out = builds / "out" / "unchecked"
    result = run_pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out, check=False)
    assert result.returncode == 1 and "no profile-use.json" in result.stderr
    assert not out.exists()


def test_a_staged_binary_that_is_not_the_checked_one_publishes_nothing(builds):
    workdir = builds / "swapped"
    shutil.copytree(builds / "pgo", workdir, symlinks=True)
    shutil.copy(builds / "plain" / "stage" / "bin" / "fixture", workdir / "stage" / "bin" / "fixture")
    out = builds / "out" / "swapped"
    result = run_pgo("package", "--workdir", workdir, "--format", "deb", "--out", out, check=False)
    # The staged tree's record of what stage installed names the file (the build-id check behind it too).
    assert result.returncode == 1 and "stage/bin/fixture changed since phase stage installed the tree" in result.stderr
    assert not out.exists() and not list(out.parent.glob(".swapped*"))


def test_an_existing_folder_is_never_overwritten(builds, published):
    folder = published["pgo", "bintar"]
    before = {n: (folder / n).read_bytes() for n in names(folder)}
    result = run_pgo("package", "--workdir", builds / "pgo", "--format", "bintar", "--out", folder, check=False)
    assert result.returncode == 1 and "already exists" in result.stderr
    assert {n: (folder / n).read_bytes() for n in names(folder)} == before


def test_a_failing_recipe_leaves_no_partial_folder(builds):
    workdir = builds / "nocpack"
    shutil.copytree(builds / "pgo", workdir, symlinks=True)
    (workdir / "build" / "pgo" / "CPackConfig.cmake").unlink()
    out = builds / "out" / "nocpack"
    result = run_pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out, check=False)
    assert result.returncode == 1 and "no CPack configuration" in result.stderr
    assert not out.exists() and not list(out.parent.glob(".nocpack*"))


def test_an_rpm_is_refused_where_configuring_finds_other_targets(builds):
    """The RPM tree is configured again: on a machine whose libraries changed since the build it would
    package a plugin the checked build never made. Refused with the targets named, nothing published."""
    workdir = builds / "changed-machine"
    shutil.copytree(builds / "pgo", workdir, symlinks=True, ignore=shutil.ignore_patterns("rpm-tree"))
    out = builds / "out" / "changed-machine"
    result = run_pgo("package", "--workdir", workdir, "--format", "rpm", "--out", out, check=False,
                     env={"FIXTURE_PLUGIN": "found"})
    assert result.returncode == 1, result.stdout
    assert "builds 1 installed target(s) the checked build did not make (libfixture_plugin.so)" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not out.exists()


def test_the_rpm_recipes_configure_options_are_a_list_of_cache_options():
    """The recipe's `cmake`, the RPM tree's own options after the checked build's: a wrong value is one line."""
    from pgo.packaging.recipes import RECIPES, load_toml
    from pgo.packaging.trees import tree_options
    for recipe in sorted((RECIPES / "rpm").glob("*.toml")):
        tree_options(load_toml(recipe), "rpm")
    assert tree_options({}, "rpm") == []
    for value, phrase in (("-UCHECKMODULE", "cmake = '-UCHECKMODULE' is not a list of -D or -U options"),
                          (["-UCHECKMODULE", 1], "cmake names 1, which is not a -D or -U option"),
                          (["CHECKMODULE=ON"], "cmake names 'CHECKMODULE=ON', which is not a -D or -U option")):
        with pytest.raises(PipelineError, match=re.escape(f"the rpm recipe's {phrase}")) as refusal:
            tree_options({"cmake": value}, "rpm")
        assert "\n" not in str(refusal.value)


def test_every_package_format_has_its_module_and_recipes(tmp_path, monkeypatch):
    """pgo/base/formats.py is the one list of formats, and each has its module (pgo/packaging/formats/<name>.py:
    make, extract, prove) and its recipes: a format added there without them fails here, a module missing a
    function is refused in one line, and a format the list does not name is refused, never taken for another."""
    from buildmaster.publish import packages
    from buildmaster.settings import PACKAGE_FORMATS
    from pgo.base import formats
    from pgo.packaging import formats as modules, package
    from pgo.packaging.recipes import RECIPES

    for fmt in formats.Format:
        module = modules.module(fmt)
        assert module.__name__ == f"pgo.packaging.formats.{fmt}"
        assert all(callable(getattr(module, op)) for op in modules.OPERATIONS)
    found = sorted(p.stem for p in pathlib.Path(modules.__file__).parent.glob("*.py") if p.stem != "__init__")
    assert found == sorted(formats.NAMES), "a module in pgo/packaging/formats/ that pgo/base/formats.py does not list"
    assert all((RECIPES / name).is_dir() for name in formats.NAMES)
    assert PACKAGE_FORMATS == formats.NAMES == ("bintar", "deb", "rpm")
    with pytest.raises(PipelineError, match=r"^unknown package format 'zip' \(known: bintar, deb, rpm\)$"):
        package.extract_named("zip", tmp_path / "x.zip", "mariadbd", tmp_path / "out")
    # A format listed without its module, and a module without one of its functions: one line each.
    monkeypatch.setattr(modules, "parse", lambda name: name)
    with pytest.raises(PipelineError, match=r"^package format 'zip' has no module pgo/packaging/formats/zip.py$"):
        modules.module("zip")
    monkeypatch.delattr(modules.module("rpm"), "prove")
    with pytest.raises(PipelineError, match=r"^pgo/packaging/formats/rpm.py defines no prove$"):
        modules.module("rpm")
    for name in ("deb/a_1_amd64.deb", "rpm/a-1.x86_64.rpm", "bintar/a-1.tar.gz", "deb/buildinfo.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert packages(tmp_path) == ["bintar/a-1.tar.gz", "deb/a_1_amd64.deb", "rpm/a-1.x86_64.rpm"]


@pytest.mark.parametrize("archiver", ["ar", "gcc-ar"])
def test_a_static_librarys_file_is_read_from_its_link_step_whatever_archiver_made_it(tmp_path, archiver):
    """The RPM and bintar trees of a DEB-layout build take Connector/C's libmariadb.a as their
    libmariadbclient.a, the file its link step names. An LTO build archives with GCC's gcc-ar, which
    Debian names x86_64-linux-gnu-gcc-ar-12: that step was not recognised, so the release of an LTO
    server (release-lto) was refused its bintar and rpms (`the checked build did not make
    libmariadbclient.a`)."""
    from pgo.packaging.trees import built_output
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hot.c").write_text("int hot(void) { return 1; }\n")
    (tmp_path / "src" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(p C)\nadd_library(hot STATIC hot.c)\n"
        "set_target_properties(hot PROPERTIES OUTPUT_NAME layoutname)\n")
    tool = os.path.realpath(shutil.which(archiver))          # gcc-ar: /usr/bin/x86_64-linux-gnu-gcc-ar-12
    subprocess.run(["cmake", "-G", "Unix Makefiles", f"-DCMAKE_AR={tool}", "-S", tmp_path / "src", "-B",
                    tmp_path / "build"], check=True, capture_output=True)
    link = (tmp_path / "build" / "CMakeFiles" / "hot.dir" / "link.txt").read_text()
    assert link.startswith(f"{tool} qc ")
    assert built_output(tmp_path / "build", ".", "hot") == "liblayoutname.a"
