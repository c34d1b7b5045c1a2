"""pgo prove: install a published package folder and run what it installed.

    pgo prove DIR [--replace-distribution] [--piuparts | --piuparts-only] [--upgrade-from OLDER]

First the folder itself: sha256sums.txt lists every file and matches. Then by
format (buildinfo.json says which):
  bintar  unpack anywhere, create a datadir with its own install script, start
          the server on a private socket, query it, shut it down; then the
          product's smoke test set (mtr) from the tarball's own test suite
  rpm     rpm -qp metadata, file list and requirements; rpmlint without errors;
          the payload extracted with rpm2cpio | cpio runs as the bintar does,
          then the smoke test set from the test package's suite there
  deb     lintian without errors; with --piuparts, Debian's piuparts (pgo/packaging/piuparts.py):
          install, remove and purge (no file left, no maintainer script failing),
          the upgrade from the distribution's packages of the same names where
          its archive serves them (and OLDER's, a folder of an earlier release),
          and apt's refusal to put the distribution's older version back over
          ours without --allow-downgrades (--piuparts-only: that alone, then
          stop); then installed with apt into a clean chroot made by mmdebstrap
          (never into this host; --replace-distribution: over the distribution's
          packages installed first, refused if apt would remove any of them),
          the server started there, queried, stopped;
          then the smoke test set from the installed test package, in the
          chroot, as nobody
The run itself is packaging/smoke/<product>.sh; its `version_comment:` line must
carry the build's mark: the profile id for PGO packages, "plain build" otherwise.
"""

import re
import shlex
import stat
import sys
import tempfile
from pathlib import Path, PurePosixPath

from pgo import PipelineError
from pgo.base import platforms, process
from pgo.base.checksums import SUMS, verify_sha256sums
from pgo.base.formats import Format, parse
from pgo.base.protocol import PACKAGE_INFO
from pgo.base.runner import PhaseLog, say
from pgo.build import source, testrun
from pgo.core.config import product
from pgo.core.workdir import cache_root, read_json
from pgo.packaging import debpackages, piuparts
from pgo.packaging.recipes import BOLT_MARK, RECIPES, STALE_MARK, load_toml, unmet_set_requirements

# The test set `pgo prove` runs on what a package installed (pgo/configs.toml).
SMOKE_SET = "smoke"
# The user the test set runs as in the chroot: base-passwd's nobody/nogroup, in every Debian system.
NOBODY = 65534


def register(subparsers):
    prove = subparsers.add_parser("prove", help="install a package folder's packages and run them")
    prove.add_argument("folder", help="a folder published by `pgo package`")
    prove.add_argument("--platform", help="deb: the platform (pgo/platforms.toml) the debs are for: its Debian "
                                          "release is the chroot's and piuparts', its version suffix the deb "
                                          "recipe's (default: this machine's, or $PGO_PLATFORM)")
    prove.add_argument("--distribution", help="Debian release of the deb chroot and of piuparts (default: the "
                                              "platform's codename)")
    prove.add_argument("--mirror", help="Debian mirror for the chroot and piuparts (default: deb.debian.org)")
    prove.add_argument("--replace-distribution", action="store_true",
                       help="deb: in the chroot, first install the distribution's packages of the set's names, "
                            "the recipe's distribution_packages and --upgrade-from's set, then ours over them "
                            "with apt; refused if apt would remove any of them")
    prove.add_argument("--piuparts", action="store_true",
                       help="deb: also run Debian's piuparts (install, upgrade from the distribution's packages "
                            "of the same names, remove, purge) and prove that apt refuses the distribution's older "
                            "version over ours without --allow-downgrades. Not the default: it installs the set "
                            "twice more and purges it (minutes for MariaDB's set), from a base chroot in the cache")
    prove.add_argument("--piuparts-only", action="store_true",
                       help="deb: the folder's checks, lintian and --piuparts, without the chroot's run of the "
                            "packages (a folder whose chroot proof passed; piuparts again after a packaging fix)")
    prove.add_argument("--upgrade-from", metavar="OLDER",
                       help="with --piuparts or --replace-distribution: a deb folder `pgo package` published of an "
                            "earlier release, served beside the archive: piuparts upgrades from it where it is newer "
                            "than the archive's, and --replace-distribution installs it first")
    prove.add_argument("--cache", help="download cache, for piuparts' base chroot (default: ~/.cache/pgo)")
    prove.set_defaults(func=cmd_prove)


