"""What every package format shares: the recipes in packaging/, the marks in a package's version, the
texts a package carries, and the packaging tools' runner.

The formats' modules (formats/), what they share (checked.py, trees.py, proving.py), debpackages.py (the
hand-written .debs), debrules.py and piuparts.py all read these; none of them imports another for them.
"""

import textwrap

from pgo import REPO
from pgo.base import platforms
from pgo.base.process import output_of
from pgo.base.readers import read_toml

RECIPES = REPO / "packaging"
ELF_MAGIC = b"\x7fELF"
# After "+pgo" in the version of a build whose profile was trained on other source: '~' sorts it
# before the same release's build with a fresh profile (dpkg, rpm).
STALE_MARK = "~stale"
# Last in the version of a build whose binary BOLT rewrote and checked (pgo/build/bolt.py): 10.11.19+pgo+bolt
# sorts after 10.11.19+pgo (dpkg, rpm).
BOLT_MARK = "+bolt"


def load_toml(path, platform=None):
    """A recipe; with a platform (pgo/base/platforms.py), a deb recipe for that Debian release (for_platform)."""
    data = read_toml(path, "recipe")
    return for_platform(data, platform) if platform is not None else data


def for_platform(data, platform):
    """A deb recipe with its release's knowledge from the platform table, not written into the recipe: the
    changelog's distribution (the codename, unless the recipe names one) and Debian's version suffix in
    `distribution_version` ("1:{version}-0+{version_suffix}" -> "1:{version}-0+deb12u1")."""
    data = dict(data)
    data.setdefault("distribution", platform.codename)
    if "distribution_version" in data:
        data["distribution_version"] = data["distribution_version"].replace("{version_suffix}",
                                                                            platform.version_suffix)
    return data


def recipe(fmt, build, platform=None):
    """The product's recipe of format fmt; a deb recipe for `platform` (default: this machine's)."""
    path = RECIPES / fmt / f"{build.info['product']}.toml"
    if fmt != "deb":
        return load_toml(path)
    return load_toml(path, platform or platforms.host())


def run(cmd, cwd=None, env=None):
    """Run a packaging tool; its output only matters when it fails."""
    return output_of(cmd, cwd=cwd, env=env)


def unmet_set_requirements(rpms):
    """(rpm, requirement) for each requirement a package of an rpm set has on its own family (the
    first part of its name: MariaDB-common for MariaDB-backup) that no package of the set provides."""
    provided = {line.split()[0] for rpm in rpms for line in run(["rpm", "-qp", "--provides", rpm]).splitlines()}
    gaps = []
    for rpm in rpms:
        family = run(["rpm", "-qp", "--qf", "%{NAME}", rpm]).split("-")[0] + "-"
        gaps += [(rpm, r) for r in run(["rpm", "-qp", "--requires", rpm]).splitlines()
                 if r.startswith(family) and r.split()[0] not in provided]
    return gaps


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == ELF_MAGIC


def describe(text, build):
    bolted = " and laid out by BOLT from a profile of its server binary" if build.info.get("bolt") else ""
    mark = (f"This build is optimised with GCC profile-guided optimisation ({profile_named(build)}){bolted}."
            if build.label else "This is a plain build, without profile-guided optimisation.")
    return f"{text.strip()}\n\n{mark}"


def wrapped(text, width=79):
    return "\n\n".join(textwrap.fill(" ".join(p.split()), width) for p in text.split("\n\n"))


def profile_named(build):
    """'profile 1.0.0-abc', or for a stale one 'stale profile 1.0.0-abc, trained on 1.0.0 source 0123456789ab'."""
    trained_on = build.info["check"].get("trained_on")
    if not trained_on:
        return f"profile {build.info['profile_id']}"
    return (f"stale profile {build.info['profile_id']}, trained on {trained_on['version']} source "
            f"{trained_on['source_checksum'][:12]}")


def changelog_line(build):
    what = (profile_named(build) + (", BOLTed" if build.info.get("bolt") else "")) if build.label \
        else "no profile (plain build)"
    return (f"Built from {build.info['source']['origin']} with {build.info['compiler']['banner']}, "
            f"configuration {build.info['config']}, {what}.")
