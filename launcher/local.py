"""./release: a Buildbot master and a local worker on this machine, and a PGO release through them.

    ./release                          set up, start, release the newest MariaDB 10.11 (pgo/configs.toml's
                                       default configuration), follow it
    ./release --config fixture --source tests/fixture --version 1.0.0
    ./release up                       only set up and start the master and the worker
    ./release stop                     stop them

Everything lives in run/ (the repository ignores it): the settings with the
generated passwords, the master, the worker, the downloads and the profile
archive. Standard library only: it installs Buildbot (requirements/master.txt)
into run/venv when this Python lacks it.
"""

import argparse
import base64
import getpass
import http.client
import http.cookiejar
import json
import os
import platform
import secrets
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from buildmaster.settings import (
    DEFAULT_RUNTIME,
    PACKAGE_FORMATS,
    SETTINGS_ENV,
    SETTINGS_FILE,
    WEB_PORT,
    WORKER_PORT,
    Nightly,
    SettingsError,
    downloads_port_after,
    load_settings,
)
from pgo import REPO, PipelineError, process, protocol
from pgo.config import default_config, test_set_names
from pgo.errors import error_reason, fail
from pgo.protocol import DEFAULT_TEST_SET
from pgo.runner import say
from pgo.toolchain import detect
from pgo.versions import LATEST

REQUIREMENTS = REPO / protocol.MASTER_REQUIREMENTS
MASTER_START_TIMEOUT = 180   # a busy 2-core machine needs more than Buildbot's default 10 s
WORKER_CONNECT_TIMEOUT = 90
POLL_SECONDS = 2
# A read the master's web server cut short (a connection it closed mid-response while the machine is
# busy with a build and its benchmark) is asked again, this many times, this far apart; only reads:
# a control call (force, stop) asked twice could act twice.
READ_ATTEMPTS, READ_RETRY_SECONDS = 5, 3
PROGRESS_EVERY = 10     # seconds between two progress lines of one running step
RESULTS = {0: "success", 1: "warnings", 2: "failure", 3: "skipped", 4: "exception", 5: "retry", 6: "cancelled"}
FAILED = (2, 4)


class LocalError(PipelineError):
    pass


class Runtime:
    """The runtime folder: settings file, master and worker base directories."""

    def __init__(self, root=None):
        self.root = Path(root or DEFAULT_RUNTIME).resolve()
        self.settings_file = Path(os.environ.get(SETTINGS_ENV) or self.root / SETTINGS_FILE).resolve()
        self.master = self.root / "master"
        self.worker = self.root / "worker"

    def settings(self):
        return load_settings(self.settings_file)

    def env(self):
        return {**os.environ, SETTINGS_ENV: str(self.settings_file)}


# --- setting up -----------------------------------------------------------------

def settings_text(web_port, worker_port, downloads_port):
    """A first settings file: this machine as the only worker, passwords generated here."""
    formats = ", ".join(f'"{f}"' for f in PACKAGE_FORMATS)
    return f"""# Settings of the local PGO release master, written by ./release.
# Outside the repository: it holds passwords. Format: buildmaster/README.md.
title = "MariaDB PGO"
web_port = {web_port}
worker_port = {worker_port}
downloads_port = {downloads_port}
downloads = "downloads"
archive = "archive"

[admins]
admin = "{secrets.token_urlsafe(18)}"

[[workers]]
name = "local-worker"
password = "{secrets.token_urlsafe(24)}"

[[platforms]]
name = "local"
workers = ["local-worker"]
formats = [{formats}]

[nightly]
enabled = true
platform = "local"
version = "latest"
source = "debian"
keep = {Nightly.keep}
"""