def cmd_prove(args):
    folder = Path(args.folder).resolve()
    info = load_buildinfo(folder)
    check_label(info)
    args.piuparts = args.piuparts or args.piuparts_only
    if args.piuparts and info["format"] != "deb":
        raise PipelineError(f"--piuparts proves debs; {folder.name} holds {info['format']} packages")
    if args.replace_distribution and info["format"] != "deb":
        raise PipelineError(f"--replace-distribution replaces the distribution's debs; {folder.name} holds "
                            f"{info['format']} packages")
    if args.replace_distribution and args.piuparts_only:
        raise PipelineError("--piuparts-only skips the chroot --replace-distribution installs into: drop one of them")
    if args.upgrade_from and not (args.piuparts or args.replace_distribution):
        raise PipelineError("--upgrade-from is the older set of --piuparts' upgrade test or of "
                            "--replace-distribution: add one of them")
    # An unknown platform is refused before any work; a machine of no platform only where debs need one.
    args.platform = platforms.platform(args.platform) if args.platform else None
    say(f"proving {folder.name}: {info['product']} {info['package_version']} {info['format']}, "
        f"{'PGO profile ' + info['profile_id'] if info['profile_id'] else 'plain build'}")
    if args.upgrade_from:
        check_older(Path(args.upgrade_from).resolve(), info)
    comment = PROVERS[parse(info["format"])](folder, info, args)
    if args.piuparts_only:
        say("proof passed: lintian and piuparts (--piuparts-only: the packages were not run, no version comment)")
        return
    check_mark(comment, info)
    say(f"proof passed: version comment '{comment}'")


# What the proof reads of buildinfo.json (pgo/packaging/package.py writes it), and the types it reads.
READS = {"product": str, "format": str, "version": str, "package_version": str, "release": int,
         "profile_id": (str, type(None)), "profile_use": (dict, type(None)), "bolt": (dict, type(None)),
         "compiler": dict, "binary": dict}


def load_buildinfo(folder):
    """A published folder's buildinfo.json, once its checksums match, with every field the proof reads."""
    path = folder / PACKAGE_INFO
    if not path.is_file():
        raise PipelineError(f"{folder} has no buildinfo.json: it is not a folder `pgo package` published")
    check_checksums(folder)
    info = read_json(path)
    if isinstance(info, dict):
        info.setdefault("profile_use", None)    # a folder of a pgo before profile checks were recorded
        info.setdefault("bolt", None)           # or before BOLT
    wrong = [key for key, kind in READS.items() if not isinstance(info, dict) or key not in info
             or not isinstance(info[key], kind)]
    if not wrong:
        wrong = [name for name, ok in (("format", info["format"] in PROVERS),
                                       ("compiler.version", "version" in info["compiler"]),
                                       ("binary.name", "name" in info["binary"])) if not ok]
    if wrong:
        raise PipelineError(f"{path} is not one `pgo package` wrote: {', '.join(wrong)} missing or wrong")
    return info


def check_checksums(folder):
    if not (folder / SUMS).is_file():
        raise PipelineError(f"{folder} has no {SUMS}")
    bad = verify_sha256sums(folder)
    if bad:
        raise PipelineError(f"checksum mismatch: {', '.join(bad)}")
    say(f"  {SUMS}: every file matches")


