"""A real Buildbot master and worker on localhost release the fixture project end to end.

Started the way `./release up` starts them (launcher/local.py), in a temporary
runtime folder with free ports and SQLite; driven through the REST API.
"""

import getpass
import json
import platform
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from buildbot.process.results import FAILURE, WARNINGS
from conftest import free_port

from buildmaster.publish import STAGING
from buildmaster.settings import SETTINGS_ENV
from launcher import local
from pgo.base.checksums import sha256_file, verify_sha256sums
from pgo.core.toolchain import detect

FORMATS = ["bintar", "deb", "rpm"]
BUILD_TIMEOUT = 120


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(SETTINGS_ENV, raising=False)
        runtime = local.Runtime(tmp_path_factory.mktemp("buildbot"))
        # The nightly builds the fixture too ('latest': its VERSION), and keeps only the newest; never
        # MariaDB, so the settings must say what is replaced.
        text = local.settings_text(free_port(), free_port(), free_port())
        # The generated nightly names no configuration: it builds pgo/configs.toml's default.
        nightly = 'version = "latest"\nsource = "debian"\nkeep = 7'
        assert nightly in text
        # A release waiting for a worker that is not connected gives up after 3 s.
        runtime.settings_file.write_text(text.replace(nightly, 'version = "latest"\nconfig = "fixture"\n'
                                                               'source = "tests/fixture"\nkeep = 1')
                                         .replace("[admins]", "worker_wait_minutes = 0.05\n\n[admins]"))
        local.setup(runtime)
        try:
            settings, _ = local.start(runtime)
            yield runtime, settings
        finally:
            local.stop(runtime)


def admin_api(settings):
    api = local.Api(settings.url)
    local.login_as_admin(settings, api)
    return api


def release(api, version, source="tests/fixture", profile="train"):
    before = local.newest_build_id(api)
    bsid = local.force_release(api, version, "fixture", source, FORMATS, profile=profile)
    lines = []
    results = local.follow(api, bsid, before, out=lines.append)
    return results, local.release_builds(api, bsid), lines


