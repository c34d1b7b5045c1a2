"""The deb packages through a Debian source package's own debian/rules (pgo/packaging/debrules.py): the fixture's
debian/ (a server, a plugin and a test package, with Debian mariadb's override structure) on the
checked build tree of configs.toml fixture-deb, with real debhelper, dpkg-deb and lintian."""

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from dataclasses import replace

import pytest
from conftest import FIXTURE, refused, run_pgo

from pgo import PipelineError
from pgo.core.config import build_config, load
from pgo.packaging import debrules
from pgo.packaging.checked import load_build

BUILD = ["build", "--version", "1.0.0", "--config", "fixture-deb", "--tests", "off"]
ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
PGO_DEBS = [f"fixture-plugin-echo_1.0.0+pgo-1_{ARCH}.deb", "fixture-test_1.0.0+pgo-1_all.deb",
            f"fixture_1.0.0+pgo-1_{ARCH}.deb"]


def tree_state(tree):
    return {str(p.relative_to(tree)): p.stat().st_mtime_ns for p in sorted(tree.rglob("*")) if p.is_file()
            and p.name != "install_manifest.txt"}      # the one file an install writes into a build tree


@pytest.fixture(scope="module")
def packaged(tmp_path_factory):
    """The PGO and the plain build of fixture-deb, each packaged through the fixture's debian/rules."""
    root = tmp_path_factory.mktemp("debrules")
    result = {}
    for kind, extra in (("pgo", []), ("plain", ["--pgo", "off"])):
        workdir = root / kind
        run_pgo(*BUILD, "--source", FIXTURE, "--workdir", workdir, *extra)
        tree = workdir / "build" / ("pgo" if kind == "pgo" else "plain")
        before = tree_state(tree)
        out = root / "out" / kind
        stdout = run_pgo("package", "--workdir", workdir, "--format", "deb", "--out", out).stdout
        result[kind] = {"workdir": workdir, "tree": tree, "before": before, "after": tree_state(tree),
                        "out": out, "stdout": stdout}
    return result


def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True, text=True, check=True).stdout.strip()


def member(deb, path):
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        return archive.extractfile(path).read()


def listing(deb):
    lines = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    return [line.split(" ./", 1)[1] for line in lines.splitlines() if " ./" in line]


def build_id(path):
    notes = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    return notes.split("Build ID: ")[1].split()[0]


def test_the_source_packages_split_with_our_version(packaged):
    out = packaged["pgo"]["out"]
    assert sorted(p.name for p in out.iterdir()) == ["buildinfo.json", *PGO_DEBS, "sha256sums.txt"]
    assert "debian/rules binary BUILDDIR=" in packaged["pgo"]["stdout"]
    server, plugin, test = (out / f"fixture_1.0.0+pgo-1_{ARCH}.deb", out / PGO_DEBS[0], out / PGO_DEBS[1])
    assert all(field(deb, "Version") == "1.0.0+pgo-1" for deb in (server, plugin, test))
    assert field(plugin, "Source") == field(test, "Source") == "fixture"
    # ${server:Version}, from the substvars the skipped override_dh_auto_configure would have written
    assert field(plugin, "Depends").startswith("fixture (= 1.0.0+pgo-1), libc6 (>= ")
    assert field(test, "Depends") == "fixture (= 1.0.0+pgo-1), python3"
    assert "usr/lib/fixture/plugin/echo.so" in listing(plugin)
    assert "usr/share/fixture/test/run" in listing(test)
    assert {"usr/bin/fixture", "usr/share/fixture/VERSION", "usr/share/doc/fixture/copyright"} <= set(listing(server))
    # A top-level file of the source a debian/*.docs names ships as a file, not as a link to the build
    # machine's source tree.
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", server], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        assert archive.getmember("./usr/share/doc/fixture/VERSION").isfile()
    # override_dh_auto_install read $(BUILDDIR): the symbols of the checked build tree's binary
    symbols = gzip.decompress(member(server, "./usr/share/doc/fixture/fixture.sym.gz")).decode()
    assert " T main\n" in symbols
    # the major version the configure override puts into the maintainer script
    postinst = subprocess.run(["dpkg-deb", "-I", server, "postinst"], capture_output=True, text=True,
                              check=True).stdout
    assert "debian-1.0.flag" in postinst and "__FIXTURE_MAJOR_VER__" not in postinst


