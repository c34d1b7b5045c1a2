"""Two workers of one machine take turns: a real master, two local workers, a fixture release on both.

`./release` releases every platform at once; a local worker and a container on one 2-core host
must not compile at the same time. Each worker has its own WorkerLock, so only the host's lock
(buildmaster/workers.py heavy_build_locks) can keep them apart. Started as ./release starts them
(launcher/local.py), plus a second worker process; under a minute.
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
