"""The compiler upgrade rollout: a new image reaches the build VMs only after it proved itself.

    1 build     build the new image (or take a finished build of it)
    2 test      its pinned compiler and the fixture's PGO pipeline, inside it
    3 canary    a PGO build of the canary configuration inside the new image
    4 baseline  the same build inside the current image
    5 gate      the canary's gate compares the two (pgo bench, or identical output)
    6 promote   the pointer moves to the new image; the old one stays for a rollback

Each step stops the rollout when it fails; the canary runs before the baseline so a
broken image costs one build, not two. Everything printed is also recorded in
<images>/rollouts/<id>/rollout.json, so a release engineer sees why a rollout stopped.

Profiles: `.gcda` files are only valid for the exact compiler that wrote them, and the
profile archive records that version in every manifest. The pointer names the current
image's exact compiler, so "profiles of the old compiler are not reusable" is the rule
`reusable = archived compiler version == current.json's current.compiler.version`,
with no second record that could disagree with the pointer, and a rollback makes the old
profiles reusable again by the same rule.
"""

import dataclasses
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from pgo.base import platforms, process, protocol
from pgo.base.atomic import write_json
from pgo.bench.policy import POLICIES
from vm_images import ImageError, definition
from vm_images.checks import OUT_IN_IMAGE
from vm_images.store import ROLLOUT_RECORD, now, read_json, stamp

# What the canary and baseline builds depend on: a resume keeps them only if these are unchanged.
CANARY_BUILD_SETTINGS = ("name", "version", "config", "source")
# A canary source given as a Debian source package's .dsc (`rollout --canary-source`) is copied, verified,
# into the rollout's work/ under this folder: both images build the same bytes (a chroot sees only work/),
# and a resumed rollout finds them there after the given path has gone.
GIVEN_SOURCE = "source"
GIVEN_SOURCE_IN_IMAGE = f"{OUT_IN_IMAGE}/{GIVEN_SOURCE}"


def canary_from_dsc(canary, dsc):
    """The canary built from the Debian source package `dsc` (its files beside it) instead of its own source.

    For a mirror that no longer lists the canary's version (11.8.6 here: trixie lists 11.8.9, whose files
    answer 404), so `source = "debian"` cannot fetch it. Refused in one line, before anything is written,
    unless it is the source of the canary's product and version and every file matches the .dsc.
    """
    from pgo.build.source import dsc_field, release_of, verify_dsc
    from pgo.core.config import build_config
    dsc = Path(dsc)
    if dsc.suffix != ".dsc" or not dsc.is_file():
        raise ImageError(f"--canary-source {dsc}: not a Debian source package's .dsc (its files beside it)")
    product = build_config(canary.config).product
    if not product.debian_source:
        raise ImageError(f"canary '{canary.name}' builds {product.name}, which has no Debian source package: "
                         "--canary-source takes a .dsc of one")
    name, full = dsc_field(dsc, "Source"), dsc_field(dsc, "Version")
    if (name, release_of(full)) != (product.debian_source, canary.version):
        raise ImageError(f"--canary-source {dsc.name} is the source of {name} {release_of(full) or full}, not of "
                         f"canary '{canary.name}': {product.debian_source} {canary.version}")
    verify_dsc(dsc)
    return dataclasses.replace(canary, source=f"{GIVEN_SOURCE_IN_IMAGE}/{dsc.name}")


def copy_given_source(dsc, work):
    """The .dsc and its files into work/GIVEN_SOURCE, verified again as the builds will read them."""
    from pgo.build.source import dsc_files, verify_dsc
    target = work / GIVEN_SOURCE
    target.mkdir(parents=True)
    for name in (dsc.name, *dsc_files(dsc)):
        shutil.copy2(dsc.parent / name, target / name)
    verify_dsc(target / dsc.name)


def check_fetchable(canary, images):
    """A canary with `source = "debian"` is fetched inside each image: refuse, before anything is built, one
    whose Debian release serves neither the suite of the configuration's line nor has it among its
    source_suites (the minimal canary's 10.11 is bookworm's; a trixie image fetches trixie's)."""
    from pgo.core.config import build_config
    config = build_config(canary.config)
    suite = config.debian_suite if canary.source == "debian" else None
    for name, release, source_suites in images:
        if suite and suite not in (release, *source_suites):
            raise ImageError(f"canary '{canary.name}' builds Debian's source of {config.product.name} {config.line}, "
                             f"which is {suite}'s, and image {name} fetches sources of "
                             f"{', '.join((release, *source_suites))}: "
                             "choose another canary (--canary-config) or give its .dsc (--canary-source)")


