"""The debs: through the Debian source package's own debian/rules (pgo/packaging/debrules.py) or the
hand-written split of the staged tree (pgo/packaging/debpackages.py); proven with lintian, piuparts on
request (pgo/packaging/piuparts.py), and apt in a throw-away chroot."""

import shlex
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from pgo import PipelineError
from pgo.base import platforms, process
from pgo.base.runner import say
from pgo.build import source, testrun
from pgo.core.workdir import cache_root
from pgo.packaging import debpackages, debrules, piuparts
from pgo.packaging.proving import (
    SMOKE_SET,
    is_server,
    report_tests,
    run,
    smoke,
    smoke_set,
    some,
    test_runner,
)
from pgo.packaging.recipes import RECIPES, load_toml, recipe
from pgo.packaging.trees import extract_from_tar


def make(build, folder, scratch):
    """A configuration with `debian_rules = true` packages through its Debian source package's own
    debian/rules (debrules.py); the others through the hand-written split (debpackages.py)."""
    spec = recipe("deb", build)
    if build.config.debian_rules:
        return build, debrules.make(build, spec, folder, scratch)
    return build, debpackages.make(build, spec, folder, scratch)


def extract(package, name, into):
    stream = process.start(["dpkg-deb", "--fsys-tarfile", package], stdout=process.PIPE)
    try:
        return extract_from_tar(tarfile.open(fileobj=stream.stdout, mode="r|"), name, into)
    finally:
        stream.stdout.close()
        stream.wait()


def prove(folder, info, args):
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
    older = Path(args.upgrade_from).resolve() if args.upgrade_from else None
    for deb in some(older, "*.deb") if older else []:
        earlier = debpackages.control_field(deb, "Version")
        if process.run(["dpkg", "--compare-versions", earlier, "lt", version]).returncode != 0:
            raise PipelineError(f"--upgrade-from {older.name}/ holds {deb.name} {earlier}, not older than ours "
                                f"({version}): that is no upgrade")
    say("  lintian:")
    run(["lintian", "--fail-on", "error", "--suppress-tags", "bad-distribution-in-changes-file", *debs],
        show=True)
    if args.piuparts:
        # Before the chroot: a package that fails piuparts is refused in its terms, without the chroot's minutes.
        names = [debpackages.control_field(deb, "Package") for deb in debs]
        server = names[debs.index(server_deb(debs, info))]
        piuparts.prove(debs, [server, *(n for n in names if n != server)], version, theirs, args.distribution,
                       args.mirror, cache_root(args.cache), older)
        if args.piuparts_only:
            return None
    suite, chosen = smoke_set(info)
    with tempfile.TemporaryDirectory(prefix="pgo-prove-") as tmp:
        tests = chroot_tests(info, suite, chosen, recipe, debs, Path(tmp)) if suite else []
        comment = in_chroot(folder, debs, version, older, info, args, recipe, tests, Path(tmp))
        if suite:
            junit = Path(tmp) / testrun.JUNIT
            if not junit.is_file():
                raise PipelineError(f"{suite.name} {SMOKE_SET} in the chroot wrote no report (its output is above)")
            results = testrun.summarise(testrun.read_junit(junit))
            results.update(runner=suite.name, set=SMOKE_SET, seconds=float((Path(tmp) / "seconds").read_text()))
            report_tests(results, "the installed deb packages")
        return comment


def distribution_versions(recipe, version):
    """The distribution's versions of this upstream release that ours must upgrade: the recipe's
    pattern, and those of the distribution's source package apt knows (a repack, a later revision)."""
    if "distribution_version" not in recipe:
        return []
    known = [v for v in source.debian_versions(recipe["source"]) if source.release_of(v) == version]
    return sorted({recipe["distribution_version"].format(version=version), *known})


def deb_paths(deb):
    """The files and symlinks a .deb installs, without the leading /."""
    return {path.lstrip("/") for path in debpackages.installed_paths(deb)}


def server_deb(debs, info):
    """The one .deb that holds the server binary."""
    holders = [deb for deb in debs if any(is_server(path, info) for path in deb_paths(deb))]
    if len(holders) != 1:
        raise PipelineError(f"{len(holders)} packages hold a {info['binary']['name']} binary, expected one")
    return holders[0]


# The user the test set runs as in the chroot: base-passwd's nobody/nogroup, in every Debian system.
NOBODY = 65534


def in_chroot(folder, debs, version, older, info, args, recipe, tests, scratch):
    """Install `debs` (at `version`) into a throw-away Debian chroot with apt and run the smoke script
    there, then the hooks of the smoke test set (chroot_tests). With --replace-distribution, the
    distribution's packages first (replace_hooks; `older`: --upgrade-from's folder, or None).

    mmdebstrap sets up and tears down the chroot's mounts around its hooks, and
    the chroot goes to /dev/null: nothing of it stays, nothing touches the host.
    """
    apt = "DEBIAN_FRONTEND=noninteractive apt-get -y -o Dpkg::Use-Pty=0"
    names = [debpackages.control_field(deb, "Package") for deb in debs]
    hooks = ['mkdir -p "$1/tmp/pgo-debs"', f'cp {" ".join(map(str, debs))} "$1/tmp/pgo-debs/"',
             f'cp {RECIPES / "smoke" / (info["product"] + ".sh")} "$1/tmp/pgo-smoke.sh"']
    if args.replace_distribution:
        hooks += replace_hooks(names, version, recipe, older, scratch)
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


def replace_hooks(names, version, recipe, older, scratch):
    """--replace-distribution: mmdebstrap hooks that serve `older` (a published folder or the
    distribution's own debs, as a flat repository) beside the chroot's archive, the archive's versions of
    our `names` newer than ours (`version`) set aside as piuparts' upgrade test sets them aside, then run
    packaging/replace-distribution.sh on our debs: the distribution's packages of our `names`, the
    recipe's `distribution_packages` (what users have beside them) and the older set's packages
    installed first, ours over them, nothing removed."""
    also = list(recipe.get("distribution_packages", []))
    hooks = [f'cp {RECIPES / "replace-distribution.sh"} "$1/tmp/pgo-replace.sh"']
    if older:
        older_debs = some(older, "*.deb")
        also += [debpackages.control_field(deb, "Package") for deb in older_debs]
        repository = scratch / "older"
        piuparts.flat_repository(older_debs, repository)
        hooks += [f'cp -r {repository} "$1/tmp/pgo-older" && chmod -R a+rX "$1/tmp/pgo-older"',
                  'echo "deb [trusted=yes] file:/tmp/pgo-older ./" > "$1/etc/apt/sources.list.d/pgo-older.list"',
                  'chroot "$1" apt-get -q update',
                  f'cp {piuparts.SET_ASIDE_SCRIPT} "$1/tmp/pgo-set-aside"',
                  f'chroot "$1" env PGO_SET_ASIDE_NEWER=1 PGO_PACKAGES={shlex.quote(" ".join(names))} '
                  f'PGO_VERSION={shlex.quote(version)} sh /tmp/pgo-set-aside']
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
