"""Debian's piuparts on a published deb set (`pgo prove --piuparts`): install, remove and purge; the
upgrade from the distribution's packages of the same names; apt's refusal to downgrade ours.

piuparts is the test Debian runs on every package of its archive (piuparts.debian.org). It unpacks
a base chroot, installs the set with apt, removes and purges it, and fails on a maintainer script
that fails, a file left behind after purge, a file of the base system changed or removed, a broken
symlink, a process left running. When the archive serves packages of the set's names, it then
installs those (the version the archive serves) and upgrades them to the set, and removes and purges
again. Its sources are `deb <mirror> <distribution> main` (and contrib, non-free): the release as
published with its point releases, no security suite. An older set given beside the archive
(`--upgrade-from`: an earlier release's published folder, or the distribution's own debs of an earlier
version, as its pool serves them) is served beside it, and the upgrade test starts from the newer of its
and the archive's versions older than ours: the archive's versions of the set's names newer than ours
are pinned away in the chroot (a point release the distribution moved on to, whose source is not
served, is no upgrade path to ours), and the proof names what it set aside.

MariaDB's maintainer scripts start the server: `--allow-database` lets them (piuparts' policy-rc.d
forbids every other daemon), and a server still running after the installation is a warning; one
still running after the purge fails. The custom scripts piuparts runs in its chroot
(packaging/piuparts/): after the install test installed the set, the distribution's older version
of it must be refused by apt without --allow-downgrades; before each removal, a database server's
question whether a purge removes its databases (mariadb-server/postrm_remove_databases, default no)
is answered yes, as Debian's own piuparts does, or the purge would keep /var/lib/mysql.

The base chroot is made once with mmdebstrap into the download cache,
<cache>/piuparts/<distribution>.tar.gz (gzip: piuparts unpacks it with `tar -z`), and reused;
piuparts brings it up to date (`apt-get dist-upgrade`) on every run, so an old one is only slower,
and one older than BASE_MAX_DAYS is made again.
"""

import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from pgo import PipelineError
from pgo.base import atomic, process
from pgo.base.runner import say
from pgo.packaging import debpackages
from pgo.packaging.recipes import RECIPES

SCRIPTS = RECIPES / "piuparts"
BASE_MAX_DAYS = 30
# What the downgrade script (SCRIPTS) prints for pgo to read: its verdict, the version it tried.
VERDICT = re.compile(r"^  pgo-downgrade: (\w+) ?(.*)$", re.M)
# dpkg's line of each package it configured (`Setting up libmariadb3:amd64 (1:10.11.18-0+deb12u1) ...`):
# in the upgrade test, the first of each of ours is the version the archive served
SET_UP = re.compile(r"^  Setting up ([^\s:]+)(?::\S+)? \((\S+)\) \.\.\.$", re.M)
# The set-aside script (also run by --replace-distribution's chroot) and its lines: a version of ours the
# archive serves, newer than ours, pinned away
SET_ASIDE_SCRIPT = SCRIPTS / "post_setup_pgo_set_aside_newer"
SET_ASIDE = re.compile(r"^\s*pgo-set-aside: (\S+) (\S+)$", re.M)
# What piuparts itself leaves on a release its version does not know yet (the host's piuparts runs
# against the platform's release): after the purge it installs logrotate to run the set's logrotate
# files, and trixie's logrotate pulls in systemd, whose postinst and tmpfiles.d make these files,
# unowned once systemd goes again (and debconf's scratch folder with it). None of them is the set's:
# its own installation does not pull in systemd. On bookworm (10.11's and the fixture's proofs) no such
# file is left.
LEFT_BY_PIUPARTS = {
    "trixie": ["/etc/default/locale", "/etc/vconsole.conf", "/root/.ssh/", "/var/cache/private/",
               "/var/lib/private/", "/var/log/private/", "/var/cache/debconf/tmp.ci/"],
}
# `0m28.5s ERROR: FAIL: Package purging left files on system:`
ERROR = re.compile(r"^\S+ ERROR: (.*)$")
INSTALL_TEST_PASSED = "INFO: PASS: Installation and purging test."
UPGRADE_TEST_PASSED = "INFO: PASS: Installation, upgrade and purging tests."
# dpkg's and apt's own words for what failed, in a failed command's output
TOOL_ERROR = re.compile(r"^  (dpkg: error .*|E: .*|.*subprocess returned error exit status \d+)$")


