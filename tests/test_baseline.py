"""`pgo baseline`: Debian's own server of the source a release built as its baseline, else the plain build.

Real parts: Debian's archive through apt (the packages of mariadb 1:10.11.18-0+deb12u1, about 15 MB),
dpkg-deb, and the unpacked mariadbd itself. The candidate is a work directory after its source phase: the
plan (the configuration it resolved) and the source record, as `pgo build` writes them.
"""

import json
import re
import subprocess

import pytest
from conftest import refused, run_pgo

from pgo import PipelineError
from pgo.base import lines, protocol
from pgo.bench.builds import from_basedir
from pgo.build import baseline, source, testrun
from pgo.core.config import build_config, load
from pgo.core.workdir import Workdir

PACKAGE, VERSION = "mariadb", "1:10.11.18-0+deb12u1"
SERVED = subprocess.run(["apt-cache", "madison", "mariadb-server"], capture_output=True, text=True).stdout
on_bookworm = pytest.mark.skipif(
    source.host_suite() != "bookworm" or not re.search(rf"\| {re.escape(VERSION)} \| .*bookworm.* Packages$",
                                                        SERVED, re.M),
    reason=f"Debian 12's archive serving mariadb-server {VERSION}")


@pytest.fixture(scope="module")
def archive_dsc():
    """The SHA-256 Debian's archive lists for the .dsc (the source phase's deb-src entry, added as it adds it)."""
    source.ensure_deb_src()
    sha = baseline.archive_dsc_sha256(PACKAGE, VERSION)
    assert sha and re.fullmatch(r"[0-9a-f]{64}", sha), "apt lists no .dsc of mariadb " + VERSION
    return sha


def candidate(path, config="release", checksum=None, origin=f"debian:{PACKAGE}={VERSION}", kind="debian"):
    """A work directory as `pgo build`'s source phase leaves it."""
    path.mkdir(parents=True)
    (path / protocol.PLAN).write_text(json.dumps({"resolved": build_config(config).record()}))
    (path / protocol.SOURCE_RECORD).write_text(json.dumps(
        {"kind": kind, "origin": origin, "checksum": checksum, "version": "10.11.18"}))
    return path


def record_of(workdir):
    return json.loads((workdir / protocol.BASELINE_RECORD).read_text())


@on_bookworm
def test_debian_s_server_of_the_very_source_built_is_the_baseline(tmp_path, archive_dsc):
    work, plain = candidate(tmp_path / "work", checksum=archive_dsc), tmp_path / "work-plain"
    result = run_pgo("baseline", "--candidate", work, "--workdir", plain)
    record = record_of(plain)
    assert record["kind"] == "distribution" and record["version"] == VERSION and record["source"] == PACKAGE
    assert [p["package"] for p in record["packages"]] == list(build_config("release").product.baseline_packages)
    for deb in record["packages"]:
        done = subprocess.run(["sha256sum", plain / baseline.DEBS / deb["file"]], capture_output=True, text=True)
        assert done.stdout.split()[0] == deb["sha256"]
    assert "10.11.18-MariaDB-0+deb12u1" in record["server_version"]
    assert f"baseline: the distribution's mariadb {VERSION} (7 packages" in result.stdout
    # Where the benchmark looks for the plain build's staged tree, a server it can run.
    build = from_basedir("A", "baseline", "basedir", plain / protocol.STAGE)
    assert build.server.name == "mariadbd" and build.install_db.name == "mariadb-install-db"
    assert "10.11.18-MariaDB-0+deb12u1" in build.version
    # A resumed release keeps what is unpacked.
    again = run_pgo("baseline", "--candidate", work, "--workdir", plain)
    assert "unpacked before" in again.stdout and record_of(plain) == record


