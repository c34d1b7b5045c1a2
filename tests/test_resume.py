"""pgo/build/resume.py: a builder's folder keeps the work of an interrupted build of the same request, and of no
other; and `pgo build --phase NAME --resume` does not run a phase the work directory finished. Real folders,
the real compiler, the fixture's real build."""

import json

import pytest
from conftest import FIXTURE, run_pgo

from pgo.build import resume

REQUEST = {"version": "1.0.0", "config": "fixture", "source": "tests/fixture", "profile": "train", "image": None}


def folder_with_work(tmp_path):
    folder = tmp_path / "release-local"
    for name in ("work", "work-plain", "bench"):
        (folder / name).mkdir(parents=True)
        (folder / name / "made").write_text(name)
    (folder / "profile-wants.json").write_text("{}")
    return folder


def prepare(folder, request, said):
    return resume.prepare(folder, request, keep=["work", "work-plain", "profile-wants.json", "sent-profile.tar"],
                          clean=["bench"], out=said.append)


def test_the_same_request_keeps_the_work_and_any_other_starts_clean(tmp_path):
    folder, said = folder_with_work(tmp_path), []
    request = resume.worker_request(REQUEST, "gcc", "g++")
    assert request["compiler_version"] and len(request["pipeline"]) == 64
    # The first build in a folder: nothing to resume, whatever is there goes.
    assert prepare(folder, request, said) is False
    assert said == ["starting clean: no interrupted build in this folder (the last one finished, or none ran)"]
    assert sorted(p.name for p in folder.iterdir()) == [resume.REQUEST_FILE]
    # That build was interrupted after it made its work: the next of the same request keeps it.
    for name in ("work", "bench"):
        (folder / name).mkdir()
    (folder / "work" / "state.json").write_text("{}")
    said.clear()
    assert prepare(folder, request, said) is True
    assert said == ["resuming the interrupted build of this request: keeping work; its finished phases are not "
                    "run again"]
    assert (folder / "work" / "state.json").is_file() and not (folder / "bench").exists()
    # Another version, or the same one by another compiler: clean, saying what differs.
    said.clear()
    assert prepare(folder, {**request, "version": "1.0.1", "compiler": "gcc-14"}, said) is False
    assert said == ["starting clean: the interrupted build here was of another request (its compiler, version "
                    "differ)"]
    assert not (folder / "work").exists()
    assert json.loads((folder / resume.REQUEST_FILE).read_text())["version"] == "1.0.1"


def test_a_build_that_ended_forgets_its_request(tmp_path):
    folder, said = folder_with_work(tmp_path), []
    prepare(folder, REQUEST, said)
    (folder / "work").mkdir()
    resume.forget(folder, out=said.append)
    assert said[-1] == "the build ended: the next build in this folder starts clean"
    said.clear()
    assert prepare(folder, REQUEST, said) is False and not (folder / "work").exists()


def test_an_unreadable_record_starts_clean(tmp_path):
    folder, said = folder_with_work(tmp_path), []
    (folder / resume.REQUEST_FILE).write_text("{not json")
    assert prepare(folder, REQUEST, said) is False
    assert said[0].startswith("starting clean: the interrupted build here was of another request")
    assert not (folder / "work").exists()