def prove(debs, names, version, upgrades, distribution, mirror, cache, older=None):
    """piuparts on `debs` (package `names`, the server's first, at `version`) against `distribution`;
    `upgrades`: the distribution's versions ours must upgrade (the recipe's); `older`: a folder of
    .debs of an earlier release or version, served beside the archive and upgraded from (the archive's
    versions newer than ours set aside); `cache`: the download cache. One line per
    proof; a failure is one PipelineError naming what piuparts reported first and its log, kept."""
    if os.geteuid() != 0:
        raise PipelineError("--piuparts needs root: piuparts mounts /proc in its chroot and chroots into it")
    if shutil.which("piuparts") is None:
        raise PipelineError("cannot run piuparts: it is not installed (tools/install-deps.sh test installs it)")
    base = base_tarball(distribution, mirror, cache / "piuparts")
    older_debs = sorted(older.glob("*.deb")) if older else []
    scratch = Path(tempfile.mkdtemp(prefix="pgo-piuparts-"))
    scratch.chmod(0o755)        # apt in the chroot reads the bind-mounted repository as _apt
    log = scratch / "piuparts.log"
    command = ["piuparts", "--basetgz", base, "--distribution", distribution, "--allow-database",
               "--scriptsdir", SCRIPTS, *(["--mirror", mirror] if mirror else []),
               *(f"--ignore={path}" for path in LEFT_BY_PIUPARTS.get(distribution, []))]
    if older_debs:
        command += repository(older_debs, scratch / "older")
    env = {"PGO_PACKAGES": " ".join(names), "PGO_VERSION": version, "PGO_UPGRADES": " ".join(upgrades),
           "PGO_SET_ASIDE_NEWER": "1" if older_debs else ""}
    say(f"  piuparts on {len(debs)} packages against {distribution}"
        + (f", with the {len(older_debs)} older packages of {older.name}/ beside it" if older else ""))
    started = time.monotonic()
    try:
        with open(log, "w") as out:
            status = process.run_into([*command, *debs], out, env=env)
    finally:
        shutil.rmtree(scratch / "older", ignore_errors=True)     # the log is what a failure keeps
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    if status != 0:
        raise PipelineError(f"{failure(text)} (piuparts exited with status {status}; its log: {log})")
    origins = {debpackages.control_field(deb, "Version"): f"{older.name}/" for deb in older_debs}
    upgraded = check_upgrade(text, names, version, upgrades, distribution, origins, log)
    verdict = downgrade_verdict(text, names[0], version, origins, distribution, log)
    aside = set_aside(text, names[0])
    if aside:
        say(f"  set aside: {distribution}'s {aside}, newer than ours: the upgrade test upgrades from {older.name}/")
    steps = ["install", *([f"upgrade from {upgraded}"] if upgraded else []), "remove", "purge"]
    say(f"  piuparts: {', '.join(steps)}: passed ({seconds:.0f} s)"
        + ("" if upgraded else f"; no upgrade test: {distribution} serves none of {', '.join(names)}"))
    say(f"  downgrade refusal: {verdict}")
    shutil.rmtree(scratch)


def set_aside(text, server=None):
    """What the set-aside script pinned away, as `PACKAGE VERSION (and N more of its packages)`, the
    server's first; None when nothing. Each chroot set up says it again."""
    pairs = sorted(set(SET_ASIDE.findall(text)), key=lambda pair: (pair[0] != server, pair))
    if not pairs:
        return None
    name, newer = pairs[0]
    return f"{name} {newer}" + (f" (and {len(pairs) - 1} more of its packages)" if len(pairs) > 1 else "")


def base_tarball(distribution, mirror, folder):
    """piuparts' base chroot of `distribution` (mmdebstrap's minbase), made once into `folder`; says how old."""
    tarball = folder / f"{distribution}.tar.gz"
    made = time.time() - tarball.stat().st_mtime if tarball.is_file() else None
    if made is not None and made < BASE_MAX_DAYS * 86400:
        say(f"  piuparts base chroot: {tarball}, made {age(made)} ago")
        return tarball
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    atomic.place(tarball, lambda path: process.output_of(
        ["mmdebstrap", "--variant=minbase", "--mode=root", "--quiet", distribution, path,
         *([mirror] if mirror else [])]))
    say(f"  piuparts base chroot: {tarball}, made now by mmdebstrap ({time.monotonic() - started:.0f} s)"
        + (f", the last one being {age(made)} old" if made is not None else ""))
    return tarball


def age(seconds):
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count > 1 else ''}"
    return "less than a minute"


def repository(debs, folder):
    """piuparts' options that serve `debs` as one more archive: a flat repository, bind-mounted at
    its own path into the chroot."""
    flat_repository(debs, folder)
    return ["--bindmount", folder, "--extra-repo", f"deb [trusted=yes] file://{folder} ./"]


def flat_repository(debs, folder):
    """`debs` copied into a new `folder` with the Packages index apt reads there (`deb [trusted=yes]
    file:FOLDER ./`)."""
    folder.mkdir()
    for deb in debs:
        shutil.copy(deb, folder)
    atomic.write(folder / "Packages", process.output_of(["dpkg-scanpackages", "--multiversion", "."],
                                                        cwd=folder).encode())