@on_bookworm
def test_the_verdict_runs_the_optimised_build_s_failures_again_on_debian_s_packages(tmp_path, archive_dsc):
    """No plain test run with Debian's packages as the baseline: the tests that failed on the optimised build
    run again, and only they, with Debian's own mariadb-test on Debian's server (real mtr, as the test user)."""
    work, plain = candidate(tmp_path / "work", checksum=archive_dsc), tmp_path / "work-plain"
    run_pgo("baseline", "--candidate", work, "--workdir", plain)
    product = build_config("release").product
    chosen = product.tests.test_set("release")
    assert testrun.distribution_baseline(Workdir(plain))["version"] == VERSION
    failed = {"test": "main.1st", "first_error": "mysqltest: result content mismatch", "attempts": 4}
    optimised = {"set": "release", "counts": {"passed": 1000, "failed": 1, "skipped": 10}, "failed": [failed],
                 "flaky": [], "outcomes": {"main.1st": "failed"}}
    rerun = testrun.distribution_rerun(optimised, Workdir(plain), product.tests, chosen)
    assert rerun["outcomes"] == {"main.1st": "passed"} and rerun["counts"]["passed"] == 1
    assert (plain / protocol.TESTS / "release-rerun" / protocol.TEST_RESULTS).is_file()
    against = f"the distribution's build (mariadb {VERSION})"
    judged = testrun.verdict(optimised, rerun, chosen.max_environment_failures, against)
    assert not judged["passed"] and judged["build_only_failures"] == ["main.1st"]
    assert judged["problems"] == [f"main.1st fails on the optimised build ({against} passes it): "
                                  "mysqltest: result content mismatch"]
    assert lines.test_verdict(judged) == (f"[test-verdict] release REFUSED: optimised build 1000 passed, 1 failed; "
                                          f"its failures again on {against}: 1 passed, 0 failed")
    # Nothing failed: nothing runs.
    assert testrun.distribution_rerun({**optimised, "failed": []}, Workdir(plain), product.tests, chosen) is None


@on_bookworm
@pytest.mark.parametrize("change, why", [
    ({"config": "minimal"}, "configuration 'minimal' is not built as the distribution builds its own"),
    ({"checksum": "0" * 64}, f"the source's .dsc is not the archive's mariadb {VERSION}"),
    ({"origin": "/srv/mariadb-10.11.18.tar.gz", "kind": "tarball"}, "is not a Debian source package"),
    ({"origin": f"debian:{PACKAGE}=1:10.11.1-0+deb12u1"}, "apt lists no source mariadb 1:10.11.1-0+deb12u1"),
])
def test_otherwise_the_plain_build_is_the_baseline_and_the_record_says_why(tmp_path, archive_dsc, change, why):
    work, plain = candidate(tmp_path / "work", **{"checksum": archive_dsc, **change}), tmp_path / "work-plain"
    result = run_pgo("baseline", "--candidate", work, "--workdir", plain)
    assert record_of(plain) == {"kind": "plain", "why": record_of(plain)["why"]}
    assert why in record_of(plain)["why"] and why in result.stdout
    assert not (plain / protocol.STAGE).exists() and not (plain / baseline.DEBS).exists()
    # Asked for the distribution's packages, it fails in one line instead.
    refused(run_pgo("baseline", "--candidate", work, "--workdir", tmp_path / "strict", "--choice", "distribution",
                    check=False), "no distribution baseline: ", why)


@on_bookworm
def test_the_plain_build_when_asked_and_when_one_is_already_there(tmp_path, archive_dsc):
    work = candidate(tmp_path / "work", checksum=archive_dsc)
    run_pgo("baseline", "--candidate", work, "--workdir", tmp_path / "asked", "--choice", "plain")
    assert record_of(tmp_path / "asked") == {"kind": "plain", "why": "asked for (--choice plain)"}
    # An interrupted release's plain build is kept, never replaced by a download.
    resumed = tmp_path / "resumed"
    (resumed / protocol.STAGE).mkdir(parents=True)
    (resumed / protocol.STATE).write_text("{}")
    (resumed / protocol.STAGE / "ours").write_text("built")
    run_pgo("baseline", "--candidate", work, "--workdir", resumed)
    assert record_of(resumed)["why"] == "this release's plain build is already here (resumed)"
    assert (resumed / protocol.STAGE / "ours").read_text() == "built"


def test_a_candidate_without_its_source_phase_is_refused_in_one_line(tmp_path):
    (tmp_path / "work").mkdir()
    refused(run_pgo("baseline", "--candidate", tmp_path / "work", "--workdir", tmp_path / "plain", check=False),
            "has no plan.json: its build never ran phase source")


def test_only_a_configuration_of_debian_s_patched_source_may_take_debian_s_server():
    data = load()
    data["configs"]["release-upstream"] = {**data["configs"]["release"], "debian_patches": False}
    with pytest.raises(PipelineError, match="distribution_baseline needs debian_patches = true"):
        build_config("release-upstream", data)
