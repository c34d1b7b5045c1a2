"""`pgo prove --piuparts` (pgo/packaging/piuparts.py): Debian's piuparts on the fixture's debs made through its
own debian/rules (configs.toml fixture-deb): install, the upgrade from an earlier release's set (the
plain build's 1.0.0-1), remove, purge, and apt's refusal to put that set back over ours; a package
whose purge leaves a file is refused in one line. The fixture's purge removes its data only when its
debconf question says so, as mariadb-server's: the proof answers it, as Debian's piuparts does.
`--replace-distribution`: the earlier set installed first, ours over it with apt, nothing removed; a
set that would remove a package the user has is refused.
Real piuparts, mmdebstrap and apt, as root; the base chroot is made by the first proof into the
session's cache and reused by the next."""

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURE, refused, run_pgo

from pgo.base.checksums import write_sha256sums
from pgo.packaging import piuparts

needs_piuparts = pytest.mark.skipif(
    shutil.which("piuparts") is None or shutil.which("mmdebstrap") is None or os.geteuid() != 0,
    reason="piuparts and its base chroot (mmdebstrap) need root and tools/install-deps.sh test")
BUILD = ["build", "--version", "1.0.0", "--config", "fixture-deb", "--tests", "off"]


def leaves_a_file(debian):
    """The fixture's packaging with a postinst that writes a file its postrm does not purge."""
    postinst, postrm = debian / "fixture.postinst", debian / "fixture.postrm"
    flag = "  touch /var/lib/fixture/debian-__FIXTURE_MAJOR_VER__.flag\n"
    postinst.write_text(postinst.read_text().replace(flag, flag + "  touch /var/lib/fixture/left-behind\n"))
    postrm.write_text(postrm.read_text().replace("rm -rf /var/lib/fixture", "rm -f /var/lib/fixture/debian-*.flag"))


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """fixture-deb's deb folders: the PGO build's, the plain build's (1.0.0-1, the earlier release) and
    the PGO build's of a fixture whose purge leaves a file."""
    root = tmp_path_factory.mktemp("piuparts")
    leaving = root / "fixture-leaving"
    shutil.copytree(FIXTURE, leaving)
    leaves_a_file(leaving / "debian")
    for kind, source, extra in (("pgo", FIXTURE, []), ("plain", FIXTURE, ["--pgo", "off"]),
                                ("leaving", leaving, [])):
        run_pgo(*BUILD, "--source", source, "--workdir", root / kind, *extra)
        run_pgo("package", "--workdir", root / kind, "--format", "deb", "--out", root / "published" / kind)
    return {kind: root / "published" / kind for kind in ("pgo", "plain", "leaving")}


def state(folder):
    return {p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in folder.iterdir()}


@needs_piuparts
def test_piuparts_installs_upgrades_removes_and_purges_and_apt_refuses_the_downgrade(published):
    """--piuparts-only: the chroot's run of the packages is test_package's and test_testrun's (minutes)."""
    before = state(published["pgo"])
    result = run_pgo("prove", published["pgo"], "--piuparts-only", "--upgrade-from", published["plain"])
    out = result.stdout
    assert "  piuparts base chroot: " in out and "/piuparts/bookworm.tar.gz, made " in out
    assert ("  piuparts: install, upgrade from fixture 1.0.0-1 of plain/ (and 2 more of its packages), remove, "
            "purge: passed (") in out
    assert ("  downgrade refusal: apt refused fixture 1.0.0-1 of plain/ (and 2 more of its packages) over ours "
            "(1.0.0+pgo-1) without --allow-downgrades") in out
    assert out.endswith("proof passed: lintian and piuparts (--piuparts-only: the packages were not run, no "
                        "version comment)\n") and "mmdebstrap bookworm chroot" not in out
    assert state(published["pgo"]) == before        # nothing in the published folder changed


