"""`pgo build-deps`: install Debian's build dependencies of each product line the configurations build.

Without a library, MariaDB's CMake silently builds less (OQGraph without Boost and Judy, GSSAPI
without Kerberos, the lz4/lzo/snappy providers, CONNECT's ODBC, NUMA: docs/plan-issue29.md
finding 5), and Debian's debian/ then cannot package the tree. Debian's source package names
what its build needs: `Build-Depends` (and `Build-Depends-Arch`) of the version its suite serves,
read with `apt-cache showsrc` from the pipeline's deb-src entry for that suite (pgo/build/source.py,
added here as the source phase adds it). `apt-get satisfy` installs them with Debian's own
semantics (alternatives, versions, [arch] and <profile> restrictions). A line from another
suite (11.8 from trixie, built on bookworm) may name a version this machine's archive does
not have (trixie's dpkg-dev): that relation is reported and left out, the rest installed.
"""

import os

from pgo import PipelineError
from pgo.base import process
from pgo.base.runner import say
from pgo.base.versions import version_key
from pgo.build import source
from pgo.core.config import build_config, config_names, load

FIELDS = ("Build-Depends", "Build-Depends-Arch")


def product_lines(data=None):
    """{(Debian source package, line, suite)} of every configuration whose product has a Debian source."""
    data = data or load()
    found = set()
    for name in config_names(data):
        config = build_config(name, data)
        if config.product.debian_source and config.line:
            found.add((config.product.debian_source, config.line, config.debian_suite))
    return sorted(found)


def relations(paragraph):
    """The build relations of a source paragraph, one per comma-separated item."""
    text = ", ".join(paragraph[field] for field in FIELDS if paragraph.get(field))
    return [item.strip() for item in text.split(",") if item.strip()]


def newest_of_line(paragraphs, line):
    """The source paragraph of the newest Debian version of an upstream release of `line`."""
    chosen = [p for p in paragraphs if source.of_line([p["Version"]], line)]
    if not chosen:
        return None
    return max(chosen, key=lambda p: version_key(source.release_of(p["Version"])) + (p["Version"],))


def satisfiable(relation):
    """Whether apt could install what satisfies a relation (a simulation, no root needed)."""
    return process.run(["apt-get", "satisfy", "-s", "-q", relation]).returncode == 0


def plan(package, line, suite, add_entry=True):
    """(Debian version, relations this machine can satisfy, relations it cannot) for one line."""
    if add_entry:
        source.ensure_deb_src(suite)
    text = process.output_of(["apt-cache", "showsrc", package])
    paragraph = newest_of_line(source.control_paragraphs(text), line)
    if paragraph is None:
        raise PipelineError(f"apt knows no {package} source of line {line} (suite {suite}): "
                            "is the deb-src entry there (pgo/build/source.py)?")
    wanted = relations(paragraph)
    if satisfiable(", ".join(wanted)):
        return paragraph["Version"], wanted, []
    good = [r for r in wanted if satisfiable(r)]
    return paragraph["Version"], good, [r for r in wanted if r not in good]


def install(dry_run=False):
    """Install the build dependencies of every product line; fail for what this machine's own suite
    cannot satisfy."""
    host = source.host_suite()
    own_problems = []
    for package, line, suite in product_lines():
        version, good, bad = plan(package, line, suite, add_entry=not dry_run or os.geteuid() == 0)
        state = f"{len(good)} of {len(good) + len(bad)} build relations installable"
        say(f"[build-deps] {package} {line} ({suite or host}, {version}): {state}"
            + (f"; not on this machine: {'; '.join(bad)}" if bad else ""))
        if bad and suite in (None, host):
            own_problems.append(f"{package} {line}: {'; '.join(bad)}")
        if not dry_run and good:
            done = process.run(["apt-get", "satisfy", "-y", "-q", "--no-install-recommends",
                                "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
                                ", ".join(good)], env={"DEBIAN_FRONTEND": "noninteractive"})
            if done.returncode != 0:
                raise PipelineError(f"apt-get satisfy of {package} {line}'s build dependencies failed: "
                                    f"{(done.stdout + done.stderr).strip().splitlines()[-1:]}")
    if own_problems:
        raise PipelineError(f"this machine's archive cannot satisfy Debian's build dependencies of "
                            f"{'; and of '.join(own_problems)}")


def register(subparsers):
    command = subparsers.add_parser(
        "build-deps", help="install Debian's build dependencies (Build-Depends) of each product line the "
        "configurations build (as root; tools/install-deps.sh build runs it)")
    command.add_argument("--dry-run", action="store_true", help="only say what would be installed")
    command.set_defaults(func=lambda args: install(args.dry_run))
