"""The release dashboard: where the releases stand, on one page of the web UI (Buildbot's WSGI dashboards plugin).

Per product line (the build's configuration) and platform, the latest release and the latest nightly: version,
state (releasable, running at which step, or the step that refused it and why), the gate's speedup with its
interval, the test counts and the failures of the optimised build alone, the profile and how much of it was
used, and the published packages. Below, the history of every release and nightly build. A badge per line
and platform (`badge/<config>/<platform>.svg`) shows the latest release's state anywhere an image goes.

The page reads the master's own data (Buildbot's data API: builds, their steps and properties), never a
summary's text: the steps keep what the page shows of their records (pgo/base/protocol.py) as build properties,
through buildmaster/kept.py.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from buildbot.data import resultspec
from buildbot.process.results import CANCELLED, EXCEPTION, FAILURE, RETRY, SKIPPED, SUCCESS, WARNINGS
from flask import Flask, Response, abort, render_template, request

from buildmaster.publish import REPORT_PAGE

DASHBOARD = "releases"   # its page: <web UI>/plugins/wsgi_dashboards/releases/index.html, menu entry "Releases"
TEMPLATES = "templates"
HISTORY = 60            # builds in the history table
PER_BUILDER = 40        # the newest builds of each builder read for the latest per product line


STATES = {SUCCESS: "success", WARNINGS: "warnings", FAILURE: "failure", SKIPPED: "skipped",
          EXCEPTION: "exception", RETRY: "retry", CANCELLED: "cancelled"}


@dataclass
class Row:
    """One build as the dashboard shows it."""

    kind: str                     # release or nightly
    builder: str
    platform: str
    buildid: int
    number: int
    url: str
    started: datetime          # the data API's (a REST client gets epoch seconds)
    version: str = "?"
    config: str = "?"
    state: str = "running"        # releasable, running, refused, cancelled, retry
    reason: str = ""
    properties: dict[str, Any] = field(default_factory=dict)

    @property
    def started_text(self) -> str:
        return self.started.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")

    def prop(self, name: str, default: Any = None) -> Any:
        return self.properties.get(name, default)

    @property
    def report(self) -> str | None:
        """The published benchmark report's address, when the release published one."""
        published = self.prop("published_url")
        return f"{published}{REPORT_PAGE}" if published and self.prop("gate") else None

    @property
    def packages(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for name in self.prop("packages") or []:
            folder = name.split("/", 1)[0]
            counts[folder] = counts.get(folder, 0) + 1
        return counts


# A builder's tags (buildmaster/builders.py): its kind, then its platform.
SHOWN_KINDS = ("release", "nightly")


def builder_kind(tags: list[str]) -> tuple[str, str] | None:
    """(kind, platform) of a release or nightly builder, from its tags; None for the package builders."""
    if len(tags) >= 2 and tags[0] in SHOWN_KINDS:
        return tags[0], tags[1]
    return None


def tests_page(ui_url: str, buildid: int) -> str:
    """The address of a build's test results page."""
    return f"{ui_url}plugins/wsgi_dashboards/{DASHBOARD}/builds/{buildid}/tests.html"


def build_state(build: Mapping[str, Any], steps: list[Mapping[str, Any]]) -> tuple[str, str]:
    """(state, why): releasable, running (at which step), or refused (the step that failed, its summary)."""
    if not build["complete"]:
        current = next((s for s in reversed(steps) if s["started_at"] and not s["complete"]), None)
        return "running", current["state_string"] if current else "waiting"
    results = build["results"]
    if results in (SUCCESS, WARNINGS):
        return "releasable", "published" if results == SUCCESS else "published, with warnings"
    if results in (CANCELLED, RETRY):
        return STATES[results], build["state_string"]
    failed = next((s for s in steps if s["results"] in (FAILURE, EXCEPTION) and not s["hidden"]), None)
    return "refused", failed["state_string"] if failed else build["state_string"]


def properties_of(get: Callable[..., Any], buildid: int) -> dict[str, Any]:
    """A build's properties, their values only (the data API pairs each with its source)."""
    return {name: value for name, (value, _source) in get(("builds", buildid, "properties")).items()}


def read_rows(get: Callable[..., Any], ui_url: str, kind: str | None = None,
              platform: str | None = None) -> list[Row]:
    """Every release and nightly build (or only kind's, of platform's builders) of the newest PER_BUILDER per
    builder, newest first: get is the data API's (the WSGI plugin's dataGet)."""
    rows = []
    for builder in get("builders"):
        tagged = builder_kind(builder["tags"])
        if tagged is None or kind not in (None, tagged[0]) or platform not in (None, tagged[1]):
            continue
        for build in get(("builders", builder["builderid"], "builds"), order=("-number",), limit=PER_BUILDER):
            properties = properties_of(get, build["buildid"])
            steps = get(("builds", build["buildid"], "steps"))
            state, reason = build_state(build, steps)
            rows.append(Row(kind=tagged[0], builder=builder["name"], platform=tagged[1], buildid=build["buildid"],
                            number=build["number"],
                            url=f"{ui_url}#/builders/{builder['builderid']}/builds/{build['number']}",
                            started=build["started_at"], version=str(properties.get("version", "?")),
                            config=str(properties.get("config", "?")), state=state, reason=reason,
                            properties=properties))
    return sorted(rows, key=lambda r: r.started, reverse=True)


@dataclass
class Line:
    """A product line on one platform: its latest release (whatever became of it), the latest one published,
    and the latest nightly."""

    platform: str
    release: Row | None = None
    published: Row | None = None
    nightly: Row | None = None


def latest(rows: list[Row]) -> dict[str, list[Line]]:
    """Per product line (configuration), per platform, its Line."""
    found: dict[str, dict[str, Line]] = {}
    for row in rows:              # newest first: the first seen is the latest
        line = found.setdefault(row.config, {}).setdefault(row.platform, Line(row.platform))
        if row.kind == "nightly":
            line.nightly = line.nightly or row
        else:
            line.release = line.release or row
            if row.state == "releasable":
                line.published = line.published or row
    return {config: [platforms[name] for name in sorted(platforms)] for config, platforms in sorted(found.items())}


BADGE_COLOURS = {"releasable": "#4c1", "running": "#dfb317", "refused": "#e05d44"}


def badge(label: str, text: str, state: str) -> str:
    """A shields-style SVG badge: label on grey, text on the state's colour."""
    left, right = 7 * len(label) + 10, 7 * len(text) + 10
    colour = BADGE_COLOURS.get(state, "#9f9f9f")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + right}" height="20" role="img" '
            f'aria-label="{label}: {text}"><rect width="{left}" height="20" fill="#555"/>'
            f'<rect x="{left}" width="{right}" height="20" fill="{colour}"/>'
            '<g fill="#fff" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
            f'<text x="5" y="14">{escape(label)}</text><text x="{left + 5}" y="14">{escape(text)}</text></g></svg>')


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def make_app(title: str, ui_url: str) -> Flask:
    """The dashboard's WSGI application; the plugin gives it buildbot_api (the master's data API) at start."""
    app = Flask("pgo_dashboard", template_folder=str(Path(__file__).parent / TEMPLATES))

    @app.route("/index.html")
    def index():
        every = read_rows(app.buildbot_api.dataGet, ui_url)
        return render_template("dashboard.html", title=title, lines=latest(every), history=every[:HISTORY],
                               total=len(every), base=f"{ui_url}plugins/wsgi_dashboards/{DASHBOARD}/")

    @app.route("/badge/<config>/<platform>.svg")
    def platform_badge(config, platform):
        # Only the release builders of that platform are read: a badge is fetched wherever it is shown.
        release = next((r for r in read_rows(app.buildbot_api.dataGet, ui_url, "release", platform)
                        if r.config == config), None)
        if release is None:
            abort(404)
        text = f"{release.version} {release.state}"
        return Response(badge(f"{config} {platform}", text, release.state), mimetype="image/svg+xml",
                        headers={"Cache-Control": "no-cache"})

    @app.route("/builds/<int:buildid>/tests.html")
    def build_tests(buildid):
        return render_template("tests.html", title=title, build=build_tests_view(app.buildbot_api.dataGet, buildid),
                               ui_url=ui_url)

    @app.route("/builders/<int:builderid>/history.html")
    def test_history(builderid):
        test = request.args.get("test", "")
        if not test:
            abort(400)
        return render_template("history.html", title=title, test=test, ui_url=ui_url,
                               **history_view(app.buildbot_api.dataGet, builderid, test))

    return app


