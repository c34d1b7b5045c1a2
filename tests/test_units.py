"""Unit tests: configuration file, flags, source resolution, profile check, compiler warnings."""

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from pgo import PipelineError
from pgo.base import lines
from pgo.build import source
from pgo.core import profile
from pgo.core.config import build_config, config_names, default_config
from pgo.core.toolchain import LTO_FLAGS, Compiler, detect, fingerprint, lto_tools, pgo_flags

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixture"


# --- configuration file -------------------------------------------------------

def test_shipped_configurations_resolve():
    assert {"release", "standalone", "minimal", "fixture"} <= set(config_names())
    release, standalone, minimal = build_config("release"), build_config("standalone"), build_config("minimal")
    assert "-DBUILD_CONFIG=mysql_release" in release.cmake_args and "-DDEB=Debian" in release.cmake_args
    assert minimal.cmake_args[:len(standalone.cmake_args)] == standalone.cmake_args
    assert "-DDEB=Debian" not in minimal.cmake_args
    assert "-DPLUGIN_ROCKSDB=NO" in minimal.cmake_args and "-DPLUGIN_ROCKSDB=NO" not in release.cmake_args
    assert minimal.product.name == "mariadb" and "sql" in minimal.product.hot_dirs


def test_configurations_name_their_product_line_and_debian_suite():
    assert (build_config("minimal").line, build_config("minimal").debian_suite) == ("10.11", "bookworm")
    for name in ("release-11.8", "minimal-11.8", "minimal-11.8-lto"):
        eleven, ten = build_config(name), build_config(name.replace("-11.8", ""))
        assert (eleven.line, eleven.debian_suite) == ("11.8", "trixie") and eleven.lto == ten.lto
        # The minimal ones take 10.11's options; release-11.8 Debian 13's rules' (tests/test_release_config.py).
        assert (eleven.cmake_args == ten.cmake_args) == (name != "release-11.8")
    assert build_config("fixture").line is None and build_config("fixture").require_version("7.1.0") == "7.1.0"
    assert build_config("minimal").require_version("10.11.19") == "10.11.19"
    with pytest.raises(PipelineError, match=r"configuration 'minimal' builds mariadb 10.11; 11.8.9 is of line 11.8 "
                                            r"\(configurations for it: minimal-11.8, minimal-11.8-lto, "
                                            r"release-11.8\)"):
        build_config("minimal").require_version("11.8.9")


def test_the_default_configuration_is_named_once_and_must_exist():
    assert default_config() in config_names()
    with pytest.raises(PipelineError, match=r"configs.toml: default = 'gone' is not a configuration \(known: a\)"):
        default_config({"default": "gone", **config(a={"product": "p"})})
    with pytest.raises(PipelineError, match=r"default = None is not a configuration"):
        default_config(config(a={"product": "p"}))


def config(**configs):
    return {"products": {"p": {"comment_variable": "C", "hot_dirs": ["src"], "train": [["true"]]}},
            "configs": configs}


def test_inherits_appends_in_order():
    data = config(base={"product": "p", "cmake": ["-DA=1"]}, child={"inherits": "base", "cmake": ["-DB=2"]})
    assert build_config("child", data).cmake_args == ("-DA=1", "-DB=2")


def test_lto_is_a_setting_the_nearest_configuration_decides():
    data = config(base={"product": "p"}, lto={"inherits": "base", "lto": True},
                  again={"inherits": "lto"}, off={"inherits": "lto", "lto": False})
    assert [build_config(name, data).lto for name in ("base", "lto", "again", "off")] == [False, True, True, False]
    minimal, experiment = build_config("minimal"), build_config("minimal-lto")
    assert experiment.lto and not minimal.lto and experiment.cmake_args == minimal.cmake_args


@pytest.mark.parametrize("data, message", [
    (config(a={"product": "p"}), "unknown configuration 'zzz'"),
    (config(zzz={"inherits": "gone"}), "unknown parent configuration of zzz 'gone'"),
    (config(zzz={"inherits": "zzz", "product": "p"}), "inherits from itself"),
    (config(zzz={"cmake": []}), "names no product"),
    (config(zzz={"product": "nope"}), "unknown product 'nope'"),
    (config(zzz={"product": "p", "cmake": ["WITH_X=1"]}), "is not a -D cache setting"),
    (config(zzz={"product": "p", "cmake": ["-DCMAKE_C_FLAGS=-O3"]}), "the pipeline owns them"),
    (config(zzz={"product": "p", "line": "11"}), "line '11' is not MAJOR.MINOR"),
    (config(zzz={"product": "p", "lto": "yes"}), "lto = 'yes' is not true or false"),
    (config(zzz={"product": "p", "trained_dirs": "storage/rocksdb"}),
     "trained_dirs = 'storage/rocksdb' is not a list of folders"),
    (config(zzz={"product": "p", "cmake": ["-DCMAKE_EXE_LINKER_FLAGS=-flto"]}), "set `lto = true` instead"),
    # A misspelt setting would be ignored: refused, in this configuration or a parent.
    (config(zzz={"product": "p", "ltoo": True}), r"^configuration 'zzz': unknown setting 'ltoo' \(known: product, "),
    (config(base={"product": "p", "cmakee": []}, zzz={"inherits": "base"}),
     r"^configuration 'base': unknown setting 'cmakee'"),
    (config(zzz={"product": "p", "reduced": {"variant": ["plain"]}}),
     r"^configuration 'zzz': unknown setting 'reduced.variant' \(known: cmake, variants\)$"),
])
def test_bad_configurations_are_refused(data, message):
    with pytest.raises(PipelineError, match=message):
        build_config("zzz", data)


# --- flags ----------------------------------------------------------------------

def test_instrumented_and_optimised_flags_name_the_same_tree_root():
    gen, gen_link = pgo_flags("instrumented", "/p", "/b1")
    use, use_link = pgo_flags("optimized", "/p", "/b2")
    assert gen == ["-fprofile-generate=/p", "-fprofile-update=prefer-atomic", "-ftest-coverage",
                   "-fprofile-prefix-path=/b1", "-frecord-gcc-switches"]
    assert gen_link == ["-fprofile-generate=/p"] and use_link == []
    assert {"-fprofile-use=/p", "-fprofile-correction", "-fprofile-partial-training",
            "-fprofile-prefix-path=/b2", "-frecord-gcc-switches"} <= set(use)
    # Every variant records its options in its objects, the plain one too (pgo/core/proof.py).
    assert pgo_flags("plain", "/p", "/b") == (["-frecord-gcc-switches"], [])
    with pytest.raises(PipelineError, match="unknown build variant"):
        pgo_flags("fast", "/p", "/b")


