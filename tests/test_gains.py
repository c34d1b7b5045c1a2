"""`pgo gains`: the per-CPU table of docs/gains/ made from the benchmarks' own results, never by hand.

Real inputs: the `result.json` files of benchmarks committed under docs/ (`pgo bench`'s own output)."""

import json
import os
import shutil

import pytest
from conftest import REPO, refused, run_pgo

LIST = REPO / "docs" / "gains" / "measurements.toml"
ZEN5 = REPO / "docs" / "release-10.11.18-release" / "bench-vs-full-plain" / "result.json"
PROSE = "Words around the table stay.\n"


def test_the_committed_table_is_the_one_its_list_makes():
    out = run_pgo("gains", LIST, "--check").stdout
    assert "up to date" in out


def folder(tmp_path, result=ZEN5, entry=None, readme=None):
    """A list of one measurement (of `result`, copied beside it) and a README with the markers."""
    shutil.copy(result, tmp_path / "result.json")
    fields = entry if entry is not None else {
        "result": "result.json", "config": "release", "version": "10.11.18", "compared": "PGO vs plain"}
    (tmp_path / "measurements.toml").write_text(
        "[[measurement]]\n" + "".join(f"{k} = {v}\n" if k == "cpu" else f"{k} = {json.dumps(v)}\n"
                                      for k, v in fields.items()))
    (tmp_path / "README.md").write_text(readme if readme is not None else
                                        f"# Gains\n{PROSE}<!-- gains: begin (written by `python3 -m pgo gains`; "
                                        "edit the list, not this part) -->\nold\n<!-- gains: end -->\nAfter.\n")
    return tmp_path / "measurements.toml"


def test_rows_come_from_the_result_and_only_the_marked_part_is_written(tmp_path):
    listed = folder(tmp_path)
    assert "1 benchmarks, 3 rows, on 1 CPUs" in run_pgo("gains", listed).stdout
    text = (tmp_path / "README.md").read_text()
    # The Zen 5 full build's figures, as its report gives them (docs/release-10.11.18-release).
    assert ("| AMD EPYC family 26 model 2 (Zen 5) | release | 10.11.18 | PGO vs plain | 1.017 [0.981, 1.054] (10) | "
            "1.038 [1.008, 1.069] (10) | 1.043 [1.016, 1.070] (10) |") in text
    assert "| oltp_read_only | 1 | 10 | 1.038 [1.008, 1.069] | faster | `result.json` |" in text
    assert text.startswith(f"# Gains\n{PROSE}") and text.endswith("<!-- gains: end -->\nAfter.\n")
    assert "\nold\n" not in text
    run_pgo("gains", listed)
    assert (tmp_path / "README.md").read_text() == text
    assert "up to date" in run_pgo("gains", listed, "--check").stdout

    # A result measured again: the check fails until the table is written again.
    result = json.loads((tmp_path / "result.json").read_text())
    result["analysis"]["throughput"][0]["ratio"] = 1.5
    (tmp_path / "result.json").write_text(json.dumps(result))
    refused(run_pgo("gains", listed, "--check", check=False), "is not the one", "run python3 -m pgo gains")
    assert (tmp_path / "README.md").read_text() == text


def test_a_result_from_before_the_machine_was_recorded_names_its_cpu_in_the_list(tmp_path):
    result = json.loads(ZEN5.read_text())
    del result["machine"]
    (tmp_path / "old.json").write_text(json.dumps(result))
    base = {"result": "result.json", "config": "minimal", "version": "10.11.18", "compared": "PGO vs plain"}
    listed = folder(tmp_path, tmp_path / "old.json", base)
    refused(run_pgo("gains", listed, check=False), "does not record its CPU", "cpu = {cpu = ")
    listed = folder(tmp_path, tmp_path / "old.json", {**base, "cpu": '{ cpu = "AMD EPYC", family = 25, model = 1 }'})
    run_pgo("gains", listed)
    assert "| AMD EPYC family 25 model 1 (Zen 3) | minimal |" in (tmp_path / "README.md").read_text()


REFUSALS = {
    "no result": ({"result": "missing.json", "config": "c", "version": "1", "compared": "x"}, None,
                  ("measurement 1", "cannot read missing.json")),
    "unknown key": ({"result": "result.json", "config": "c", "version": "1", "compared": "x", "cpus": 2}, None,
                    ("unknown key 'cpus'",)),
    "a key missing": ({"result": "result.json", "config": "c", "version": "1"}, None, ("'compared' is missing",)),
    "a number for a text": ({"result": "result.json", "config": "c", "version": 10, "compared": "x"}, None,
                            ("'version' must be a str",)),
    "another cpu than recorded": ({"result": "result.json", "config": "c", "version": "1", "compared": "x",
                                   "cpu": '{ cpu = "AMD EPYC", family = 25, model = 1 }'}, None,
                                  ("'cpu' says", "the result recorded")),
    "no markers": (None, "# Gains\nno table here\n", ("needs the markers",)),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_every_bad_input_is_one_line_and_writes_nothing(tmp_path, case):
    entry, readme, phrases = REFUSALS[case]
    listed = folder(tmp_path, entry=entry, readme=readme)
    before = (tmp_path / "README.md").read_text()
    result = run_pgo("gains", listed, check=False)
    refused(result, *phrases)
    assert result.returncode == 2
    assert (tmp_path / "README.md").read_text() == before


def test_a_list_that_is_no_list(tmp_path):
    (tmp_path / "measurements.toml").write_text("[[measurement]\n")
    refused(run_pgo("gains", tmp_path / "measurements.toml", check=False), "not TOML")
    (tmp_path / "measurements.toml").write_text("title = 'no entries'\n")
    refused(run_pgo("gains", tmp_path / "measurements.toml", check=False), "no [[measurement]] entries")
    refused(run_pgo("gains", tmp_path / "absent.toml", check=False), "cannot read the list")
    (tmp_path / "result.json").write_text('{"settings": {}}')
    (tmp_path / "measurements.toml").write_text(
        '[[measurement]]\nresult = "result.json"\nconfig = "c"\nversion = "1"\ncompared = "x"\n')
    refused(run_pgo("gains", tmp_path / "measurements.toml", check=False), "is not a benchmark result")
    (tmp_path / "result.json").write_text('{"analysis": {"throughput": [{"workload": "oltp_read_only"}]}}')
    refused(run_pgo("gains", tmp_path / "measurements.toml", check=False), "is not a benchmark result")
    assert not os.path.exists(tmp_path / "README.md")
