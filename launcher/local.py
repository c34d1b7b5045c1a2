"""./release: a Buildbot master and a local worker on this machine, and a PGO release through them.

    ./release                          set up, start, release the newest MariaDB 10.11 (pgo/configs.toml's
                                       default configuration) on every platform that builds it, follow it
    ./release --platform debian-13 --config release-11.8
                                       on one platform (pgo/platforms.toml, or a [[platforms]] name)
    ./release --config fixture --source tests/fixture --version 1.0.0
    ./release up                       only set up and start the master and the worker
    ./release stop                     stop them (a running or queued release starts again on the next start)
    ./release stop --cancel            cancel every running and queued release, then stop them

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
import importlib.metadata
import json
import os
import platform
import secrets
import shlex
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from buildmaster.preflight import release_platforms
from buildmaster.settings import (
    DEFAULT_RUNTIME,
    LISTEN,
    PACKAGE_FORMATS,
    SETTINGS_ENV,
    SETTINGS_FILE,
    WEB_PORT,
    WORKER_PORT,
    Nightly,
    downloads_port_after,
    load_settings,
)
from pgo import REPO, PipelineError
from pgo.base import process, protocol
from pgo.base.errors import error_reason, fail
from pgo.base.protocol import DEFAULT_TEST_SET
from pgo.base.runner import say
from pgo.base.versions import LATEST
from pgo.core.config import default_config, test_set_names
from pgo.core.toolchain import detect

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
# How long `./release stop --cancel` waits for the builds it stopped to end (their step's processes
# are killed) before it gives up, leaving the master running.
CANCEL_TIMEOUT = 240
CANCEL_ASK_AGAIN = 10   # seconds after which a request still not complete is cancelled again (cancel is idempotent)
CANCEL_COMMAND = "./release stop --cancel"
START_COMMANDS = "./release or ./release up"


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


def write_settings(runtime):
    """The settings of runtime, written first with generated passwords unless they exist."""
    runtime.root.mkdir(parents=True, exist_ok=True)
    if not runtime.settings_file.is_file():
        ports = free_ports(runtime.settings_file)
        runtime.settings_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(runtime.settings_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(settings_text(*ports))
        say(f"wrote {runtime.settings_file} (generated admin and worker passwords)")
        if ports != default_ports():
            say(f"ports {', '.join(map(str, default_ports()))} are taken on this machine (another checkout's master?): "
                f"this master listens on {', '.join(map(str, ports))} (web UI http://localhost:{ports[0]}/)")
    return runtime.settings()


# How many steps of 10 above the default ports (buildmaster/settings.py) a first setup tries when another
# program listens on them (a second checkout's master on this machine).
PORT_STEPS = 20


def default_ports(step=0):
    """(web, worker, downloads) ports, `step` tens above the defaults."""
    web = WEB_PORT + 10 * step
    return web, WORKER_PORT + 10 * step, downloads_port_after(web)


def port_taken(port, interface=LISTEN):
    """Whether a program listens on TCP `port` where the master would (binding it fails)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As Twisted binds its listening ports: a closed connection's TIME_WAIT does not count as taken.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((interface, port))
        except OSError:
            return True
    return False


def free_ports(settings_file):
    """The first (web, worker, downloads) ports, the defaults or tens above them, that no program listens on."""
    for step in range(PORT_STEPS):
        ports = default_ports(step)
        if not any(map(port_taken, ports)):
            return ports
    last = default_ports(PORT_STEPS - 1)
    raise LocalError(f"no free ports for the master: {WEB_PORT}-{last[0]} and {WORKER_PORT}-{last[1]} are taken, "
                     f"in steps of 10; write {settings_file} with web_port, worker_port and downloads_port "
                     "(buildmaster/README.md)")


def check_ports(runtime, settings):
    """A master that is not running yet would fail to start on a port another program listens on (its log
    would say so after the start timed out): one line naming the port and the setting, before it starts."""
    for name in ("web_port", "worker_port", "downloads_port"):
        port = getattr(settings, name)
        if port_taken(port, settings.listen):
            raise LocalError(f"port {port} ({name} in {runtime.settings_file}) is taken by another program on "
                             f"{settings.listen} (another checkout's master?): stop it, or give this master another "
                             f"{name} there")