def setup(runtime):
    """Create the settings, master and worker of runtime unless they exist; return the settings."""
    runtime.root.mkdir(parents=True, exist_ok=True)
    if not runtime.settings_file.is_file():
        runtime.settings_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(runtime.settings_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(settings_text(WEB_PORT, WORKER_PORT, downloads_port_after(WEB_PORT)))
        say(f"wrote {runtime.settings_file} (generated admin and worker passwords)")
    settings = runtime.settings()
    local = [w for w in settings.workers if w.kind == "local"]
    if not local:
        raise LocalError(f"{runtime.settings_file} names no local worker to start")
    tac = runtime.master / "buildbot.tac"
    if not tac.is_file():
        run_tool("buildbot", "create-master", "--relocatable", "--db", settings.db_url,
                 "--config", str(REPO / "master.cfg"), str(runtime.master), env=runtime.env())
        # twistd's default umask 077 would make the downloads readable by root only.
        tac.write_text(tac.read_text().replace("umask = None", "umask = 0o022"))
    if not (runtime.worker / "buildbot.tac").is_file():
        run_tool("buildbot-worker", "create-worker", "--relocatable", "--umask=0o022", str(runtime.worker),
                 f"localhost:{settings.worker_port}", local[0].name, local[0].password)
    return settings


def tool(name):
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else name


def run_tool(name, *args, env=None):
    result = process.run([tool(name), *args], env=env, error=LocalError)
    if result.returncode != 0:
        raise LocalError(f"{name} {args[0]} failed:\n{result.stdout}{result.stderr}".rstrip())
    return result.stdout


# --- starting and stopping --------------------------------------------------------

def running_pid(basedir):
    try:
        pid = int((basedir / "twistd.pid").read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def start(runtime):
    settings = runtime.settings()
    if not running_pid(runtime.master):
        say(f"starting the master in {runtime.master}")
        try:
            run_tool("buildbot", "start", f"--start_timeout={MASTER_START_TIMEOUT}", str(runtime.master),
                     env=runtime.env())
        except LocalError as e:
            raise LocalError(f"{e}\n{log_tail(runtime.master / 'twistd.log')}") from None
    if not running_pid(runtime.worker):
        say(f"starting the worker in {runtime.worker}")
        describe_worker(runtime.worker)
        run_tool("buildbot-worker", "start", str(runtime.worker))
    api = Api(settings.url)
    wait_for_worker(api, [w.name for w in settings.workers if w.kind == "local"][0])
    return settings, api


def describe_worker(basedir):
    """What the web UI shows of the local worker: this machine's system and compiler, not Buildbot's placeholders."""
    try:
        system = platform.freedesktop_os_release()["PRETTY_NAME"]
    except (OSError, KeyError):
        system = platform.platform()
    try:
        compiler = detect().banner
    except PipelineError as e:
        compiler = f"none usable ({e})"
    info = basedir / "info"
    info.mkdir(exist_ok=True)
    (info / "host").write_text(f"image: {system} (this machine); compiler: {compiler}")
    (info / "admin").write_text(f"the release engineer running ./release as {getpass.getuser()}")


def stop(runtime):
    for name, basedir in (("buildbot-worker", runtime.worker), ("buildbot", runtime.master)):
        if running_pid(basedir):
            say(f"stopping {basedir}")
            run_tool(name, "stop", str(basedir), env=runtime.env())


def log_tail(path, lines=15):
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_for_worker(api, name):
    deadline = time.monotonic() + WORKER_CONNECT_TIMEOUT
    while time.monotonic() < deadline:
        try:
            # One read per poll: this loop is the retry, and keeps to its deadline.
            workers = api.get("workers", attempts=1, name=name)["workers"]
            if workers and workers[0]["connected_to"]:
                return
        except ApiError:
            pass                   # the web server is still starting (Api.open turns its OSError into this)
        time.sleep(1)
    raise LocalError(f"worker {name} did not connect to the master within {WORKER_CONNECT_TIMEOUT} s "
                     "(see run/worker/twistd.log and run/master/twistd.log)")


# --- the REST API -----------------------------------------------------------------

class ApiError(PipelineError):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class Api:
    """Buildbot's REST API (data) and JSON-RPC (control), with a login session."""

    def __init__(self, url):
        self.url = url.rstrip("/")
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def login(self, user, password):
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.open(urllib.request.Request(f"{self.url}/auth/login", headers={"Authorization": f"Basic {token}"}))
        who = json.loads(self.open(urllib.request.Request(f"{self.url}/config")))["user"]
        if who.get("anonymous"):
            raise ApiError(401, f"login as {user} failed")

    def get(self, path, *, attempts=READ_ATTEMPTS, **query):
        url = f"{self.url}/api/v2/{path}" + (f"?{urllib.parse.urlencode(query, doseq=True)}" if query else "")
        for attempt in range(1, attempts + 1):
            try:
                return json.loads(self.open(urllib.request.Request(url)))
            except ApiError as e:
                if e.status is not None:
                    raise
                if attempt == attempts:
                    # The count is said here, where it is known: a control call is never asked again.
                    raise ApiError(None, f"{e} (asked {attempts} times)") from None
            time.sleep(READ_RETRY_SECONDS)

    def control(self, path, method, **params):
        body = json.dumps({"jsonrpc": "2.0", "method": method, "id": 1, "params": params}).encode()
        request = urllib.request.Request(f"{self.url}/api/v2/{path}", data=body,
                                         headers={"Content-Type": "application/json"})
        return json.loads(self.open(request))["result"]

    def open(self, request):
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.read()
        except urllib.error.HTTPError as e:
            raise ApiError(e.code, error_message(e.read())) from None
        except (http.client.HTTPException, OSError) as e:
            # No answer, or half of one (http.client's IncompleteRead is no OSError): status None.
            reason = e.reason if isinstance(e, urllib.error.URLError) else e
            raise ApiError(None, f"no whole answer from the master at {self.url}: {reason}") from None


def error_message(body):
    try:
        data = json.loads(body)
        message = data["error"]["message"] if isinstance(data.get("error"), dict) else data["error"]
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace").strip()
    # A refused form names the field of each reason: {"version": "..."}.
    return "; ".join(f"{field}: {reason}" for field, reason in message.items()) if isinstance(message, dict) \
        else str(message)


def login_as_admin(settings, api):
    user, password = next(iter(settings.admins.items()))
    api.login(user, password)
    return user


def force_release(api, version, config, source, formats, benchmark="auto", profile="train", tests=DEFAULT_TEST_SET):
    """Start a release on every platform; returns the buildset id."""
    bsid, _ = api.control("forceschedulers/release", "force", version=version, config=config, source=source,
                          formats=list(formats), benchmark=benchmark, profile=profile, tests=tests,
                          reason=f"./release {version}")
    return bsid


def resolution(api, bsid):
    """Which version 'latest' became: the master's answer, or that the worker's version step gives it."""
    properties = api.get(f"buildsets/{bsid}/properties")["properties"]
    said = properties[0].get("resolved_from") if properties else None
    return (f"release {said[0]} (resolved by the master)" if said else
            "release latest: the master's apt does not know the line; the build's version step resolves it")


def newest_build_id(api):
    builds = api.get("builds", order="-buildid", limit=1)["builds"]
    return builds[0]["buildid"] if builds else 0


def follow(api, bsid, after_buildid, out=print, give_up_after=None):
    """Print the steps of the builds started after after_buildid until the buildset completes.

    A request that waits for a worker which is not connected is named at once,
    and cancelled after give_up_after seconds of that.
    """
    builders = {b["builderid"]: b["name"] for b in api.get("builders")["builders"]}
    shown, last_print, waiting_since = {}, {}, {}
    while True:
        buildset = api.get(f"buildsets/{bsid}")["buildsets"][0]
        for build in api.get("builds", buildid__gt=after_buildid, order="buildid")["builds"]:
            label = build_label(builders, build)
            for step in api.get(f"builds/{build['buildid']}/steps")["steps"]:
                if step["hidden"] or step["started_at"] is None or step["state_string"] == "pending":
                    continue
                key = (build["buildid"], step["number"])
                now = time.monotonic()
                too_soon = not step["complete"] and now - last_print.get(key, 0) < PROGRESS_EVERY
                if shown.get(key) != step["state_string"] and not (key in shown and too_soon):
                    out(f"{label:<24} {step['name']:<20} {step['state_string']}")
                    shown[key], last_print[key] = step["state_string"], now
        if buildset["complete"]:
            return buildset["results"]
        watch_workers(api, bsid, builders, waiting_since, give_up_after, out)
        time.sleep(POLL_SECONDS)


def watch_workers(api, bsid, builders, waiting_since, give_up_after, out):
    """Name the requests of bsid that wait for a worker which is not connected; cancel them after give_up_after s."""
    for request in api.get("buildrequests", buildsetid=bsid)["buildrequests"]:
        brid, builder = request["buildrequestid"], builders.get(request["builderid"], "?")
        workers = api.get(f"builders/{request['builderid']}/workers")["workers"]
        if request["claimed"] or request["complete"] or any(w["connected_to"] for w in workers):
            if waiting_since.pop(brid, None) is not None:
                out(f"{builder}: a worker connected")
            continue
        if brid not in waiting_since:
            waiting_since[brid] = time.monotonic()
            names = ", ".join(w["name"] for w in workers) or "none configured"
            limit = f"; giving up after {give_up_after:g} s" if give_up_after is not None else ""
            out(f"{builder}: waiting for a worker: not connected to the master ({names}){limit}")
        elif give_up_after is not None and time.monotonic() - waiting_since[brid] >= give_up_after:
            reason = f"no worker connected within {give_up_after:g} s"
            api.control(f"buildrequests/{brid}", "cancel", reason=reason)
            out(f"{builder}: gave up waiting for a worker: {reason}; request cancelled")
            del waiting_since[brid]


def build_label(builders, build):
    return f"{builders.get(build['builderid'], '?')} #{build['number']}"


def failure_reasons(api, after_buildid):
    """(build label, step name, reason) of each failed build started after after_buildid."""
    builders = {b["builderid"]: b["name"] for b in api.get("builders")["builders"]}
    reasons = []
    for build in api.get("builds", buildid__gt=after_buildid, order="buildid")["builds"]:
        if build["results"] not in FAILED:
            continue
        steps = api.get(f"builds/{build['buildid']}/steps")["steps"]
        step = next((s for s in steps if s["results"] in FAILED and not s["hidden"]), None)
        if step:
            reasons.append((build_label(builders, build), step["name"], step_reason(api, step)))
    return reasons


def step_reason(api, step):
    """The last error line of the step's logs: pgo's own error line, else the last line on stderr."""
    said, errors = [], []
    for log in api.get(f"steps/{step['stepid']}/logs")["logs"]:
        chunks = api.get(f"logs/{log['logid']}/contents")["logchunks"]
        for line in "".join(chunk["content"] for chunk in chunks).splitlines():
            # A stdio log marks each line with its stream: o(ut), e(rr), h(eader).
            stream, text = (line[:1], line[1:]) if log["type"] == "s" else ("o", line)
            if stream != "h" and text.strip():
                said.append(text)
                if stream == "e":
                    errors.append(text)
    return error_reason(said) or (errors or said or [step["state_string"]])[-1].strip()


def release_builds(api, bsid):
    requests = api.get("buildrequests", buildsetid=bsid)["buildrequests"]
    builds = []
    for request in requests:
        builds += api.get("builds", buildrequestid=request["buildrequestid"],
                          property=["published", "published_url"])["builds"]
    return builds


# --- the command ------------------------------------------------------------------

def cmd_up(args):
    runtime = Runtime(args.runtime)
    setup(runtime)
    settings, _ = start(runtime)
    say(f"master and worker are running; web UI: {settings.url}")
    say(f"admin user: {next(iter(settings.admins))} (password in {runtime.settings_file})")
    say("stop them with: ./release stop" + (f" --runtime {args.runtime}" if args.runtime else ""))


def cmd_stop(args):
    stop(Runtime(args.runtime))


def cmd_run(args):
    runtime = Runtime(args.runtime)
    setup(runtime)
    settings, api = start(runtime)
    user = login_as_admin(settings, api)
    before = newest_build_id(api)
    bsid = force_release(api, args.version, args.config, args.source, args.formats.split(","), args.benchmark,
                         args.profile, args.tests)
    say(f"release {args.version} ({args.config}) forced as {user}; web UI: {settings.url}")
    if args.version == LATEST:
        say(resolution(api, bsid))
    try:
        results = follow(api, bsid, before, out=say, give_up_after=settings.worker_wait_minutes * 60)
    except KeyboardInterrupt:
        say(f"\nstopped following; the release goes on: {settings.url}")
        return 130
    except ApiError as e:
        if e.status is not None:
            raise
        raise LocalError(f"stopped following the release ({e}); it goes on in the master: {settings.url}") from None
    summaries = []
    for build in release_builds(api, bsid):
        published = build["properties"].get("published", [None])[0]
        summaries.append(build["state_string"])
        say(f"{RESULTS.get(build['results'], build['results'])}: {build['state_string']}")
        if published:
            say(f"packages: {published}")
            if "published_url" in build["properties"]:
                say(f"download: {build['properties']['published_url'][0]}")
            for path in sorted(Path(published).rglob("*")):
                if path.is_file():
                    say(f"  {path.relative_to(published)}")
        say(f"build: {settings.url}#/builders/{build['builderid']}/builds/{build['number']}")
    # A pgo step's summary already ends with its error line; the other steps' reasons,
    # and those of the package builds, are said here.
    for label, step, reason in failure_reasons(api, before):
        if not any(reason in summary for summary in summaries):
            say(f"{label} failed in {step}: {reason}")
    say(f"profile archive: {settings.archive}")
    say(f"web UI: {settings.url}")
    return 0 if results == 0 else 1


def make_parser():
    parser = argparse.ArgumentParser(prog="./release", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--runtime", help="runtime folder (default: run/ in the repository)")
    sub = parser.add_subparsers(dest="command", metavar="command")
    run = sub.add_parser("run", parents=[common], help="start everything and run a PGO release (the default)")
    run.add_argument("--version", default=LATEST, help="version to release: MAJOR.MINOR.PATCH, or 'latest' "
                     "(the default: the newest of the configuration's line that the source has)")
    run.add_argument("--config", default=default_config(),
                     help="named configuration of pgo/configs.toml (default: its `default`, %(default)s)")
    run.add_argument("--source", default="debian", help="'debian', a tarball, a directory or a git URL")
    run.add_argument("--formats", default=",".join(PACKAGE_FORMATS),
                     help=f"package formats, comma-separated (default {','.join(PACKAGE_FORMATS)})")
    run.add_argument("--profile", default="train",
                     help="'train' (default), or reuse an archived profile: its name or 'latest'")
    run.add_argument("--benchmark", choices=("auto", "on", "off"), default="auto",
                     help="benchmark gate (auto: on for MariaDB)")
    run.add_argument("--tests", choices=test_set_names(), default=DEFAULT_TEST_SET,
                     help="the test set run on the optimised and the plain build before the verdict "
                     "(default: %(default)s)")
    run.set_defaults(func=cmd_run)
    sub.add_parser("up", parents=[common], help="only set up and start the master and the local worker"
                   ).set_defaults(func=cmd_up)
    sub.add_parser("stop", parents=[common], help="stop the master and the worker").set_defaults(func=cmd_stop)
    return parser


def pinned_buildbot():
    for line in REQUIREMENTS.read_text().splitlines():
        if line.lower().startswith("buildbot=="):
            return line.split("==", 1)[1].strip()
    raise LocalError(f"{REQUIREMENTS} pins no buildbot version")


def ensure_buildbot(runtime, argv):
    """Re-run in run/venv, with the pinned Buildbot installed, unless this Python has it."""
    try:
        import buildbot
        if buildbot.version == pinned_buildbot():
            return
    except ImportError:
        pass
    venv = runtime.root / "venv"
    python = venv / "bin" / "python3"
    if Path(sys.executable).resolve() == python.resolve():
        raise LocalError(f"{venv} lacks Buildbot {pinned_buildbot()}: remove it and run again")
    if not python.is_file():
        say(f"installing Buildbot {pinned_buildbot()} into {venv}")
        for cmd in ([sys.executable, "-m", "venv", venv], [python, "-m", "pip", "install", "-q", "-r", REQUIREMENTS]):
            status = process.run_into(cmd, error=LocalError)
            if status != 0:
                raise LocalError(f"{' '.join(map(str, cmd))} exited with status {status}")
    os.execv(python, [str(python), str(REPO / "release"), *argv])


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("run", "up", "stop", "-h", "--help"):
        argv.insert(0, "run")
    args = make_parser().parse_args(argv)
    try:
        ensure_buildbot(Runtime(args.runtime), argv)
        return args.func(args) or 0
    except (LocalError, SettingsError, ApiError) as e:
        return fail("release", e)
    except OSError as e:
        return fail("release", f"cannot talk to the master: {e}")
