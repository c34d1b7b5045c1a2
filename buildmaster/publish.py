"""Publishing on the master: a staging folder becomes a download folder in one rename.

A build uploads everything into a staging folder next to the downloads (same
file system, so the rename is atomic: pgo/base/atomic.py reveal), and only its last step publishes:
readers see a complete folder with its sha256sums.txt or no folder at all.
Nothing published is ever replaced.
"""

import html
import json
import os
import shutil
import time
from pathlib import Path

import markdown

from pgo import PipelineError
from pgo.base import atomic, formats, lines, protocol
from pgo.base.checksums import SUMS, sha256_file, write_sha256sums
from pgo.base.readers import read_json

STAGING = ".incoming"
INDEX = "index.html"          # the downloads server (Twisted's static.File) shows it for its folder
REPORT, REPORT_PAGE = "benchmark/report.md", "benchmark/report.html"
LISTING = "releases.json"     # the front page's list, for scripts
PAGE_STYLE = ("body{font-family:system-ui,sans-serif;font-size:14px;margin:1em 2em;color:#222}"
              "table{border-collapse:collapse}th,td{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}"
              "th{background:#f4f4f4}code{font-size:12px}img{max-width:100%}")
# What a published folder's records say, each through the line the build page shows (pgo/base/lines.py).
RECORD_LINES = (("profile check", "profile-check.json", lines.profile_check_summary),
                ("profile use", "profile-use.json", lines.profile_use_summary),
                ("benchmark baseline", protocol.BASELINE_RECORD, lines.baseline_summary),
                ("benchmark gate", "benchmark/result.json", lines.bench_verdict_summary),
                ("tests, optimised build", "tests/pgo/results.json", lines.test_result_summary),
                ("tests, plain build", "tests/plain/results.json", lines.test_result_summary))


class PublishError(PipelineError):
    pass


def staging_dir(downloads: str | os.PathLike, build_name: str) -> Path:
    return Path(downloads) / STAGING / build_name


def release_dir(downloads: str | os.PathLike, version: str, platform: str) -> Path:
    """Where a release of version built for platform is published."""
    return Path(downloads) / version / platform


def publish(staging: str | os.PathLike, destination: str | os.PathLike) -> int:
    """Checksum staging and rename it to destination; returns the number of files published."""
    staging, destination = Path(staging), Path(destination)
    if destination.exists():
        raise PublishError(f"{destination} is already published; a release is never replaced")
    if not staging.is_dir() or not any(p.is_file() for p in staging.rglob("*")):
        raise PublishError(f"nothing to publish: the build uploaded no files into {staging}")
    # The packages are hashed once, for their rows on the folder's page and for sha256sums.txt.
    digests = {name: sha256_file(staging / name) for name in packages(staging)}
    write_report(staging)
    write_index(staging, destination, digests)
    count = write_sha256sums(staging, known=digests)
    try:
        atomic.reveal(staging, destination)
    except FileExistsError:
        raise PublishError(f"{destination} is already published; a release is never replaced") from None
    return count


def record(folder, name):
    """A published record's data; None when the build did not write it, or it cannot be read."""
    try:
        return read_json(Path(folder) / name, name)
    except PipelineError:
        return None