def local_worker(settings):
    """The worker process ./release starts on this machine; None when every worker is latent (containers,
    VMs: the master starts those for a build)."""
    return next((w for w in settings.workers if w.kind == "local"), None)


def setup(runtime):
    """Create the settings, master and (with a local worker) worker of runtime unless they exist; return
    the settings."""
    settings = write_settings(runtime)
    local = local_worker(settings)
    if not (runtime.master / "buildbot.tac").is_file():
        create_master(runtime, settings)
    if local and not (runtime.worker / "buildbot.tac").is_file():
        run_tool("buildbot-worker", "create-worker", "--relocatable", "--umask=0o022", str(runtime.worker),
                 f"localhost:{settings.worker_port}", local.name, local.password)
    return settings



def create_master(runtime, settings):
    """The master's base directory for master.cfg, in runtime."""
    run_tool("buildbot", "create-master", "--relocatable", "--db", settings.db_url,
             "--config", str(REPO / "master.cfg"), str(runtime.master), env=runtime.env())
    # twistd's default umask 077 would make the downloads readable by root only.
    tac = runtime.master / "buildbot.tac"
    tac.write_text(tac.read_text().replace("umask = None", "umask = 0o022"))

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
    start_master(runtime, settings)
    api = Api(settings.url)
    local = local_worker(settings)
    if local is None:
        # Only latent workers: the master starts them for a build; there is no process to start here.
        return settings, api
    if not running_pid(runtime.worker):
        say(f"starting the worker in {runtime.worker}")
        describe_worker(runtime.worker)
        run_tool("buildbot-worker", "start", str(runtime.worker))
    wait_for_worker(api, local.name)
    return settings, api


def start_master(runtime, settings=None):
    if not running_pid(runtime.master):
        settings = settings or runtime.settings()
        check_ports(runtime, settings)
        # What the master would refuse on loading master.cfg (a container image its Docker host lacks),
        # refused here in one line: its start would fail with a traceback in its log.
        check_master_config(settings)
        say(f"starting the master in {runtime.master}")
        try:
            run_tool("buildbot", "start", f"--start_timeout={MASTER_START_TIMEOUT}", str(runtime.master),
                     env=runtime.env())
        except LocalError as e:
            log = runtime.master / "twistd.log"
            errors = config_errors(log_tail(log, lines=200))
            if errors:
                raise LocalError(f"the master refused its configuration: {errors} (details: {log})") from None
            raise LocalError(f"{e}\n{log_tail(log)}") from None


def check_master_config(settings):
    """Build the master's configuration from settings as master.cfg does, and have Buildbot check it; its
    first error, or a SettingsError of the settings' own check, as one line."""
    # Here, not at the top: ./release runs without Buildbot until ensure_buildbot has installed it.
    from buildbot.config.errors import ConfigErrors
    from buildbot.config.master import MasterConfig

    from buildmaster.config import buildmaster_config
    try:
        MasterConfig.loadFromDict(buildmaster_config(settings), "master.cfg")
    except ConfigErrors as e:
        raise LocalError(f"the master would refuse its configuration: {'; '.join(e.errors)}") from None


# What the master logs of a master.cfg that fails to load: the header, then each error indented, the
# exception's message wrapped in Buildbot's words.
CONFIG_ERRORS_HEADER = "Configuration Errors:"
CONFIG_ERROR_WRAP = ("error while parsing config file: ", " (traceback in logfile)")


def config_errors(log_text):
    """The errors of the last 'Configuration Errors:' block of a twistd.log, in one line ('' if none)."""
    lines = log_text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.endswith(CONFIG_ERRORS_HEADER)]
    if not starts:
        return ""
    errors = []
    for line in lines[starts[-1] + 1:]:
        # twistd prefixes each line with its time and source: "2026-... [-]   the error".
        message = line.split("] ", 1)[1] if "] " in line else line
        if not message.startswith("  "):
            break
        message = message.strip()
        head, tail = CONFIG_ERROR_WRAP
        errors.append(message.removeprefix(head).removesuffix(tail))
    return "; ".join(errors)


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