def test_the_pipelines_code_is_part_of_the_request(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pgo").mkdir(parents=True)
    (repo / "pgo" / "phases.py").write_text("A = 1\n")
    (repo / "pgo" / "__pycache__").mkdir()
    (repo / "pgo" / "__pycache__" / "phases.cpython-311.pyc").write_bytes(b"\0")
    before = resume.pipeline_digest(repo)
    (repo / "pgo" / "__pycache__" / "phases.cpython-311.pyc").write_bytes(b"\1")
    assert resume.pipeline_digest(repo) == before
    (repo / "pgo" / "phases.py").write_text("A = 2\n")
    assert resume.pipeline_digest(repo) != before


@pytest.mark.parametrize("args, error", [
    ([], "give --request (or --forget)"),
    (["--request", "[1]"], "--request must be a JSON object"),
    (["--request", "{"], "--request is not JSON: "),
    (["--request", "{}", "--keep", "../work"], "--keep '../work': give a name in the folder, not a path"),
])
def test_bad_input_is_one_line(tmp_path, args, error):
    result = run_pgo("resume", "--folder", tmp_path / "f", *args, check=False)
    assert result.returncode != 0
    assert result.stderr.splitlines() == [result.stderr.splitlines()[0]]
    assert error in result.stderr
    assert not (tmp_path / "f").exists()


def resume_command(folder, *extra):
    return run_pgo("resume", "--folder", folder, "--request", json.dumps(REQUEST), "--keep", "work", "work-plain",
                   "--clean", "bench", *extra, check=False)


def test_a_release_without_the_space_it_takes_is_refused_at_its_first_step_and_its_work_kept(tmp_path):
    folder = folder_with_work(tmp_path)
    assert resume_command(folder).returncode == 0       # the build that is then interrupted, after it made work
    (folder / "work").mkdir()
    (folder / "work" / "made").write_bytes(b"x" * (1 << 20))
    refused = resume_command(folder, "--disk-gib", "1000000")
    assert refused.returncode == 1 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert f"{folder} has " in refused.stderr and "GiB free, and a release of configuration 'fixture' takes about " \
        "1000000 GiB there, 1 MiB of it kept from the interrupted build: free " in refused.stderr
    # Nothing it kept is gone: with the space, the next try resumes it.
    assert (folder / "work" / "made").stat().st_size == 1 << 20
    resumed = resume_command(folder, "--disk-gib", "0.001")
    assert resumed.returncode == 0 and "resuming the interrupted build of this request: keeping work" in resumed.stdout
    assert "of it kept from the interrupted build" in resumed.stdout and (folder / "work" / "made").is_file()


def test_the_space_a_release_takes_is_its_configurations(tmp_path):
    from pgo.core.config import build_config
    assert build_config("release").disk_gib == build_config("release-11.8").disk_gib > 10
    assert build_config("fixture").disk_gib is None
    said = resume_command(tmp_path / "f").stdout
    assert "free space not checked: configuration 'fixture' says nothing of what a release takes" in said
    refused = run_pgo("resume", "--folder", tmp_path / "g", "--request", json.dumps({**REQUEST, "config": "nope"}),
                      check=False)
    assert "unknown configuration 'nope'" in refused.stderr and not (tmp_path / "g").exists()
    assert "argument --disk-gib: '0': give a size in GiB, above 0" in resume_command(tmp_path / "h", "--disk-gib",
                                                                                      "0").stderr


def test_a_finished_phase_is_not_run_again_with_resume(tmp_path):
    workdir = tmp_path / "w"
    common = ["build", "--version", "1.0.0", "--config", "fixture", "--source", FIXTURE, "--workdir", workdir]
    run_pgo(*common)
    state = json.loads((workdir / "state.json").read_text())
    resumed = run_pgo(*common, "--phase", "instrumented", "--phase", "check", "--resume")
    assert resumed.stdout.splitlines()[-2:] == [
        f"{phase}: finished at {state['done'][phase]['finished']} by the interrupted build this one resumes: "
        "not run again" for phase in ("instrumented", "check")]
    assert json.loads((workdir / "state.json").read_text()) == state
    # Without --resume, --phase runs it again.
    again = run_pgo(*common, "--phase", "check")
    assert "not run again" not in again.stdout
    assert json.loads((workdir / "state.json").read_text())["done"]["check"]["finished"] >= \
        state["done"]["check"]["finished"]
    refused = run_pgo(*common, "--resume", check=False)
    assert refused.returncode == 1 and "--resume applies to --phase" in refused.stderr
