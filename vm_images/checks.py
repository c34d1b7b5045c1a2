"""Test an image from inside: its pinned compiler, its Buildbot worker, the fixture's PGO pipeline;
and that its disk boots as a VM, where this machine has QEMU.

Every check runs in the image's root filesystem under an overlay, as the worker user,
with the repository mounted read-only: the same way a build VM runs the pipeline.
The results go to <build>/tests/<time>.json.
"""

import re
import shutil
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from pgo.base import protocol
from pgo.base.atomic import write_json
from pgo.base.lines import without_terminal_codes
from vm_images import REPO, ImageError, boot, chroot
from vm_images.build import WORKER_VENV
from vm_images.container import REPO_IN_IMAGE, worker_ids
from vm_images.store import now, read_json, stamp

OUT_IN_IMAGE = "/srv/out"
# A real benchmark result, re-analysed by the image's pgo bench (numpy, scipy, matplotlib).
BENCH_SAMPLE = "docs/bench-10.11.18-minimal/result.json"
BENCH_LIBRARIES = ("python3-numpy", "python3-scipy", "python3-matplotlib")
COMPILER_PACKAGE_RE = re.compile(r"^(gcc|g\+\+)-\d+$")


class SkipCheck(Exception):
    pass


@dataclass
class Check:
    name: str
    passed: bool
    detail: str
    seconds: float = 0.0
    skipped: bool = False        # could not run here (no hypervisor); does not fail the test


@dataclass
class Report:
    build: str
    checks: list = field(default_factory=list)

    @property
    def passed(self):
        return bool(self.checks) and all(c.passed for c in self.checks)

    @property
    def summary(self):
        failed = [c for c in self.checks if not c.passed]
        skipped = [c.name for c in self.checks if c.skipped]
        if not failed:
            return (f"{len(self.checks) - len(skipped)} checks passed"
                    + (f", skipped: {', '.join(skipped)}" if skipped else ""))
        return f"{len(failed)} of {len(self.checks)} checks failed: " + "; ".join(
            f"{c.name}: {c.detail}" for c in failed)


def run_pgo(build, pgo_args, out, log, scratch, echo=None, env=None):
    """`python3 -m pgo ...` inside the image as its worker user; out is /srv/out there; env added."""
    manifest = build.manifest
    user = manifest["definition"]["worker"]["user"]
    uid, gid = worker_ids(build.rootfs, user)
    out.mkdir(parents=True, exist_ok=True)
    shutil.chown(out, uid, gid)
    return chroot.run(build.rootfs, ["python3", "-m", "pgo", *pgo_args], log, user=user,
                      binds=[chroot.Bind(REPO, REPO_IN_IMAGE), chroot.Bind(out, OUT_IN_IMAGE, writable=True)],
                      cwd=REPO_IN_IMAGE, scratch=scratch, echo=echo, env=env)