@dataclass
class ResultSet:
    """One test run's results in Buildbot's store (buildsteps.RecordTestResults): failed tests first."""

    description: str
    passed: int
    failed: int
    tests: list[tuple[str, bool]]


def build_tests_view(get: Callable[..., Any], buildid: int) -> dict[str, Any]:
    """A build's test runs, each test's outcome, and the failures of the optimised build alone."""
    build = get(("builds", buildid))
    if build is None:
        abort(404)
    builder = get(("builders", build["builderid"]))
    properties = properties_of(get, buildid)
    sets = []
    for found in get(("builds", buildid, "test_result_sets")):
        results = get(("test_result_sets", found["test_result_setid"], "results"))
        tests = sorted(((r["test_name"], r["value"] == "1") for r in results), key=lambda t: (t[1], t[0]))
        sets.append(ResultSet(found["description"], found["tests_passed"] or 0, found["tests_failed"] or 0, tests))
    verdict = properties.get("test_verdict") or {}
    return {"buildid": buildid, "number": build["number"], "builder": builder["name"],
            "builderid": build["builderid"], "version": properties.get("version", "?"), "sets": sets,
            "pgo_only": verdict.get("pgo_only", []), "flaky": (properties.get("test_counts") or {}).get("flaky", [])}


def history_view(get: Callable[..., Any], builderid: int, test: str) -> dict[str, Any]:
    """One test's outcome in every build of a builder that recorded it, newest first: a flaky test shows."""
    builder = get(("builders", builderid))
    if builder is None:
        abort(404)
    runs = []
    for found in sorted(get(("builders", builderid, "test_result_sets")), key=lambda f: f["buildid"], reverse=True):
        results = get(("test_result_sets", found["test_result_setid"], "results"),
                      filters=[resultspec.Filter("test_name", "eq", [test])])
        if results:
            build = get(("builds", found["buildid"]))
            version = properties_of(get, found["buildid"]).get("version", "?")
            runs.append({"number": build["number"], "buildid": found["buildid"], "version": version,
                         "set": found["description"], "passed": results[0]["value"] == "1"})
    return {"builder": builder["name"], "builderid": builderid, "runs": runs,
            "failed": sum(1 for r in runs if not r["passed"])}