# The gate runs both builds inside the new image, so the new compiler's code is measured against the
# old one's on the same libraries. A baseline built in another Debian release may need a library under a
# name the new one no longer has (bookworm's libaio.so.1 is trixie's libaio.so.1t64): only those are
# copied from the current image into work/GATE_LIBRARIES, which the gate puts on the library path. The
# canary, built in the new image, never asks for a name the new image lacks, so it loads none of them.
GATE_LIBRARIES = "gate-libraries"
# Where an image keeps shared libraries (Debian's multiarch folders first).
LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib", "lib", "usr/lib64", "lib64")
NEEDED_RE = re.compile(r"\(NEEDED\)\s+Shared library: \[(.+?)\]")


def needed_libraries(files):
    """{soname: the first file that needs it} of the ELF files among files (readelf -d)."""
    needed = {}
    for path in files:
        if path.is_symlink() or not path.is_file():
            continue
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        for soname in NEEDED_RE.findall(process.output_of(["readelf", "-d", path], error=ImageError)):
            needed.setdefault(soname, path)
    return needed


def library_in(rootfs, soname):
    """The file of soname in an image's library folders, or None."""
    return next((rootfs / d / soname for d in LIBRARY_DIRS if (rootfs / d / soname).exists()), None)


def libraries_for_baseline(stage, old_rootfs, new_rootfs, target):
    """Copy into target what the baseline's staged tree needs that neither it nor the new image has, from
    the image it was built in, with what those need in turn; [(soname, the file that needs it)]."""
    shutil.rmtree(target, ignore_errors=True)
    files = sorted(stage.rglob("*"))
    own = {p.name for p in files if ".so" in p.name}
    wanted = needed_libraries(files)
    copied = []
    while wanted:
        soname, user = wanted.popitem()
        if soname in own or library_in(new_rootfs, soname):
            continue
        found = library_in(old_rootfs, soname)
        if found is None:
            raise ImageError(f"the baseline's {user.name} needs {soname}, which neither image has")
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(found.resolve(), target / soname)
        own.add(soname)                     # lent now: the tree has it from here on
        copied.append((soname, user))
        wanted.update({k: v for k, v in needed_libraries([target / soname]).items() if k not in wanted})
    return sorted(copied)


@dataclass
class Outcome:
    passed: bool
    summary: str
    details: dict = field(default_factory=dict)