def test_image(build, store, say=print):
    manifest = build.manifest
    compiler = manifest["definition"]["compiler"]
    user = manifest["definition"]["worker"]["user"]
    folder = build.path / "tests"
    folder.mkdir(exist_ok=True)
    started_at = stamp()
    log = folder / f"{started_at}.log"
    scratch = store.scratch(f"test-{build.image}-{build.build_id}")
    report = Report(build.ref)
    say(f"testing {build.ref} inside its root filesystem (log: {log})")

    def check(name, function):
        started = time.monotonic()
        skipped = False
        try:
            passed, detail = function()
        except ImageError as e:
            passed, detail = False, str(e)
        except SkipCheck as e:
            passed, detail, skipped = True, str(e), True
        report.checks.append(Check(name, passed, detail, round(time.monotonic() - started, 1), skipped))
        say(f"  {'SKIP' if skipped else 'PASS' if passed else 'FAIL'} {name}: {detail}")

    @contextmanager
    def throwaway(suffix):
        """A folder beside the scratch overlay for one check, removed before and after it."""
        path = scratch.with_name(f"{scratch.name}-{suffix}")
        shutil.rmtree(path, ignore_errors=True)
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def in_image(argv):
        return chroot.run(build.rootfs, argv, log, user=user, scratch=scratch)

    def pins():
        wrong = [f"{p} is {manifest['packages'].get(p, 'missing')}, pinned {v}"
                 for p, v in compiler["packages"].items() if manifest["packages"].get(p) != v]
        return not wrong, "; ".join(wrong) or ", ".join(f"{p}={v}" for p, v in compiler["packages"].items())

    def only_compiler():
        others = sorted(p for p in manifest["packages"]
                        if COMPILER_PACKAGE_RE.match(p) and p not in compiler["packages"])
        return not others, (f"other compilers installed: {', '.join(others)}" if others
                            else f"no GCC besides {compiler['cc']}")

    def version():
        result = in_image(["sh", "-c", f"{compiler['cc']} -dumpfullversion; {compiler['cxx']} -dumpfullversion; "
                                       f"{compiler['cc']} --version | head -n 1"])
        lines = result.tail.splitlines()[-3:]
        if not result.ok or len(lines) != 3:
            return False, f"could not run {compiler['cc']}: {result.tail[-200:]}"
        cc_version, cxx_version, banner = lines
        ok = cc_version == cxx_version == compiler["version"]
        return ok, (f"{compiler['cc']} {cc_version}, {compiler['cxx']} {cxx_version} "
                    f"(pinned {compiler['version']}): {banner}")

    def worker():
        expected = manifest["definition"]["worker"]["buildbot_worker"]
        result = in_image([f"{WORKER_VENV}/bin/buildbot-worker", "--version"])
        found = re.search(r"worker version: (\S+)", result.tail)
        ok = result.ok and found is not None and found.group(1) == expected
        return ok, f"buildbot-worker {found.group(1) if found else 'not runnable'} (pinned {expected}) as {user}"

    def fixture_pipeline():
        with throwaway("out") as out:
            result = run_pgo(build, ["build", "--version", "1.0.0", "--config", "fixture",
                                     "--source", "tests/fixture", "--workdir", f"{OUT_IN_IMAGE}/w",
                                     "--cc", compiler["cc"], "--cxx", compiler["cxx"]], out, log, scratch)
            if not result.ok:
                return False, f"pgo build failed with status {result.returncode}: {result.tail.splitlines()[-1:]}"
            info = read_json(out / "w" / protocol.BUILD_INFO, "build info")
            use = read_json(out / "w" / protocol.PROFILE_USE, "profile use")
            ok = info["compiler"]["version"] == compiler["version"] and info["pgo"] == "on" and use["hot_coverage"] > 0
            return ok, (f"PGO build with {info['compiler']['cc']} {info['compiler']['version']}, profile "
                        f"{use['profile_id']} used on {use['hot_coverage']:.0%} of hot objects")

    def benchmark():
        with throwaway("bench") as out:
            sysbench = in_image(["sysbench", "--version"])
            if not sysbench.ok:
                return False, f"sysbench does not run: {sysbench.tail[-200:]}"
            # the release gate's --callgrind
            valgrind = in_image(["valgrind", "--version"])
            if not valgrind.ok:
                return False, f"valgrind does not run: {valgrind.tail[-200:]}"
            result = run_pgo(build, ["bench", "--from-result", BENCH_SAMPLE, "--out", f"{OUT_IN_IMAGE}/bench"],
                             out, log, scratch)
            # 0 and 1 are the gate's verdicts: the analysis ran; anything else is a broken tool
            if result.returncode not in (0, 1) or not (out / "bench" / "speedup.png").is_file():
                return False, f"pgo bench --from-result failed with status {result.returncode}: {result.tail[-300:]}"
            libraries = ", ".join(f"{p} {manifest['packages'].get(p, 'missing')}" for p in BENCH_LIBRARIES)
            return True, (f"{sysbench.tail.splitlines()[-1]}, {valgrind.tail.splitlines()[-1]}; pgo bench "
                          f"re-analysed and plotted {BENCH_SAMPLE} "
                          f"({libraries})")

    def boots():
        missing = boot.emulator_missing()
        if missing:
            raise SkipCheck(f"not booted here: {missing}")
        with throwaway("vm") as scratch_vm:
            reached, console = boot.boot(build, scratch_vm)
        (folder / f"{started_at}-console.log").write_text(console)
        console = without_terminal_codes(console)
        failed_units = re.findall(r"\[FAILED\] Failed to start (.+?)\.?$", console, re.M)
        if not reached:
            console_log = folder / f"{started_at}-console.log"
            return False, f"no login prompt within {boot.BOOT_TIMEOUT} s (console: {console_log})"
        if failed_units:
            return False, f"booted, but units failed: {', '.join(failed_units)}"
        kernel = re.search(r"Linux version (\S+)", console)
        return True, (f"kernel {kernel.group(1) if kernel else '?'} booted from disk.qcow2 "
                      f"to '{boot.LOGIN_PROMPT}' with no failed units")

    check("compiler pins", pins)
    check("one compiler", only_compiler)
    check("compiler version", version)
    check("buildbot worker", worker)
    check("fixture PGO pipeline", fixture_pipeline)
    check("benchmark gate tools", benchmark)
    check("boots as a VM", boots)
    write_json(folder / f"{started_at}.json", {"build": build.ref, "tested_at": now(), "passed": report.passed,
                                          "checks": [asdict(c) for c in report.checks]})
    say(f"{build.ref}: {'PASSED' if report.passed else 'FAILED'}: {report.summary}")
    return report