def force_release(api, version, config, source, formats, benchmark="auto", profile="train", tests=DEFAULT_TEST_SET,
                  platforms=(), baseline="auto"):
    """Start a release on platforms (names of [[platforms]] rows or of pgo/platforms.toml's platforms; none:
    the master's matrix); returns the buildset id."""
    bsid, _ = api.control("forceschedulers/release", "force", version=version, config=config, source=source,
                          formats=list(formats), benchmark=benchmark, baseline=baseline, profile=profile, tests=tests,
                          platforms=list(platforms), reason=f"./release {version}")
    return bsid


def latent_workers(settings):
    """Worker name -> how ./release names its start, for each latent worker (a container or a VM the master
    starts for a build), with the image the master starts (its images folder's current.json)."""
    found = {}
    for w in settings.workers:
        if w.kind == "local":
            continue
        try:
            current = json.loads((Path(w.images) / protocol.CURRENT_IMAGE).read_text())["current"]
            image = current["container_image"] if w.kind == "docker" else f"{current['image']}:{current['build']}"
        except (OSError, ValueError, KeyError, TypeError):
            image = None      # the master says why at its start; here only the name is wanted
        kind = "container" if w.kind == "docker" else "VM"
        found[w.name] = f"{kind} worker {w.name}" + (f" ({image})" if image else "")
    return found


def resolution(api, bsid):
    """Which version 'latest' became: the master's answer, or that the worker's version step gives it."""
    properties = api.get(f"buildsets/{bsid}/properties")["properties"]
    said = properties[0].get("resolved_from") if properties else None
    return (f"release {said[0]} (resolved by the master)" if said else
            "release latest: the master's apt does not know the line; the build's version step resolves it")


def newest_build_id(api):
    builds = api.get("builds", order="-buildid", limit=1)["builds"]
    return builds[0]["buildid"] if builds else 0


def follow(api, bsid, after_buildid, out=print, give_up_after=None, cancel_hint=None, owners=None, hosts=None,
           latent=None):
    """Print the steps of bsid's builds started after after_buildid until the buildset completes.

    Its builds are those of its requests and those they triggered (the package builds), never
    another release's. A request that waits for a worker which is not connected is named at once,
    and cancelled after give_up_after seconds of that; one that waits behind other builds names
    them, with cancel_hint, the command that cancels them. owners, if given, is filled with
    {buildid: whether it is bsid's} of the builds seen. hosts (worker name -> its host) makes the
    builds of another worker of the same host count as ahead: heavy builds of one host take turns.
    latent (worker name -> how to name its start, latent_workers) says that a request waiting for such a
    worker waits for the master to start it, not for a worker process to connect.
    """
    builders = builder_names(api)
    shown, last_print, waiting_since, workers_of, said_ahead = {}, {}, {}, builder_workers(api, hosts), []
    owners = {} if owners is None else owners
    while True:
        buildset = api.get(f"buildsets/{bsid}")["buildsets"][0]
        for build in api.get("builds", buildid__gt=after_buildid, order="buildid")["builds"]:
            if not of_buildset(api, bsid, build, owners):
                continue
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
        ahead = work_ahead(api, bsid, builders, workers_of)
        watch_workers(api, bsid, builders, waiting_since, give_up_after, out, latent=latent, queued=bool(ahead))
        if ahead and ahead != said_ahead:
            them = "it" if len(ahead) == 1 else "them"
            out(f"waiting behind {' and '.join(ahead)}: {cancel_hint or CANCEL_COMMAND} cancels {them}, "
                "and this release too")
        said_ahead = ahead
        time.sleep(POLL_SECONDS)


