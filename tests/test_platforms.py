"""The platform table (pgo/platforms.toml): what a platform is, and that the rest reads it from there."""

import copy
import subprocess
import sys
import tomllib

import pytest
from conftest import REPO

from pgo import PipelineError
from pgo.base import platforms
from pgo.core.config import build_config, load


@pytest.fixture
def raw():
    return copy.deepcopy(tomllib.loads(platforms.PLATFORMS_FILE.read_text()))


def table(raw, path):
    path.write_text(dump(raw))
    return platforms.load(path)


def dump(raw):
    """The table back as TOML (flat values only: what the platform entries have)."""
    def value(v):
        if isinstance(v, dict):
            return "{ " + ", ".join(f'{k} = {value(x)}' for k, x in v.items()) + " }"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return f'"{v}"'
    return "".join(f"[platforms.\"{name}\"]\n" + "".join(f"{k} = {value(v)}\n" for k, v in entry.items()) + "\n"
                   for name, entry in raw["platforms"].items())


def test_the_shipped_platforms_say_what_each_debian_release_is():
    table = platforms.load()
    twelve, thirteen = table["debian-12"], table["debian-13"]
    assert (twelve.codename, twelve.version_suffix, twelve.image, twelve.lines) == ("bookworm", "deb12u1", "gcc12",
                                                                                  ("10.11",))
    assert (thirteen.codename, thirteen.version_suffix, thirteen.image, thirteen.lines) == ("trixie", "deb13u1",
                                                                                          "gcc14", ("11.8",))
    assert (twelve.compiler.cc, thirteen.compiler.cc, thirteen.compiler.version) == ("gcc-12", "gcc-14", "14.2.0")
    assert platforms.bolt_versions() == ("19",)


def test_the_source_of_a_line_is_the_release_that_ships_it():
    assert platforms.source_suite("10.11") == "bookworm"
    assert platforms.source_suite("11.8") == "trixie"
    assert platforms.source_suite(None) is None and platforms.source_suite("12.3") is None
    # The configurations read it: minimal-11.8 still builds trixie's source (on Debian 12's workers).
    assert (build_config("minimal-11.8").line, build_config("minimal-11.8").debian_suite) == ("11.8", "trixie")
    assert build_config("release").debian_suite == "bookworm" and build_config("fixture").debian_suite is None


def test_a_configuration_may_not_name_a_suite_of_its_own():
    data = load()
    data["configs"]["minimal-11.8"]["debian_suite"] = "bookworm"
    with pytest.raises(PipelineError, match=r"^configuration 'minimal-11.8': debian_suite is no longer set here"):
        build_config("minimal-11.8", data)


def test_bad_platform_requests_are_one_line_each(raw, tmp_path):
    with pytest.raises(PipelineError) as e:
        platforms.platform("debian-14")
    assert str(e.value) == "unknown platform 'debian-14' (known: debian-12, debian-13)"
    del raw["platforms"]["debian-13"]["image"]
    no_image = table(raw, tmp_path / "platforms.toml")
    with pytest.raises(PipelineError, match=r"^platform 'debian-13' has no build image \(platforms.toml: image\)"):
        platforms.image("debian-13", no_image)
    assert platforms.image("debian-12") == "gcc12"


def test_a_platform_builds_only_the_sources_its_workers_can_fetch():
    assert platforms.check_source("debian-12", "10.11") == "bookworm"
    assert platforms.check_source("debian-12", "11.8") == "trixie"       # minimal-11.8 on Debian 12 today
    assert platforms.check_source("debian-13", "11.8") == "trixie"
    with pytest.raises(PipelineError, match=r"^platform 'debian-13' cannot build Debian's source of 10.11: that is "
                                            r"bookworm's, and debian-13's workers fetch sources of trixie$"):
        platforms.check_source("debian-13", "10.11")
    with pytest.raises(PipelineError, match=r"^no platform ships MariaDB 12.3"):
        platforms.check_source("debian-13", "12.3")