@needs_piuparts
def test_a_package_whose_purge_leaves_a_file_is_refused_in_one_line(published):
    result = run_pgo("prove", published["leaving"], "--piuparts", check=False)
    line = refused(result, "piuparts' install and purge test failed: package purging left files on system: "
                           "/var/lib/fixture/left-behind (not owned) and 1 more (piuparts exited with status 1; "
                           "its log: ")
    log = Path(line.rpartition("its log: ")[2].removesuffix(")"))
    assert "ERROR: FAIL: Package purging left files on system:" in log.read_text()
    assert "mmdebstrap bookworm chroot" not in result.stdout       # refused before the chroot's minutes
    shutil.rmtree(log.parent)


def as_the_distributions_own(published, folder):
    """The published folder's debs alone, as a distribution's pool serves them: no buildinfo.json, no checksums."""
    folder.mkdir()
    for deb in published.glob("*.deb"):
        shutil.copy(deb, folder)
    return folder


@needs_piuparts
def test_piuparts_upgrades_from_a_folder_of_the_distributions_own_debs(published, tmp_path):
    """--upgrade-from a folder of debs that `pgo package` did not publish (Debian 13's 11.8.6 from its pool,
    here the earlier release's debs alone): piuparts upgrades from them; the archive's versions of ours
    newer than ours would be set aside (bookworm serves no fixture, so nothing is)."""
    older = as_the_distributions_own(published["plain"], tmp_path / "pool")
    result = run_pgo("prove", published["pgo"], "--piuparts-only", "--upgrade-from", older)
    out = result.stdout
    assert ("  the older set (--upgrade-from): pool/, 3 debs of version 1.0.0-1 (the distribution's own: no "
            "buildinfo.json, no checksums of ours)\n") in out
    assert "  piuparts: install, upgrade from fixture 1.0.0-1 of pool/ (and 2 more of its packages), remove, " in out
    assert "  set aside: " not in out


def test_upgrade_from_a_set_not_older_than_ours_is_refused_before_piuparts(published, tmp_path):
    """The PGO set itself as the older set: the same version, no upgrade; refused in one line, before
    lintian and piuparts (and without root)."""
    older = as_the_distributions_own(published["pgo"], tmp_path / "same")
    result = run_pgo("prove", published["pgo"], "--piuparts-only", "--upgrade-from", older, check=False)
    refused(result, "--upgrade-from same/ holds fixture")
    assert "not older than ours (1.0.0+pgo-1): that is no upgrade" in result.stderr
    assert "lintian" not in result.stdout
    for bad, line in ((tmp_path / "absent", "no such folder"), (tmp_path, "holds no .deb files")):
        refused(run_pgo("prove", published["pgo"], "--piuparts-only", "--upgrade-from", bad, check=False),
                f"--upgrade-from {bad}", line)


def test_upgrade_from_belongs_to_piuparts_or_the_replacement(published):
    refused(run_pgo("prove", published["pgo"], "--upgrade-from", published["plain"], check=False),
            "--upgrade-from is the older set of --piuparts' upgrade test or of --replace-distribution: add one")
    refused(run_pgo("prove", published["pgo"], "--replace-distribution", "--piuparts-only", check=False),
            "--piuparts-only skips the chroot --replace-distribution installs into")


def with_a_package_tied_to_it(older, folder):
    """A copy of the published folder `older` with one more package, fixture-extra, which depends on
    exactly its fixture's version: as Debian's engine plugins depend on their exact server version."""
    shutil.copytree(older, folder)
    version = subprocess.run(["dpkg-deb", "-f", next(older.glob("fixture_*.deb")), "Version"], check=True,
                             capture_output=True, text=True).stdout.strip()
    tree = folder.parent / "fixture-extra"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(
        f"Package: fixture-extra\nVersion: {version}\nArchitecture: all\nMaintainer: PGO pipeline "
        f"<pgo-release@example.org>\nDepends: fixture (= {version})\nDescription: a package of the earlier "
        "release that needs exactly its fixture\n")
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", tree, folder / f"fixture-extra_{version}_all.deb"],
                   check=True, capture_output=True)
    write_sha256sums(folder)
    return folder


