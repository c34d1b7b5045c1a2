"""Two workers of one machine take turns: a real master, two local workers, a fixture release on both.

`./release` releases every platform at once; a local worker and a container on one 2-core host
must not compile at the same time. Each worker has its own WorkerLock, so only the host's lock
(buildmaster/workers.py heavy_build_locks) can keep them apart. Started as ./release starts them
(launcher/local.py), plus a second worker process; under a minute. And ./release names what its
release waits behind on another worker of the same host.
"""

import subprocess

import pytest
from conftest import free_port

from buildmaster.settings import SETTINGS_ENV
from launcher import local

# The builds' own steps: Buildbot's preparation (the wait for a worker and for the locks) is not work.
WAITING_STEPS = ("worker_preparation", "locks_acquire")


@pytest.fixture
def two_workers(tmp_path):
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(SETTINGS_ENV, raising=False)
        runtime = local.Runtime(tmp_path / "run")
        text = local.settings_text(free_port(), free_port(), free_port())
        second = ('[[workers]]\nname = "local-worker-2"\npassword = "second-secret"\n\n'
                  '[[platforms]]\nname = "local-2"\nworkers = ["local-worker-2"]\nformats = ["bintar"]\n\n[nightly]')
        runtime.root.mkdir()
        runtime.settings_file.write_text(text.replace("[nightly]\nenabled = true", f"{second}\nenabled = false"))
        settings = local.setup(runtime)
        worker_2 = runtime.root / "worker-2"
        local.run_tool("buildbot-worker", "create-worker", "--relocatable", "--umask=0o022", str(worker_2),
                       f"localhost:{settings.worker_port}", "local-worker-2", "second-secret")
        try:
            settings, api = local.start(runtime)
            local.run_tool("buildbot-worker", "start", str(worker_2))
            local.wait_for_worker(api, "local-worker-2")
            yield settings
        finally:
            if local.running_pid(worker_2):
                subprocess.run([local.tool("buildbot-worker"), "stop", str(worker_2)], capture_output=True)
            local.stop(runtime)


def working_time(api, build):
    steps = [s for s in api.get(f"builds/{build['buildid']}/steps")["steps"] if s["name"] not in WAITING_STEPS]
    return min(s["started_at"] for s in steps if s["started_at"]), max(s["complete_at"] for s in steps)


def test_releases_on_two_workers_of_one_host_do_not_overlap(two_workers):
    settings = two_workers
    assert {w.build_host for w in settings.workers} == {"localhost"}
    api = local.Api(settings.url)
    local.login_as_admin(settings, api)
    before = local.newest_build_id(api)
    bsid = local.force_release(api, "1.0.0", "fixture", "tests/fixture", ["bintar"], benchmark="off")
    lines = []
    assert local.follow(api, bsid, before, out=lines.append) == 0, "\n".join(lines)
    builds = local.release_builds(api, bsid)
    assert sorted(b["workerid"] for b in builds) == sorted(w["workerid"] for w in api.get("workers")["workers"])
    (first_start, first_end), (second_start, second_end) = sorted(working_time(api, b) for b in builds)
    assert first_end <= second_start, f"the two releases overlapped: {first_start}-{first_end}, " \
                                      f"{second_start}-{second_end}"


class FakeApi:
    """The REST API's answers launcher/local.py reads, for three workers: two of this machine, one elsewhere."""

    WORKERS = {1: "local-worker", 2: "container-worker", 3: "remote-worker"}
    BUILDERS = {10: ("release-local", [1]), 11: ("release-container", [2]), 12: ("release-remote", [3])}

    def __init__(self, requests, builds):
        self.requests, self.builds = requests, builds

    def get(self, path, **query):
        if path == "workers":
            return {"workers": [{"workerid": i, "name": n} for i, n in self.WORKERS.items()]}
        if path == "builders":
            return {"builders": [{"builderid": i, "name": n} for i, (n, _) in self.BUILDERS.items()]}
        if path.startswith("builders/"):
            ids = self.BUILDERS[int(path.split("/")[1])][1]
            return {"workers": [{"workerid": i, "name": self.WORKERS[i]} for i in ids]}
        if path == "buildrequests":
            wanted = [r for r in self.requests if query.get("buildsetid", r["buildsetid"]) == r["buildsetid"]]
            return {"buildrequests": [r for r in wanted if not (query.get("complete") is False and r["complete"])]}
        if path == "builds":
            return {"builds": [b for b in self.builds if b["buildrequestid"] == query["buildrequestid"]]}
        if path.startswith("buildsets/"):
            return {"buildsets": [{"parent_buildid": None}]}
        raise AssertionError(path)


def request(brid, bsid, builderid, claimed):
    return {"buildrequestid": brid, "buildsetid": bsid, "builderid": builderid, "claimed": claimed,
            "complete": False, "submitted_at": 1000 + brid, "properties": {"version": ["1.0.0", "Force"]}}


@pytest.mark.parametrize("running_on, named", [(1, True), (3, False)])
def test_release_names_the_build_it_waits_behind_on_its_host(running_on, named):
    """A release queued for the container waits behind a release running on the local worker of its host,
    and says so; one running on another host's worker is not in its way."""
    builder = {1: 10, 3: 12}[running_on]
    api = FakeApi([request(1, 100, builder, claimed=True), request(2, 200, 11, claimed=False)],
                  [{"buildrequestid": 1, "number": 4, "complete": False, "results": None, "workerid": running_on,
                    "started_at": 1_000_000}])
    hosts = {"local-worker": "localhost", "container-worker": "localhost", "remote-worker": "buildhost-2"}
    ahead = local.work_ahead(api, 200, local.builder_names(api), local.builder_workers(api, hosts))
    name = {1: "release-local", 3: "release-remote"}[running_on]
    assert ahead == ([f"release 1.0.0 ({name} #4, running since {local.when(1_000_000)})"] if named else [])
    # Without the hosts (an older caller): only the builder's own workers count.
    assert local.work_ahead(api, 200, local.builder_names(api), local.builder_workers(api)) == []