def of_buildset(api, bsid, build, owners):
    """Whether build is one of buildset bsid's, or one that such a build triggered (owners: the builds
    asked about before, parents first: builds come in the order they started)."""
    if build["buildid"] not in owners:
        request = api.get(f"buildrequests/{build['buildrequestid']}")["buildrequests"][0]
        parent = api.get(f"buildsets/{request['buildsetid']}")["buildsets"][0]["parent_buildid"]
        owners[build["buildid"]] = request["buildsetid"] == bsid or owners.get(parent, False)
    return owners[build["buildid"]]


def watch_workers(api, bsid, builders, waiting_since, give_up_after, out, latent=None, queued=False):
    """Name the requests of bsid that wait for a worker which is not connected; cancel them after give_up_after s.

    A request whose workers are all latent (latent: name -> how to name its start) waits for the master to
    start one: said so, and, when queued (behind other builds, which follow names), not waiting yet: a
    latent worker connects only for a build that may start."""
    latent = latent or {}
    for request in api.get("buildrequests", buildsetid=bsid)["buildrequests"]:
        brid, builder = request["buildrequestid"], builders.get(request["builderid"], "?")
        workers = api.get(f"builders/{request['builderid']}/workers")["workers"]
        starting = [latent[w["name"]] for w in workers if w["name"] in latent]
        all_latent = bool(workers) and len(starting) == len(workers)
        if request["claimed"] or request["complete"] or any(w["connected_to"] for w in workers) \
                or (all_latent and queued):
            since = waiting_since.pop(brid, None)
            # A latent worker's request is claimed as the master starts it: its build's steps follow.
            if since is not None and not all_latent:
                out(f"{builder}: a worker connected")
            continue
        if brid not in waiting_since:
            waiting_since[brid] = time.monotonic()
            names = ", ".join(w["name"] for w in workers) or "none configured"
            limit = f"; giving up after {give_up_after:g} s" if give_up_after is not None else ""
            if all_latent:
                out(f"{builder}: starting {' or '.join(starting)}{limit}")
            else:
                out(f"{builder}: waiting for a worker: not connected to the master ({names}){limit}")
        elif give_up_after is not None and time.monotonic() - waiting_since[brid] >= give_up_after:
            reason = f"no worker connected within {give_up_after:g} s"
            api.control(f"buildrequests/{brid}", "cancel", reason=reason)
            out(f"{builder}: gave up waiting for a worker: {reason}; request cancelled")
            del waiting_since[brid]


def build_label(builders, build):
    return f"{builders.get(build['builderid'], '?')} #{build['number']}"


def failure_reasons(api, after_buildid, only=None):
    """(build label, step name, reason) of each failed build started after after_buildid (of those in only)."""
    builders = builder_names(api)
    reasons = []
    for build in api.get("builds", buildid__gt=after_buildid, order="buildid")["builds"]:
        if build["results"] not in FAILED or (only is not None and build["buildid"] not in only):
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


# --- what the master runs and has queued -------------------------------------------

def builder_names(api):
    return {b["builderid"]: b["name"] for b in api.get("builders")["builders"]}


def builder_workers(api, hosts=None):
    """builderid -> the ids of the workers it may run on, asked once each; with hosts (worker name -> its
    host), also those of every other worker of their hosts, whose release and nightly builds hold the
    host's lock (buildmaster/workers.py heavy_build_locks)."""
    known, every = {}, []

    def workers_of(builderid):
        if builderid not in known:
            own = api.get(f"builders/{builderid}/workers")["workers"]
            shared = {hosts.get(w["name"]) for w in own} - {None} if hosts else set()
            if shared and not every:
                every.extend(api.get("workers")["workers"])
            known[builderid] = {w["workerid"] for w in own} | {
                w["workerid"] for w in every if hosts.get(w["name"]) in shared}
        return known[builderid]
    return workers_of


def when(epoch):
    moment = time.localtime(epoch)
    return time.strftime("%H:%M:%S" if moment[:3] == time.localtime()[:3] else "%Y-%m-%d %H:%M:%S", moment)


