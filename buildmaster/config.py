"""BuildmasterConfig assembled from the settings: the one function master.cfg calls."""

from buildbot.plugins import util

from buildmaster.builders import make_builders
from buildmaster.dashboard import DASHBOARD, make_app
from buildmaster.downloads import DownloadsServer
from buildmaster.schedulers import make_schedulers
from buildmaster.workers import make_workers


def web_ui(settings):
    """Anyone may look; only an authenticated admin may force, stop, rebuild or cancel."""
    admins = sorted(settings.admins)
    return {
        "port": f"tcp:{settings.web_port}:interface={settings.listen}",
        # Buildbot's own views (requirements/master.txt pins them with the master), and the release
        # dashboard through its WSGI dashboards plugin (buildmaster/dashboard.py).
        "plugins": {"waterfall_view": {}, "console_view": {}, "grid_view": {},
                    "wsgi_dashboards": [{"name": DASHBOARD, "caption": "Releases", "order": 1, "icon": "rocket",
                                         "app": make_app(settings.title, settings.url)}]},
        "auth": util.UserPasswordAuth(dict(settings.admins)),
        "authz": util.Authz(
            allowRules=[
                util.ForceBuildEndpointMatcher(role="admins"),
                util.StopBuildEndpointMatcher(role="admins"),
                util.RebuildBuildEndpointMatcher(role="admins"),
                util.AnyControlEndpointMatcher(role="admins"),
            ],
            roleMatchers=[util.RolesFromUsername(roles=["admins"], usernames=admins)],
        ),
        "change_hook_dialects": {},
        # A build's badge in the grid, console, waterfall and builder pages says its version (the release
        # form's, or the one 'latest' resolved to) beside its number, instead of the branch we never use.
        "ui_default_config": {"Links.build_link_template": "%(prop:version) (%(build_number))"},
    }


def buildmaster_config(settings):
    return {
        "title": settings.title,
        "titleURL": settings.url,
        "buildbotURL": settings.url,
        "buildbotNetUsageData": None,
        "db": {"db_url": settings.db_url},
        "protocols": {"pb": {"port": f"tcp:{settings.worker_port}:interface={settings.listen}"}},
        "workers": make_workers(settings),
        "builders": make_builders(settings),
        "schedulers": make_schedulers(settings),
        # Two releases forced one after the other differ only in properties;
        # merging their requests would silently drop a version.
        "collapseRequests": False,
        "www": web_ui(settings),
        "services": [DownloadsServer(folder=str(settings.downloads), port=settings.downloads_port,
                                     interface=settings.listen)],
    }
