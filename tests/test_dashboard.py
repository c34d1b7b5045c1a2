"""The Releases page's reading of the data API (buildmaster/dashboard.py), on the data API's shapes; the page,
its badge and its tests pages on a real master are tests/test_buildbot_smoke.py's."""

from buildmaster.dashboard import latest, read_rows

BUILDERS = [{"builderid": 1, "name": "release-debian-12", "tags": ["release", "debian-12"]},
            {"builderid": 2, "name": "release-debian-13", "tags": ["release", "debian-13"]},
            {"builderid": 3, "name": "nightly-debian-13", "tags": ["nightly", "debian-13"]},
            {"builderid": 4, "name": "package-debian-13-deb", "tags": ["package", "debian-13"]}]


def data_api(reads):
    """The data API of a master whose every builder has one finished build, published, of version 1.<id>."""
    def get(path, **_):
        reads.append(path)
        if path == "builders":
            return BUILDERS
        if path[0] == "builders":
            return [{"buildid": 10 * path[1], "number": 1, "started_at": path[1], "complete": True, "results": 0,
                     "state_string": "finished"}]
        if path[2] == "properties":
            return {"version": (f"1.{path[1] // 10}", "set"), "config": ("release", "set")}
        return []       # steps
    return get


def test_a_badge_reads_only_its_platforms_release_builder():
    reads = []
    rows = read_rows(data_api(reads), "http://ui/", "release", "debian-13")
    assert [(r.builder, r.version, r.state) for r in rows] == [("release-debian-13", "1.2", "releasable")]
    assert sorted({path[1] for path in reads if path != "builders"}) == [2, 20]


def test_the_page_reads_every_release_and_nightly_builder_and_no_package_builder():
    reads = []
    rows = read_rows(data_api(reads), "http://ui/")
    assert [r.builder for r in rows] == ["nightly-debian-13", "release-debian-13", "release-debian-12"]
    lines = latest(rows)["release"]
    assert [(line.platform, line.release.version, line.nightly and line.nightly.version) for line in lines] == [
        ("debian-12", "1.1", None), ("debian-13", "1.2", "1.3")]
