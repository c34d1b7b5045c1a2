"""./release (launcher/local.py): its client of the master's REST API against a real HTTP server that
cuts its answers short, as the master's web server did once under a release's benchmark (`./release`
ended in a traceback, http.client.IncompleteRead, while the release went on); and, with a real master
and worker, what `./release` and `./release stop` say of a release that runs or waits in the master
(issue 43: a stopped release came back first, silently, and a new ./release waited behind it for hours).
"""

import http.server
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest
from conftest import free_port, held_source, step_output

from buildmaster.settings import SETTINGS_ENV, load_settings
from launcher import local
from pgo import REPO

BODY = json.dumps({"builds": [{"buildid": 7}]}).encode()


class CutShort(http.server.BaseHTTPRequestHandler):
    """Answers with the whole body after `cut` answers that promise it and send part of it."""
    cut = 0
    served = 0

    def do_GET(self):
        type(self).served += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        if type(self).served <= type(self).cut:
            self.wfile.write(BODY[:10])
            self.close_connection = True
        else:
            self.wfile.write(BODY)

    def log_message(self, *args):
        pass


@pytest.fixture
def master(monkeypatch):
    monkeypatch.setattr(local, "READ_RETRY_SECONDS", 0)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CutShort)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def handler(master, cut):
    master.RequestHandlerClass = type("Cut", (CutShort,), {"cut": cut, "served": 0})
    return master.RequestHandlerClass


def test_a_read_cut_short_is_asked_again(master):
    served = handler(master, cut=local.READ_ATTEMPTS - 1)
    api = local.Api(f"http://127.0.0.1:{master.server_address[1]}")
    assert api.get("builds", order="-buildid", limit=1) == {"builds": [{"buildid": 7}]}
    assert served.served == local.READ_ATTEMPTS


def test_a_master_that_keeps_cutting_its_answers_short_is_one_error(master):
    served = handler(master, cut=local.READ_ATTEMPTS)
    api = local.Api(f"http://127.0.0.1:{master.server_address[1]}")
    with pytest.raises(local.ApiError) as failed:
        api.get("builds")
    assert failed.value.status is None
    assert str(failed.value).startswith(f"no whole answer from the master at {api.url}: IncompleteRead(")
    assert str(failed.value).endswith(f"(asked {local.READ_ATTEMPTS} times)")
    assert served.served == local.READ_ATTEMPTS


def test_waiting_for_the_worker_keeps_to_its_deadline(master, monkeypatch):
    """The wait polls once a second up to its limit; a read retried inside each poll would stretch
    the limit fivefold while the web server fails."""
    served = handler(master, cut=1000)
    monkeypatch.setattr(local, "WORKER_CONNECT_TIMEOUT", 0.5)
    api = local.Api(f"http://127.0.0.1:{master.server_address[1]}")
    with pytest.raises(local.LocalError, match="did not connect to the master within 0.5 s"):
        local.wait_for_worker(api, "release-local")
    assert served.served == 1


class Recorded:
    """Answers the reads of `of_buildset` from a table: buildset of each request, parent build of each buildset."""

    def __init__(self, requests, parents):
        self.requests, self.parents = requests, parents

    def get(self, path):
        kind, number = path.split("/")
        if kind == "buildrequests":
            return {"buildrequests": [{"buildrequestid": int(number), "buildsetid": self.requests[int(number)]}]}
        return {"buildsets": [{"bsid": int(number), "parent_buildid": self.parents[int(number)]}]}


def test_a_release_follows_its_own_builds_and_those_they_triggered_only():
    """Another release's build (one the master took up again after ./release stop) is not this release's:
    ./release printed its steps as its own when it started after the force."""
    api = Recorded(requests={1: 1, 2: 2, 3: 3, 4: 4}, parents={1: None, 2: 10, 3: None, 4: 12})
    owners = {}
    builds = [{"buildid": 10, "buildrequestid": 1}, {"buildid": 11, "buildrequestid": 2},
              {"buildid": 12, "buildrequestid": 3}, {"buildid": 13, "buildrequestid": 4}]
    assert [local.of_buildset(api, 1, build, owners) for build in builds] == [True, True, False, False]
    assert owners == {10: True, 11: True, 12: False, 13: False}


# --- latent workers, the master's configuration, a master without a local worker (issue 45) -------------

