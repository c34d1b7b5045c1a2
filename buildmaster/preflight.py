"""Before a release starts: say which version 'latest' is, which platforms it builds on, and refuse a
release that is already published, whose version its source lacks, or that names a platform which
cannot build it.

Either would otherwise end an hour of building in a red build. The master checks
what it can see: the download folders, and the source's versions through
pgo.build.source (Debian's archive as the master's apt knows it, a directory of the
repository); the worker's `version` step resolves a 'latest' the master could not,
and its source phase still checks every source.
"""

from buildmaster import publish
from pgo import PipelineError
from pgo.base import platforms
from pgo.base.versions import LATEST
from pgo.build.source import check_available, resolve_version
from pgo.core.config import build_config


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


def release_platforms(settings, config, source, chosen=(), offered=None):
    """The [[platforms]] rows a release of config from source builds on, and those the matrix leaves out.

    chosen: names of rows, or of platforms of pgo/platforms.toml (every row building for it); each must
    be able to build the release, or the first that cannot is refused in one line. Without it, the matrix:
    every row (of offered, default all) whose platform's workers fetch the source (Debian's source of a
    line comes from the release that ships it, pgo.base.platforms check_source); a row of the matrix that
    fetches it but has no build image is refused all the same: its settings name a platform that cannot
    build. Returns (rows, [(row, why it is left out)]); raises PipelineError.
    """
    table = platforms.load()
    offered = list(settings.platforms if offered is None else offered)
    line = build_config(config).line if source == "debian" else None
    if chosen:
        rows = []
        for name in chosen:
            rows += [r for r in named_rows(settings, table, name, line) if r not in rows]
        outside = [r for r in rows if r not in offered]
        if outside:
            raise PipelineError(f"platform {outside[0].name} is not one this release may build on "
                                f"(here: {', '.join(r.name for r in offered)})")
        for row in rows:
            able(row, table, line)
        return rows, []
    rows, left_out = [], []
    for row in offered:
        try:
            platforms.check_source(row.platform, line, table)
        except platforms.PlatformError as e:
            left_out.append((row, str(e)))
            continue
        able(row, table, line)
        rows.append(row)
    if not rows:
        raise PipelineError(f"no platform of the master settings can build {config} from {source}: "
                            + "; ".join(why for _, why in left_out))
    return rows, left_out


def named_rows(settings, table, name, line):
    """The rows `name` means: the row of that name, else every row building for platform `name`."""
    rows = [r for r in settings.platforms if r.name == name]
    if rows:
        return rows
    if name not in table:
        rows_named = ", ".join(r.name for r in settings.platforms if r.name not in table)
        raise PipelineError(f"unknown platform '{name}' (known: {', '.join(sorted(table))}"
                            + (f"; of the master settings: {rows_named})" if rows_named else ")"))
    # What no settings can change first: a platform that cannot build the release is refused as such,
    # not sent to the settings for a row that would not build it either.
    platforms.image(name, table)
    platforms.check_source(name, line, table)
    rows = [r for r in settings.platforms if r.platform == name]
    if not rows:
        where = settings.source_file or "the default settings"
        raise PipelineError(f"platform '{name}' is not in the master settings ({where}): no [[platforms]] "
                            f"entry builds for it (they build for {described(settings.platforms)})")
    return rows


def able(row, table, line):
    """Refuse, in one line, a row whose platform has no build image or cannot fetch Debian's source of line."""
    platforms.image(row.platform, table)
    platforms.check_source(row.platform, line, table)


def described(rows):
    return ", ".join(r.name if r.name == r.platform else f"{r.name}: {r.platform}" for r in rows)
