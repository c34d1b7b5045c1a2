"""The download folder over HTTP, served by the master on its own port (downloads_port).

The publish step links each published package from the build page; the links
point here. What builds are still uploading (the hidden staging folder) is
neither listed nor served.
"""

from pathlib import Path

from buildbot.util import service
from twisted.application import strports
from twisted.internet import defer, threads
from twisted.web import resource, server, static

from buildmaster import publish


class PublishedFiles(static.File):
    """A folder's files and subfolders, without the hidden ones."""

    def getChild(self, path, request):
        if path.startswith(b"."):
            return resource.NoResource()
        return super().getChild(path, request)

    def listNames(self):
        return [name for name in super().listNames() if not name.startswith(".")]


class DownloadsServer(service.BuildbotService):
    name = "downloads"

    def checkConfig(self, folder, port, interface):
        pass

    @defer.inlineCallbacks
    def reconfigService(self, folder, port, interface):
        if getattr(self, "port_service", None):
            yield self.port_service.disownServiceParent()
        Path(folder).mkdir(parents=True, exist_ok=True)
        # The front page says what is published, or that nothing is yet, from the start.
        yield threads.deferToThread(publish.write_downloads_index, folder)
        self.port_service = strports.service(f"tcp:{port}:interface={interface}", server.Site(PublishedFiles(folder)))
        yield self.port_service.setServiceParent(self)


def download_url(downloads, downloads_url, path):
    """The URL of path, a file or folder in the downloads folder served at downloads_url."""
    return downloads_url + "/".join(Path(path).relative_to(downloads).parts)