class Waiting:
    """The REST API's answers watch_workers reads: one request of buildset 1, unclaimed, for a builder
    whose only worker is not connected."""

    def __init__(self, worker):
        self.worker, self.cancelled = worker, []

    def get(self, path, **query):
        if path == "buildrequests":
            return {"buildrequests": [{"buildrequestid": 5, "builderid": 2, "claimed": False, "complete": False}]}
        assert path == "builders/2/workers", path
        return {"workers": [{"workerid": 1, "name": self.worker, "connected_to": []}]}

    def control(self, path, method, **params):
        self.cancelled.append((path, method))


def watch(api, waiting_since, latent, queued=False):
    said = []
    local.watch_workers(api, 1, {2: "release-debian-13"}, waiting_since, 900, said.append, latent=latent,
                        queued=queued)
    return said


def test_a_latent_worker_is_said_to_be_starting_and_the_wait_still_gives_up():
    latent = {"container-worker": "container worker container-worker (pgo-worker/gcc14:B7)"}
    api, since = Waiting("container-worker"), {}
    # Behind another build of its host (follow names it): nothing to start yet, no clock running.
    assert watch(api, since, latent, queued=True) == [] and since == {}
    assert watch(api, since, latent) == ["release-debian-13: starting container worker container-worker "
                                         "(pgo-worker/gcc14:B7); giving up after 900 s"]
    assert watch(api, since, latent) == []                    # said once
    since[5] -= 900
    assert watch(api, since, latent) == ["release-debian-13: gave up waiting for a worker: no worker connected "
                                         "within 900 s; request cancelled"]
    assert api.cancelled == [("buildrequests/5", "cancel")]
    # A worker process ./release starts: not connected is what it is.
    assert watch(Waiting("local-worker"), {}, latent) == [
        "release-debian-13: waiting for a worker: not connected to the master (local-worker); giving up after 900 s"]