def test_lto_flags_go_on_the_compile_and_the_link_of_every_variant():
    for variant in ("instrumented", "optimized", "plain"):
        compile_flags, link_flags = pgo_flags(variant, "/p", "/b")
        assert pgo_flags(variant, "/p", "/b", lto=True) == (compile_flags + list(LTO_FLAGS),
                                                            link_flags + list(LTO_FLAGS))
    assert LTO_FLAGS == ("-flto=auto", "-ffat-lto-objects")


def test_fingerprint_follows_the_flags_only():
    data = config(a={"product": "p", "cmake": ["-DA=1"]}, same={"product": "p", "cmake": ["-DA=1"], "line": "1.2"},
                  b={"product": "p", "cmake": ["-DA=2"]}, lto={"inherits": "a", "lto": True})
    a, same, b, lto = (build_config(name, data) for name in ("a", "same", "b", "lto"))
    assert fingerprint(a) == fingerprint(same) != fingerprint(b)
    assert fingerprint(lto) != fingerprint(a)


def test_fingerprint_follows_every_variants_flags_and_the_build_environment():
    """The flags fingerprint changed with -frecord-gcc-switches: profiles archived before it no longer match.
    A compiler launcher (or GCC's search paths) in the environment is part of it."""
    minimal = build_config("minimal")
    assert fingerprint(minimal) != hashlib.sha256(json.dumps(list(minimal.cmake_args)).encode()).hexdigest()[:16]
    launched = {"CMAKE_C_COMPILER_LAUNCHER": "/usr/bin/ccache (sha256 0123456789ab)"}
    assert fingerprint(minimal, launched) != fingerprint(minimal) == fingerprint(minimal, {})


def compiler_at(path):
    return Compiler("gcc", "g++", "12.2.0", "gcc (Debian 12.2.0) 12.2.0", str(path))


def test_lto_archives_with_the_compilers_own_gcc_ar(tmp_path):
    for name in ("x86_64-linux-gnu-gcc-12", "x86_64-linux-gnu-gcc-ar-12", "x86_64-linux-gnu-gcc-ranlib-12",
                 "x86_64-linux-gnu-gcc-nm-12", "gcc-ar-13"):
        (tmp_path / name).write_text("")
        (tmp_path / name).chmod(0o755)
    assert lto_tools(compiler_at(tmp_path / "x86_64-linux-gnu-gcc-12")) == [
        f"-DCMAKE_AR={tmp_path}/x86_64-linux-gnu-gcc-ar-12",
        f"-DCMAKE_RANLIB={tmp_path}/x86_64-linux-gnu-gcc-ranlib-12",
        f"-DCMAKE_NM={tmp_path}/x86_64-linux-gnu-gcc-nm-12"]
    with pytest.raises(PipelineError, match=f"LTO needs {tmp_path}/gcc-ranlib-13, the gcc-ranlib of the compiler"):
        lto_tools(compiler_at(tmp_path / "gcc-13"))
    with pytest.raises(PipelineError, match="is not named gcc"):
        lto_tools(compiler_at(tmp_path / "ccache"))


def test_compiler_detection():
    gcc = detect("gcc", "g++")
    assert gcc.version.count(".") == 2 and "gcc" in gcc.banner.lower()
    with pytest.raises(PipelineError, match="not found"):
        detect("no-such-gcc", "g++")
    with pytest.raises(PipelineError, match="is not GCC"):
        detect("true", "g++")


# --- source resolution ------------------------------------------------------------

@pytest.mark.parametrize("spec, kind", [
    ("debian", "debian"), ("https://github.com/MariaDB/server.git", "git"),
    ("git@github.com:MariaDB/server.git", "git"), ("file:///srv/server.git", "git"),
])
def test_source_kinds(spec, kind):
    assert source.kind_of(spec) == kind


def test_local_sources(tmp_path):
    assert source.kind_of(str(tmp_path)) == "directory"
    (tmp_path / "x.tar.gz").write_bytes(b"")
    assert source.kind_of(str(tmp_path / "x.tar.gz")) == "tarball"
    with pytest.raises(PipelineError, match="neither"):
        source.kind_of(str(tmp_path / "missing"))


@pytest.mark.parametrize("text, version", [
    ("MYSQL_VERSION_MAJOR=10\nMYSQL_VERSION_MINOR=11\nMYSQL_VERSION_PATCH=18\nSERVER_MATURITY=stable\n",
     "10.11.18"),
    ("1.0.0\n", "1.0.0"),
])
def test_source_version(tmp_path, text, version):
    (tmp_path / "VERSION").write_text(text)
    assert source.source_version(tmp_path) == version


def test_source_version_refuses_other_trees(tmp_path):
    with pytest.raises(PipelineError, match="no VERSION file"):
        source.source_version(tmp_path)
    (tmp_path / "VERSION").write_text("hello\n")
    with pytest.raises(PipelineError, match="names no version"):
        source.source_version(tmp_path)