@needs_piuparts
def test_replace_distribution_installs_the_older_set_first_and_ours_over_it_removing_nothing(published):
    """The distribution (here the earlier release's set, served beside bookworm's archive, which has no
    fixture) installed first, then ours with apt: each of its packages replaced, none removed."""
    result = run_pgo("prove", published["pgo"], "--replace-distribution", "--upgrade-from", published["plain"])
    out = result.stdout
    assert ("  the distribution's packages, installed first: fixture-plugin-echo=1.0.0-1 fixture-test=1.0.0-1 "
            "fixture=1.0.0-1\n") in out
    assert ("  the distribution's packages, after ours, nothing removed: fixture-plugin-echo=1.0.0+pgo-1 "
            "fixture-test=1.0.0+pgo-1 fixture=1.0.0+pgo-1\n") in out
    assert out.rstrip().splitlines()[-1].startswith("proof passed: version comment '")


@needs_piuparts
def test_replace_distribution_refuses_a_set_that_would_remove_a_package_the_user_has(published, tmp_path):
    older = with_a_package_tied_to_it(published["plain"], tmp_path / "plain-extra")
    result = run_pgo("prove", published["pgo"], "--replace-distribution", "--upgrade-from", older, check=False)
    refused(result, "installing ours would remove fixture-extra")
    assert "proof passed" not in result.stdout


# piuparts' own log of a postrm that exits 1 on purge (the fixture's, so changed), cut to the failure
FAILED_PURGE = """\
0m30.9s DEBUG: Starting command: ['chroot', '/tmp/tmpopp7wug2', 'dpkg', '--purge', 'fixture', 'fixture-test']
0m31.0s ERROR: Command failed (status=1): ['chroot', '/tmp/tmpopp7wug2', 'dpkg', '--purge', 'fixture', 'fixture-test']
  (Reading database ... 8134 files and directories currently installed.)
  Purging configuration files for fixture (1.0.0+pgo-1) ...
  cannot purge
  dpkg: error processing package fixture (--purge):
   installed fixture package post-removal script subprocess returned error exit status 1
  dpkg: warning: ignoring request to remove fixture-test which isn't installed
  Errors were encountered while processing:
   fixture

0m31.3s DEBUG: Starting command: ['umount', '/tmp/tmpopp7wug2/dev/shm']
0m38.5s ERROR: piuparts run ends.
"""


def test_a_failing_maintainer_script_is_named_with_dpkgs_words():
    assert piuparts.failure(FAILED_PURGE) == (
        "piuparts' install and purge test failed: dpkg --purge fixture fixture-test failed: dpkg: error processing "
        "package fixture (--purge): installed fixture package post-removal script subprocess returned error exit "
        "status 1")


# piuparts' own log of Debian's mariadb-server set purged without its databases question answered: the
# server the maintainer scripts started (--allow-database) is only a warning, logged as an error first
LEFT_DATABASES = """\
0m35.1s DEBUG: Command failed (status=1), but ignoring error: ['lsof', '-w', '+D', '/tmp/tmpcstedlyv']
0m35.1s ERROR: WARN: Processes are running inside chroot:
  COMMAND    PID       USER   FD   TYPE DEVICE  SIZE/OFF     NODE NAME
  mariadbd  4232 messagebus  cwd    DIR  254,0      4096 10529932 /tmp/tmpcstedlyv/var/lib/mysql
0m46.3s ERROR: FAIL: Package purging left files on system:
  /var/lib/mysql/\t not owned
  /var/lib/mysql/ibdata1\t not owned
  /var/lib/mysql/mysql/\t not owned

0m46.3s ERROR: FAIL: Installation and purging test.
0m47.5s ERROR: piuparts run ends.
"""


def test_a_warning_piuparts_logs_as_an_error_is_not_the_failure_named():
    assert piuparts.failure(LEFT_DATABASES) == (
        "piuparts' install and purge test failed: package purging left files on system: /var/lib/mysql/ibdata1 "
        "(not owned) and 2 more")
