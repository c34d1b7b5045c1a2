"""pgo compare-debs (pgo/packaging/compare_debs.py): two small sets of .debs built with dpkg-deb that differ in a file,
a relation, a maintainer script and a package on each side; the bad inputs; and one real download of a
small Debian package with apt."""

import json
import os
import re
import subprocess

import pytest
from conftest import refused, run_pgo

SUMMARY = ("[compare-debs] 3 packages in Debian's set, 3 in ours, 1 alike in name, Architecture, files, relations, "
           "maintainer scripts and conffiles; differences: 1 only in Debian's set, 1 only in ours, "
           "1 differ in files, 1 differ in relations, 1 differ in maintainer scripts")


def make_deb(folder, name, version, files=(), links=(), scripts=None, conffiles=(), arch="amd64", source="demo",
             **relations):
    """A .deb built by dpkg-deb into folder: files {path: text}, links {path: target}, scripts {name: text},
    relation fields as keyword arguments (Pre_Depends= for Pre-Depends)."""
    root = folder.parent / f"{folder.name}-trees" / name
    (root / "DEBIAN").mkdir(parents=True)
    for path, text in dict(files).items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(text)
    for path, target in dict(links).items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / path.lstrip("/"))
    for script, text in (scripts or {}).items():
        (root / "DEBIAN" / script).write_text(text)
        (root / "DEBIAN" / script).chmod(0o755)
    if conffiles:
        (root / "DEBIAN" / "conffiles").write_text("".join(f"{c}\n" for c in conffiles))
    fields = {"Package": name, "Source": source, "Version": version, "Architecture": arch,
              "Maintainer": "Tests <tests@example.org>", "Installed-Size": "8",
              **{field.replace("_", "-"): text for field, text in relations.items()},
              "Description": f"{name} for the tests\n A package of two sets compared."}
    (root / "DEBIAN" / "control").write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    folder.mkdir(exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", root,
                    folder / f"{name}_{version.split(':')[-1]}_{arch}.deb"], check=True, capture_output=True)


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """Ours (1:1.2.3+pgo-1) and Debian's (1:1.2.4-1) of the source demo."""
    root = tmp_path_factory.mktemp("compare-debs")
    ours, debian = root / "ours", root / "debian"
    server = {"/usr/sbin/demod": "server", "/usr/share/doc/demo-server/changelog.Debian.gz": "ours",
              "/usr/share/demo/1.2.3/errmsg.sys": "messages", "/usr/lib/demo/plugin/extra.so": "plugin",
              "/etc/demo/demo.cnf": "[demo]\n"}
    make_deb(ours, "demo-server", "1:1.2.3+pgo-1", files=server, scripts={"postinst": "#!/bin/sh\necho ours\n"},
             conffiles=["/etc/demo/demo.cnf"], Depends="demo-common (>= 1:1.2.3+pgo-1), libc6 (>= 2.34)")
    make_deb(ours, "demo-common", "1:1.2.3+pgo-1", arch="all", files={"/etc/demo/common.cnf": "x"},
             Pre_Depends="dpkg (>= 1.17)")
    make_deb(ours, "demo-extra", "1:1.2.3+pgo-1", files={"/usr/bin/demo-extra": "x"})
    server = {"/usr/sbin/demod": "server", "/usr/share/doc/demo-server/changelog.Debian.gz": "Debian's",
              "/usr/share/demo/1.2.4/errmsg.sys": "messages", "/etc/demo/demo.cnf": "[demo]\n"}
    make_deb(debian, "demo-server", "1:1.2.4-1", files=server, links={"/usr/sbin/demo-daemon": "demod"},
             scripts={"postinst": "#!/bin/sh\necho Debian\n", "config": "#!/bin/sh\n", "templates": "Template: x\n"},
             conffiles=["/etc/demo/demo.cnf"],
             Depends="demo-common (>= 1:1.2.4-1), libc6 (>= 2.34), adduser, debconf (>= 0.5) | debconf-2.0")
    make_deb(debian, "demo-common", "1:1.2.4-1", arch="all", files={"/etc/demo/common.cnf": "y"},
             Pre_Depends="dpkg (>= 1.19)")
    make_deb(debian, "demo-backup", "1:1.2.4-1", files={"/usr/bin/demo-backup": "x"})
    return ours, debian


@pytest.fixture(scope="module")
def compared(sets):
    ours, debian = sets
    out = ours.parent / "out"
    stdout = run_pgo("compare-debs", "--ours", ours, "--reference", debian, "--out", out).stdout
    packages = {p["name"]: p for p in json.loads((out / "compare.json").read_text())["packages"]}
    return {"stdout": stdout, "out": out, "packages": packages, "report": (out / "report.md").read_text()}


def test_the_summary_counts_what_differs(compared):
    assert compared["stdout"].strip() == f"{SUMMARY}; report: {compared['out'] / 'report.md'}"
    record = json.loads((compared["out"] / "compare.json").read_text())
    assert record["summary"]["alike"] == ["demo-common"]
    assert record["summary"]["only_ours"] == ["demo-extra"] and record["summary"]["only_debian"] == ["demo-backup"]
    assert record["summary"]["differ"] == {"architecture": [], "files": ["demo-server"], "relations": ["demo-server"],
                                           "scripts": ["demo-server"], "conffiles": []}