def make_tarball(path, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"proj-1.0.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_tarball_source_unpacks_its_top_folder(tmp_path):
    from pgo.core.config import product
    make_tarball(tmp_path / "p.tar.gz", {"VERSION": "1.0.0\n", "a.c": "int a;\n"})
    got, tree = source.fetch(str(tmp_path / "p.tar.gz"), "1.0.0", product("fixture"), tmp_path / "src", tmp_path)
    assert got.kind == "tarball" and got.checksum == source.sha256_file(tmp_path / "p.tar.gz")
    assert (tree / "a.c").read_text() == "int a;\n"
    assert tree == tmp_path / "src" / "fixture-1.0"
    _, same = source.fetch(str(tmp_path / "p.tar.gz"), "1.0.0", product("fixture"), tmp_path / "src", tmp_path)
    assert same == tree and [p.name for p in (tmp_path / "src").iterdir() if not p.name.startswith(".")] == [tree.name]
    (tmp_path / "bad.tar.gz").write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(PipelineError, match="cannot unpack"):
        source.fetch(str(tmp_path / "bad.tar.gz"), "1.0.0", product("fixture"), tmp_path / "src", tmp_path)


def test_a_tarball_cannot_write_outside_its_folder(tmp_path):
    from pgo.core.config import product
    make_tarball(tmp_path / "evil.tar.gz", {"VERSION": "1.0.0\n", "../../escaped": "x\n"})
    with pytest.raises(PipelineError, match="cannot unpack .*evil.tar.gz: .*escaped: Member name contains '..'"):
        source.fetch(str(tmp_path / "evil.tar.gz"), "1.0.0", product("fixture"), tmp_path / "src", tmp_path)
    assert not (tmp_path / "escaped").exists()
    assert [p.name for p in (tmp_path / "src").iterdir() if p.suffix != ".lock"] == []


def test_tree_checksum_covers_names_and_contents(tmp_path):
    (tmp_path / "a").write_text("1")
    first = source.sha256_tree(tmp_path)
    assert source.sha256_tree(tmp_path) == first
    (tmp_path / "a").write_text("2")
    assert source.sha256_tree(tmp_path) != first


def test_git_source_checks_out_the_tag_and_caches_the_clone(tmp_path):
    from pgo.core.config import product
    repo = tmp_path / "upstream"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "VERSION").write_text("1.0.0\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    subprocess.run([*git, "tag", "fixture-1.0.0"], check=True)
    (repo / "VERSION").write_text("1.0.1\n")
    subprocess.run([*git, "commit", "-qam", "two"], check=True)
    url = f"file://{repo}"
    got, tree = source.fetch(url, "1.0.0", product("fixture"), tmp_path / "src", tmp_path / "cache")
    assert got.kind == "git" and got.origin == f"{url}@fixture-1.0.0" and got.checksum.startswith("git:")
    assert (tree / "VERSION").read_text() == "1.0.0\n"
    assert len(list((tmp_path / "cache" / "git").iterdir())) == 1
    with pytest.raises(PipelineError, match="git ref 'nope' not found"):
        source.fetch(url, "1.0.0", product("fixture"), tmp_path / "src", tmp_path / "cache", git_ref="nope")


# --- versions: Debian's, 'latest' ------------------------------------------------

@pytest.mark.parametrize("full, upstream, release", [
    ("1:10.11.19-0+deb12u1", "10.11.19", "10.11.19"),
    ("1:11.8.9+ds-0+deb13u1", "11.8.9+ds", "11.8.9"),     # trixie repacks the tarball
    ("1:10.11.20~rc1-1", "10.11.20~rc1", None),           # not a release
])
def test_debian_versions_name_their_upstream_release(full, upstream, release):
    assert (source.upstream_of(full), source.release_of(full)) == (upstream, release)


def test_matching_debian_version_takes_a_repacked_tarball():
    versions = ["1:10.11.18-0+deb12u1", "1:10.11.19-0+deb12u1", "1:11.8.9+ds-0+deb13u1"]
    assert source.matching_debian_version("mariadb", "11.8.9", versions) == "1:11.8.9+ds-0+deb13u1"
    assert source.of_line(versions, "10.11") == versions[:2] and source.of_line(versions, None) == versions
    with pytest.raises(PipelineError, match="unknown version 11.8.8: Debian's archive has mariadb 1:10.11.18"):
        source.matching_debian_version("mariadb", "11.8.8", versions)


DEBIAN_SOURCES = """Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_deb_src_entry_of_another_suite_mirrors_this_machines_entries():
    own = source.deb_src_text(DEBIAN_SOURCES, None, "bookworm")
    assert own == DEBIAN_SOURCES.replace("Types: deb\n", "Types: deb-src\n")
    assert source.deb_src_text(DEBIAN_SOURCES, "bookworm", "bookworm") == own
    trixie = source.deb_src_text(DEBIAN_SOURCES, "trixie", "bookworm")
    assert "Suites: trixie trixie-updates\n" in trixie and "Suites: trixie-security\n" in trixie
    assert "bookworm" not in trixie and trixie.count("Types: deb-src\n") == 2
    assert "URIs: http://deb.debian.org/debian-security" in trixie
    with pytest.raises(PipelineError, match="cannot derive deb-src entries for trixie"):
        source.deb_src_text(DEBIAN_SOURCES, "trixie", None)
    assert source.deb_src_entry("zzz").name == "pgo-deb-src-zzz.sources"


@pytest.fixture
def apt(monkeypatch):
    """Debian's archive as apt would show it, and the entries the pipeline adds, without apt."""
    state = {"versions": ["1:10.11.18-0+deb12u1", "1:10.11.19-0+deb12u1"], "added": [], "refreshed": [],
             "unserved": {}}
    monkeypatch.setattr(source, "debian_versions", lambda package: list(state["versions"]))
    monkeypatch.setattr(source, "unserved", lambda package, full: state["unserved"].get(full))
    monkeypatch.setattr(source, "refresh_deb_src", lambda suite, log=None: state["refreshed"].append(suite))

    def add(suite, log=None):
        state["added"].append(suite)
        state["versions"].append("1:11.8.9+ds-0+deb13u1")
    monkeypatch.setattr(source, "ensure_deb_src", add)
    return state


def test_latest_is_the_newest_debian_version_of_the_configurations_line(apt):
    version, how = source.resolve_version("latest", "debian", build_config("minimal"))
    assert (version, how) == ("10.11.19", "the newest mariadb 10.11 in Debian's archive: 1:10.11.19-0+deb12u1")
    assert apt["refreshed"] == ["bookworm"] and apt["added"] == []
    # No 11.8 known: the suite's deb-src entry is added first.
    version, how = source.resolve_version("latest", "debian", build_config("minimal-11.8"))
    assert (version, how) == ("11.8.9", "the newest mariadb 11.8 in Debian's archive: 1:11.8.9+ds-0+deb13u1")
    assert apt["added"] == ["trixie"]
    assert source.resolve_version("10.11.18", "debian", build_config("minimal")) == ("10.11.18", "as requested")
    with pytest.raises(PipelineError, match="configuration 'minimal-11.8' builds mariadb 11.8; 10.11.18"):
        source.resolve_version("10.11.18", "debian", build_config("minimal-11.8"))


def test_latest_is_the_newest_version_whose_source_the_archive_serves(apt):
    # Seen on a mirror that carries bookworm-security's binaries but not its sources: apt lists
    # 10.11.19, and its .dsc is a 404.
    apt["unserved"]["1:10.11.19-0+deb12u1"] = "HTTP 404 for mariadb_10.11.19-0+deb12u1.dsc"
    version, how = source.resolve_version("latest", "debian", build_config("minimal"))
    assert version == "10.11.18"
    assert how == ("the newest mariadb 10.11 whose source Debian's archive serves: 1:10.11.18-0+deb12u1 "
                   "(not 1:10.11.19-0+deb12u1, listed but not served: HTTP 404 for mariadb_10.11.19-0+deb12u1.dsc)")
    # Asked for by name, it is refused before anything is built or downloaded.
    with pytest.raises(PipelineError, match=r"^mariadb 1:10.11.19-0\+deb12u1 is listed by apt, but Debian's "
                                            r"archive does not serve its source \(HTTP 404 for"):
        source.check_available("debian", "10.11.19", build_config("minimal"), ".")
    source.check_available("debian", "10.11.18", build_config("minimal"), ".")
    apt["unserved"]["1:10.11.18-0+deb12u1"] = "HTTP 404 for mariadb_10.11.18-0+deb12u1.dsc"
    with pytest.raises(PipelineError, match=r"lists mariadb 10.11 but serves none of their sources: .* "
                                            r"\(give a source you have with --source: "):
        source.resolve_version("latest", "debian", build_config("minimal"))


@pytest.mark.skipif(os.geteuid() != 0, reason="Debian source lookups add a deb-src entry as root")
def test_latest_on_the_real_archive_is_a_version_whose_source_it_serves():
    version, how = source.resolve_version("latest", "debian", build_config("minimal"))
    full = source.matching_debian_version("mariadb", version, source.debian_versions("mariadb"))
    assert full in how and source.unserved("mariadb", full) is None
    # Whatever it passed over, it passed over for an HTTP status of the .dsc, and says so.
    for skipped in re.findall(r"(1:[^ ,]+), listed but not served: (HTTP [0-9]{3} for mariadb_\S+\.dsc)", how):
        assert source.unserved("mariadb", skipped[0]) == skipped[1]


def test_latest_goes_on_with_apts_lists_when_they_cannot_be_refreshed(apt, monkeypatch, capsys):
    def locked(suite, log=None):
        raise PipelineError("'apt-get update' failed: E: Could not get lock /var/lib/apt/lists/lock")
    monkeypatch.setattr(source, "refresh_deb_src", locked)
    assert source.resolve_version("latest", "debian", build_config("minimal"))[0] == "10.11.19"
    assert "pgo: warning: cannot refresh the deb-src lists of bookworm, taking apt's lists as they are: " \
           "'apt-get update' failed: E: Could not get lock" in capsys.readouterr().err


def test_a_master_resolves_latest_only_from_what_apt_already_knows(apt):
    apt["versions"] = []
    assert source.resolve_version("latest", "debian", build_config("minimal"), on_worker=False) is None
    assert apt["added"] == apt["refreshed"] == []


def test_latest_of_a_directory_a_tarball_and_a_git_repository(tmp_path):
    fixture = build_config("fixture")
    assert source.resolve_version("latest", "tests/fixture", fixture, base=REPO) == (
        "1.0.0", "the version of tests/fixture")
    make_tarball(tmp_path / "p.tar.gz", {"VERSION": "1.2.3\n"})
    assert source.resolve_version("latest", str(tmp_path / "p.tar.gz"), fixture)[0] == "1.2.3"
    repo = tmp_path / "upstream"
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    for tag in ("fixture-1.0.0", "fixture-1.10.0", "fixture-1.9.9", "fixture-2.0.0-rc1", "other-9.0.0"):
        subprocess.run([*git, "tag", tag], check=True)
    url = f"file://{repo}"
    assert source.resolve_version("latest", url, fixture) == ("1.10.0", f"the newest fixture-* tag of {url}")
    with pytest.raises(PipelineError, match="--git-ref main names one commit"):
        source.resolve_version("latest", url, fixture, git_ref="main")
    assert source.resolve_version("latest", str(tmp_path / "nowhere"), fixture, on_worker=False) is None


# --- the line's shared source tree --------------------------------------------------

def fixture_release(root, version, extra=""):
    tree = Path(root) / version
    tree.mkdir(parents=True)
    (tree / "VERSION").write_text(version + "\n")
    (tree / "a.c").write_text(f"int a;{extra}\n")
    return tree


def test_every_version_of_a_line_is_built_at_one_path(tmp_path):
    from pgo.core.config import product
    one, two = fixture_release(tmp_path, "1.0.0"), fixture_release(tmp_path, "1.0.1", " int b;")
    first, tree = source.fetch(str(one), "1.0.0", product("fixture"), tmp_path / "src", tmp_path / "cache")
    second, same = source.fetch(str(two), "1.0.1", product("fixture"), tmp_path / "src", tmp_path / "cache")
    assert tree == same == tmp_path / "src" / "fixture-1.0" and (tree / "VERSION").read_text() == "1.0.1\n"
    assert source.read_marker(tree) == {"checksum": second.checksum, "origin": second.origin, "version": "1.0.1",
                                        "tree": source.sha256_tree(tree)}
    # A build of 1.0.0 that holds the tree later gets its own source back, from where it came.
    record = {"kind": first.kind, "origin": first.origin, "checksum": first.checksum}
    with source.held(record, str(one), "1.0.0", product("fixture"), tmp_path / "src", tmp_path / "cache") as held:
        assert held == tree and (tree / "VERSION").read_text() == "1.0.0\n"
        # ... and while it does, this process cannot want another source there.
        with pytest.raises(PipelineError, match="holds .* for this command, which also needs"):
            source.fetch(str(two), "1.0.1", product("fixture"), tmp_path / "src", tmp_path / "cache")
    (one / "a.c").write_text("changed\n")
    shutil.rmtree(tree)
    with pytest.raises(PipelineError, match="is no longer what phase source took"):
        with source.held(record, str(one), "1.0.0", product("fixture"), tmp_path / "src", tmp_path / "cache"):
            pass
    assert [p.name for p in (tmp_path / "src").iterdir() if not p.name.endswith((".lock", ".json", ".files"))] == []


def test_another_version_waits_until_no_build_uses_the_tree(tmp_path):
    from pgo.core.config import product
    one, two = fixture_release(tmp_path, "1.0.0"), fixture_release(tmp_path, "1.0.1")
    first, tree = source.fetch(str(one), "1.0.0", product("fixture"), tmp_path / "src", tmp_path / "cache")
    record = {"kind": first.kind, "origin": first.origin, "checksum": first.checksum}
    fetch_two = [sys.executable, "-c", "import sys; from pgo.build import source; from pgo.core.config import product; "
                 f"source.fetch({str(two)!r}, '1.0.1', product('fixture'), {str(tmp_path / 'src')!r}, "
                 f"{str(tmp_path / 'cache')!r}); print('done')"]
    with source.held(record, str(one), "1.0.0", product("fixture"), tmp_path / "src", tmp_path / "cache"):
        other = subprocess.Popen(fetch_two, cwd=REPO, stdout=subprocess.PIPE, text=True)
        waiting = other.stdout.readline()
        assert waiting.startswith(f"waiting for the source tree {tree}: another build is using it (it holds ")
        time.sleep(0.5)
        assert other.poll() is None and (tree / "VERSION").read_text() == "1.0.0\n"
    assert other.stdout.read() == "done\n" and other.wait() == 0
    assert (tree / "VERSION").read_text() == "1.0.1\n"


def test_dsc_verification_catches_a_corrupted_download(tmp_path):
    (tmp_path / "p_1.0.orig.tar.gz").write_bytes(b"payload")
    digest = source.sha256_file(tmp_path / "p_1.0.orig.tar.gz")
    dsc = tmp_path / "p_1.0-1.dsc"
    dsc.write_text(f"Source: p\nChecksums-Sha256:\n {digest} 7 p_1.0.orig.tar.gz\n")
    assert source.verify_dsc(dsc)
    (tmp_path / "p_1.0.orig.tar.gz").write_bytes(b"payloaX")
    assert not source.verify_dsc(dsc, quiet=True)
    with pytest.raises(PipelineError, match="corrupted download"):
        source.verify_dsc(dsc)


def debian_source_package_of_the_fixture(folder):
    """A real Debian source package of the fixture (format 3.0 (quilt)) with one patch, in `folder`."""
    tree = folder / "fixture-1.0.0"
    shutil.copytree(FIXTURE, tree, ignore=shutil.ignore_patterns("debian"))
    subprocess.run(["tar", "-czf", folder / "fixture_1.0.0.orig.tar.gz", "fixture-1.0.0"], cwd=folder, check=True)
    shutil.copytree(FIXTURE / "debian", tree / "debian")
    (tree / "debian" / "patches").mkdir()
    (tree / "debian" / "patches" / "series").write_text("say-debian.patch\n")
    (tree / "debian" / "patches" / "say-debian.patch").write_text(
        "Description: a line only Debian's source has\n---\n"
        "--- a/CMakeLists.txt\n+++ b/CMakeLists.txt\n@@ -1 +1,2 @@\n+# patched by Debian\n"
        f" {(FIXTURE / 'CMakeLists.txt').read_text().splitlines()[0]}\n")
    subprocess.run(["dpkg-source", "-b", "fixture-1.0.0"], cwd=folder, check=True, capture_output=True)
    shutil.rmtree(tree)
    return folder / "fixture_1.0.0-1.dsc"


def test_debian_patches_build_debians_source_with_its_patches_in_a_tree_of_its_own(tmp_path, monkeypatch):
    """debian_patches: `dpkg-source -x` of the verified .dsc, identified by the .dsc's checksum, in
    <product>-<line>-debian; the upstream tarball's tree beside it keeps the unpatched source."""
    from dataclasses import replace
    cache = tmp_path / "cache"
    (cache / "debian" / "fixture_1.0.0-1").mkdir(parents=True)
    dsc = debian_source_package_of_the_fixture(cache / "debian" / "fixture_1.0.0-1")
    monkeypatch.setattr(source, "debian_version", lambda package, version, suite=None, log=None: "1.0.0-1")
    fixture = replace(build_config("fixture").product, debian_source="fixture")
    patched, tree = source.fetch("debian", "1.0.0", fixture, cache / "src", cache, patched=True)
    upstream, plain_tree = source.fetch("debian", "1.0.0", fixture, cache / "src", cache)
    assert (tree.name, plain_tree.name) == ("fixture-1.0-debian", "fixture-1.0")
    assert (tree / "CMakeLists.txt").read_text().startswith("# patched by Debian\n")
    assert not (plain_tree / "CMakeLists.txt").read_text().startswith("# patched")
    assert (tree / "debian" / "rules").is_file() and not (plain_tree / "debian").exists()
    assert patched.origin == upstream.origin == "debian:fixture=1.0.0-1"
    assert patched.checksum == source.sha256_file(dsc) != upstream.checksum
    # Held again (a later phase), the patched tree is the one with the .dsc's checksum.
    with source.held({"kind": "debian", "origin": patched.origin, "checksum": patched.checksum}, "debian",
                     "1.0.0", fixture, cache / "src", cache, patched=True) as held:
        assert held == tree
    with pytest.raises(PipelineError, match="builds Debian's patched source .debian_patches., and --source "
                                            ".* is not Debian's source package: leave --source out, or "
                                            "give its .dsc"):
        source.fetch(str(FIXTURE), "1.0.0", fixture, cache / "src", cache, patched=True)


def test_a_source_package_given_as_its_dsc_is_debians_source_verified_and_of_the_version(tmp_path):
    """--source X.dsc: a Debian source package the mirror no longer lists (11.8.6 beside 11.8.9), built as one
    from the archive is: verified, patched, labelled with Debian's version."""
    from dataclasses import replace
    cache = tmp_path / "cache"
    dsc = debian_source_package_of_the_fixture(tmp_path)
    fixture = replace(build_config("fixture").product, debian_source="fixture")
    given, tree = source.fetch(str(dsc), "1.0.0", fixture, cache / "src", cache, patched=True)
    assert (given.kind, given.origin, given.checksum) == ("debian", "debian:fixture=1.0.0-1", source.sha256_file(dsc))
    assert tree.name == "fixture-1.0-debian" and (tree / "CMakeLists.txt").read_text().startswith("# patched by")
    assert source.resolve_version("latest", str(dsc), build_config("fixture"))[0] == "1.0.0"
    # Copied where a downloaded one lies, verified: the debs take debian/ from there (pgo/packaging/debrules.py),
    # and the given folder may be gone by then (release-debian-13 #6's deb packaging failed on that).
    cached = cache / "debian" / "fixture_1.0.0-1" / "fixture_1.0.0-1.dsc"
    assert source.verify_dsc(cached) and cached.read_bytes() == dsc.read_bytes()
    assert sorted(p.name for p in cached.parent.iterdir()) == sorted([cached.name, *source.dsc_files(dsc)])
    assert any(name.endswith(".debian.tar.xz") for name in source.dsc_files(dsc))
    with pytest.raises(PipelineError, match=r"^fixture_1.0.0-1.dsc is the source of fixture 1.0.0, not of fixture "
                                            r"1.0.1$"):
        source.fetch(str(dsc), "1.0.1", fixture, cache / "src", cache, patched=True)
    (tmp_path / "fixture_1.0.0.orig.tar.gz").write_bytes(b"not the tarball the .dsc names")
    with pytest.raises(PipelineError, match="does not match the checksum in fixture_1.0.0-1.dsc: corrupted download"):
        source.fetch(str(dsc), "1.0.0", fixture, cache / "src2", cache, patched=True)


def test_a_patch_that_does_not_apply_is_one_line_and_leaves_no_tree(tmp_path):
    dsc = debian_source_package_of_the_fixture(tmp_path)
    orig = tmp_path / "fixture_1.0.0.orig.tar.gz"
    subprocess.run(["tar", "-xzf", orig], cwd=tmp_path, check=True)
    (tmp_path / "fixture-1.0.0" / "CMakeLists.txt").write_text("something else\n")
    subprocess.run(["tar", "-czf", orig, "fixture-1.0.0"], cwd=tmp_path, check=True)
    with pytest.raises(PipelineError, match=r"cannot unpack fixture_1.0.0-1.dsc: its patch say-debian.patch does not "
                                           r"apply to CMakeLists.txt \(Hunk #1 FAILED at 1\)$"):
        source.unpack_dsc(dsc, tmp_path / "tree")
    assert not (tmp_path / "tree").exists()


# --- profile check ----------------------------------------------------------------

def fake_tree(tmp_path, objects, gcdas):
    build, prof = tmp_path / "build", tmp_path / "profile"
    for obj in objects:
        (build / obj).parent.mkdir(parents=True, exist_ok=True)
        (build / obj).write_bytes(b"o")
    prof.mkdir()
    for name in gcdas:
        (prof / name).write_bytes(b"gcda")
    return build, prof


def test_profile_check_counts_per_hot_directory(tmp_path):
    build, prof = fake_tree(tmp_path, ["sql/CMakeFiles/sql.dir/a.cc.o", "sql/CMakeFiles/sql.dir/b.cc.o",
                                       "mysys/CMakeFiles/mysys.dir/c.c.o", "client/x.c.o"],
                            ["sql#CMakeFiles#sql.dir#a.cc.gcda", "mysys#CMakeFiles#mysys.dir#c.c.gcda",
                             "#tmp#CMakeTmp#check.c.gcda"])
    figures = profile.check(prof, build, ["sql", "mysys"], "1.0.0")
    assert figures["gcda_files"] == 3 and figures["build_objects_with_profile"] == 2
    assert figures["hot_dirs"]["sql"] == {"objects": 2, "with_profile": 1, "share": 0.5,
                                          "functions": 0, "functions_run": 0}  # not real .gcda data
    assert figures["profile_id"].startswith("1.0.0-")


def test_profile_check_fails_without_data_in_a_hot_directory(tmp_path):
    build, prof = fake_tree(tmp_path, ["sql/a.cc.o", "strings/s.c.o"], ["sql#a.cc.gcda"])
    with pytest.raises(PipelineError, match=r"no profile data for hot objects in strings \(1 objects\)"):
        profile.check(prof, build, ["sql", "strings"], "1.0.0")


def test_profile_check_requires_data_where_the_configuration_trains(tmp_path):
    """A configuration's trained_dirs (release: its engines) need data too, and are counted apart from
    the hot directories; a training that never reached one is refused."""
    build, prof = fake_tree(tmp_path, ["sql/a.cc.o", "storage/rocksdb/r.cc.o", "storage/rocksdb/s.cc.o"],
                            ["sql#a.cc.gcda", "storage#rocksdb#r.cc.gcda"])
    figures = profile.check(prof, build, ["sql"], "1.0.0", trained_dirs=("storage/rocksdb",))
    assert list(figures["hot_dirs"]) == ["sql"]
    assert figures["trained_dirs"]["storage/rocksdb"]["objects"] == 2
    assert figures["trained_dirs"]["storage/rocksdb"]["with_profile"] == 1
    (prof / "storage#rocksdb#r.cc.gcda").unlink()
    with pytest.raises(PipelineError, match=r"^no profile data for the objects the configuration trains in "
                                           r"storage/rocksdb \(2 objects\): the training did not reach them$"):
        profile.check(prof, build, ["sql"], "1.0.0", trained_dirs=("storage/rocksdb",))


def test_with_lto_the_link_decides_what_is_hot():
    """Without LTO the threshold is each object's sum_max / 10000; with LTO GCC sets one at the link,
    from the program's working set, which the .gcda files cannot tell."""
    by_object = {"sql/a.cc": {"runs": 1, "sum_max": 2_000_000, "total": 3_000_000,
                              "functions": [(2_000_000, True), (150, True), (0, False)]}}
    plain = profile.quality(by_object, ["sql"])
    assert plain["threshold_rule"] == "sum_max/10000" and plain["largest"][0]["hot_threshold"] == 200
    assert (plain["hot_functions"], plain["functions_run"], plain["hot_share"]) == (1, 2, 0.5)
    assert "(hot from 200 = sum_max/10000); 1 of 2 trained functions hot (50%)" in lines.profile_quality(plain)
    lto = profile.quality(by_object, ["sql"], lto=True)
    assert lto["threshold_rule"] == "LTO working set" and lto["largest"][0]["hot_threshold"] is None
    assert (lto["hot_functions"], lto["functions_run"], lto["hot_share"]) == (None, 2, None)
    line = lines.profile_quality(lto)
    assert line == ("quality: 1 runs; largest counter 2.0M in sql/a.cc (hot from the LTO working set); "
                    "2 trained functions")
    figures = {"profile_id": "1.0.0-abc", "build_objects": 2, "build_objects_with_profile": 1, "quality": lto}
    assert lines.profile_check_summary(figures) == ("profile 1.0.0-abc: 1 of 2 objects trained; hot from the LTO "
                                                    "working set, largest counter 2.0M in a.cc, 2 trained functions, "
                                                    "1 runs;")


def test_compiler_warnings_are_counted_and_classified():
    log = """\
[3/9] Building CXX object sql/CMakeFiles/sql.dir/a.cc.o
../sql/a.cc:10:1: warning: '/w/profile/sql#CMakeFiles#sql.dir#a.cc.gcda' profile count data file not found [-Wmissing-profile]
../client/c.c:1:1: warning: ‘/w/profile/client#c.c.gcda’ profile count data file not found [-Wmissing-profile]
../sql/b.cc:5:3: warning: source locations for function 'f' have changed, the profile data may be out of date [-Wcoverage-mismatch]
"""  # noqa: E501 (GCC's lines, verbatim)
    counts = profile.compiler_warnings(log, ["sql"], Path("/src"), ["sql/CMakeFiles/sql.dir/a.cc"])
    assert counts["missing_profile"] == 2 and counts["missing_profile_hot"] == 1
    assert counts["coverage_mismatch"] == 1 and counts["source_moved"] == 1
    assert counts["missing_hot_objects"] == ["sql/CMakeFiles/sql.dir/a.cc"]
    assert counts["functions_without_profile"] == 0


def test_a_missing_profile_counts_against_the_object_gcc_names_when_compiles_print_over_each_other():
    """make -j2 without --output-sync (debian/rules): a's warning comes after b's line. GCC named a's .gcda,
    so a lost its profile and b did not; a .gcda of no object here (a compile elsewhere) is b's."""
    log = """[ 10%] Building CXX object sql/CMakeFiles/sql.dir/a.cc.o
[ 10%] Building CXX object sql/CMakeFiles/sql.dir/b.cc.o
/src/sql/a.cc:1:1: warning: ‘/b/pgo/profile/sql#CMakeFiles#sql.dir#a.cc.gcda’ profile count data file not found [-Wmissing-profile]
"""  # noqa: E501 (GCC's lines, verbatim)
    objects = ["sql/CMakeFiles/sql.dir/a.cc", "sql/CMakeFiles/sql.dir/b.cc"]
    counts = profile.compiler_warnings(log, ["sql"], Path("/src"), objects)
    assert counts["missing_profile_hot"] == 1 and counts["missing_hot_objects"] == ["sql/CMakeFiles/sql.dir/a.cc"]
    elsewhere = log.replace("/b/pgo/profile/sql#CMakeFiles#sql.dir#a.cc.gcda", "/tmp/icecc-1/#tmp#icecc-1#x.o.gcda")
    counts = profile.compiler_warnings(elsewhere, ["sql"], Path("/src"), objects)
    assert counts["missing_hot_objects"] == ["sql/CMakeFiles/sql.dir/b.cc"]


def test_a_dropped_function_counts_against_the_object_whose_compile_printed_it():
    """GCC dropped the counters of an inline function of a header: the object being compiled loses them."""
    log = """[1/3] Building CXX object sql/CMakeFiles/sql.dir/a.cc.o
[2/3] Building CXX object sql/CMakeFiles/sql.dir/b.cc.o
/src/include/h.h:3:5: warning: the control flow of function 'f' does not match its profile data (counter 'arcs') [-Wcoverage-mismatch]
[3/3] Linking CXX executable mariadbd
"""  # noqa: E501 (GCC's lines, verbatim)
    objects = ["sql/CMakeFiles/sql.dir/a.cc", "sql/CMakeFiles/sql.dir/b.cc"]
    counts = profile.compiler_warnings(log, ["sql"], Path("/src"), objects)
    assert counts["coverage_mismatch"] == 1 and counts["mismatch_hot_objects"] == ["sql/CMakeFiles/sql.dir/b.cc"]


def test_functions_without_profile_take_their_object_out_of_the_hot_coverage():
    """A .gcda with another object's counters: GCC names each function it has no counters for."""
    log = """/src/sql/b.cc:28:10: warning: profile for function ‘cold’ not found in profile data [-Wmissing-profile]
/src/sql/b.cc:8:10: warning: profile for function ‘hot’ not found in profile data [-Wmissing-profile]
/src/sql/b.cc:8:10: warning: profile for function ‘hot’ not found in profile data [-Wmissing-profile]
"""
    objects = ["sql/CMakeFiles/sql.dir/a.cc", "sql/CMakeFiles/sql.dir/b.cc", "CMakeFiles/x.dir/sql/b.cc"]
    counts = profile.compiler_warnings(log, ["sql"], Path("/src"), objects)
    assert counts["functions_without_profile"] == 2
    assert counts["missing_hot_objects"] == ["sql/CMakeFiles/sql.dir/b.cc"]


def test_a_build_that_used_no_profile_never_passes_whatever_the_limits(tmp_path):
    """The label's own check: 0% hot coverage is no PGO build, even under limits that allow anything."""
    objects = ["sql/CMakeFiles/sql.dir/a.cc", "sql/CMakeFiles/sql.dir/b.cc"]
    build, prof = fake_tree(tmp_path, [f"{o}.o" for o in objects], ["sql#CMakeFiles#sql.dir#a.cc.gcda"])
    records = {"objects": 2, "recorded": 2, "in_effect": objects, "faults": {}, "seconds": 0.0}
    warnings = {"coverage_mismatch": 0, "missing_hot_objects": objects, "mismatch_hot_objects": []}
    traces = {"expected": [], "traced": [], "startup": []}
    verdict = profile.judge_use(warnings, records, traces, prof, build, ["sql"], max_mismatch=10**6,
                                min_hot_coverage=0)
    assert verdict["hot_coverage"] == 0 and not verdict["passed"]
    assert verdict["problems"] == ["no hot object got a profile: the profile does not fit this build at all"]
    passed = profile.judge_use(dict(warnings, missing_hot_objects=objects[1:]), records, traces, prof, build,
                               ["sql"], 0, 0.5)
    assert passed["passed"] and passed["hot_coverage"] == 0.5


def test_training_counts_leave_out_a_gcda_of_another_object_even_of_the_same_stamp(tmp_path):
    """gcov skips the functions of a .gcda its notes lack without a word, and compares only a stamp
    that two objects share when they are compiled in the same millisecond, or always with
    -frandom-seed (reproducible builds): the training counts compare the function records."""
    build, profile_dir = tmp_path / "build", tmp_path / "profile"
    build.mkdir(), profile_dir.mkdir()
    (build / "a.c").write_text("int twice(int x) { return 2 * x; }\n")
    (build / "b.c").write_text("int twice(int);\nint main(void) { return twice(3) - 6; }\n")
    flags = ["-frandom-seed=1", "-fprofile-generate", "-ftest-coverage", f"-fprofile-dir={profile_dir}",
             f"-fprofile-prefix-path={build}"]
    for name in ("a", "b"):
        subprocess.run(["gcc", *flags, "-c", f"{name}.c", "-o", f"{name}.o"], cwd=build, check=True)
    subprocess.run(["gcc", "-fprofile-generate", "a.o", "b.o", "-o", "prog"], cwd=build, check=True)
    subprocess.run([build / "prog"], check=True)
    gcda = {name: profile_dir / f"{name}.gcda" for name in ("a", "b")}
    assert profile.function_entries(profile_dir, build) == {"functions": {"twice": 1, "main": 1},
                                                              "objects": 2, "unread": 0}
    shutil.copy(gcda["b"], gcda["a"])
    assert profile.function_entries(profile_dir, build) == {"functions": {"main": 1}, "objects": 2, "unread": 1}


def test_training_compiles_with_the_builds_compiler():
    """profile_load links the instrumented client library: only the build's own compiler (and its
    libgcov) fits it, and a build VM has no `cc` besides that compiler."""
    from pgo.core.config import product
    compiles = [command for command in product("mariadb").train if "cmake" in command]
    assert compiles and all("-DCMAKE_C_COMPILER={cc}" in command for command in compiles)


def test_the_training_keeps_the_instrumented_mariadb_configs_counters_out_of_the_profile():
    """Configuring profile_load runs the instrumented mariadb_config (a build tool, its source generated
    from the configuration): with GCOV_PREFIX, its counters go where the setup's go."""
    from pgo.core.config import product
    mariadb = product("mariadb")
    configure = next(command for command in mariadb.train if "cmake" in command)
    assert configure[:4] == ("sh", "-c", 'GCOV_PREFIX="$0" exec "$@"', "{setup_counters}")
    assert configure[4] == "cmake" and mariadb.setup_counters


# --- progress -----------------------------------------------------------------

def test_makes_progress_is_said_rising_and_once(tmp_path, capsys):
    """make -j prints its targets' shares out of order and repeats 100%: the console sees each
    share once, rising (at most every 2 s, so the lines come 2.1 s apart), and the log keeps every line."""
    from pgo.base.runner import MAKE_PROGRESS, PhaseLog
    script = ("import time\n"
              "for line in ['[ 13%] Building a.o', '[ 11%] Building b.o', '[ 40%] Building c.o',\n"
              "             '[100%] Built target c', '[100%] Built target d']:\n"
              "    print(line, flush=True); time.sleep(2.1)\n")
    log = PhaseLog(tmp_path / "plain.log", "plain")
    log.run([sys.executable, "-c", script], progress=MAKE_PROGRESS)
    log.close()
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[plain] compile")]
    assert said == ["[plain] compile 13%", "[plain] compile 40%", "[plain] compile 100%"], said
    assert (tmp_path / "plain.log").read_text().splitlines()[-5:] == [
        "[ 13%] Building a.o", "[ 11%] Building b.o", "[ 40%] Building c.o", "[100%] Built target c",
        "[100%] Built target d"]


# --- the stage ----------------------------------------------------------------

def test_the_stage_links_debians_client_test_plugins(tmp_path):
    """A DEB-layout stage gets the links debian/rules' install step makes (mtr's client plugin dir);
    a plugin the build lacks is left out, a file already there kept, another layout left alone."""
    from pgo.base.runner import PhaseLog
    from pgo.build.phases import link_staged_plugins
    from pgo.core.config import product
    links = product("mariadb").stage_links
    deb, standalone = tmp_path / "deb", tmp_path / "standalone"
    (deb / "lib/mysql/plugin").mkdir(parents=True)
    client = deb / "lib/x86_64-linux-gnu/libmariadb3/plugin"
    client.mkdir(parents=True)
    for name in ("qa_auth_client.so", "auth_test_plugin.so", "qa_auth_interface.so"):
        (deb / "lib/mysql/plugin" / name).write_text(name)
    (client / "qa_auth_interface.so").write_text("the package's own")
    (standalone / "lib/plugin").mkdir(parents=True)
    (standalone / "lib/plugin/qa_auth_client.so").write_text("x")
    log = PhaseLog(tmp_path / "stage.log", "stage")
    for tree in (deb, standalone):
        link_staged_plugins(links, tree, log)
    log.close()
    assert sorted(p.name for p in client.iterdir()) == ["auth_test_plugin.so", "qa_auth_client.so",
                                                        "qa_auth_interface.so"]
    assert os.readlink(client / "qa_auth_client.so") == "../../../mysql/plugin/qa_auth_client.so"
    assert (client / "qa_auth_client.so").read_text() == "qa_auth_client.so"
    assert (client / "qa_auth_interface.so").read_text() == "the package's own"
    assert [p.relative_to(standalone).as_posix() for p in standalone.rglob("*")] == [
        "lib", "lib/plugin", "lib/plugin/qa_auth_client.so"]
    assert "linked lib/x86_64-linux-gnu/libmariadb3/plugin/qa_auth_client.so" in (tmp_path / "stage.log").read_text()


def test_stage_links_must_say_from_into_and_names():
    from pgo.core.config import stage_links
    with pytest.raises(PipelineError, match="stage_links needs exactly from, into"):
        stage_links("mariadb", {"from": "lib/mysql/plugin", "names": []})