class ImageOperations:
    """The slow, external part of a rollout: building, testing and running builds in images."""

    def __init__(self, store, say=print):
        self.store = store
        self.say = say

    def build(self, image):
        from vm_images.build import build
        build(image, self.store, say=self.say)
        return self.store.build(image.name)

    def test(self, build):
        from vm_images.checks import test_image
        report = test_image(build, self.store, say=self.say)
        return Outcome(report.passed, report.summary, {"checks": [c.__dict__ for c in report.checks]})

    def canary_build(self, build, canary, role, folder):
        """The canary's PGO build inside build's image, into folder/work/<role>."""
        from vm_images.checks import run_pgo
        compiler = build.manifest["definition"]["compiler"]
        started = time.monotonic()
        result = run_pgo(build, ["build", "--version", canary.version, "--config", canary.config,
                                 "--source", canary.source, "--workdir", f"{OUT_IN_IMAGE}/{role}",
                                 "--cache", f"{OUT_IN_IMAGE}/cache",
                                 "--cc", compiler["cc"], "--cxx", compiler["cxx"]],
                         folder / "work", folder / f"{role}.log", self.store.scratch(f"{role}-{folder.name}"),
                         echo=role)
        seconds = round(time.monotonic() - started, 1)
        if not result.ok:
            return Outcome(False, f"pgo build failed in {build.ref} with status {result.returncode} "
                           f"(log: {folder / f'{role}.log'})", {"seconds": seconds, "tail": result.tail})
        workdir = folder / "work" / role
        use = read_json(workdir / protocol.PROFILE_USE, "canary profile use")
        return Outcome(True, f"PGO build of {canary.config} {canary.version} with {compiler['cc']} "
                       f"{compiler['version']} passed in {seconds:.0f} s; profile {use['profile_id']} used on "
                       f"{use['hot_coverage']:.0%} of hot objects",
                       {"seconds": seconds, "build_info": read_json(workdir / protocol.BUILD_INFO, "canary build info"),
                        "profile_use": use, "phases": read_json(workdir / protocol.STATE, "canary state")["done"]})

    def gate(self, build, current, canary, folder):
        """Compare baseline (built in current) and canary inside the new image (build)."""
        from vm_images import chroot
        from vm_images.checks import run_pgo
        # one log and report per attempt: a resumed rollout's gate keeps the stopped one's
        attempt = f"gate-{stamp()}"
        log = folder / f"{attempt}.log"
        borrowed = libraries_for_baseline(folder / "work" / "baseline" / "stage", current.rootfs, build.rootfs,
                                          folder / "work" / GATE_LIBRARIES)
        env = {"LD_LIBRARY_PATH": f"{OUT_IN_IMAGE}/{GATE_LIBRARIES}"} if borrowed else None
        details = {"baseline_libraries": [{"soname": s, "needed_by": user.name} for s, user in borrowed]}
        note = (f"; the baseline ran with {', '.join(s for s, _ in borrowed)} of {current.ref}, which "
                f"{build.image} lacks" if borrowed else "")
        if canary.gate == "bench":
            result = run_pgo(build, ["bench", "--baseline", f"{OUT_IN_IMAGE}/baseline/stage",
                                     "--candidate", f"{OUT_IN_IMAGE}/canary/stage",
                                     "--out", f"{OUT_IN_IMAGE}/{attempt}",
                                     *canary.bench_options, "--policy", canary.policy],
                             folder / "work", log, self.store.scratch(f"gate-{folder.name}"), echo="gate", env=env)
            if result.returncode not in (0, 1):
                raise ImageError(f"pgo bench could not run (status {result.returncode}; log: {log})")
            verdict = ("passed" if result.ok else f"failed: the canary's build is not shown to be at least "
                       f"{POLICIES[canary.policy].min_speedup:g}x as fast as the current image's, or is "
                       "measurably slower")
            return Outcome(result.ok, f"benchmark gate {verdict} (report: {folder / 'work' / attempt}){note}",
                           {"tail": result.tail, **details})
        outputs = {}
        user = build.manifest["definition"]["worker"]["user"]
        for role in ("baseline", "canary"):
            command = [f"{OUT_IN_IMAGE}/{role}/stage/{canary.compare[0]}", *canary.compare[1:]]
            result = chroot.run(build.rootfs, command, log, user=user, cwd=OUT_IN_IMAGE, env=env,
                                binds=[chroot.Bind(folder / "work", OUT_IN_IMAGE)],
                                scratch=self.store.scratch(f"gate-{folder.name}"))
            if not result.ok:
                return Outcome(False, f"{' '.join(canary.compare)} of the {role} failed with status "
                               f"{result.returncode} (log: {log})")
            outputs[role] = result.tail
        same = outputs["baseline"] == outputs["canary"]
        return Outcome(same, f"{' '.join(canary.compare)}: " + (
            f"same output from both builds ({outputs['canary'].splitlines()[-1]})" if same else
            f"outputs differ: baseline {outputs['baseline']!r}, canary {outputs['canary']!r}") + note,
            {**outputs, **details})


