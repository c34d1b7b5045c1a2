"""The release configuration's mechanics on the fixture (configs.toml fixture-make): CMake's Makefiles
generator beside Ninja, the distribution's flags before the pipeline's, instrumented and plain builds
that leave a part out, the configure-only check of CMake's feature summary, and its rpms."""

import argparse
import json
import re
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from conftest import FIXTURE, build_fixture, refused, run_pgo

from pgo import PipelineError
from pgo.base import lines
from pgo.build.configure_check import feature_summary, judge
from pgo.core import profile
from pgo.core.config import build_config, load, server_binary
from pgo.core.toolchain import config_flags, fingerprint
from pgo.packaging.recipes import RECIPES, load_toml


def build(workdir, *extra, config="fixture-make", check=True):
    return build_fixture(workdir, *extra, config=config, check=check)


@pytest.fixture(scope="module")
def make_build(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("make") / "w"
    return workdir, build(workdir).stdout


@pytest.fixture(scope="module")
def make_rpms(make_build, tmp_path_factory):
    workdir, _ = make_build
    out = tmp_path_factory.mktemp("make-rpms") / "rpm"
    return out, run_pgo("package", "--workdir", workdir, "--format", "rpm", "--out", out).stdout


def cmake_line(workdir, phase):
    return next(line for line in (workdir / "logs" / f"{phase}.log").read_text().splitlines()
                if line.startswith("$ cmake -S"))


def test_a_makefiles_configuration_runs_the_whole_pipeline(make_build):
    workdir, out = make_build
    assert "-G Unix Makefiles" in cmake_line(workdir, "instrumented")
    tree = workdir / "build" / "pgo"
    assert (tree / "Makefile").is_file() and not (tree / "build.ninja").exists()
    # make's share done is the progress line, each share once.
    progress = [line for line in out.splitlines() if line.startswith("[instrumented] compile")]
    assert progress[-1] == "[instrumented] compile 100%" and len(progress) == len(set(progress))
    assert lines.progress("[optimized] compile 45%") == "compile 45%"
    use = json.loads((workdir / "profile-use.json").read_text())
    assert use["passed"] and use["hot_coverage"] == 1.0, use
    assert "== phase 8 of 8: test:" in out
    info = json.loads((workdir / "build-info.json").read_text())
    assert info["variant"] == "optimized" and "-DWITH_EXTRA=OFF" not in info["cmake_args"]


def test_the_distributions_flags_come_first_in_every_variant(make_build):
    workdir, _ = make_build
    src = (workdir / "src").resolve()
    for phase, pgo_flag in (("instrumented", "-fprofile-generate="), ("optimized", "-fprofile-use=")):
        line = cmake_line(workdir, phase)
        flags = line.split("-DCMAKE_C_FLAGS=", 1)[1].split(" -DCMAKE_CXX_FLAGS=", 1)[0].split()
        assert flags[:2] == [f"-ffile-prefix-map={src}=.", "-fstack-protector-strong"], flags
        assert flags.index("-D_FORTIFY_SOURCE=2") < next(i for i, f in enumerate(flags) if f.startswith(pgo_flag))
        assert "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-z,relro -Wl,-z,now" in line
    # The objects record them: the hardening reached the compiler.
    from pgo.core.proof import records
    assert any("-fstack-protector-strong" in r for r in records(workdir / "build" / "pgo" / "CMakeFiles" / "hot.dir"
                                                                / "src" / "hot.c.o"))


def test_the_instrumented_build_leaves_out_what_the_optimised_build_ships(make_build):
    workdir, _ = make_build
    assert "-DWITH_EXTRA=OFF" in cmake_line(workdir, "instrumented")
    assert "-DWITH_EXTRA=OFF" not in cmake_line(workdir, "optimized")
    assert (workdir / "build" / "pgo" / "extra").is_file()
    # The optimised build compiled the part the training never saw without a profile, and said so
    # after the line naming its object (make --output-sync), as Ninja does.
    log = (workdir / "logs" / "optimized.log").read_text()
    assert profile.warned_objects(log, "[-Wmissing-profile]") == {"CMakeFiles/extra.dir/src/extra.c"}
    use = json.loads((workdir / "profile-use.json").read_text())
    assert use["missing_profile"] == 1 and use["missing_profile_hot"] == 0


def test_files_a_layout_installs_to_absolute_paths_stay_in_the_staged_tree(make_build):
    """MariaDB's DEB layout installs /etc/mysql/...: a stage (or the instrumented install) as root must not
    write this machine's /etc."""
    workdir, _ = make_build
    for tree in (workdir / "stage", workdir / "build" / "instrumented-install"):
        assert (tree / "etc" / "pgo-fixture" / "fixture.conf").is_file()
        assert (tree / "bin" / "fixture").is_file()
    assert not Path("/etc/pgo-fixture").exists()


def test_the_bintar_of_a_layout_with_absolute_paths_comes_from_a_standalone_tree(make_build, tmp_path):
    """CPack's TGZ runs the install rules without DESTDIR: over a tree that installs to /etc/... it would
    write this machine's /etc as root (seen with release's DEB layout). The bintar comes from a tree
    configured with the bintar recipe's options (packaging/bintar/fixture.toml), holding the checked
    build's files; nothing is compiled again, nothing written to /etc."""
    workdir, _ = make_build
    out = tmp_path / "bintar"
    result = run_pgo("package", "--workdir", workdir, "--format", "bintar", "--out", out)
    assert "with -UFIXTURE_SYSCONFDIR (configure only" in result.stdout
    assert "fixture in fixture-1.0.0+pgo-linux-x86_64.tar.gz: build-id " in result.stdout
    assert "= the checked optimized" in result.stdout
    with tarfile.open(out / "fixture-1.0.0+pgo-linux-x86_64.tar.gz") as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
        packaged = tar.extractfile("fixture-1.0.0+pgo-linux-x86_64/bin/fixture").read()
    assert "bin/fixture" in members and "lib/libhot.a" in members and not any("etc" in m for m in members)
    assert packaged == (workdir / "build" / "pgo" / "fixture").read_bytes()
    assert not list((workdir / "bintar-tree" / "tree").rglob("*.o"))
    assert not Path("/etc/pgo-fixture").exists()


def bintar_with_recipe(workdir, out, monkeypatch, **spec):
    from pgo.packaging import package
    from pgo.packaging.formats import bintar
    monkeypatch.setattr(bintar, "recipe", lambda fmt, build: spec)
    package.cmd_package(argparse.Namespace(workdir=workdir, format="bintar", out=out, release=1, as_plain=False))


@pytest.mark.parametrize("spec,phrase", [
    ({}, "no bintar of configuration 'fixture-make': configured for the bintar, it still installs files to "
         "absolute paths (/etc/pgo-fixture), which a relocatable tarball cannot hold"),
    ({"cmake": ["-UFIXTURE_SYSCONFDIR"], "keep": ["FIXTURE_SYSCONFDIR"]},
     "no bintar of configuration 'fixture-make': configured for the bintar, it still installs files to "
     "absolute paths (/etc/pgo-fixture)"),
    ({"keep": ["INSTALL_PLUGINDIR"]},
     "the bintar recipe keeps INSTALL_PLUGINDIR, which the checked build's CMake cache does not have"),
])
def test_a_bintar_recipe_whose_tree_installs_to_absolute_paths_is_refused(make_build, tmp_path, monkeypatch,
                                                                          spec, phrase):
    """Without the recipe's option, or keeping the absolute folder from the checked build: refused before
    CPack runs, in one line; nothing written to /etc, nothing published."""
    workdir = tmp_path / "w"
    shutil.copytree(make_build[0], workdir, symlinks=True, ignore=shutil.ignore_patterns("*-tree"))
    with pytest.raises(PipelineError, match=re.escape(phrase)) as refusal:
        bintar_with_recipe(workdir, tmp_path / "bintar", monkeypatch, **spec)
    assert "\n" not in str(refusal.value)
    assert not Path("/etc/pgo-fixture").exists() and not (tmp_path / "bintar").exists()


def test_the_bintar_tree_keeps_the_folders_the_recipe_names_from_the_checked_build(make_build, tmp_path,
                                                                                  monkeypatch):
    """MariaDB's recipe keeps the folders its programs have compiled in (packaging/bintar/mariadb.toml):
    the tree's cache has the checked build's value, whatever the standalone layout's default."""
    workdir = tmp_path / "w"
    shutil.copytree(make_build[0], workdir, symlinks=True, ignore=shutil.ignore_patterns("*-tree"))
    bintar_with_recipe(workdir, tmp_path / "bintar", monkeypatch, cmake=["-UFIXTURE_SYSCONFDIR"],
                       keep=["CHECKMODULE"])
    assert "CHECKMODULE:FILEPATH=OFF\n" in (workdir / "bintar-tree" / "tree" / "CMakeCache.txt").read_text()
    assert next((tmp_path / "bintar").glob("*.tar.gz")).is_file()


def test_the_rpms_of_a_makefiles_build_hold_its_checked_binary_and_nothing_compiles_again(make_build, make_rpms):
    """CPack builds a Makefiles tree's preinstall target, which depends on `all`, before it installs: the RPM
    tree would compile everything again (with the checked build's flags) and package that."""
    workdir, _ = make_build
    _, out = make_rpms
    assert "fixture in fixture-server-1.0.0+pgo-1.x86_64.rpm: build-id " in out and "= the checked optimized" in out
    assert not list((workdir / "rpm-tree" / "tree").rglob("*.o"))


POLICY_MODULE = "/usr/share/fixture/policy/selinux/fixture.mod"


def server_rpm_files(folder):
    rpm = next(folder.glob("fixture-server-*.rpm"))
    return subprocess.run(["rpm", "-qlp", rpm], capture_output=True, text=True, check=True).stdout.split()


def test_the_rpm_tree_finds_checkmodule_again_for_the_policy_module_the_server_rpm_carries(make_build, make_rpms):
    """release says -DCHECKMODULE=OFF for Debian's packaging, and the RPM tree configures with the checked
    build's command: the rpm recipe's -UCHECKMODULE after it has CMake look for checkmodule again."""
    assert shutil.which("checkmodule"), "checkmodule is missing: tools/install-deps.sh installs checkpolicy"
    workdir, _ = make_build
    folder, out = make_rpms
    assert "-DCHECKMODULE=OFF" in json.loads((workdir / "build-info.json").read_text())["cmake_args"]
    assert "with -DRPM=generic -UCHECKMODULE" in out and "what only it makes: fixture-pp" in out
    assert POLICY_MODULE in server_rpm_files(folder)


def test_without_the_recipes_option_the_rpm_tree_keeps_the_builds_checkmodule_off(make_build, tmp_path,
                                                                                 monkeypatch):
    """The same build packaged with the recipe's cmake left out: the RPM tree keeps release's
    -DCHECKMODULE=OFF, makes no policy module, and the server rpm goes without it."""
    from pgo.packaging import package
    from pgo.packaging.checked import load_build
    from pgo.packaging.formats import rpm
    workdir = tmp_path / "w"
    shutil.copytree(make_build[0], workdir, symlinks=True, ignore=shutil.ignore_patterns("rpm-tree"))
    edited = {key: value for key, value in rpm.recipe("rpm", load_build(workdir)).items() if key != "cmake"}
    monkeypatch.setattr(rpm, "recipe", lambda fmt, build: edited)
    package.cmd_package(argparse.Namespace(workdir=workdir, format="rpm", out=tmp_path / "rpm", release=1,
                                           as_plain=False))
    assert "CHECKMODULE:FILEPATH=OFF\n" in (workdir / "rpm-tree" / "tree" / "CMakeCache.txt").read_text()
    assert POLICY_MODULE not in server_rpm_files(tmp_path / "rpm")
    assert "/usr/bin/fixture" in server_rpm_files(tmp_path / "rpm")


def test_the_release_rpms_find_checkmodule_again():
    """What Debian's packaging needs (release's -DCHECKMODULE=OFF) the rpm recipe undoes for MariaDB's
    SELinux modules, which MariaDB-server carries."""
    assert "-DCHECKMODULE=OFF" in build_config("release").cmake_args
    assert "-UCHECKMODULE" in load_toml(RECIPES / "rpm" / "mariadb.toml")["cmake"]


def test_the_plain_build_is_reduced_too(make_build, tmp_path):
    workdir, _ = make_build
    plain = tmp_path / "plain"
    build(plain, "--pgo", "off", "--tests", "off")
    assert "-DWITH_EXTRA=OFF" in cmake_line(plain, "plain")
    assert not (plain / "build" / "plain" / "extra").exists()
    assert "-DWITH_EXTRA=OFF" in json.loads((plain / "build-info.json").read_text())["cmake_args"]


def compile_commands(build_dir):
    """{object: its compile command's words, without the object's own path}: what a generator makes GCC run."""
    commands = {}
    for entry in json.loads((build_dir / "compile_commands.json").read_text()):
        words = shlex.split(entry["command"])
        at = words.index("-o")
        commands[str(Path(entry["directory"], words[at + 1]).relative_to(build_dir))] = words[:at] + words[at + 2:]
    return commands


def test_both_generators_compile_the_same_commands_into_the_same_objects(tmp_path):
    """So the .gcda names, and the profile, are the same whichever generator built the tree."""
    trees = {}
    for generator in ("Ninja", "Unix Makefiles"):
        tree = trees[generator] = tmp_path / generator.replace(" ", "-")
        subprocess.run(["cmake", "-S", FIXTURE, "-B", tree, "-G", generator, "-DWITH_EXTRA=ON",
                        "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON", "-DCMAKE_C_FLAGS=-O2 -fstack-protector-strong"],
                       check=True, capture_output=True)
    assert compile_commands(trees["Ninja"]) == compile_commands(trees["Unix Makefiles"])
    assert len(compile_commands(trees["Ninja"])) == 3


def test_a_reduced_variant_is_part_of_the_fingerprint_and_never_the_optimised_build():
    data = load()
    full = build_config("fixture-make", data)
    assert full.variant_cmake_args("optimized") == full.cmake_args
    assert full.variant_cmake_args("instrumented") == full.cmake_args + ("-DWITH_EXTRA=OFF",)
    data["configs"]["fixture-make"]["reduced"] = {"variants": ["instrumented"], "cmake": ["-DWITH_EXTRA=OFF"]}
    assert fingerprint(build_config("fixture-make", data)) != fingerprint(full)
    data["configs"]["fixture-make"]["reduced"] = {"variants": ["optimized"], "cmake": ["-DWITH_EXTRA=OFF"]}
    with pytest.raises(PipelineError, match="only the instrumented and the plain build may build less"):
        build_config("fixture-make", data)
    # Without a reduced variant the fingerprint is what it was before there were any: a configuration
    # saying so keeps its archived profiles.
    data["configs"]["fixture-make"]["reduced"] = {}
    plain_config = build_config("fixture-make", data)
    del data["configs"]["fixture-make"]["reduced"]
    assert fingerprint(plain_config) == fingerprint(build_config("fixture-make", data))


def test_a_configuration_may_not_smuggle_the_pipelines_flags_or_an_unknown_generator():
    data = load()
    data["configs"]["fixture-make"]["compile_flags"] = ["-fprofile-use=/elsewhere"]
    with pytest.raises(PipelineError, match="is a flag the pipeline owns"):
        build_config("fixture-make", data)
    data["configs"]["fixture-make"]["compile_flags"] = []
    data["configs"]["fixture-make"]["generator"] = "Xcode"
    with pytest.raises(PipelineError, match="generator 'Xcode' is not one the pipeline runs"):
        build_config("fixture-make", data)


def test_the_configure_check_passes_when_every_required_feature_is_built(tmp_path):
    result = run_pgo("configure-check", "--config", "fixture-make", "--version", "1.0.0", "--source", FIXTURE,
                     "--workdir", tmp_path / "w")
    assert ("[configure-check] fixture-make (optimized build): 2 features enabled, off as configured: none"
            in result.stdout)
    # The reduced builds may go without what their options turn off.
    assert "[configure-check] fixture-make (instrumented build): 1 features enabled, off as configured: EXTRA" \
        in result.stdout
    record = json.loads((tmp_path / "w" / "configure-check.json").read_text())
    assert set(record["builds"]) == {"optimized", "instrumented"}
    assert not (tmp_path / "w" / "build").exists()        # configured only, in a scratch folder since removed
    assert not (tmp_path / "w" / "configure-check").exists()


def test_the_configure_check_fails_with_one_line_naming_what_cmake_left_out(tmp_path):
    result = run_pgo("configure-check", "--config", "fixture-make", "--version", "1.0.0", "--source", FIXTURE,
                     "--workdir", tmp_path / "w", "--variant", "optimized", check=False,
                     env={"FIXTURE_WITHOUT": "zlib"})
    line = refused(result, "configuration 'fixture-make' (optimized build) of 1.0.0 would build without what it "
                           "requires: disabled COMPRESS", "tools/install-deps.sh build")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "EXTRA" not in line
    # The log of the configure stays for a look.
    assert (tmp_path / "w" / "logs" / "configure-check-optimized.log").is_file()


def test_a_required_feature_cmake_never_mentions_is_missing_too(tmp_path):
    """A MariaDB plugin whose CMakeLists returns before adding itself (OQGraph without Judy) is in neither list."""
    tree = tmp_path / "t"
    out = subprocess.run(["cmake", "-S", FIXTURE, "-B", tree], capture_output=True, text=True, check=True)
    summary = feature_summary(out.stdout + out.stderr)
    assert summary == {"features have been enabled": ["COMPRESS"], "features have been disabled": ["EXTRA"]}
    result = judge(summary, lambda feature: feature == "EXTRA", ["COMPRESS", "OQGRAPH"])
    assert result["unexpected_off"] == [] and result["missing"] == ["OQGRAPH"]


def test_release_is_debians_configuration_with_a_reduced_instrumented_and_plain_build():
    release = build_config("release")
    assert release.generator == "Unix Makefiles"
    for option in ("-DDEB=Debian", "-DBUILD_CONFIG=mysql_release", "-DPLUGIN_COLUMNSTORE=NO",
                   "-DPLUGIN_AWS_KEY_MANAGEMENT=NO", "-DCONC_DEFAULT_CHARSET=utf8mb4", "-DWITH_URING=ON",
                   "-DWITH_LIBAIO=ON", "-DWITH_INNODB_SNAPPY=ON"):
        assert option in release.cmake_args
    assert not any(arg.startswith("-DCOMPILATION_COMMENT") for arg in release.cmake_args)
    assert release.reduced_variants == ("instrumented", "plain")
    assert "-DPLUGIN_S3=NO" not in release.variant_cmake_args("instrumented")     # S3 changes Aria's objects
    allowed, required = release.variant_features("instrumented")
    assert allowed("CONNECT_ODBC") and allowed("MROONGA") and not allowed("ROCKSDB")
    assert "SPIDER" not in required and "ROCKSDB" in required
    # Its training must reach performance_schema and the engines it ships (the check refuses without).
    assert release.trained_dirs == ("storage/perfschema", "storage/maria", "storage/myisam", "storage/rocksdb")
    assert build_config("release-whole").trained_dirs == release.trained_dirs
    assert build_config("minimal-lto").trained_dirs == ()
    # The minimal configurations keep the standalone layout, and their fingerprints.
    assert build_config("minimal-lto").generator == "Ninja"
    assert "-DDEB=Debian" not in build_config("minimal-lto").cmake_args


def test_release_whole_builds_the_whole_server_in_every_variant_with_a_fingerprint_of_its_own():
    """The plain full build issue 29 measures the release against: release's options, nothing reduced."""
    release, whole = build_config("release"), build_config("release-whole")
    for variant in ("instrumented", "optimized", "plain"):
        assert whole.variant_cmake_args(variant) == release.cmake_args
    assert fingerprint(whole) != fingerprint(release)


def test_release_lto_is_release_with_lto_for_mariadbd_and_release_s_profile():
    """Issue 47's PGO+LTO of the server that ships: release's options, reduced builds, packaging and profile
    (its instrumented build is release's), LTO in the optimised build, for mariadbd's link alone."""
    release, lto = build_config("release"), build_config("release-lto")
    assert lto.lto and lto.lto_server and not release.lto
    for variant in ("instrumented", "optimized", "plain"):
        assert lto.variant_cmake_args(variant) == release.variant_cmake_args(variant)
    assert (lto.debian_rules, lto.debian_patches, lto.distribution_baseline, lto.generator) == \
        (True, True, True, "Unix Makefiles")
    assert lto.trained_dirs == release.trained_dirs and lto.line == release.line
    assert config_flags("instrumented", lto) == config_flags("instrumented", release)
    compile_flags, link_flags = config_flags("optimized", lto)
    assert compile_flags == config_flags("optimized", release)[0] + ["-flto=auto", "-ffat-lto-objects"]
    assert link_flags[-3:] == ["-flto=auto", "-ffat-lto-objects", "-fno-lto"]
    assert fingerprint(lto) == fingerprint(release)
    assert server_binary("mariadb")["link_flags_variable"] == "WITH_MYSQLD_LDFLAGS"


# Options of debian/rules that are not the configuration's: the comment is the pipeline's, the suffix
# Debian's revision (pgo/configs.toml [configs.release]).
NOT_OURS = ("-DCOMPILATION_COMMENT=", "-DMYSQL_SERVER_SUFFIX=")


def debian_tarball(suite_mark):
    """A Debian packaging tarball of MariaDB in this machine's download cache (the pipeline's source phase
    put it there), or None: read only, never fetched by the tests."""
    found = sorted((Path.home() / ".cache" / "pgo" / "debian").glob(f"mariadb_*{suite_mark}*/*.debian.tar.xz"))
    return found[-1] if found else None


def debian_rules_options(tarball, scratch):
    """The CMake options debian/rules' override_dh_auto_configure passes (make -n: nothing runs)."""
    subprocess.run(["tar", "-xf", tarball, "-C", scratch], check=True)
    out = subprocess.run(["make", "-n", "-f", "debian/rules", "override_dh_auto_configure"], cwd=scratch,
                         capture_output=True, text=True, check=True).stdout
    command = out.split("dh_auto_configure --builddirectory=builddir --", 1)[1].split("\n\n", 1)[0]
    return [word for word in shlex.split(command.replace("\\\n", " ")) if word.startswith("-D")]


def test_release_has_every_option_of_debian_12s_rules(tmp_path):
    tarball = debian_tarball("deb12")
    if tarball is None:
        pytest.skip("no Debian 12 mariadb packaging in the download cache (a release's source phase puts it there)")
    options = debian_rules_options(tarball, tmp_path)
    assert "-DDEB=Debian" in options and len(options) >= 15, options
    release = build_config("release").cmake_args
    assert [o for o in options if not o.startswith(NOT_OURS) and o not in release] == []


# Debian 13's debian/rules and debhelper (mariadb 1:11.8.6-0+deb13u1) against Debian 12's (1:10.11.18-0+deb12u1):
# the options it dropped and the ones it added (docs/plan-issue45-release-11.8.md).
DEBIAN_13_DROPPED = ("-DWITH_PMEM=ON", "-DCMAKE_SYSTEM_PROCESSOR=amd64")
DEBIAN_13_ADDED = ("-DCMAKE_INSTALL_RUNSTATEDIR=/run", "-DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON",
                   "-DHAVE_SYSTEM_LIBFMT_EXITCODE=0", "-DWITH_SBOM=NO")


def test_release_11_8_is_the_server_debian_13_ships_with_the_pipelines_own_choices_as_release():
    release, trixie = build_config("release"), build_config("release-11.8")
    assert (trixie.line, trixie.debian_suite) == ("11.8", "trixie")
    # Debian 13's options, not Debian 12's: and Debian 13 builds CONNECT's JDBC (default-jdk), so no pins.
    assert [o for o in release.cmake_args if o not in trixie.cmake_args] == [
        *DEBIAN_13_DROPPED, "-DCONNECT_WITH_JDBC=OFF", "-DCONNECT_WITH_MONGO=OFF"]
    assert [o for o in trixie.cmake_args if o not in release.cmake_args] == list(DEBIAN_13_ADDED)
    assert not any(arg.startswith(NOT_OURS) for arg in trixie.cmake_args)
    # Debian 13's dpkg-buildflags (hardening=+all on amd64): Debian 12's and stack clash and control-flow
    # protection, fortify still at 2; not its C-only -Werror=implicit-function-declaration (these are C++'s too).
    assert [f for f in trixie.compile_flags if f not in release.compile_flags] == ["-fstack-clash-protection",
                                                                                   "-fcf-protection"]
    assert set(release.compile_flags) < set(trixie.compile_flags) and "-D_FORTIFY_SOURCE=2" in trixie.compile_flags
    assert not any("implicit-function-declaration" in f for f in trixie.compile_flags)
    assert trixie.link_flags == release.link_flags and not trixie.lto
    # What configure-check holds it to: CONNECT's JDBC and PARSEC are built; the reduced builds drop CONNECT.
    allowed, required = trixie.variant_features("optimized")
    assert {"CONNECT_JDBC", "AUTH_PARSEC"} <= set(required) and not allowed("CONNECT_JDBC")
    assert allowed("CONNECT_MONGODB") and set(release.features_required) < set(trixie.features_required)
    assert trixie.variant_features("instrumented")[0]("CONNECT_JDBC")
    # The pipeline's own choices are release's.
    for ours in ("-DWITH_LIBFMT=system", "-DWITH_JEMALLOC=no", "-DCHECKMODULE=OFF"):
        assert ours in trixie.cmake_args and ours in release.cmake_args
    for key in ("product", "generator", "debian_rules", "debian_patches", "bolt", "reduced_variants",
                "reduced_cmake", "trained_dirs", "disk_gib"):
        assert getattr(trixie, key) == getattr(release, key), key
    assert trixie.generator == "Unix Makefiles"     # 11.8.6's Connector/C has no pull request 302
    assert fingerprint(trixie) != fingerprint(release)


def test_release_11_8_has_every_option_of_debian_13s_rules_and_none_it_dropped(tmp_path):
    tarball = debian_tarball("deb13")
    if tarball is None:
        pytest.skip("no Debian 13 mariadb packaging in the download cache (a release's source phase puts it there)")
    if not Path("/usr/share/debhelper/dh_package_notes/package-notes.mk").is_file():
        pytest.skip("Debian 13's debian/rules include dh-package-notes' package-notes.mk (the 11.8 line's "
                    "Build-Depends, `pgo build-deps`), which this machine lacks")
    options = debian_rules_options(tarball, tmp_path)
    assert "-DDEB=Debian" in options and "-DWITH_SBOM=NO" in options, options
    trixie = build_config("release-11.8").cmake_args
    assert [o for o in options if not o.startswith(NOT_OURS) and o not in trixie] == []
    assert not set(DEBIAN_13_DROPPED) & set(options)


def test_build_dependencies_are_read_from_debians_source_package_and_judged_by_apt():
    from pgo.base import process
    from pgo.build import builddeps
    if "10.11." not in process.run(["apt-cache", "showsrc", "mariadb"]).stdout:
        pytest.skip("apt knows no mariadb 10.11 source here (the pipeline's deb-src entry adds it)")
    assert ("mariadb", "10.11", "bookworm") in builddeps.product_lines()
    version, good, bad = builddeps.plan("mariadb", "10.11", "bookworm", add_entry=False)
    assert version.startswith("1:10.11.") and "libjudy-dev" in good and "dh-exec" in good
    # tools/install-deps.sh build installed them: this machine satisfies every one.
    assert bad == []
    assert builddeps.satisfiable("dpkg-dev") and not builddeps.satisfiable("dpkg-dev (>= 99)")
    assert builddeps.satisfiable("gdb <!nocheck>, libaio-dev [linux-any], no-such-package [s390x]")


def test_a_source_paragraphs_build_relations_span_its_continuation_lines():
    from pgo.build import builddeps, source
    text = ("Package: m\nVersion: 1:10.11.18-1\nBuild-Depends: a,\n b (>= 1) | c,\n d [linux-any]\n"
            "Build-Depends-Arch: e\n\nPackage: m\nVersion: 1:10.11.19-1\nBuild-Depends: f\n\n"
            "Package: m\nVersion: 1:11.8.9+ds-1\nBuild-Depends: g\n")
    paragraphs = source.control_paragraphs(text)
    assert builddeps.relations(paragraphs[0]) == ["a", "b (>= 1) | c", "d [linux-any]", "e"]
    assert builddeps.newest_of_line(paragraphs, "10.11")["Version"] == "1:10.11.19-1"
    assert builddeps.newest_of_line(paragraphs, "11.8")["Version"] == "1:11.8.9+ds-1"
    assert builddeps.newest_of_line(paragraphs, "12.0") is None