def check_label(info):
    """A PGO label stands only on the packaged binary's own passed profile check."""
    check = info.get("profile_use")
    pgo_named = info["profile_id"] or "+pgo" in info["package_version"]
    if not pgo_named:
        return
    if not check or not check.get("passed"):
        raise PipelineError(f"{info['package_version']} is labelled PGO, but its binary did not pass a profile check")
    theirs = (check.get("profile_id"), check.get("identity", {}).get("compiler", {}).get("version"))
    ours = (info["profile_id"], info["compiler"]["version"])
    if theirs != ours:
        raise PipelineError(f"{info['package_version']} is labelled profile {ours[0]}, GCC {ours[1]}, but its "
                            f"binary's profile check says profile {theirs[0]}, GCC {theirs[1]}")
    stale, marked = bool(check.get("stale")), STALE_MARK in info["package_version"]
    if stale and not marked:
        raise PipelineError(f"{info['package_version']} has no stale mark ({STALE_MARK}), but its binary's profile "
                            f"check says its profile was trained on other source")
    if marked and not stale:
        raise PipelineError(f"{info['package_version']} is marked stale, but its binary's profile check says its "
                            "profile was trained on this very source")
    bolted, bolt_marked = bool((info["bolt"] or {}).get("passed")), info["package_version"].endswith(BOLT_MARK)
    if bolt_marked != bolted:
        raise PipelineError(f"{info['package_version']} {'is' if bolt_marked else 'is not'} marked BOLT ({BOLT_MARK}), "
                            f"but its binary {'has no passed' if bolt_marked else 'has a passed'} BOLT check")
    say(f"  label: {'stale ' if stale else ''}profile {check['profile_id']} used by {check['hot_coverage']:.0%} of "
        f"the hot objects, GCC {theirs[1]} (the binary's own profile check)"
        + (f"; BOLT: {info['bolt']['profiled_functions']} functions profiled (its own check)" if bolted else ""))


def check_mark(comment, info):
    if info["profile_id"]:
        mark = "PGO+BOLT build" if info["bolt"] else "PGO build"
        if mark not in comment or info["profile_id"] not in comment:
            raise PipelineError(f"version comment '{comment}' lacks the mark '{mark}' with profile "
                                f"{info['profile_id']}")
        stale = bool((info["profile_use"] or {}).get("stale"))
        if stale != (f"stale profile {info['profile_id']}" in comment):
            raise PipelineError(f"version comment '{comment}' {'lacks' if stale else 'has'} the mark of a stale "
                                f"profile, but the binary's profile check says its profile is "
                                f"{'stale' if stale else 'of this very source'}")
    elif "PGO" in comment.replace("no PGO", "") or "plain build" not in comment:
        raise PipelineError(f"version comment '{comment}' of a plain package does not say 'plain build'")


def only(folder, pattern):
    found = sorted(folder.glob(pattern))
    if len(found) != 1:
        raise PipelineError(f"{folder} holds {len(found)} files matching {pattern}, expected one")
    return found[0]


def some(folder, pattern):
    found = sorted(folder.glob(pattern))
    if not found:
        raise PipelineError(f"{folder} holds no {pattern} files")
    return found


def run(cmd, cwd=None, show=False, merged=False, reason=None):
    """Run cmd; its output, shown indented if `show`. A failure is one PipelineError: the first group of
    `reason` (a pattern) where the output has a match, else the command and its status."""
    cmd = [str(c) for c in cmd]
    done = process.run(cmd, cwd=cwd)
    output = done.stdout + done.stderr
    if show:
        for line in output.rstrip().splitlines():
            say(f"    {line}")
    if done.returncode != 0:
        if not show:
            print(output.rstrip(), file=sys.stderr)
        found = reason.search(output) if reason else None
        raise PipelineError(found.group(1) if found
                            else f"{' '.join(cmd[:2])} ... failed with status {done.returncode}")
    return output if merged else done.stdout