class Rollout:
    def __init__(self, store, operations, canary, say=print, source=None):
        """source: the canary's Debian source package as its .dsc, instead of the canary's own source."""
        self.store = store
        self.ops = operations
        self.given = Path(source).resolve() if source else None
        self.canary = canary_from_dsc(canary, self.given) if source else canary
        self.say = say

    def run(self, to_image, from_image=None, reuse_build=None, resume=None):
        """True when the new image was promoted; False when a step stopped the rollout.

        resume: the id of a stopped rollout to continue in its folder. The steps it passed are
        kept (the hour of canary and baseline builds is not redone), the step that stopped it
        and those after run again; the earlier attempt stays in the record under "attempts".
        """
        current = self.store.current()
        if from_image and current.image != from_image:
            raise ImageError(f"the current image is {current.ref}, not {from_image}: nothing to roll out from")
        image = definition.image(to_image)
        kept = {}
        if resume and self.given:
            raise ImageError(f"rollout {resume} builds the source it copied into its folder: resume it without "
                             "--canary-source")
        if resume:     # nothing is written before the checks below passed
            rollout_id, folder = resume, self.store.rollouts / resume
            self.record = read_json(folder / ROLLOUT_RECORD, f"rollout {resume}")
            recorded = self.record.get("canary", {}).get("source", "")
            if recorded.startswith(f"{GIVEN_SOURCE_IN_IMAGE}/"):   # the copy in its folder, as before
                self.canary = dataclasses.replace(self.canary, source=recorded)
            kept, reuse_build = self.resumable(current, to_image, reuse_build)
            earlier = {k: self.record.pop(k) for k in ("canary", "steps", "decision", "reason", "started", "finished")}
            self.record.setdefault("attempts", []).append(earlier)
            # the gate's settings may have changed since (the builds do not depend on them)
            self.record.update(canary=self.canary.__dict__, steps=[], decision="running", started=now())
        if reuse_build:
            self.store.build(f"{to_image}/{reuse_build}")      # fails now, not after an hour
            if f"{to_image}/{reuse_build}" == current.ref:
                raise ImageError(f"{current.ref} is already the current image")
        old = current.manifest["definition"]
        check_fetchable(self.canary, [(to_image, image.release, image.source_suites),
                                      (current.ref, old["release"], old.get("source_suites", []))])
        if not resume:
            rollout_id = f"{stamp()}-{current.image}-to-{to_image}"
            folder = self.store.rollouts / rollout_id
            folder.mkdir(parents=True)
            if self.given:
                try:
                    copy_given_source(self.given, folder / "work")
                except BaseException:
                    shutil.rmtree(folder)
                    raise
            self.record = {"id": rollout_id, "from": current.ref, "to": to_image, "canary": self.canary.__dict__,
                           "started": now(), "steps": [], "decision": "running"}
            if self.given:
                self.record["canary_source"] = str(self.given)
        self.record_file = folder / ROLLOUT_RECORD
        self.save()
        self.say(f"rollout {current.ref} ({current.manifest['definition']['compiler']['cc']}) -> {to_image} "
                 f"({image.compiler.cc} {image.compiler.version}), canary '{self.canary.name}'; "
                 f"{'resumed, ' if resume else ''}record: {self.record_file}")
        new = None

        def build():
            nonlocal new
            if reuse_build:
                new = self.store.build(f"{to_image}/{reuse_build}")
                return Outcome(True, f"using the finished build {new.ref}", {"build": new.ref})
            new = self.ops.build(image)
            return Outcome(True, f"built {new.ref}", {"build": new.ref})

        steps = [
            ("build", f"build image {to_image}", build),
            ("test", f"test {to_image} inside it", lambda: self.ops.test(new)),
            ("canary", f"canary: PGO build of '{self.canary.config}' {self.canary.version} in {to_image}",
             lambda: self.ops.canary_build(new, self.canary, "canary", folder)),
            ("baseline", f"the same build in the current image {current.ref}",
             lambda: self.ops.canary_build(current, self.canary, "baseline", folder)),
            ("gate", f"gate '{self.canary.gate}': canary against baseline",
             lambda: self.ops.gate(new, current, self.canary, folder)),
            ("promote", f"point the build VMs at {to_image}", lambda: self.promote(current, new, rollout_id)),
        ]
        for number, (name, title, function) in enumerate(steps, 1):
            if name in kept:
                self.say(f"== step {number} of {len(steps)}: {name}: kept from the stopped attempt: "
                         f"{kept[name]['summary']}")
                self.record["steps"].append(kept[name])
            elif not self.step(number, len(steps), name, title, function):
                return False
        self.finish("promoted", f"{new.ref} is the current image; rollback: python3 -m vm_images rollback")
        return True

    def resumable(self, current, to_image, reuse_build):
        """The passed steps a resume keeps (after build, before the failed one) and the build to use."""
        record = self.record
        if record.get("decision") != "stopped":
            raise ImageError(f"rollout {record['id']} is {record.get('decision')}: only a stopped rollout resumes")
        if (record["from"], record["to"]) != (current.ref, to_image):
            raise ImageError(f"rollout {record['id']} went from {record['from']} to {record['to']}; now the "
                             f"current image is {current.ref}: start a new rollout")
        changed = [k for k in CANARY_BUILD_SETTINGS if record["canary"].get(k) != getattr(self.canary, k)]
        if changed:
            raise ImageError(f"the canary's {changed[0]} changed since rollout {record['id']}, so its builds "
                             "do not apply: start a new rollout")
        steps = record["steps"]
        built = steps[0].get("details", {}).get("build") if steps and steps[0]["result"] == "passed" else None
        if built and reuse_build and built != f"{to_image}/{reuse_build}":
            raise ImageError(f"rollout {record['id']} tested {built}, not {to_image}/{reuse_build}")
        if not (built or reuse_build):
            raise ImageError(f"rollout {record['id']} names no finished build of {to_image}: "
                             f"pass the one it used with --build")
        kept = {}
        for entry in steps[1:]:
            if entry["result"] != "passed":
                break
            kept[entry["step"]] = entry
        return kept, reuse_build or built.split("/", 1)[1]

    def step(self, number, total, name, title, function):
        self.say(f"== step {number} of {total}: {name}: {title}")
        started = time.monotonic()
        entry = {"step": name, "title": title, "started": now()}
        try:
            outcome = function()
        except ImageError as e:
            outcome = Outcome(False, str(e))
        except BaseException as e:
            entry.update(result="error", summary=f"{type(e).__name__}: {e}")
            self.record["steps"].append(entry)
            self.finish("stopped", f"step {name} broke off: {type(e).__name__}: {e}")
            raise
        entry.update(result="passed" if outcome.passed else "failed", summary=outcome.summary,
                     seconds=round(time.monotonic() - started, 1), details=outcome.details)
        self.record["steps"].append(entry)
        self.save()
        self.say(f"== {name}: {entry['result'].upper()}: {outcome.summary}")
        if not outcome.passed:
            self.finish("stopped", f"step {name} failed: {outcome.summary}; the current image is unchanged")
        return outcome.passed

    def promote(self, current, new, rollout_id):
        entry = self.store.point_to(new, f"rollout {rollout_id}")
        old_version = current.manifest["definition"]["compiler"]["version"]
        new_version = entry["compiler"]["version"]
        profiles = ("profiles stay reusable (same compiler)" if old_version == new_version else
                    f"profiles archived with GCC {old_version} are not reusable with GCC {new_version} "
                    "(reuse needs the exact compiler of current.json)")
        moved = platform_change(current.image, new.image)
        return Outcome(True, f"{self.store.pointer_file.name} now names {new.ref}; {current.ref} kept for "
                       f"a rollback; {profiles}{moved}", {"pointer": entry, "profiles_not_reusable": old_version
                                                          if old_version != new_version else None})

    def finish(self, decision, reason):
        self.record.update(decision=decision, reason=reason, finished=now())
        self.save()
        self.say(f"rollout {decision}: {reason} (record: {self.record_file})")

    def save(self):
        write_json(self.record_file, self.record)


def platform_change(old_image, new_image):
    """What a promotion to another platform's image means for the workers of this images folder ("" when
    both images are one platform's, or an image is no platform's)."""
    table = platforms.load()
    old, new = ({p.image: p.name for p in table.values() if p.image}.get(i) for i in (old_image, new_image))
    if not (old and new) or old == new:
        return ""
    return (f"; {new_image} is platform {new}'s image, {old_image} was {old}'s: this folder's workers build for "
            f"{new} now (the master refuses them in a [[platforms]] entry of {old}: give those a folder of their own)")


def rollback(store, reason, say=print):
    """Point back at the image current before this one; every build and record stays."""
    current = store.current()
    previous = store.previous()
    entry = store.point_to(previous, f"rollback from {current.ref}: {reason}")
    say(f"current image: {entry['image']}/{entry['build']} ({entry['compiler']['cc']} "
        f"{entry['compiler']['version']}), was {current.ref}; both builds kept; pointer {store.pointer_file}")
    return entry
