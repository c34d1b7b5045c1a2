"""Which platforms a release builds on (issue 45): the matrix of the master settings' [[platforms]] rows
whose platform (pgo/platforms.toml) can fetch the source, or those `./release --platform` names; and every
platform that cannot build the release refused in one line before anything starts."""

import os
import subprocess
import sys

import pytest

from buildmaster.preflight import release_platforms
from buildmaster.settings import SETTINGS_ENV, load_settings
from launcher import local
from pgo import REPO, PipelineError
from pgo.base import platforms

# This machine (`local`, the generated settings' row) and a worker process on a Debian 13 machine.
MATRIX = """
[admins]
admin = "secret"
[[workers]]
name = "local-worker"
password = "p"
[[workers]]
name = "trixie-worker"
password = "p2"
host = "trixie-box"
[[platforms]]
name = "local"
workers = ["local-worker"]
[[platforms]]
name = "debian-13"
workers = ["trixie-worker"]
formats = ["deb"]
"""


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv(platforms.ENV, "debian-12")       # `local` is this machine: here a Debian 12 one
    settings_file = tmp_path / "master-settings.toml"
    settings_file.write_text(MATRIX)
    return load_settings(settings_file)


def names(chosen):
    rows, left_out = chosen
    return [r.name for r in rows], [(r.name, why) for r, why in left_out]


def test_the_matrix_is_every_platform_whose_workers_fetch_the_source(settings):
    # 10.11 is bookworm's: Debian 13's workers do not fetch it; 11.8 is trixie's, which Debian 12's fetch too.
    assert names(release_platforms(settings, "release", "debian")) == (["local"], [(
        "debian-13", "platform 'debian-13' cannot build Debian's source of 10.11: that is bookworm's, and "
        "debian-13's workers fetch sources of trixie")])
    assert names(release_platforms(settings, "minimal-11.8", "debian")) == (["local", "debian-13"], [])
    # A source of the release's own (a directory, a tarball, a git URL) is any platform's.
    assert names(release_platforms(settings, "fixture", "tests/fixture")) == (["local", "debian-13"], [])


def test_a_named_platform_is_a_row_or_a_platform_of_the_table(settings):
    assert names(release_platforms(settings, "minimal-11.8", "debian", ["debian-13"])) == (["debian-13"], [])
    assert names(release_platforms(settings, "minimal-11.8", "debian", ["debian-12"])) == (["local"], [])
    assert names(release_platforms(settings, "minimal-11.8", "debian", ["local", "debian-12"])) == (["local"], [])


@pytest.mark.parametrize("config, chosen, reason", [
    ("minimal", ["debian-13"], "platform 'debian-13' cannot build Debian's source of 10.11: that is bookworm's, "
                               "and debian-13's workers fetch sources of trixie"),
    ("minimal", ["debian-14"], "unknown platform 'debian-14' (known: debian-12, debian-13; of the master "
                               "settings: local)"),
    ("minimal-11.8", ["local", "sid"], "unknown platform 'sid' (known: debian-12, debian-13; of the master "
                                       "settings: local)"),
])
def test_a_platform_that_cannot_build_the_release_is_refused(settings, config, chosen, reason):
    with pytest.raises(PipelineError) as refused:
        release_platforms(settings, config, "debian", chosen)
    assert str(refused.value) == reason


def test_a_platform_the_settings_do_not_build_for_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(platforms.ENV, "debian-12")
    settings_file = tmp_path / "master-settings.toml"
    settings_file.write_text(MATRIX.split("[[platforms]]\nname = \"debian-13\"")[0])
    with pytest.raises(PipelineError) as refused:
        release_platforms(load_settings(settings_file), "minimal-11.8", "debian", ["debian-13"])
    assert str(refused.value) == (f"platform 'debian-13' is not in the master settings ({settings_file}): no "
                                  "[[platforms]] entry builds for it (they build for local: debian-12)")


def test_a_platform_without_a_build_image_is_refused_named_or_in_the_matrix(settings, monkeypatch):
    table = platforms.load()
    without = {**table, "debian-13": table["debian-13"].__class__(**{**vars(table["debian-13"]), "image": None})}
    monkeypatch.setattr(platforms, "load", lambda path=None: without)
    why = "platform 'debian-13' has no build image (platforms.toml: image): it cannot build yet"
    for chosen in (["debian-13"], ()):
        with pytest.raises(PipelineError) as refused:
            release_platforms(settings, "minimal-11.8", "debian", chosen)
        assert str(refused.value) == why
    # Left out of the matrix anyway by its source: not refused for its image.
    assert names(release_platforms(settings, "release", "debian"))[0] == ["local"]


def test_a_release_no_platform_can_build_is_refused(settings):
    with pytest.raises(PipelineError) as refused:
        release_platforms(settings, "release", "debian", (), offered=[settings.platform("debian-13")])
    assert str(refused.value) == (
        "no platform of the master settings can build release from debian: platform 'debian-13' cannot build "
        "Debian's source of 10.11: that is bookworm's, and debian-13's workers fetch sources of trixie")


# --- through ./release: refused before anything is set up or started -------------------------------------

@pytest.mark.parametrize("args, reason", [
    (["--config", "minimal", "--platform", "debian-13"],
     "platform 'debian-13' cannot build Debian's source of 10.11: that is bookworm's, and debian-13's workers "
     "fetch sources of trixie"),
    (["--platform", "debian-99"], "unknown platform 'debian-99' (known: debian-12, debian-13; of the master "
                                  "settings: local)"),
    (["--config", "minimal-11.8", "--platform", "debian-13"],
     "platform 'debian-13' is not in the master settings ({settings}): no [[platforms]] entry builds for it "
     "(they build for local: debian-12)"),
    (["--config", "minimall"], "unknown configuration 'minimall'"),
])
def test_release_refuses_a_platform_in_one_line_before_it_starts_anything(tmp_path, monkeypatch, capsys, args,
                                                                         reason):
    monkeypatch.delenv(SETTINGS_ENV, raising=False)
    monkeypatch.setenv(platforms.ENV, "debian-12")
    assert local.main(["--runtime", str(tmp_path), *args]) == 1
    printed = capsys.readouterr()
    (line,) = printed.err.splitlines()
    assert line.startswith(f"release: error: {reason.format(settings=tmp_path / 'master-settings.toml')}"), line
    assert not (tmp_path / "master").exists() and not (tmp_path / "worker").exists()


def test_the_release_command_refuses_a_source_the_platforms_suite_does_not_serve(tmp_path, monkeypatch):
    """The real entry, as a user runs it, with settings that have a Debian 13 row."""
    settings_file = tmp_path / "master-settings.toml"
    settings_file.write_text(MATRIX)
    env = {**{k: v for k, v in os.environ.items() if k != SETTINGS_ENV}, platforms.ENV: "debian-12"}
    result = subprocess.run([sys.executable, "release", "--runtime", str(tmp_path), "--config", "minimal",
                             "--platform", "debian-13"], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "release: error: platform 'debian-13' cannot build Debian's source of 10.11: that is bookworm's, and "
        "debian-13's workers fetch sources of trixie"], result.stderr
    assert result.stdout == ""
    assert not (tmp_path / "master").exists()