def smoke(info, *args, command=None):
    """Run the product's smoke script (or a command that runs it); return the version comment it reports."""
    script = RECIPES / "smoke" / f"{info['product']}.sh"
    # mmdebstrap passes its hooks' output on stderr
    output = run(command or ["sh", script, *args], show=True, merged=True, reason=REPLACE_REFUSED)
    for what, packages in REPLACE_LINE.findall(output):
        say(f"  the distribution's packages, {what}: {packages}")
    for line in output.splitlines():
        if line.startswith("version_comment: "):
            return line.removeprefix("version_comment: ").strip()
    raise PipelineError(f"{script.name} reported no version_comment line")


def smoke_set(info):
    """The product's test suite and its smoke set, or (None, None) when it has none."""
    suite = product(info["product"]).tests
    if suite is None or SMOKE_SET not in suite.sets:
        return None, None
    return suite, suite.test_set(SMOKE_SET)


def test_runner(recipe, fmt, info, present):
    """Where the format's test package installs the runner: the first of the recipe's `test_runner`
    paths that `present` (a test on a path relative to the installed root) finds."""
    if "test_runner" not in recipe:
        raise PipelineError(f"packaging/{fmt}/{info['product']}.toml names no test_runner: the "
                            f"{SMOKE_SET} test set cannot run on what the packages install")
    candidates = recipe["test_runner"]
    found = next((path for path in candidates if present(path)), None)
    if found is None:
        raise PipelineError(f"no test suite in the {fmt} packages: none installs {' or '.join(candidates)}")
    return found


def run_test_set(info, tree, scratch, what, runner=None):
    """The product's smoke test set on what a package installed, as MariaDB's Buildbot tests its packages."""
    suite, chosen = smoke_set(info)
    if suite is None:
        return
    # The test user (as root) must reach the tree in this private temporary folder.
    scratch.chmod(scratch.stat().st_mode | stat.S_IXOTH)
    planned = testrun.plan_tree(suite, chosen, tree, scratch / "tests", what, "the package", runner=runner)
    log = PhaseLog(scratch / "tests.log", "prove")
    try:
        results = testrun.execute(planned, log)
    finally:
        log.close()
    report_tests(results, what)


def report_tests(results, what):
    for line in testrun.describe(results):
        say(f"  {line}")
    testrun.refuse_failures(results, SMOKE_SET, what)


def is_server(path, info):
    """Whether a package's path is the server binary: buildinfo.json's binary name in a bin/ or sbin/."""
    return PurePosixPath(path).name == info["binary"]["name"] and PurePosixPath(path).parent.name in ("bin", "sbin")


# --- bintar -------------------------------------------------------------------

def prove_bintar(folder, info, args):
    tarball = only(folder, "*.tar.gz")
    with tempfile.TemporaryDirectory(prefix="pgo-prove-") as tmp:
        run(["tar", "-xzf", tarball, "-C", tmp])
        top = Path(tmp) / tarball.name.removesuffix(".tar.gz")
        if not top.is_dir():
            raise PipelineError(f"{tarball.name} does not unpack into {top.name}/ as MariaDB's bintars do")
        say(f"  unpacked into {top.name}/, running it from there")
        comment = smoke(info, "tree", top)
        run_test_set(info, top, Path(tmp), tarball.name)
        return comment


# --- rpm ----------------------------------------------------------------------