@pytest.mark.parametrize("change, message", [
    (lambda p: p["debian-13"].update(lines=["10.11"]), "platforms 'debian-12' and 'debian-13' both ship line 10.11"),
    (lambda p: p["debian-13"].update(codename="bookworm"), "are the same release (bookworm)"),
    (lambda p: p["debian-13"].update(version_suffix="13"), "version_suffix '13' is not Debian's suffix"),
    (lambda p: p["debian-13"].update(suite="trixie"), "platform 'debian-13': unknown setting 'suite'"),
    (lambda p: p["debian-13"].pop("compiler"), "platform 'debian-13': missing setting 'compiler'"),
    (lambda p: p["debian-13"].update(compiler={"cc": "gcc-14", "version": "14.2.0"}), "exactly cc, cxx and version"),
    (lambda p: p["debian-13"].update(lines=["11"]), "lines must be a list of MAJOR.MINOR lines"),
    (lambda p: p.update({"Debian 14": dict(p["debian-13"], codename="forky", lines=[])}), "a name is lower-case"),
])
def test_bad_tables_are_refused_with_the_reason(raw, tmp_path, change, message):
    change(raw["platforms"])
    with pytest.raises(PipelineError) as e:
        table(raw, tmp_path / "platforms.toml")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_this_machines_platform_is_its_release_or_the_environments(tmp_path):
    os_release = tmp_path / "os-release"
    os_release.write_text('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nVERSION_CODENAME=trixie\nID=debian\n')
    assert platforms.host(environ={}, os_release=os_release).name == "debian-13"
    assert platforms.host(environ={platforms.ENV: "debian-12"}, os_release=os_release).name == "debian-12"
    os_release.write_text("VERSION_CODENAME=forky\n")
    with pytest.raises(PipelineError, match=r"^this machine: Debian release 'forky' is no platform of platforms.toml "
                                            r"\(known: debian-12 \(bookworm\), debian-13 \(trixie\)\); "
                                            r"set PGO_PLATFORM"):
        platforms.host(environ={}, os_release=os_release)
    with pytest.raises(PipelineError, match=r"^unknown platform 'nosuch'"):
        platforms.host(environ={platforms.ENV: "nosuch"}, os_release=os_release)


def test_the_deb_recipes_take_the_release_from_the_platform():
    from pgo.packaging.recipes import RECIPES, load_toml
    for product in ("mariadb", "fixture"):
        assert "distribution" not in load_toml(RECIPES / "deb" / f"{product}.toml")
        assert load_toml(RECIPES / "deb" / f"{product}.toml", platforms.platform("debian-13"))["distribution"] == \
            "trixie"


def test_the_shell_reads_one_value_and_gets_one_error_line():
    def run(*args):
        return subprocess.run([sys.executable, "-m", "pgo.base.platforms", *args], cwd=REPO, capture_output=True,
                              text=True, env={"PATH": "/usr/bin:/bin", "PGO_PLATFORM": "debian-13"})
    assert run("show", "debian-13", "--field", "version_suffix").stdout == "deb13u1\n"
    assert run("host", "--field", "compiler.cc").stdout == "gcc-14\n"
    assert run("show", "debian-12", "--field", "source_suites").stdout == "trixie\n"
    listed = run("list").stdout.splitlines()
    assert listed[1] == "debian-13: debian 13 (trixie, +deb13u1), gcc-14 14.2.0, image gcc14, ships 11.8"
    bad = run("show", "debian-99")
    assert (bad.returncode, bad.stderr) == (1, "platforms: error: unknown platform 'debian-99' "
                                               "(known: debian-12, debian-13)\n")


def test_prove_refuses_an_unknown_platform_before_any_work(tmp_path):
    import json

    from pgo.base.checksums import write_sha256sums
    folder = tmp_path / "published"
    folder.mkdir()
    (folder / "buildinfo.json").write_text(json.dumps({
        "product": "fixture", "format": "deb", "version": "1.0.0", "package_version": "1.0.0", "release": 1,
        "profile_id": None, "compiler": {"version": "12.2.0"}, "binary": {"name": "fixture"}}))
    write_sha256sums(folder)
    result = subprocess.run([sys.executable, "-m", "pgo", "prove", folder, "--platform", "debian-99"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == "pgo: error: unknown platform 'debian-99' (known: debian-12, debian-13)"
    assert "lintian" not in result.stdout