def write_index(folder, destination, digests):
    """The folder's index.html: what was built (from build-info.json), its records' lines, the benchmark's
    plots and report, and every package with its size and sha256 (digests: {package: sha256})."""
    folder = Path(folder)
    info = record(folder, "build-info.json") or {}
    label = "PGO" if info.get("pgo") == "on" else "plain"
    title = f"{info.get('product', '?')} {info.get('version', '?')} ({label}) for {Path(destination).name}"
    rows = [("configuration", info.get("config")), ("profile", info.get("profile_id")),
            ("compiler", (info.get("compiler") or {}).get("banner")),
            ("flags fingerprint", info.get("flags_fingerprint"))]
    for what, name, line in RECORD_LINES:
        data = record(folder, name)
        if data is not None:
            try:
                rows.append((what, line(data)))
            except (KeyError, TypeError, ValueError):
                rows.append((what, f"unreadable {name}"))
    e = html.escape
    parts = [page_head(title), f"<h1>{e(title)}</h1>", "<table>"]
    parts += [f"<tr><th align=\"left\">{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in rows if v]
    parts.append("</table>")
    plots = sorted(p.name for p in (folder / "benchmark").glob("*.png"))
    if plots or (folder / REPORT_PAGE).is_file():
        parts.append("<h2>Benchmark</h2>")
        if (folder / REPORT_PAGE).is_file():
            parts.append(f'<p><a href="{REPORT_PAGE}">the benchmark\'s report</a> (every workload and '
                         "concurrency, the pairs, the machine)</p>")
        parts += [f'<img src="benchmark/{e(name)}" alt="{e(name)}" width="640">' for name in plots]
    parts += ["<h2>Packages</h2>", "<table><tr><th>file</th><th>bytes</th><th>sha256</th></tr>"]
    for name, digest in digests.items():
        parts.append(f'<tr><td><a href="{e(name)}">{e(name)}</a></td><td align="right">'
                     f"{(folder / name).stat().st_size:,}</td><td><code>{digest}</code></td></tr>")
    parts.append("</table>")
    # sha256sums.txt is written after this page, over it too.
    links = [*test_reports(folder), *(n for n in ("build-info.json", "profile-archive/") if (folder / n).exists()),
             SUMS]
    parts.append("<h2>Records</h2><ul>" + "".join(f'<li><a href="{e(n)}">{e(n)}</a></li>' for n in links) + "</ul>")
    parts.append("</body></html>\n")
    atomic.write(folder / INDEX, "\n".join(parts).encode())


def page_head(title):
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{PAGE_STYLE}</style></head><body>")


def write_report(folder):
    """The benchmark's report (Markdown, pgo/bench) as an HTML page beside it; the plots it shows are beside
    both."""
    folder = Path(folder)
    if not (folder / REPORT).is_file():
        return
    body = markdown.markdown((folder / REPORT).read_text(errors="replace"), extensions=["tables"])
    atomic.write(folder / REPORT_PAGE, f"{page_head('Benchmark report')}{body}</body></html>\n".encode())


def published_folders(downloads):
    """Every published release and nightly folder (with its index page), newest first, with what it is."""
    downloads = Path(downloads)
    found = []
    for folder in sorted((p for p in downloads.glob("*/*") if (p / INDEX).is_file()),
                         key=lambda p: p.stat().st_mtime, reverse=True):
        info = record(folder, "build-info.json") or {}
        found.append({"path": str(folder.relative_to(downloads)), "product": info.get("product"),
                      "version": info.get("version"), "config": info.get("config"),
                      "pgo": info.get("pgo") == "on", "profile": info.get("profile_id"),
                      "packages": len(packages(folder)),
                      "published": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(folder.stat().st_mtime))})
    return found


def write_downloads_index(downloads, title="PGO releases"):
    """The downloads site's front page (and its list as JSON): every published release and nightly, newest
    first, or that nothing is published yet."""
    downloads = Path(downloads)
    found = published_folders(downloads)
    e = html.escape
    rows = "".join(f'<tr><td><a href="{e(f["path"])}/">{e(f["path"])}</a></td><td>{e(str(f["product"]))}</td>'
                   f'<td>{e(str(f["config"]))}</td><td>{"PGO" if f["pgo"] else "plain"}</td>'
                   f'<td><code>{e(str(f["profile"] or ""))}</code></td><td>{f["packages"]}</td>'
                   f'<td>{f["published"]}</td></tr>' for f in found)
    listing = ("<table><tr><th>release</th><th>product</th><th>configuration</th><th>build</th><th>profile</th>"
               f"<th>packages</th><th>published</th></tr>{rows}</table>" if found else
               "<p>Nothing is published yet: a release appears here when its last step publishes it.</p>")
    atomic.write(downloads / LISTING, (json.dumps(found, indent=1) + "\n").encode())
    atomic.write(downloads / INDEX, (
        f"{page_head(title)}<h1>{e(title)}</h1><p>Packages built with GCC profile-guided optimisation, each "
        "release in its folder: the packages with their sha256, the profile it was built with, its tests and "
        f'benchmark. <a href="{LISTING}">{LISTING}</a> lists them for scripts.</p>{listing}</body></html>\n'
    ).encode())


def packages(folder: str | os.PathLike) -> list[str]:
    """The packages of a published folder (in its format folders), as relative paths."""
    folder = Path(folder)
    return sorted(str(path.relative_to(folder)) for path in folder.glob("*/*")
                  if path.is_file() and path.name.endswith(formats.PACKAGE_SUFFIXES))


def test_reports(folder: str | os.PathLike) -> list[str]:
    """The JUnit files of a published folder's test runs (tests/<build>/junit.xml), as relative paths."""
    folder = Path(folder)
    return sorted(str(path.relative_to(folder)) for path in folder.glob("tests/*/junit.xml") if path.is_file())


def nightly_name(version: str, build_number: object, now: float | None = None) -> str:
    """Names sort by time, so the oldest nightly comes first."""
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now))}-{version}-b{build_number}"


def prune_nightlies(folder: str | os.PathLike, keep: int) -> list[str]:
    """Delete all but the newest `keep` nightly folders; returns the names deleted."""
    folder = Path(folder)
    nightlies = sorted(p for p in folder.iterdir() if p.is_dir() and (p / SUMS).is_file())
    doomed = nightlies[:max(len(nightlies) - keep, 0)]
    for path in doomed:
        shutil.rmtree(path)
    return [p.name for p in doomed]


def discard(staging: str | os.PathLike) -> None:
    shutil.rmtree(staging, ignore_errors=True)