def prove_rpm(folder, info, args):
    rpms = some(folder, "*.rpm")
    names = {}
    for rpm in rpms:
        name, version, release = run(["rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE}", rpm]).split()
        if (version, release) != (info["package_version"], str(info["release"])):
            raise PipelineError(f"{rpm.name} is {name} {version}-{release}, buildinfo.json says "
                                f"{info['package_version']}-{info['release']}")
        names[rpm] = name
    say(f"  {len(rpms)} packages, version {info['package_version']}-{info['release']}: "
        + ", ".join(names.values()))
    holders = {rpm: path for rpm in rpms for path in run(["rpm", "-qpl", rpm]).splitlines() if is_server(path, info)}
    if len(holders) != 1:
        raise PipelineError(f"{len(holders)} packages hold a {info['binary']['name']} binary, expected one")
    (server, path), = holders.items()
    say(f"  rpm -qp --info {server.name}")
    run(["rpm", "-qp", "--info", server], show=True)
    say(f"  {path} is in {names[server]}; its requirements:")
    requires = run(["rpm", "-qp", "--requires", server], show=True).splitlines()
    if not any(r.startswith("libc.so.6") for r in requires):
        raise PipelineError(f"{server.name} requires no libc.so.6: its automatic requirements are missing")
    # A package of the set that another one needs must be in the set.
    gaps = unmet_set_requirements(rpms)
    if gaps:
        rpm = gaps[0][0]
        missing = ", ".join(r for holder, r in gaps if holder == rpm)
        raise PipelineError(f"{rpm.name} requires {missing}, which no package of {folder.name} provides")
    say("  rpmlint:")
    rpmlintrc = RECIPES / "rpm" / f"{info['product']}.rpmlintrc"
    # One rpmlintrc serves the sets of every configuration (packaging/rpm/<product>.rpmlintrc says why).
    run(["rpmlint", "--ignore-unused-rpmlintrc", "--rpmlintrc", rpmlintrc, *rpms], show=True)
    with tempfile.TemporaryDirectory(prefix="pgo-prove-") as tmp:
        for rpm in rpms:
            run(["sh", "-c", f"rpm2cpio '{rpm}' | cpio -idm --quiet"], cwd=tmp)
        base = Path(tmp) / Path(path).parent.parent.relative_to("/")
        say(f"  every package extracted with rpm2cpio | cpio, running it from {Path(path).parent.parent}")
        comment = smoke(info, "tree", base)
        if smoke_set(info)[0]:
            recipe = load_toml(RECIPES / "rpm" / f"{info['product']}.toml")
            runner = test_runner(recipe, "rpm", info, lambda p: (Path(tmp) / p).is_file())
            run_test_set(info, Path(tmp), Path(tmp), f"the rpm set's /{runner}", runner=runner)
        return comment


# --- deb ----------------------------------------------------------------------

def distribution_versions(recipe, version):
    """The distribution's versions of this upstream release that ours must upgrade: the recipe's
    pattern, and those of the distribution's source package apt knows (a repack, a later revision)."""
    if "distribution_version" not in recipe:
        return []
    known = [v for v in source.debian_versions(recipe["source"]) if source.release_of(v) == version]
    return sorted({recipe["distribution_version"].format(version=version), *known})


def prove_deb(folder, info, args):
    debs = some(folder, "*.deb")
    platform = args.platform or platforms.host()
    args.distribution = args.distribution or platform.codename
    recipe = load_toml(RECIPES / "deb" / f"{info['product']}.toml", platform)
    theirs = distribution_versions(recipe, info["version"])
    for deb in debs:
        version = debpackages.control_field(deb, "Version")
        if info["profile_id"] and "+pgo" not in version:
            raise PipelineError(f"{deb.name} has version {version} without the +pgo mark")
        for distribution_version in theirs:
            if process.run(["dpkg", "--compare-versions", version, "gt", distribution_version]).returncode != 0:
                raise PipelineError(f"{deb.name} {version} would not upgrade the distribution's {distribution_version}")
    say(f"  {len(debs)} packages, version {version}"
        + (f" (upgrades the distribution's {', '.join(theirs)})" if theirs else ""))
    say("  lintian:")
    run(["lintian", "--fail-on", "error", "--suppress-tags", "bad-distribution-in-changes-file", *debs],
        show=True)
    if args.piuparts:
        # Before the chroot: a package that fails piuparts is refused in its terms, without the chroot's minutes.
        names = [debpackages.control_field(deb, "Package") for deb in debs]
        server = names[debs.index(server_deb(debs, info))]
        piuparts.prove(debs, [server, *(n for n in names if n != server)], version, theirs, args.distribution,
                       args.mirror, cache_root(args.cache), Path(args.upgrade_from).resolve() if args.upgrade_from
                       else None)
        if args.piuparts_only:
            return None
    suite, chosen = smoke_set(info)
    with tempfile.TemporaryDirectory(prefix="pgo-prove-") as tmp:
        tests = chroot_tests(info, suite, chosen, recipe, debs, Path(tmp)) if suite else []
        comment = in_chroot(folder, debs, info, args, recipe, tests, Path(tmp))
        if suite:
            junit = Path(tmp) / testrun.JUNIT
            if not junit.is_file():
                raise PipelineError(f"{suite.name} {SMOKE_SET} in the chroot wrote no report (its output is above)")
            results = testrun.summarise(testrun.read_junit(junit))
            results.update(runner=suite.name, set=SMOKE_SET, seconds=float((Path(tmp) / "seconds").read_text()))
            report_tests(results, "the installed deb packages")
        return comment


