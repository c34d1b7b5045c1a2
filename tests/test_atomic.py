"""pgo/base/atomic.py, the one way files and folders are written hidden and renamed into place.

Its writers are the work directory's state, the archive's kinds and checksums, the
package folders, the shared source trees and the VM image records; these tests take
the helper itself, with real processes writing and dying.
"""

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

from pgo.base import atomic

REPO = Path(__file__).resolve().parent.parent


def python(code, *args, **kw):
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=REPO,
                            stderr=subprocess.PIPE, text=True, **kw)


WRITER = """
import sys
from pgo.base.atomic import write_json
for i in range(int(sys.argv[2])):
    write_json(sys.argv[1], {"writer": sys.argv[3], "i": i, "padding": "x" * 8192})
"""

READER = """
import json, sys
from pathlib import Path
seen = 0
while seen < int(sys.argv[2]):
    json.loads(Path(sys.argv[1]).read_text())   # never half a file, never two writers' bytes
    seen += 1
"""


def test_two_writers_of_one_file_never_collide_and_readers_see_whole_files(tmp_path):
    state = tmp_path / "state.json"
    atomic.write_json(state, {"writer": "first"})
    processes = [python(WRITER, state, 300, name) for name in ("a", "b")] + [python(READER, state, 1000)]
    errors = [p.communicate()[1] for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0], errors
    assert json.loads(state.read_text())["i"] == 299
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


KILLED_BEFORE_RENAME = """
import os, signal, sys
from pgo.base import atomic
os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)
atomic.write_json(sys.argv[1], {"never": "seen"})
"""


def test_a_writer_killed_before_its_rename_leaves_nothing_the_next_writer_keeps(tmp_path):
    state = tmp_path / "state.json"
    atomic.write_json(state, {"kept": True})
    killed = python(KILLED_BEFORE_RENAME, state)
    killed.communicate()
    assert killed.returncode == -signal.SIGKILL
    left = [p.name for p in tmp_path.iterdir() if p.name != "state.json"]
    assert len(left) == 1 and left[0].startswith(".state.json.")      # its hidden file, named after it
    assert json.loads(state.read_text()) == {"kept": True}
    atomic.write_json(tmp_path / "other.json", {})          # any write into the folder sweeps it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.json", "state.json"]


def test_a_live_writers_hidden_file_is_left_alone(tmp_path):
    live = subprocess.Popen(["sleep", "30"])
    try:
        theirs = tmp_path / f".state.json.{socket.gethostname()}.{live.pid}.partial"
        theirs.write_text("{")
        atomic.write_json(tmp_path / "state.json", {})
        assert theirs.is_file()
    finally:
        live.kill()
        live.wait()
    atomic.write_json(tmp_path / "state.json", {})
    assert not theirs.exists()