def check_upgrade(text, names, version, upgrades, distribution, origins, log):
    """What piuparts' upgrade test upgraded ours from (`<package> <version> of <origin>`), or None when
    the archive served none of the set's names; a failure when that was no upgrade."""
    upgrade_test = text.partition(INSTALL_TEST_PASSED)[2]
    if UPGRADE_TEST_PASSED not in upgrade_test:
        return None
    before = {}
    for name, old in SET_UP.findall(upgrade_test):
        if name in names:
            before.setdefault(name, old)
    name = names[0] if names[0] in before else next(n for n in names if n in before)
    old = before[name]
    origin = origins.get(old, distribution)
    if process.run(["dpkg", "--compare-versions", old, "lt", version]).returncode != 0:
        hint = "" if not upgrades or origin != distribution else \
            f"ours upgrade {' '.join(upgrades)}: --upgrade-from a folder of the distribution's debs of that version, " \
            "or --mirror a snapshot of the archive that served it; "
        raise PipelineError(f"piuparts' upgrade test put ours ({version}) over {name} {old} of {origin}, which is not "
                            f"older than ours: that proves no upgrade ({hint}log: {log})")
    more = f" (and {len(before) - 1} more of its packages)" if len(before) > 1 else ""
    recipe = "" if not upgrades or old in upgrades or origin != distribution else \
        f" (not {' '.join(upgrades)}, the recipe's: {distribution} serves this one now)"
    return f"{name} {old} of {origin}{more}{recipe}"


def downgrade_verdict(text, server, version, origins, distribution, log):
    found = VERDICT.findall(text)
    if not found:
        raise PipelineError(f"piuparts ran no downgrade check ({SCRIPTS.name}/ printed nothing; log: {log})")
    verdict, detail = found[0]
    if verdict == "none":
        return (f"not shown: no {server} older than ours ({version}) is served (--upgrade-from the folder of "
                f"an earlier release serves one)")
    target, *requested = detail.split()
    more = f" (and {len(requested) - 1} more of its packages)" if len(requested) > 1 else ""
    return (f"apt refused {server} {target} of {origins.get(target, distribution)}{more} over ours ({version}) "
            f"without --allow-downgrades")


def failure(text):
    """The one line that names what piuparts reported first: the file a purge left, the maintainer
    script that failed, what the downgrade check saw."""
    verdicts = dict(VERDICT.findall(text))
    if "accepted" in verdicts:
        return f"apt downgraded ours without --allow-downgrades: {verdicts['accepted']}"
    if "unresolved" in verdicts:
        return f"the downgrade refusal was not shown: apt-get failed otherwise: {verdicts['unresolved']}"
    test = "upgrade test" if INSTALL_TEST_PASSED in text else "install and purge test"
    lines = text.splitlines()
    for at, line in enumerate(lines):
        error = ERROR.match(line)
        # `ERROR: WARN: Processes are running inside chroot:`: with --allow-database (a server the
        # maintainer scripts start) piuparts logs it as an error, but only warns and goes on.
        if not error or error.group(1).startswith("WARN: "):
            continue
        following = []
        for detail in lines[at + 1:]:
            if not detail.startswith("  "):
                break
            following.append(detail)
        message = error.group(1).removeprefix("FAIL: ").rstrip(":")
        if message.startswith("Command failed"):
            said = [m.group(1).strip() for m in map(TOOL_ERROR.match, following) if m] \
                or [d.strip() for d in following if d.strip()][-1:]     # a tool without dpkg's or apt's words
            # `Command failed (status=1): ['chroot', '/tmp/tmpopp7wug2', 'dpkg', '--purge', 'fixture']`
            listed = re.search(r"\[(.*)\]$", message)
            words = [word.strip("'") for word in listed.group(1).split(", ")] if listed else []
            what = " ".join(words[2:] if words[:1] == ["chroot"] else words) or message
            return f"piuparts' {test} failed: {what} failed" + (f": {' '.join(said[:2])}" if said else "")
        # `  /var/lib/fixture/left-behind\t not owned`: a file rather than its folder
        items = [described(d) for d in following if d.strip()]
        files = [i for i in items if not i.split()[0].endswith("/")] or items
        named = f": {files[0]}" + (f" and {len(items) - 1} more" if len(items) > 1 else "") if items else ""
        return f"piuparts' {test} failed: {message[:1].lower()}{message[1:]}{named}"
    return f"piuparts' {test} failed"


def described(item):
    path, _, note = item.strip().partition("\t")
    return f"{path} ({note.strip()})" if note.strip() else path