def fetch(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def test_web_ui_serves_the_grid_console_and_waterfall_views(master):
    _, settings = master
    for view in ("grid_view", "console_view", "waterfall_view"):
        assert b"buildbot" in fetch(f"{settings.url}plugins/{view}/scripts.js").lower(), view
    # Every build's badge there says its version.
    config = json.loads(fetch(f"{settings.url}config"))
    assert config["ui_default_config"]["Links.build_link_template"] == "%(prop:version) (%(build_number))"


def test_unpublished_uploads_are_not_served(master):
    _, settings = master
    with pytest.raises(urllib.error.HTTPError) as missing:
        fetch(f"{settings.downloads_url}{STAGING}/")
    assert missing.value.code == 404
    assert STAGING not in fetch(settings.downloads_url).decode()


def test_local_worker_shows_its_system_and_compiler(master):
    _, settings = master
    (worker,) = local.Api(settings.url).get("workers", name="local-worker")["workers"]
    host = worker["workerinfo"]["host"]
    assert host.startswith(f"image: {platform.freedesktop_os_release()['PRETTY_NAME']} (this machine); ")
    assert host.endswith(f"compiler: {detect().banner}")
    assert worker["workerinfo"]["admin"] == f"the release engineer running ./release as {getpass.getuser()}"


def test_anonymous_force_is_refused(master):
    _, settings = master
    with pytest.raises(local.ApiError) as refused:
        local.force_release(local.Api(settings.url), "1.0.0", "fixture", "tests/fixture", FORMATS)
    assert refused.value.status == 403


def test_wrong_admin_password_is_refused(master):
    _, settings = master
    user = next(iter(settings.admins))
    with pytest.raises(local.ApiError):
        local.Api(settings.url).login(user, "not-the-password")


def test_invalid_version_is_rejected(master):
    _, settings = master
    with pytest.raises(local.ApiError) as rejected:
        local.force_release(admin_api(settings), "10.11", "fixture", "tests/fixture", FORMATS)
    assert "invalid version '10.11': expected MAJOR.MINOR.PATCH" in str(rejected.value)


def test_release_publishes_packages_with_checksums(master):
    runtime, settings = master
    results, builds, lines = release(admin_api(settings), "1.0.0")
    assert results == 0, "\n".join(lines)
    (build,) = builds
    # One line: the profile's use, the tests' verdict, where it was published (the profile check and the test
    # run are on their steps and the dashboard).
    assert "objects trained;" not in build["state_string"] and " skipped, " not in build["state_string"]
    assert build["state_string"].startswith("build successful profile used by 100% of 2 hot objects, 0 mismatches; "
                                            "tests release passed: optimised build 2 passed, 0 failed; no plain build;")
    published = Path(build["properties"]["published"][0])
    assert published == settings.downloads / "1.0.0" / "local"
    assert verify_sha256sums(published) == []
    assert published.stat().st_mode & 0o005 == 0o005, "downloads must be readable by everyone"
    files = {str(p.relative_to(published)) for p in published.rglob("*") if p.is_file()}
    assert {"bintar/fixture-1.0.0+pgo-linux-x86_64.tar.gz", "deb/fixture_1.0.0+pgo-1_amd64.deb",
            "rpm/fixture-server-1.0.0+pgo-1.x86_64.rpm", "build-info.json", "profile-check.json",
            "tests/pgo/junit.xml", "tests/pgo/results.json", "tests/pgo/skip.list"} <= files
    assert any(f.startswith("profile-archive/fixture/1.0.0/") and f.endswith("manifest.json") for f in files)
    assert list((settings.downloads / STAGING).iterdir()) == []
    assert any("instrumented" in line for line in lines)
    # Each package build names what it made, from the buildinfo.json beside its packages.
    assert any(" package-bintar " in line and "bintar of fixture 1.0.0+pgo: fixture-1.0.0+pgo-linux-x86_64.tar.gz "
               "(PGO, profile 1.0.0-" in line for line in lines), "\n".join(lines)
    # The publish step links the folder and each package; the master serves them.
    api = local.Api(settings.url)
    publish_step = next(s for s in api.get(f"builds/{build['buildid']}/steps")["steps"] if s["name"] == "publish")
    links = {link["name"]: link["url"] for link in publish_step["urls"]}
    folder_url = f"{settings.downloads_url}1.0.0/local/"
    assert links.pop("download folder") == folder_url == build["properties"]["published_url"][0]
    assert build["state_string"].endswith(f"published to {folder_url}")
    packages = {f for f in files if f.split("/")[0] in FORMATS and not f.endswith((".json", ".txt"))}
    assert "rpm/fixture-server-1.0.0+pgo-1.x86_64.rpm" in packages
    # ... and the optimised build's test results (the fixture has no plain build: no benchmark).
    assert links.pop("test results, optimised build (JUnit)") == folder_url + "tests/pgo/junit.xml"
    assert links == {name: folder_url + name for name in packages}
    for name, url in links.items():
        assert fetch(url) == (published / name).read_bytes(), url
    # The folder's page (index.html, under the checksums too): what was built, its records' lines, every
    # package with its size and sha256; the site's front page lists the release.
    page = fetch(folder_url).decode()
    assert "<title>fixture 1.0.0 (PGO) for local</title>" in page and "sha256sums.txt" in page
    assert "<th align=\"left\">tests, optimised build</th><td>fixture tests release: 2 passed, 0 failed" in page, page
    profile_id = json.loads((published / "build-info.json").read_text())["profile_id"]
    assert f"<td>{profile_id}</td>" in page and f"<td>profile {profile_id}: 2 of 2 objects trained;" in page, page
    deb = published / "deb" / "fixture_1.0.0+pgo-1_amd64.deb"
    assert f'<a href="deb/{deb.name}">deb/{deb.name}</a></td><td align="right">{deb.stat().st_size:,}</td>' in page
    assert sha256_file(deb) in page
    assert "index.html" in (published / "sha256sums.txt").read_text()
    assert '<a href="1.0.0/local/">1.0.0/local</a>' in fetch(settings.downloads_url).decode()
    # The release is a change: the UI's grid and console views show builds by change.
    (change,) = api.get(f"builds/{build['buildid']}/changes")["changes"]
    assert (change["revision"], change["author"], change["category"]) == ("1.0.0", "admin", "release")


def test_release_stores_its_test_results_and_shows_on_the_dashboard(master):
    """Buildbot's own test-result store holds each test of the release's run (the build page's test results, a
    test's history across builds); the dashboard shows where the fixture's line stands, from the master's data."""
    _, settings = master
    api = local.Api(settings.url)
    release_builder = next(b for b in api.get("builders")["builders"] if b["name"] == "release-local")
    builds = api.get(f"builders/{release_builder['builderid']}/builds", property="version")["builds"]
    build = next(b for b in builds if b["properties"].get("version", [None])[0] == "1.0.0" and b["results"] == 0)
    (step,) = [s for s in api.get(f"builds/{build['buildid']}/steps")["steps"] if s["name"] == "test-results-pgo"]
    (result_set,) = api.get(f"steps/{step['stepid']}/test_result_sets")["test_result_sets"]
    assert (result_set["description"], result_set["category"], result_set["value_unit"]) == (
        "fixture tests release, optimised build", "pass_fail", "boolean")
    assert (result_set["tests_passed"], result_set["tests_failed"], result_set["complete"]) == (2, 0, True)
    results = api.get(f"test_result_sets/{result_set['test_result_setid']}/results")["test_results"]
    assert sorted((r["test_name"], r["value"]) for r in results) == [("main.cold", "1"), ("main.digest", "1")]
    assert step["state_string"] == "fixture tests release, optimised build: 2 passed, 0 failed"
    # The build links its test results page (Buildbot's own UI has no view of the store); each test leads to
    # its history on the builder.
    (link,) = [u["url"] for u in step["urls"] if u["name"] == "test results"]
    assert link == f"{settings.url}plugins/wsgi_dashboards/releases/builds/{build['buildid']}/tests.html"
    tests = fetch(link).decode()
    assert "fixture tests release, optimised build: 2 passed, 0 failed</h2>" in tests, tests
    history = f'href="../../builders/{release_builder["builderid"]}/history.html?test=main.cold">main.cold</a>'
    assert history + '</td><td class="pass">passed</td>' in tests, tests
    page = fetch(f"{settings.url}plugins/wsgi_dashboards/releases/builders/{release_builder['builderid']}/"
                 "history.html?test=main.cold").decode()
    assert "<h1>main.cold on release-local</h1>" in page and "it failed in 0." in page, page
    assert f'#/builders/{release_builder["builderid"]}/builds/{build["number"]}" target="_top">' in page, page
    # What the dashboard shows, the build keeps from its steps' records (buildmaster/kept.py).
    properties = api.get(f"builds/{build['buildid']}/properties")["properties"][0]
    assert properties["test_counts"][0]["passed"] == 2 and properties["test_verdict"][0]["pgo_only"] == []
    # The plan the worker's source phase resolved: the steps ran by it (no bolt, no plain build or benchmark).
    assert properties["plan"][0] == {"config": "fixture", "product": "fixture", "phases": [
        "source", "instrumented", "train", "check", "optimized", "archive", "stage", "test"]}
    page = fetch(settings.url + "plugins/wsgi_dashboards/releases/index.html").decode()
    assert "<h2>fixture</h2>" in page, page
    row = page[page.index("<h2>fixture</h2>"):page.index("</table>", page.index("<h2>fixture</h2>"))]
    assert f'#/builders/{release_builder["builderid"]}/builds/' in row and ">1.0.0</a>" in row, row
    assert '<span class="state releasable">releasable</span>' in row, row
    assert '<span class="small">no benchmark</span>' in row, row     # the fixture's: published without a gate
    assert "optimised: 2 passed, <span class=\"\">0 failed</span>, 1 skipped" in row, row
    assert f"<code>{properties['profile_check'][0]['id']}</code>" in row and "2 of 2 objects trained" in row, row
    made = [name.split("/")[0] for name in properties["packages"][0]]
    assert f'<a href="{settings.downloads_url}1.0.0/local/">' in row, row
    assert ", ".join(f"{made.count(f)} {f}" for f in FORMATS) + "</a>" in row, row
    assert "<h2>History" in page
    badge = fetch(settings.url + "plugins/wsgi_dashboards/releases/badge/fixture/local.svg").decode()
    assert badge.startswith("<svg") and "fixture local: " in badge and "#4c1" in badge, badge
    with pytest.raises(urllib.error.HTTPError, match="404"):
        fetch(settings.url + "plugins/wsgi_dashboards/releases/badge/no-such-line/local.svg")


def test_release_can_reuse_an_archived_profile(master, tmp_path):
    """A profile trained elsewhere (here: by the CLI) and archived; the release reuses it: one build."""
    _, settings = master
    source = tmp_path / "fixture-1.0.2"
    shutil.copytree(Path(__file__).resolve().parent / "fixture", source)
    (source / "VERSION").write_text("1.0.2\n")
    trained = subprocess.run([sys.executable, "-m", "pgo", "build", "--version", "1.0.2", "--config", "fixture",
                              "--source", source, "--workdir", tmp_path / "trained", "--archive", settings.archive],
                             cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True)
    assert trained.returncode == 0, trained.stderr
    # Its release published: a pending profile is never `latest`.
    promoted = subprocess.run([sys.executable, "-m", "pgo", "archive", "promote", "--workdir", tmp_path / "trained",
                               "--archive", settings.archive], cwd=Path(__file__).resolve().parent.parent,
                              capture_output=True, text=True)
    assert promoted.returncode == 0, promoted.stderr
    results, (build,), lines = release(admin_api(settings), "1.0.2", source=str(source), profile="latest")
    assert results == 0, "\n".join(lines)
    assert "profile used by 100% of 2 hot objects" in build["state_string"]
    steps = {s["name"]: s["results"] for s in local.Api(settings.url).get(
        f"builds/{build['buildid']}/steps")["steps"]}
    assert steps["import"] == 0 and steps["train"] == 3 and steps["instrumented"] == 3  # 3: skipped
    published = settings.downloads / "1.0.2" / "local"
    assert verify_sha256sums(published) == []
    assert (published / "bintar" / "fixture-1.0.2+pgo-linux-x86_64.tar.gz").is_file()


def test_anonymous_stop_and_rebuild_are_refused(master):
    _, settings = master
    anonymous = local.Api(settings.url)
    build = anonymous.get("builds", order="-buildid", limit=1)["builds"][0]
    for path, method in ((f"builds/{build['buildid']}", "stop"),
                         (f"builders/{build['builderid']}/builds/{build['number']}", "rebuild")):
        with pytest.raises(local.ApiError) as refused:
            anonymous.control(path, method)
        assert refused.value.status == 403, method


def release_command(runtime, capsys, version, source="tests/fixture"):
    """./release of the fixture against the running master: exit status, printed lines, error lines."""
    status = local.main(["--runtime", str(runtime.root), "--version", version, "--config", "fixture",
                         "--source", source, "--formats", ",".join(FORMATS)])
    printed = capsys.readouterr()
    return status, printed.out.splitlines(), printed.err.splitlines()


def test_failed_release_publishes_nothing_and_says_why(master, capsys):
    runtime, settings = master
    before = local.newest_build_id(admin_api(settings))
    status, printed, _ = release_command(runtime, capsys, "1.0.1", source="tests/no-such-source")
    assert status == 1
    reason = "source 'tests/no-such-source' is neither 'debian', a git URL, nor an existing .dsc, tarball or directory"
    # The step's summary (in the web UI too) and so the build's end with the reason, said once.
    assert f"failure: failed source (failure): {reason}" in printed
    assert sum(reason in line for line in printed if not line.startswith("release-local #")) == 1, printed
    (label, step, why), = local.failure_reasons(admin_api(settings), before)
    assert (label.split(" #")[0], step, why) == ("release-local", "source", reason)
    assert not (settings.downloads / "1.0.1").exists()
    assert list((settings.downloads / STAGING).glob("*")) == []


def test_release_that_fails_its_tests_publishes_nothing_and_names_the_test(master, capsys, tmp_path):
    """A source whose own test fails: the verdict refuses, ./release names the test and its first error."""
    runtime, settings = master
    source = tmp_path / "fixture-1.0.4"
    shutil.copytree(Path(__file__).resolve().parent / "fixture", source)
    (source / "VERSION").write_text("1.0.4\n")
    (source / "test" / "main" / "cold.result").write_text("0\n0\n")
    status, printed, _ = release_command(runtime, capsys, "1.0.4", source=str(source))
    assert status == 1
    reason = ("the release is refused: main.cold fails on the optimised build (no plain build to compare with): "
              "fixture-test: result content mismatch")
    assert any(line.startswith("failure: ") and line.endswith(f"test-verdict (failure): {reason}")
               for line in printed), "\n".join(printed)
    assert any(line.split()[2:4] == ["test", "test"] and line.endswith(
        "(warnings): fixture tests release: 1 passed, 1 failed, 1 skipped, 0.0 min;") for line in printed), printed
    # The run completed, with a failure: warnings on its step; the verdict's step failed.
    (build,) = [b for b in admin_api(settings).get("builds", order="-buildid", limit=1)["builds"]]
    steps = {s["name"]: s["results"] for s in admin_api(settings).get(f"builds/{build['buildid']}/steps")["steps"]}
    assert (steps["test"], steps["test-verdict"]) == (WARNINGS, FAILURE)
    # The dashboard's line shows the refused release, the step that refused it, and the test.
    page = fetch(settings.url + "plugins/wsgi_dashboards/releases/index.html").decode()
    row = page[page.index("<h2>fixture</h2>"):page.index("</table>", page.index("<h2>fixture</h2>"))]
    assert ">1.0.4</a>" in row and '<span class="state refused">refused</span>' in row, row
    assert f'<span class="why">test-verdict (failure): {reason}</span>' in row, row
    assert "failing on the optimised build only: main.cold" in row, row
    assert "no benchmark" not in row, row      # refused before it: not a release without a gate
    # The test's history on the builder shows the failure beside the earlier passes.
    history = fetch(f"{settings.url}plugins/wsgi_dashboards/releases/builders/{build['builderid']}/"
                    "history.html?test=main.cold").decode()
    assert f'#/builders/{build["builderid"]}/builds/{build["number"]}" target="_top">' in history, history
    assert "it failed in 1." in history and '<td class="fail">failed</td>' in history, history
    assert "#e05d44" in fetch(settings.url + "plugins/wsgi_dashboards/releases/badge/fixture/local.svg").decode()
    assert not (settings.downloads / "1.0.4").exists()
    assert list((settings.downloads / STAGING).glob("*")) == []


@pytest.mark.parametrize("version, source, reason", [
    ("1.0.0", "tests/fixture", "1.0.0 is already published for local ({downloads}/1.0.0/local); "
                               "a release is never replaced"),
    ("2.0.0", "tests/fixture", "source tests/fixture is version 1.0.0, not the requested 2.0.0"),
    ("1.0.3", "debian", "product 'fixture' has no Debian source package; give a source"),
])
def test_release_is_refused_before_any_build(master, capsys, version, source, reason):
    """Runs after the fixture's 1.0.0 is published."""
    runtime, settings = master
    assert (settings.downloads / "1.0.0" / "local").is_dir()
    before = local.newest_build_id(admin_api(settings))
    status, printed, errors = release_command(runtime, capsys, version, source)
    assert status == 1
    assert errors == [f"release: error: version: {reason.format(downloads=settings.downloads)}"]
    assert local.newest_build_id(admin_api(settings)) == before


def test_nightly_publishes_a_tarball_and_keeps_the_newest(master):
    _, settings = master
    api = admin_api(settings)
    for _ in range(2):
        before = local.newest_build_id(api)
        bsid, _ = api.control("forceschedulers/nightly_now", "force", reason="smoke test")
        assert local.follow(api, bsid, before, out=lambda line: None) == 0
    (nightly,) = (settings.downloads / "nightly").iterdir()
    assert "-1.0.0-" in nightly.name          # 'latest', resolved by the nightly's version step
    assert verify_sha256sums(nightly) == []
    assert (nightly / "bintar" / "fixture-1.0.0+pgo-linux-x86_64.tar.gz").is_file()


def test_release_gives_up_on_a_worker_that_is_not_connected(master):
    """The last test: it stops the worker, and starts it again for nobody."""
    runtime, settings = master
    local.run_tool("buildbot-worker", "stop", str(runtime.worker))
    try:
        api = admin_api(settings)
        # A source the master cannot check before the build: the request reaches the builder.
        bsid = local.force_release(api, "1.0.4", "fixture", "tests/no-such-source", FORMATS)
        lines = []
        started = time.monotonic()
        results = local.follow(api, bsid, local.newest_build_id(api), out=lines.append,
                               give_up_after=settings.worker_wait_minutes * 60)
        assert results == 6, lines                                       # cancelled
        assert lines == ["release-local: waiting for a worker: not connected to the master (local-worker); "
                         "giving up after 3 s",
                         "release-local: gave up waiting for a worker: no worker connected within 3 s; "
                         "request cancelled"]
        # After its 3 s and a few polls, not the default 15 minutes: a busy machine slows the polls.
        assert time.monotonic() - started < 300
        assert not (settings.downloads / "1.0.4").exists()
    finally:
        local.start(runtime)
