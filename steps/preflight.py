"""Before a release starts: refuse one that is already published, or whose version its source lacks.

Either would otherwise end an hour of building in a red build. The master checks
what it can see: the download folders, and the source's versions through
pgo.source.check_available (Debian's archive, a directory of the repository);
the source phase on the worker still checks every source.
"""

from pgo import PipelineError
from pgo.config import build_config
from pgo.source import check_available
from steps import publish


def refusal(settings, platforms, version, config, source):
    """Why the release of version on platforms must not start, in one line; None when it may."""
    for platform in platforms:
        published = publish.release_dir(settings.downloads, version, platform.name)
        if published.exists():
            return f"{version} is already published for {platform.name} ({published}); a release is never replaced"
    try:
        check_available(source, version, build_config(config), base=settings.repo_on_worker)
    except PipelineError as e:
        return str(e)
    return None