def test_files_are_compared_with_the_release_a_path_names_as_version(compared):
    server = compared["packages"]["demo-server"]
    assert server["ours"]["files"] == 5 and server["debian"]["files"] == 5        # directories left out
    assert server["files"]["only_ours"] == ["/usr/lib/demo/plugin/extra.so"]
    assert server["files"]["only_debian"] == ["/usr/sbin/demo-daemon"]
    assert server["files"]["matched_by_version"] == [{"ours": "/usr/share/demo/1.2.3/errmsg.sys",
                                                      "debian": "/usr/share/demo/1.2.4/errmsg.sys"}]
    assert server["conffiles"] == {"only_ours": [], "only_debian": []}
    assert server["ours"]["conffiles"] == server["debian"]["conffiles"] == ["/etc/demo/demo.cnf"]


def test_relations_differ_by_name_and_constraints_apart(compared):
    depends = compared["packages"]["demo-server"]["relations"]["Depends"]
    assert depends["only_ours"] == []
    assert depends["only_debian"] == ["adduser", "debconf (>= 0.5) | debconf-2.0"]
    assert depends["constraints_differ"] == [{"names": "demo-common", "ours": "demo-common (>= 1:1.2.3+pgo-1)",
                                              "debian": "demo-common (>= 1:1.2.4-1)"}]
    common = compared["packages"]["demo-common"]
    assert common["differs"] == [] and common["relations"]["Pre-Depends"]["constraints_differ"][0]["debian"] == \
        "dpkg (>= 1.19)"


def test_maintainer_scripts_by_presence_and_text(compared):
    scripts = compared["packages"]["demo-server"]["scripts"]
    assert scripts == {"only_ours": [], "only_debian": ["config", "templates"], "text_differs": ["postinst"]}


def test_the_report_puts_the_sets_side_by_side(compared):
    report = compared["report"].splitlines()
    assert f"{SUMMARY.removeprefix('[compare-debs] ')}." in report
    header = "| package | ours files | Debian files | only ours | only Debian | relations differ | scripts differ |"
    table = report[report.index(header) + 2:report.index(header) + 6]
    assert table == ["| demo-backup (only in Debian) | — | 1 | — | — | — | — |",
                     "| demo-common | 1 | 1 | 0 | 0 | constraints only | no |",
                     "| demo-extra (only ours) | 1 | — | — | — | — | — |",
                     "| demo-server | 5 | 5 | 1 | 1 | Depends | only Debian: config, templates |"]
    assert "### demo-server" in report and "  - only ours: `/usr/lib/demo/plugin/extra.so`" in report
    assert ("- Depends: only Debian's: `adduser`, `debconf (>= 0.5) | debconf-2.0`; constraint alone differs: "
            "`demo-common (>= 1:1.2.3+pgo-1)` / `demo-common (>= 1:1.2.4-1)`") in report
    assert "- maintainer scripts: ours postinst; Debian's postinst, config, templates; text differs: postinst" in report
    assert "- demo-backup 1:1.2.4-1 amd64: 1 files" in report
    assert any("(1.2.3 in ours, 1.2.4 in Debian's)" in line and "1 paths matched so" in line for line in report)


def test_bad_inputs_are_refused_in_one_line_and_write_nothing(sets, tmp_path):
    ours, debian = sets
    out = tmp_path / "out"
    (tmp_path / "empty").mkdir()
    refused(run_pgo("compare-debs", "--ours", tmp_path / "empty", "--reference", debian, "--out", out, check=False),
            "--ours", "holds no .deb")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "demo-server_1_amd64.deb").write_text("not an ar archive\n")
    refused(run_pgo("compare-debs", "--ours", ours, "--reference", broken, "--out", out, check=False),
            "demo-server_1_amd64.deb is not a readable .deb")
    # apt serves no binary package of the source demo at any version
    cache = tmp_path / "cache"
    refused(run_pgo("compare-debs", "--ours", ours, "--debian-version", "9:0.0.1-1", "--cache", cache, "--out", out,
                    check=False), "apt serves no binary package of demo 9:0.0.1-1")
    refused(run_pgo("compare-debs", "--ours", ours, "--debian-version", "../1", "--cache", cache, "--out", out,
                    check=False), "'../1' is no Debian version")
    assert not out.exists() and not (cache / "debian-binaries" / "demo_0.0.1-1").exists()


HELLO = "2.10-3"        # Debian 12's hello: one binary package of 53 kB
ARCH = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()


SERVED = subprocess.run(["apt-cache", "madison", "hello"], capture_output=True, text=True).stdout


@pytest.mark.skipif(not re.search(rf"^ *hello \| +{re.escape(HELLO)} \|.* Packages$", SERVED, re.M),
                    reason=f"apt serves no hello {HELLO} here (Debian 12's archive)")
def test_debians_set_is_downloaded_once_with_apt(tmp_path):
    ours, cache, out = tmp_path / "ours", tmp_path / "cache", tmp_path / "out"
    make_deb(ours, "hello", f"{HELLO}+pgo1", source="hello", files={"/usr/bin/hello": "x"}, Depends="libc6 (>= 2.34)")
    first = run_pgo("compare-debs", "--ours", ours, "--debian-version", HELLO, "--cache", cache, "--out", out)
    folder = cache / "debian-binaries" / f"hello_{HELLO}"
    assert f"downloading Debian's hello {HELLO} with apt: 1 binary packages into {folder}" in first.stdout
    download = json.loads((folder / "download.json").read_text())
    assert download["served"] == ["hello"] and download["not_served"] == []
    assert [p.name for p in folder.glob("*.deb")] == [f"hello_{HELLO}_{ARCH}.deb"]
    again = run_pgo("compare-debs", "--ours", ours, "--debian-version", HELLO, "--cache", cache, "--out", out)
    assert "(downloaded before)" in again.stdout and "1 packages in Debian's set, 1 in ours" in again.stdout
    hello = json.loads((out / "compare.json").read_text())["packages"][0]
    assert hello["side"] == "both" and "/usr/share/man/man1/hello.1.gz" in hello["files"]["only_debian"]