class Work:
    """A build request the master has not completed: queued, or with its build running."""

    def __init__(self, request, builds, builder, parent_buildid):
        self.request, self.parent_buildid = request, parent_buildid
        self.build = next((b for b in builds if not b["complete"]), None)
        # Buildbot ends a build whose worker went away as `retry` and queues its request again.
        self.lost = sum(RESULTS.get(b["results"]) == "retry" for b in builds)
        version = (request["properties"] or {}).get("version", [None])[0]
        self.kind = builder.split("-")[0]
        what = self.kind + (f" {version}" if version else "")
        where = (f"{builder} #{self.build['number']}, running since {when(self.build['started_at'])}" if self.build
                 else f"{builder}, queued since {when(request['submitted_at'])}")
        lost = f"; its worker was lost {self.lost} time{'s' if self.lost > 1 else ''} before" if self.lost else ""
        self.label = f"{what} ({where}{lost})"


def active_work(api, builders=None):
    """Every build request not complete, oldest first."""
    builders = builders or builder_names(api)
    work = []
    for request in api.get("buildrequests", complete=False, order="buildrequestid",
                           property="version")["buildrequests"]:
        builds = api.get("builds", buildrequestid=request["buildrequestid"], order="buildid")["builds"]
        parent = api.get(f"buildsets/{request['buildsetid']}")["buildsets"][0]["parent_buildid"]
        work.append(Work(request, builds, builders.get(request["builderid"], "?"), parent))
    return work


def work_ahead(api, bsid, builders, workers_of):
    """What bsid's unclaimed requests wait behind: the builds running on their workers and the requests
    queued for them before. Builds a release triggered (its package builds) go with the release."""
    waiting = [r for r in api.get("buildrequests", buildsetid=bsid)["buildrequests"]
               if not (r["claimed"] or r["complete"])]
    if not waiting:
        return []
    workers = set().union(*(workers_of(r["builderid"]) for r in waiting))
    first = min(r["submitted_at"] for r in waiting)
    return [w.label for w in active_work(api, builders)
            if w.request["buildsetid"] != bsid and w.parent_buildid is None
            and (w.build["workerid"] in workers if w.build else
                 w.request["submitted_at"] <= first and workers_of(w.request["builderid"]) & workers)]


def say_what_resumes(api, max_lost, cancel_hint):
    """Before the worker and the master stop: what of theirs starts again on the next start."""
    work = [w for w in active_work(api) if w.parent_buildid is None]
    for w in work:
        # Stopping the worker loses it for a running build: Buildbot queues its request again.
        lost = w.lost + (w.build is not None)
        if lost >= max_lost:
            fate = ("fails on the next start: the worker-lost guard gives up on a build request whose worker "
                    f"was lost {lost} times (max_lost_workers = {max_lost})")
        elif w.build and w.kind == "release":
            # Its work stays where its worker keeps it: it resumes after its last finished phase (pgo/build/resume.py).
            fate = f"starts again on the next {START_COMMANDS}, after the last phase it finished"
        elif w.build:
            fate = f"starts again from its first step on the next {START_COMMANDS}"
        else:
            fate = f"starts on the next {START_COMMANDS}"
        say(f"{w.label} {'stops with the worker' if w.build else 'stays queued'}; it {fate}")
    if work:
        say(f"to cancel {'it' if len(work) == 1 else 'them'} instead: {cancel_hint}")


def cancel_all(api, reason, out=print, timeout=CANCEL_TIMEOUT):
    """Stop every running build and cancel every queued build request (Buildbot's `stop` and `cancel`
    actions, as an admin); return when the master has completed them all."""
    deadline, asked = time.monotonic() + timeout, {}
    while True:
        work = active_work(api)
        if not work:
            out(f"cancelled {len(asked)} build request{'' if len(asked) == 1 else 's'}: none is left to start again"
                if asked else "nothing to cancel: no build is running or queued")
            return
        now = time.monotonic()
        if now >= deadline:
            raise LocalError(f"not cancelled within {timeout:g} s: {'; '.join(w.label for w in work)}; "
                             f"the master and the worker keep running: {api.url}")
        for w in work:
            brid = w.request["buildrequestid"]
            if now - asked.get(brid, -CANCEL_ASK_AGAIN) < CANCEL_ASK_AGAIN:
                continue
            if brid not in asked:
                out(f"cancelling {w.label}")
            if w.build:
                api.control(f"builds/{w.build['buildid']}", "stop", reason=reason)
            else:
                # A claimed request whose build has not started yet: Buildbot stops that build as it starts.
                api.control(f"buildrequests/{brid}", "cancel", reason=reason)
            asked[brid] = now
        time.sleep(1)