def test_changelog_substvars_and_stamp_are_the_only_changes_to_debian(packaged):
    workdir = packaged["pgo"]["workdir"]
    debian = workdir / "package-deb" / "src" / "debian"
    profile_id = json.loads((workdir / "build-info.json").read_text())["profile_id"]
    changelog = (debian / "changelog").read_text()
    head, _, rest = changelog.partition("\n -- ")
    assert head.startswith("fixture (1.0.0+pgo-1) bookworm; urgency=medium\n")
    assert f"profile {profile_id}" in " ".join(head.split()) and "configuration fixture-deb" in head
    assert "\nfixture (1.0.0-1) bookworm;" in rest                  # the source package's own entries follow
    assert (debian / "substvars").read_text() == "server:Version=1.0.0+pgo-1\n"
    assert (debian / "debhelper-build-stamp").read_text().split() == ["fixture", "fixture-plugin-echo", "fixture-test"]
    # every other file of the source package's debian/ byte for byte
    source = FIXTURE / "debian"
    changed = [p.relative_to(source).as_posix() for p in sorted(source.rglob("*")) if p.is_file()
               and p.read_bytes() != (debian / p.relative_to(source)).read_bytes()]
    assert changed == ["changelog", "fixture.postinst"]
    # the source tree's folders are linked, never copied, its top-level files copied (a debian/*.docs may
    # name them), and debian/ is not the shared tree's
    src = workdir / "package-deb" / "src"
    assert all((src / name).is_symlink() for name in ("src", "test", "plugin"))
    assert not (src / "CMakeLists.txt").is_symlink() and (src / "CMakeLists.txt").read_bytes() == (
        FIXTURE / "CMakeLists.txt").read_bytes()
    assert not debian.is_symlink()


def test_no_compile_step_ran(packaged):
    for kind in ("pgo", "plain"):
        assert packaged[kind]["after"] == packaged[kind]["before"], kind
    log = (packaged["pgo"]["workdir"] / "package-deb" / "rules.log").read_text()
    assert "override_dh_auto_install" in log and "dh_builddeb" in log
    for step in ("override_dh_auto_configure", "override_dh_auto_build", "override_dh_auto_test", "Building C"):
        assert step not in log, step


def test_the_packaged_server_is_the_checked_binary(packaged, tmp_path):
    out, tree = packaged["pgo"]["out"], packaged["pgo"]["tree"]
    info = json.loads((out / "buildinfo.json").read_text())
    assert info["binary"]["build_id"] == build_id(tree / "fixture") and info["package_version"] == "1.0.0+pgo"
    shipped = tmp_path / "fixture"
    shipped.write_bytes(member(out / f"fixture_1.0.0+pgo-1_{ARCH}.deb", "./usr/bin/fixture"))
    assert build_id(shipped) == build_id(tree / "fixture")
    # dh_strip stripped it: not the build tree's bytes, the same build-id
    assert hashlib.sha256(shipped.read_bytes()).digest() != hashlib.sha256((tree / "fixture").read_bytes()).digest()


def test_the_plain_build_carries_no_mark(packaged):
    out = packaged["plain"]["out"]
    debs = sorted(p.name for p in out.glob("*.deb"))
    assert debs == [f"fixture-plugin-echo_1.0.0-1_{ARCH}.deb", "fixture-test_1.0.0-1_all.deb",
                    f"fixture_1.0.0-1_{ARCH}.deb"]
    changelog = (packaged["plain"]["workdir"] / "package-deb" / "src" / "debian" / "changelog").read_text()
    assert changelog.startswith("fixture (1.0.0-1) bookworm;")
    assert "no profile (plain build)" in " ".join(changelog.split())


