"""pgo/base/process.py's wait for a text a started process writes into a file (a VM's serial console: the
master's KVM probe and vm_images' boot check), with real processes."""

import time

from pgo.base import process


def started(tmp_path, script):
    console = tmp_path / "console.log"
    return process.start(["sh", "-c", script, "sh", str(console)], stderr=process.PIPE, text=True), console


def test_the_text_is_seen_once_written(tmp_path):
    proc, console = started(tmp_path, 'sleep 0.3; printf "booting\\nLinux version 6.1\\n" >"$1"; sleep 30')
    begun = time.monotonic()
    try:
        assert process.wrote(proc, console, "Linux version", 20) is True
        assert time.monotonic() - begun < 10
    finally:
        assert process.stopped(proc).returncode == -9


def test_a_process_that_ends_first_is_not_waited_for(tmp_path):
    proc, console = started(tmp_path, 'echo "no kernel" >"$1"; echo "could not load kernel" >&2; exit 1')
    begun = time.monotonic()
    assert process.wrote(proc, console, "Linux version", 20) is False
    assert time.monotonic() - begun < 10
    assert proc.returncode == 1 and proc.stderr.read() == "could not load kernel\n"
    assert process.stopped(proc).returncode == 1


def test_the_wait_ends_at_its_timeout(tmp_path):
    proc, console = started(tmp_path, 'echo "nothing to see" >"$1"; sleep 30')
    begun = time.monotonic()
    try:
        assert process.wrote(proc, console, "Linux version", 0.5) is False
        assert 0.5 <= time.monotonic() - begun < 10
        assert proc.poll() is None
    finally:
        process.stopped(proc)
    assert proc.poll() == -9