# --- the command ------------------------------------------------------------------

def cmd_up(args):
    runtime = Runtime(args.runtime)
    setup(runtime)
    settings, api = start(runtime)
    say(f"master and worker are running; web UI: {settings.url}" if local_worker(settings) else
        f"master is running (its workers are started for each build); web UI: {settings.url}")
    say(f"admin user: {next(iter(settings.admins))} (password in {runtime.settings_file})")
    # What an earlier ./release stop left running or queued goes on now: said, not silent.
    work = [w for w in active_work(api) if w.parent_buildid is None]
    for w in work:
        say(f"{w.label} {'runs' if w.build else 'is queued'}")
    if work:
        say(f"to cancel {'it' if len(work) == 1 else 'them'}: {with_runtime(CANCEL_COMMAND, args)}")
    say("stop them with: " + with_runtime("./release stop", args))


def with_runtime(command, args):
    return command + (f" --runtime {shlex.quote(args.runtime)}" if args.runtime else "")


def cmd_stop(args):
    runtime = Runtime(args.runtime)
    if args.cancel:
        cancel_releases(runtime)
    elif running_pid(runtime.master):
        settings = runtime.settings()
        try:
            say_what_resumes(Api(settings.url), settings.max_lost_workers, with_runtime(CANCEL_COMMAND, args))
        except ApiError as e:
            # The master is stopped all the same: that is what was asked.
            say(f"cannot tell which releases start again on the next start: {e}")
    stop(runtime)


def cancel_releases(runtime):
    """Cancel every running and queued build of runtime's master, which is started alone (no worker to
    claim a request) when it is not running, and stopped again if the cancel fails."""
    if not (runtime.master / "buildbot.tac").is_file():
        raise LocalError(f"--cancel: no master in {runtime.master}, so nothing to cancel")
    settings = runtime.settings()
    started_here = not running_pid(runtime.master)
    if started_here:
        say("the master is not running: starting it alone to cancel what it would start again")
        start_master(runtime)
    try:
        api = Api(settings.url)
        user = login_as_admin(settings, api)
        cancel_all(api, f"{CANCEL_COMMAND} as {user}", out=say)
    except BaseException:
        if started_here:
            stop(runtime)
        raise