def test_the_rpms_of_a_deb_layout_build_have_the_rpm_layouts_names(packaged, tmp_path):
    """The RPM tree configures the DEB-layout build with -DRPM and -UDEB: the static library the DEB
    layout names libfixturehot.a (as Connector/C's libmariadb.a) is the RPM layout's libhot.a, the
    checked build's file under the RPM layout's name (without it the RPM tree was refused: a target
    the checked build did not make), and the DEB layout's plugin is not packaged."""
    workdir = packaged["pgo"]["workdir"]
    out = run_pgo("package", "--workdir", workdir, "--format", "rpm", "--out", tmp_path / "rpm").stdout
    assert ("  libhot.a: the checked build's libfixturehot.a, the same target, which the RPM layout names "
            "otherwise") in out
    rpm = next((tmp_path / "rpm").glob("fixture-server-*.rpm"))
    files = subprocess.run(["rpm", "-qlp", rpm], capture_output=True, text=True, check=True).stdout.split()
    assert "/usr/bin/fixture" in files and not any("/plugin/" in f for f in files)   # no DEB-layout plugin
    built = packaged["pgo"]["tree"] / "libfixturehot.a"
    assert (workdir / "rpm-tree" / "tree" / "libhot.a").samefile(built)


def test_lintian_passes(packaged):
    debs = [packaged["pgo"]["out"] / name for name in PGO_DEBS]
    result = subprocess.run(["lintian", "--fail-on", "error", *debs], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_packaging_tree_copies_the_sources_files_and_links_its_folders(tmp_path):
    """A top-level file, and a link to one, become files of their own (debhelper would ship a link to
    this machine's source); folders stay links to the read-only shared tree; debian/ is left out."""
    from pgo.packaging.debrules import link_source
    shared, src = tmp_path / "shared", tmp_path / "src"
    for folder in ("sql", "debian"):
        (shared / folder).mkdir(parents=True)
    (shared / "README.md").write_text("read me")
    (shared / "README").symlink_to("README.md")
    src.mkdir()
    link_source(shared, src)
    assert sorted(p.name for p in src.iterdir()) == ["README", "README.md", "sql"]
    for name in ("README", "README.md"):
        assert not (src / name).is_symlink() and (src / name).read_text() == "read me"
    assert (src / "sql").is_symlink() and (src / "sql").resolve() == (shared / "sql").resolve()


def test_the_fixtures_debian_is_a_real_source_package(tmp_path):
    """dpkg-buildpackage builds it from the source as any Debian package: the rules are not made for pgo."""
    source = tmp_path / "fixture-1.0.0"
    shutil.copytree(FIXTURE, source)
    result = subprocess.run(["dpkg-buildpackage", "-b", "-uc", "-us"], cwd=source, capture_output=True, text=True,
                            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEB_BUILD_OPTIONS": "noautodbgsym"})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.glob("*.deb")) == sorted(n.replace("+pgo", "") for n in PGO_DEBS)


# --- bad inputs: one error line, nothing published -----------------------------------------------

def package_edited(tmp_path, edit):
    """Build fixture-deb from a copy of the fixture whose debian/ `edit` changed; package it."""
    source = tmp_path / "fixture"
    shutil.copytree(FIXTURE, source)
    edit(source / "debian")
    run_pgo(*BUILD, "--source", source, "--workdir", tmp_path / "w")
    out = tmp_path / "out"
    result = run_pgo("package", "--workdir", tmp_path / "w", "--format", "deb", "--out", out, check=False)
    assert not out.exists() and not list(tmp_path.glob(".out*"))
    return result


def append(path, text):
    path.write_text(path.read_text() + text)


def test_an_install_file_naming_what_the_build_did_not_install_fails(tmp_path):
    result = package_edited(tmp_path, lambda debian: append(debian / "fixture-plugin-echo.install",
                                                            "usr/lib/fixture/plugin/missing.so\n"))
    refused(result, "debian/fixture-plugin-echo.install names usr/lib/fixture/plugin/missing.so, "
                    "which the build did not install")


def test_an_installed_file_no_package_takes_fails(tmp_path):
    def drop_version(debian):
        install = debian / "fixture.install"
        install.write_text(install.read_text().replace("usr/share/fixture/VERSION\n", ""))
    refused(package_edited(tmp_path, drop_version),
            "the build installed usr/share/fixture/VERSION, which no debian/*.install takes", "dh_missing")


def test_rules_that_rebuild_the_tree_are_refused(tmp_path):
    """An install override that brings the tree up to date first (as `make install` does) relinks the binary."""
    def rebuild_first(debian):
        rules = debian / "rules"
        rules.write_text(rules.read_text().replace("\tDESTDIR=$(TMP) cmake --install $(BUILDDIR)\n",
                                                   "\trm $(BUILDDIR)/fixture\n\tcmake --build $(BUILDDIR)\n"
                                                   "\tDESTDIR=$(TMP) cmake --install $(BUILDDIR)\n"))
    refused(package_edited(tmp_path, rebuild_first), "debian/rules binary changed the build tree's fixture: "
            "it compiled")


def test_a_failing_rules_target_is_one_line(tmp_path):
    def no_library(debian):
        rules = debian / "rules"
        rules.write_text(rules.read_text().replace("rm $(TMP)/usr/lib/libfixturehot.a", "rm $(TMP)/usr/lib/libnone.a"))
    refused(package_edited(tmp_path, no_library), "debian/rules binary failed in debian/rules:",
            ": override_dh_auto_install: rm: cannot remove", "libnone.a': No such file or directory")


def test_dh_plans_the_build_without_the_stamp(tmp_path):
    """The check before running: without the stamp, dh's own plan for `binary` configures and builds."""
    shutil.copytree(FIXTURE / "debian", tmp_path / "debian")
    with pytest.raises(PipelineError, match="would still run .*debian/rules override_dh_auto_configure, "
                                            "debian/rules override_dh_auto_build"):
        debrules.require_no_build_step(tmp_path)
    names = subprocess.run(["dh_listpackages"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    (tmp_path / "debian" / debrules.STAMP).write_text(names)
    debrules.require_no_build_step(tmp_path)


def test_debian_from_the_cached_debian_source_package(packaged, tmp_path):
    """[rules] debian = "debian-source" (MariaDB): the .debian.tar.* beside the verified .dsc in the cache."""
    build = load_build(packaged["pgo"]["workdir"])
    with pytest.raises(PipelineError, match="takes debian/ from Debian's source package, but this build's source is /"):
        debrules.place_debian("debian-source", build, tmp_path)
    cache = build.workdir.cache(build.workdir.load_settings()) / "debian" / "fixture_1.0.0-1"
    cache.mkdir(parents=True)
    tarball = cache / "fixture_1.0.0-1.debian.tar.xz"
    with tarfile.open(tarball, "w:xz") as archive:
        archive.add(FIXTURE / "debian", arcname="debian")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    from_debian = replace(build, info={**build.info, "source": {"kind": "debian", "origin": "debian:fixture=1.0.0-1"}})
    with pytest.raises(PipelineError, match="does not hold a verified fixture_1.0.0-1.dsc"):
        debrules.place_debian("debian-source", from_debian, tmp_path)
    (cache / "fixture_1.0.0-1.dsc").write_text(
        f"Source: fixture\nChecksums-Sha256:\n {digest} {tarball.stat().st_size} {tarball.name}\n")
    debian = debrules.place_debian("debian-source", from_debian, tmp_path)
    assert (debian / "rules").read_bytes() == (FIXTURE / "debian" / "rules").read_bytes()
    with pytest.raises(PipelineError, match="neither 'src:debian' nor 'debian-source'"):
        debrules.place_debian("apt:fixture", build, tmp_path)
    shutil.rmtree(cache)


def test_the_configuration_selects_the_rules():
    assert build_config("fixture-deb").debian_rules and not build_config("fixture").debian_rules
    # The release configurations (Debian's layout) make Debian's debs; the standalone ones the recipe's split.
    assert build_config("release").debian_rules and build_config("release-whole").debian_rules
    assert not build_config("minimal-lto").debian_rules
    data = {"products": load()["products"], "configs": {"x": {"product": "fixture", "debian_rules": "yes"}}}
    with pytest.raises(PipelineError, match="debian_rules = 'yes' is not true or false"):
        build_config("x", data)
