"""Before a release starts: say which version 'latest' is, and refuse a release that is already
published, or whose version its source lacks.

Either would otherwise end an hour of building in a red build. The master checks
what it can see: the download folders, and the source's versions through
pgo.source (Debian's archive as the master's apt knows it, a directory of the
repository); the worker's `version` step resolves a 'latest' the master could not,
and its source phase still checks every source.
"""

from buildmaster import publish
from pgo import PipelineError
from pgo.config import build_config
from pgo.source import check_available, resolve_version
from pgo.versions import LATEST


def resolve(settings, version, config, source):
    """(version, how): 'latest' as this master sees it (how: None when it cannot tell, so the
    worker resolves it), any other version as it is."""
    if version != LATEST:
        return version, None
    found = resolve_version(LATEST, source, build_config(config), base=settings.repo_on_worker, on_worker=False)
    return found if found else (LATEST, None)


def refusal(settings, platforms, version, config, source):
    """Why the release of version on platforms must not start, in one line; None when it may."""
    if version == LATEST:
        return None
    for platform in platforms:
        published = publish.release_dir(settings.downloads, version, platform.name)
        if published.exists():
            return f"{version} is already published for {platform.name} ({published}); a release is never replaced"
    try:
        check_available(source, version, build_config(config), base=settings.repo_on_worker)
    except PipelineError as e:
        return str(e)
    return None