def deb_paths(deb):
    """The files and symlinks a .deb installs, without the leading /."""
    return {path.lstrip("/") for path in debpackages.installed_paths(deb)}


def server_deb(debs, info):
    """The one .deb that holds the server binary."""
    holders = [deb for deb in debs if any(is_server(path, info) for path in deb_paths(deb))]
    if len(holders) != 1:
        raise PipelineError(f"{len(holders)} packages hold a {info['binary']['name']} binary, expected one")
    return holders[0]


def check_older(older, info):
    """--upgrade-from: a deb folder `pgo package` published of the same product, its checksums matching."""
    theirs = load_buildinfo(older)
    if (theirs["format"], theirs["product"]) != ("deb", info["product"]):
        raise PipelineError(f"--upgrade-from {older} holds {theirs['product']} {theirs['format']} packages, not "
                            f"{info['product']} debs")
    say(f"  the older set (--upgrade-from): {older.name}/, {theirs['product']} {theirs['package_version']}-"
        f"{theirs['release']} debs, {'profile ' + theirs['profile_id'] if theirs['profile_id'] else 'plain build'}")


def in_chroot(folder, debs, info, args, recipe, tests, scratch):
    """Install into a throw-away Debian chroot with apt and run the smoke script there, then the hooks
    of the smoke test set (chroot_tests). With --replace-distribution, the distribution's packages first
    (replace_hooks).

    mmdebstrap sets up and tears down the chroot's mounts around its hooks, and
    the chroot goes to /dev/null: nothing of it stays, nothing touches the host.
    """
    apt = "DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Use-Pty=0"
    names = [debpackages.control_field(deb, "Package") for deb in debs]
    hooks = ['mkdir -p "$1/tmp/pgo-debs"', f'cp {" ".join(map(str, debs))} "$1/tmp/pgo-debs/"',
             f'cp {RECIPES / "smoke" / (info["product"] + ".sh")} "$1/tmp/pgo-smoke.sh"']
    if args.replace_distribution:
        hooks += replace_hooks(names, recipe, Path(args.upgrade_from).resolve() if args.upgrade_from else None,
                               scratch)
    else:
        hooks.append(f'chroot "$1" sh -c "{apt} install --allow-downgrades /tmp/pgo-debs/*.deb"')
    hooks += ['chroot "$1" dpkg-query -W -f "\\${Package} \\${Version} \\${Status}\\n" ' + " ".join(names),
              'chroot "$1" sh /tmp/pgo-smoke.sh system',
              *tests]
    command = ["mmdebstrap", "--variant=minbase", "--mode=root", "--quiet",
               *(f"--customize-hook={hook}" for hook in hooks), args.distribution, "/dev/null"]
    if args.mirror:
        command.append(args.mirror)
    say(f"  mmdebstrap {args.distribution} chroot: apt install {len(debs)} packages"
        + (" over the distribution's" if args.replace_distribution else "") + ", run the smoke test")
    return smoke(info, command=command)