def test_latent_workers_are_named_with_the_image_the_master_starts(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    (images / "current.json").write_text(json.dumps({"current": {"image": "gcc14", "build": "B7",
                                                                 "container_image": "pgo-worker/gcc14:B7"}}))
    (tmp_path / "settings.toml").write_text(
        "[admins]\nadmin = 'a'\n[[workers]]\nname = 'c'\nkind = 'docker'\nimages = 'images'\n"
        "[[workers]]\nname = 'vm'\npassword = 'p'\nkind = 'libvirt'\nimages = 'images'\nhd_image = 'd'\n"
        "[[workers]]\nname = 'gone'\nkind = 'docker'\nimages = 'nowhere'\n"
        "[[workers]]\nname = 'here'\npassword = 'p'\nhost = 'box-13'\n"
        "[[platforms]]\nname = 'debian-13'\nworkers = ['c', 'vm', 'gone', 'here']\n[nightly]\nenabled = false\n")
    settings = load_settings(tmp_path / "settings.toml")
    assert local.latent_workers(settings) == {"c": "container worker c (pgo-worker/gcc14:B7)",
                                              "vm": "VM worker vm (gcc14:B7)", "gone": "container worker gone"}


TWISTD_LOG = """\
2026-11-28 09:40:01+0000 [-] Loading configuration from '/srv/run/master/master.cfg'
2026-11-28 09:40:02+0000 [-] error while parsing config file:
\tTraceback (most recent call last):
\t  File "/srv/pgo/buildmaster/workers.py", line 160, in check_image_on_docker_host
\tbuildmaster.settings.SettingsError: docker worker c1: the Docker host unix:///var/run/docker.sock has no image
2026-11-28 09:40:02+0000 [-] Configuration Errors:
2026-11-28 09:40:02+0000 [-]   error while parsing config file: docker worker c1: the Docker host \
unix:///var/run/docker.sock has no image pgo-worker/gcc12:B1 (the current image) (traceback in logfile)
2026-11-28 09:40:02+0000 [-] Halting master.
"""


def test_the_masters_configuration_errors_are_one_line():
    assert local.config_errors(TWISTD_LOG.replace("\\\n", "")) == (
        "docker worker c1: the Docker host unix:///var/run/docker.sock has no image pgo-worker/gcc12:B1 "
        "(the current image)")
    assert local.config_errors("2026-11-28 09:40:02+0000 [-] BuildMaster is running\n") == ""


CONTAINERS_ONLY = """
[admins]
admin = "secret"
[[workers]]
name = "container-worker"
kind = "docker"
images = "images"
[[platforms]]
name = "debian-12"
workers = ["container-worker"]
[nightly]
platform = "debian-12"
"""


@pytest.fixture
def containers_only(tmp_path, monkeypatch):
    """A runtime whose only worker is a container of an image (made up: the Docker daemon is asked nothing)."""
    from buildmaster import workers
    monkeypatch.delenv(SETTINGS_ENV, raising=False)
    images = tmp_path / "images"
    images.mkdir()
    (images / "current.json").write_text(json.dumps({"current": {
        "image": "gcc12", "build": "B1", "container_image": "pgo-worker/gcc12:B1", "worker_user": "buildbot",
        "worker_uid": 1000, "worker_gid": 1000, "worker_cache": "/home/buildbot/.cache/pgo",
        "worker_repo": "/srv/pgo"}}))
    # Free ports: the defaults may be another master's on this machine (check_ports would refuse them first).
    ports = f"web_port = {free_port()}\nworker_port = {free_port()}\ndownloads_port = {free_port()}\n"
    (tmp_path / "master-settings.toml").write_text(ports + CONTAINERS_ONLY)
    asked = []
    monkeypatch.setattr(workers, "docker_image_state", lambda host, image: asked.append(image) or "missing")
    return local.Runtime(tmp_path), asked


def test_a_master_config_error_is_one_line_before_the_master_starts(containers_only, capsys):
    """The Docker host lacks the worker's image: said as the master would say it, without starting it."""
    runtime, asked = containers_only
    assert release_cli("up", "--runtime", str(runtime.root)) == 1
    printed = capsys.readouterr()
    assert printed.err.splitlines() == [
        "release: error: docker worker container-worker: the Docker host unix:///var/run/docker.sock has no image "
        "pgo-worker/gcc12:B1 (the current image): import it with `python3 -m vm_images --images "
        f"{runtime.root / 'images'} container-image`"]
    assert asked == ["pgo-worker/gcc12:B1"]
    assert not local.running_pid(runtime.master)


def test_a_master_with_only_container_workers_starts_no_worker_process(containers_only):
    runtime, _ = containers_only
    settings = local.setup(runtime)
    assert local.local_worker(settings) is None
    assert (runtime.master / "buildbot.tac").is_file() and not runtime.worker.exists()


# --- with a real master and worker (issue 43) -------------------------------------------------

HELD_VERSION = "1.0.5"
WAIT = 90           # seconds for what a busy 2-core machine does in a few


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """A master and its local worker, started as `./release up` starts them; no nightly."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(SETTINGS_ENV, raising=False)
        runtime = local.Runtime(tmp_path_factory.mktemp("buildbot"))
        text = local.settings_text(free_port(), free_port(), free_port())
        assert "\nenabled = true\n" in text
        runtime.settings_file.write_text(text.replace("\nenabled = true\n", "\nenabled = false\n"))
        local.setup(runtime)
        try:
            local.start(runtime)
            yield runtime
        finally:
            local.stop(runtime)


def held_fixture(tmp_path, version, only_with=""):
    """(the fixture as version, held while the gate file is missing (conftest.held_source); the gate)."""
    gate = tmp_path / "go"
    return held_source(tmp_path / "fixture-held", version, gate, only_with), gate


@pytest.fixture
def held(tmp_path):
    """The fixture as version 1.0.5, whose configure holds its release until the test ends (at most 2 min)."""
    source, gate = held_fixture(tmp_path, HELD_VERSION)
    yield source
    gate.touch()


def wait_for(what, probe, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout} s")


def admin(runtime):
    settings = runtime.settings()
    api = local.Api(settings.url)
    local.login_as_admin(settings, api)
    return api


def admin_when_up(runtime):
    """admin(runtime) once the master another process starts answers."""
    def up():
        try:
            return admin(runtime)
        except local.ApiError:
            return None
    return wait_for("master answering", up)


def held_release(api, source):
    """Start the held release; return its build once it runs its configure (the instrumented step)."""
    bsid = local.force_release(api, HELD_VERSION, "fixture", str(source), ["bintar"])
    return bsid, wait_for("held build in its instrumented step", lambda: running_step(api, bsid, "instrumented"))


def running_step(api, bsid, name):
    """bsid's running build once its step name has started."""
    for request in api.get("buildrequests", buildsetid=bsid)["buildrequests"]:
        for build in api.get("builds", buildrequestid=request["buildrequestid"], complete=False)["builds"]:
            steps = api.get(f"builds/{build['buildid']}/steps")["steps"]
            if any(s["name"] == name and s["started_at"] for s in steps):
                return build
    return None


def release_cli(*args):
    """`./release ARGS` in-process: its exit status (capsys has what it printed)."""
    return local.main(list(args))


def incomplete_requests(runtime):
    """The build requests in the master's database that a start would take up again."""
    with sqlite3.connect(runtime.master / "state.sqlite") as db:
        return db.execute("SELECT id FROM buildrequests WHERE complete = 0").fetchall()


class SecondRelease:
    """`./release` of the fixture's 1.0.0 in another terminal, as a user runs it: its printed lines."""

    def __init__(self, runtime):
        env = {k: v for k, v in os.environ.items() if k != SETTINGS_ENV}
        self.process = subprocess.Popen(
            [sys.executable, "release", "--runtime", str(runtime.root), "--version", "1.0.0", "--config", "fixture",
             "--source", "tests/fixture", "--formats", "bintar"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.printed = []
        self.reader = threading.Thread(target=lambda: self.printed.extend(
            line.rstrip("\n") for line in self.process.stdout), daemon=True)
        self.reader.start()

    def said(self, line):
        wait_for(f"line {line!r} from ./release (it printed {self.printed})", lambda: line in self.printed)

    def end(self):
        status = self.process.wait(WAIT)
        self.reader.join(5)
        return status

    def kill(self):
        self.process.kill()
        self.process.wait()


def label(build, lost=""):
    return (f"release {HELD_VERSION} (release-local #{build['number']}, running since {local.when(build['started_at'])}"
            f"{lost})")


def test_a_new_release_names_what_it_waits_behind_and_stop_cancel_leaves_nothing_to_resume(runtime, held, capsys):
    api = admin(runtime)
    _, build = held_release(api, held)
    root = str(runtime.root)
    second = SecondRelease(runtime)
    try:
        second.said(f"waiting behind {label(build)}: ./release stop --cancel --runtime {root} cancels it, "
                    "and this release too")
        capsys.readouterr()
        assert release_cli("up", "--runtime", root) == 0
        said = capsys.readouterr().out.splitlines()
        assert said[2] == f"{label(build)} runs", said
        assert said[3].startswith("release 1.0.0 (release-local, queued since ") and said[3].endswith(") is queued")
        assert said[4] == f"to cancel them: ./release stop --cancel --runtime {root}", said

        assert release_cli("stop", "--cancel", "--runtime", root) == 0
        said = capsys.readouterr().out.splitlines()
        assert said[0] == f"cancelling {label(build)}", said
        assert said[1].startswith("cancelling release 1.0.0 (release-local, queued since "), said
        assert said[2:] == ["cancelled 2 build requests: none is left to start again",
                            f"stopping {runtime.worker}", f"stopping {runtime.master}"], said
        assert not local.running_pid(runtime.master) and not local.running_pid(runtime.worker)
        assert incomplete_requests(runtime) == []
        # Its release cancelled (or the master stopped under it), the second ./release ends.
        assert second.end() == 1, second.printed
    finally:
        second.kill()

    # The next start takes nothing up again.
    assert release_cli("up", "--runtime", root) == 0
    said = capsys.readouterr().out.splitlines()
    assert not [line for line in said if line.endswith((" runs", " is queued")) or "cancel" in line], said
    api = admin(runtime)
    newest = local.newest_build_id(api)
    time.sleep(3)
    assert local.active_work(api) == [] and local.newest_build_id(api) == newest == build["buildid"]
    (newest,) = api.get("builds", order="-buildid", limit=1)["builds"]
    assert local.RESULTS[newest["results"]] == "cancelled", newest
    assert release_cli("stop", "--cancel", "--runtime", root) == 0
    assert capsys.readouterr().out.splitlines() == ["nothing to cancel: no build is running or queued",
                                                    f"stopping {runtime.worker}", f"stopping {runtime.master}"]


def test_a_stopped_release_is_said_when_it_comes_back_and_cancelled_with_the_master_stopped(runtime, held, capsys):
    """Issue 43 case 7. ./release stop loses the worker of the running release: Buildbot takes it up again
    on the next start (the worker-lost guard counts it), and a new ./release waits behind it: both say so.
    The second stop says that the guard fails it; --cancel needs no running master."""
    local.start(runtime)
    api = admin(runtime)
    bsid, build = held_release(api, held)
    root = str(runtime.root)
    capsys.readouterr()
    assert release_cli("stop", "--runtime", root) == 0
    said = capsys.readouterr().out.splitlines()
    assert said == [
        f"{label(build)} stops with the worker; it starts again on the next ./release or ./release up, after the "
        "last phase it finished",
        f"to cancel it instead: ./release stop --cancel --runtime {root}",
        f"stopping {runtime.worker}", f"stopping {runtime.master}"], said
    assert len(incomplete_requests(runtime)) == 1

    # ./release starts the master and the worker; the stopped release comes back first.
    second = SecondRelease(runtime)
    try:
        api = admin_when_up(runtime)
        again = wait_for("held build taken up again", lambda: running_step(api, bsid, "resume"))
        assert again["buildid"] != build["buildid"]
        steps = api.get(f"builds/{again['buildid']}/steps")["steps"]
        guard = next(s for s in steps if s["name"] == "worker-lost-guard")
        assert guard["state_string"] == "worker lost 1 times before"
        lost_once = "; its worker was lost 1 time before"
        second.said(f"waiting behind {label(again, lost_once)}: ./release stop --cancel --runtime {root} cancels it, "
                    "and this release too")
        wait_for("held build in its instrumented step", lambda: running_step(api, bsid, "instrumented"))

        capsys.readouterr()
        assert release_cli("stop", "--runtime", root) == 0
        said = capsys.readouterr().out.splitlines()
        assert said[0] == (f"{label(again, lost_once)} stops with the worker; it fails on the next start: the "
                           "worker-lost guard gives up on a build request whose worker was lost 2 times "
                           "(max_lost_workers = 2)"), said
        assert said[1].startswith("release 1.0.0 (release-local, queued since "), said
        assert said[1].endswith(") stays queued; it starts on the next ./release or ./release up"), said
        assert said[2] == f"to cancel them instead: ./release stop --cancel --runtime {root}", said
        assert second.end() == 1
        assert second.printed[-1] == ("release: error: the master stopped: release 1.0.0 starts again on the next "
                                      f"./release or ./release up, unless ./release stop --cancel --runtime {root} "
                                      "cancelled it"), second.printed
    finally:
        second.kill()
    assert len(incomplete_requests(runtime)) == 2

    # Everything stopped: the master starts alone, without a worker to take the requests up.
    assert release_cli("stop", "--cancel", "--runtime", root) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[:2] == ["the master is not running: starting it alone to cancel what it would start again",
                        f"starting the master in {runtime.master}"], said
    assert said[2].startswith(f"cancelling release {HELD_VERSION} (release-local, queued since "), said
    assert said[2].endswith("; its worker was lost 2 times before)"), said
    assert said[3].startswith("cancelling release 1.0.0 (release-local, queued since "), said
    assert said[4:] == ["cancelled 2 build requests: none is left to start again", f"stopping {runtime.master}"], said
    assert incomplete_requests(runtime) == []
    assert not local.running_pid(runtime.worker) and not local.running_pid(runtime.master)


def test_a_stopped_release_resumes_after_the_last_phase_it_finished(runtime, tmp_path, capsys):
    """A release stopped in its optimised build (./release stop) resumes on the next start: the phases it
    finished are not run again, the optimised build runs again in the same work directory and is proven as
    before, and the release is published. Its last step forgets the request: the next build starts clean."""
    version = "1.0.6"
    source, gate = held_fixture(tmp_path, version, only_with="-fprofile-use")
    local.start(runtime)
    api = admin(runtime)
    bsid = local.force_release(api, version, "fixture", str(source), ["bintar"])
    build = wait_for("release in its optimised build", lambda: running_step(api, bsid, "optimized"))
    root = str(runtime.root)
    capsys.readouterr()
    assert release_cli("stop", "--runtime", root) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0] == (f"release {version} (release-local #{build['number']}, running since "
                       f"{local.when(build['started_at'])}) stops with the worker; it starts again on the next "
                       "./release or ./release up, after the last phase it finished"), said

    gate.touch()
    assert release_cli("up", "--runtime", root) == 0
    api = admin_when_up(runtime)
    builds = wait_for("the resumed release to end", lambda: [
        b for r in api.get("buildrequests", buildsetid=bsid)["buildrequests"]
        for b in api.get("builds", buildrequestid=r["buildrequestid"])["builds"]
        if b["buildid"] != build["buildid"] and b["complete"]], timeout=300)
    (again,) = builds
    assert local.RESULTS[again["results"]] == "success", again
    steps = {s["name"]: s for s in api.get(f"builds/{again['buildid']}/steps")["steps"]}
    resumed = step_output(api, steps["resume"])
    # Stopped before its archive and its plain build: the PGO work directory is all there is to keep.
    assert resumed[0] == ("resuming the interrupted build of this request: keeping work; its finished phases "
                          "are not run again"), resumed
    for phase in ("source", "instrumented", "train", "check"):
        printed = step_output(api, steps[phase])
        assert any(line.startswith(f"{phase}: finished at ") and line.endswith(
            "by the interrupted build this one resumes: not run again") for line in printed), (phase, printed)
    # The optimised build ran (the configure that held it before), and its proof still holds.
    assert not any("not run again" in line for line in step_output(api, steps["optimized"]))
    assert "profile used by" in steps["optimized"]["state_string"], steps["optimized"]
    assert steps["forget-request"]["results"] == 0
    published = runtime.settings().downloads / version / "local"
    assert (published / "bintar" / f"fixture-{version}+pgo-linux-x86_64.tar.gz").is_file()
    assert release_cli("stop", "--runtime", root) == 0


def test_stop_cancel_without_a_master_is_one_error_line(tmp_path, capsys):
    assert release_cli("stop", "--cancel", "--runtime", str(tmp_path)) == 1
    printed = capsys.readouterr()
    assert printed.err.splitlines() == [f"release: error: --cancel: no master in {tmp_path / 'master'}, "
                                        "so nothing to cancel"]
    assert printed.out == ""


@pytest.mark.parametrize("chosen, reason", [
    (["debian-13"], "platform 'debian-13' is not in the master settings ({settings}): no [[platforms]] entry builds "
                    "for it (they build for local: {here})"),
    (["sid"], "unknown platform 'sid' (known: debian-12, debian-13; of the master settings: local)"),
])
def test_the_release_form_refuses_a_platform_before_any_build(runtime, chosen, reason):
    """The web UI's form and ./release's force: the master's own check of the platforms (issue 45)."""
    local.start(runtime)
    api = admin(runtime)
    before = local.newest_build_id(api)
    with pytest.raises(local.ApiError) as refused:
        local.force_release(api, "1.0.0", "fixture", "tests/fixture", ["bintar"], platforms=chosen)
    here = runtime.settings().platform("local").platform
    assert str(refused.value) == "platforms: " + reason.format(settings=runtime.settings_file, here=here)
    assert local.newest_build_id(api) == before


def listening(port):
    """A socket listening on the loopback's `port`, as another program's server would."""
    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("127.0.0.1", port))
    held.listen()
    return held


def test_a_first_setup_takes_the_next_free_ports_when_another_program_has_the_defaults(tmp_path, monkeypatch,
                                                                                        capsys):
    """A second checkout's ./release where another master listens on the default web port: its settings take the
    ports ten above, and it says so (the master would otherwise time out starting, its log saying why)."""
    monkeypatch.delenv(SETTINGS_ENV, raising=False)
    web, worker = free_port(), free_port()
    monkeypatch.setattr(local, "WEB_PORT", web)
    monkeypatch.setattr(local, "WORKER_PORT", worker)
    if any(map(local.port_taken, (web + 1, web + 10, web + 11, worker + 10))):
        pytest.skip("a port the test needs is taken by another program")
    with listening(web):
        settings = local.write_settings(local.Runtime(tmp_path / "run"))
    assert (settings.web_port, settings.worker_port, settings.downloads_port) == (web + 10, worker + 10, web + 11)
    out = capsys.readouterr().out
    assert f"ports {web}, {worker}, {web + 1} are taken on this machine" in out
    assert f"this master listens on {web + 10}, {worker + 10}, {web + 11} (web UI http://localhost:{web + 10}/)" in out
    # Free defaults are taken as they are, without a word.
    settings = local.write_settings(local.Runtime(tmp_path / "other"))
    assert (settings.web_port, settings.worker_port) == (web, worker)
    assert "are taken" not in capsys.readouterr().out


def test_a_master_whose_port_another_program_holds_is_refused_in_one_line_before_it_starts(tmp_path, monkeypatch):
    monkeypatch.delenv(SETTINGS_ENV, raising=False)
    runtime = local.Runtime(tmp_path / "run")
    runtime.root.mkdir()
    web, worker, downloads = free_port(), free_port(), free_port()
    runtime.settings_file.write_text(local.settings_text(web, worker, downloads))
    with listening(downloads):
        with pytest.raises(local.LocalError) as refused_start:
            local.start_master(runtime)
    assert str(refused_start.value) == (
        f"port {downloads} (downloads_port in {runtime.settings_file}) is taken by another program on 127.0.0.1 "
        "(another checkout's master?): stop it, or give this master another downloads_port there")
    assert not runtime.master.exists()