def cmd_run(args):
    runtime = Runtime(args.runtime)
    # Which platforms, or why none, before anything is started: the master checks the same again.
    platforms, left_out = release_platforms(write_settings(runtime), args.config, args.source, args.platform or ())
    for row, why in left_out:
        say(f"leaving out platform {row.name}: {why}")
    setup(runtime)
    settings, api = start(runtime)
    user = login_as_admin(settings, api)
    before = newest_build_id(api)
    names = [p.name for p in platforms]
    bsid = force_release(api, args.version, args.config, args.source, args.formats.split(","), args.benchmark,
                         args.profile, args.tests, platforms=names, baseline=args.baseline)
    on = ", ".join(p.name if p.name == p.platform else f"{p.name} ({p.platform})" for p in platforms)
    say(f"release {args.version} ({args.config}) on {on} forced as {user}; web UI: {settings.url}")
    if args.version == LATEST:
        say(resolution(api, bsid))
    owners = {}
    try:
        results = follow(api, bsid, before, out=say, give_up_after=settings.worker_wait_minutes * 60,
                         cancel_hint=with_runtime(CANCEL_COMMAND, args), owners=owners,
                         hosts={w.name: w.build_host for w in settings.workers}, latent=latent_workers(settings))
    except KeyboardInterrupt:
        say(f"\nstopped following; the release goes on: {settings.url}")
        return 130
    except ApiError as e:
        if not running_pid(runtime.master):
            # ./release stop in another terminal: the release is kept for the next start, or was cancelled.
            raise LocalError(f"the master stopped: release {args.version} starts again on the next {START_COMMANDS}, "
                             f"unless {with_runtime(CANCEL_COMMAND, args)} cancelled it") from None
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
    for label, step, reason in failure_reasons(api, before, only={b for b, ours in owners.items() if ours}):
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
    run.add_argument("--baseline", choices=("auto", "plain", "distribution"), default="auto",
                     help="what the benchmark compares with (auto: the distribution's own packages of the version, "
                     "when the configuration builds as the distribution does and its archive serves them; else "
                     "the plain build)")
    run.add_argument("--platform", action="append", metavar="NAME",
                     help="release on this platform only (pgo/platforms.toml, or a [[platforms]] name of the "
                     "settings; again for more); default: every platform of the settings whose workers can build "
                     "the source")
    run.add_argument("--tests", choices=test_set_names(), default=DEFAULT_TEST_SET,
                     help="the test set run on the optimised and the plain build before the verdict "
                     "(default: %(default)s)")
    run.set_defaults(func=cmd_run)
    sub.add_parser("up", parents=[common], help="only set up and start the master and the local worker"
                   ).set_defaults(func=cmd_up)
    stopping = sub.add_parser("stop", parents=[common], help="stop the master and the worker; a running or "
                              "queued release starts again on the next start")
    stopping.add_argument("--cancel", action="store_true", help="first cancel every running and queued "
                          "release (as the admin; the master is started alone for it when it is not running)")
    stopping.set_defaults(func=cmd_stop)
    return parser


def pinned_buildbot():
    for line in REQUIREMENTS.read_text().splitlines():
        if line.lower().startswith("buildbot=="):
            return line.split("==", 1)[1].strip()
    raise LocalError(f"{REQUIREMENTS} pins no buildbot version")


# What the master imports beyond Buildbot itself: its web UI's plugins (buildmaster/config.py), Markdown.
MASTER_DISTRIBUTIONS = ("buildbot", "buildbot-www", "buildbot-grid-view", "buildbot-console-view",
                        "buildbot-waterfall-view", "buildbot-wsgi-dashboards", "Flask", "Markdown")


def missing_distributions():
    """The master's distributions this Python lacks, or has in another version than requirements/master.txt
    pins."""
    pins = dict(line.split("#", 1)[0].strip().lower().split("==", 1) for line in REQUIREMENTS.read_text().splitlines()
                if "==" in line.split("#", 1)[0])
    missing = []
    for name in MASTER_DISTRIBUTIONS:
        try:
            if importlib.metadata.version(name) != pins[name.lower()]:
                missing.append(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(name)
    return missing


def ensure_buildbot(runtime, argv):
    """Re-run in run/venv, with the pinned Buildbot and its plugins installed, unless this Python has them;
    a run/venv made before a pin changed is brought up to date."""
    if not missing_distributions():
        return
    venv = runtime.root / "venv"
    python = venv / "bin" / "python3"
    if Path(sys.executable).resolve() == python.resolve():
        raise LocalError(f"{venv} lacks {', '.join(missing_distributions())} as {REQUIREMENTS.name} pins them: "
                         "remove it and run again")
    if not python.is_file() or process.run([python, "-c", "import sys, launcher.local as l; "
                                            "sys.exit(bool(l.missing_distributions()))"], cwd=REPO).returncode != 0:
        say(f"installing Buildbot {pinned_buildbot()} and the master's plugins into {venv}")
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
    except PipelineError as e:
        # LocalError, SettingsError, ApiError, and the platform and configuration checks: one line each.
        return fail("release", e)
    except OSError as e:
        return fail("release", f"cannot talk to the master: {e}")