# packaging/replace-distribution.sh's lines: its reason for a refusal, and what it installed
REPLACE_REFUSED = re.compile(r"^\s*pgo-replace: refused: (.*)$", re.M)
REPLACE_LINE = re.compile(r"^\s*pgo-replace: (installed first|after ours, nothing removed): ?(.*)$", re.M)


def replace_hooks(names, recipe, older, scratch):
    """--replace-distribution: mmdebstrap hooks that serve `older` (a published folder, as a flat
    repository) beside the chroot's archive, then run packaging/replace-distribution.sh on our debs: the
    distribution's packages of our `names`, the recipe's `distribution_packages` (what users have beside
    them) and the older set's packages installed first, ours over them, nothing removed."""
    also = list(recipe.get("distribution_packages", []))
    hooks = [f'cp {RECIPES / "replace-distribution.sh"} "$1/tmp/pgo-replace.sh"']
    if older:
        older_debs = some(older, "*.deb")
        also += [debpackages.control_field(deb, "Package") for deb in older_debs]
        repository = scratch / "older"
        piuparts.flat_repository(older_debs, repository)
        hooks += [f'cp -r {repository} "$1/tmp/pgo-older" && chmod -R a+rX "$1/tmp/pgo-older"',
                  'echo "deb [trusted=yes] file:/tmp/pgo-older ./" > "$1/etc/apt/sources.list.d/pgo-older.list"',
                  'chroot "$1" apt-get -q update']
    env = f"PGO_NAMES={shlex.quote(' '.join(names))} PGO_ALSO={shlex.quote(' '.join(also))}"
    hooks.append(f'chroot "$1" env {env} sh /tmp/pgo-replace.sh /tmp/pgo-debs')
    return hooks


def chroot_tests(info, suite, chosen, recipe, debs, scratch):
    """Hooks that run the smoke test set from the installed test package, as MariaDB's Buildbot runs mtr
    from its installed debs: as `nobody` (mtr refuses root), the JUnit report and time copied to scratch."""
    contents = set().union(*map(deb_paths, debs))
    runner = PurePosixPath("/") / test_runner(recipe, "deb", info, lambda p: p in contents)
    (scratch / testrun.SKIP_LIST).write_text(testrun.skip_text(chosen))
    inside = PurePosixPath("/tmp/pgo-tests")
    command = testrun.runner_command(suite, chosen, runner, chosen.suites, inside / "var", inside / testrun.JUNIT,
                                     inside / testrun.SKIP_LIST, chosen.minutes)
    nobody = testrun.as_user(NOBODY, NOBODY, ["sh", "-c", f"cd {shlex.quote(str(runner.parent))} && exec "
                                                          f"{shlex.join(command)}"],
                             HOME=inside, PATH="/usr/sbin:/usr/bin:/sbin:/bin")
    out = shlex.quote(str(scratch))
    say(f"  then {suite.name} {SMOKE_SET} from {runner} in the chroot, as nobody")
    # mmdebstrap writes no /etc/hosts, and mtr binds its servers' ports on `localhost`.
    hosts = ('grep -qw localhost "$1/etc/hosts" 2>/dev/null '
             '|| printf "127.0.0.1 localhost\\n::1 localhost ip6-localhost\\n" >> "$1/etc/hosts"')
    return [hosts,
            f'mkdir -p "$1{inside}/var" && cp {out}/{testrun.SKIP_LIST} "$1{inside}/" '
            f'&& chown -R {NOBODY}:{NOBODY} "$1{inside}"',
            f'started=$(date +%s); chroot "$1" {shlex.join(nobody)} '
            f'|| echo "{suite.name} exited with status $?"; echo $(( $(date +%s) - started )) > {out}/seconds',
            f'if [ -f "$1{inside}/{testrun.JUNIT}" ]; then cp "$1{inside}/{testrun.JUNIT}" {out}/; fi']


# Each format's proof (pgo/base/formats.py).
PROVERS = {Format.BINTAR: prove_bintar, Format.DEB: prove_deb, Format.RPM: prove_rpm}
