"""Named build configurations, read from the declarative file pgo/configs.toml."""

import re
from dataclasses import asdict, dataclass
from typing import Any

from pgo import REPO, PipelineError
from pgo.base import platforms
from pgo.base.protocol import Variant
from pgo.base.readers import read_toml
from pgo.base.versions import version_line

CONFIG_FILE = REPO / "pgo" / "configs.toml"
# Each product's server binary: the one its packages are checked against, and the one BOLT rewrites.
BINARIES_FILE = REPO / "packaging" / "products.toml"
# CMake generators the build phases run (pgo/build/phases.py BUILD_TOOLS).
GENERATORS = ("Ninja", "Unix Makefiles")
# The test sets' skip lists (one test a line, with the reason).
TESTS_DIR = REPO / "pgo" / "testsets"


@dataclass(frozen=True)
class Product:
    name: str
    comment_variable: str
    hot_dirs: tuple[str, ...]
    train: tuple[tuple[str, ...], ...]
    debian_source: str | None = None
    train_report: str | None = None
    # Folder (in the training directory) where the training puts the counters of its setup
    # runs, kept out of the profile; the check reports their share.
    setup_counters: str | None = None
    # The product's own test suite (MariaDB's mariadb-test-run), run by the test phase.
    tests: "TestSuite | None" = None
    # Plugins the stage links from one folder into another, as the distribution's install step does
    # ([products.X.stage_links]): {"from": folder, "into": glob of folders, "names": [...]}.
    stage_links: dict | None = None
    # The distribution's binary packages whose files are the server a user installs: a release's
    # baseline when its configuration builds as the distribution does (`pgo baseline`).
    baseline_packages: tuple[str, ...] = ()


@dataclass(frozen=True)
class TestSet:
    """A named selection of the product's tests (configs.toml [products.X.tests.sets.NAME])."""
    name: str
    suites: tuple[str, ...]
    # Suites of plugins a configuration may leave out: run where the staged tree has them.
    optional_suites: tuple[str, ...]
    args: tuple[str, ...]
    # Tests skipped with a reason, one per line (TESTS_DIR/<file>, mtr's --skip-test-list format).
    skip_lists: tuple[str, ...]
    # The budget: the run is stopped past it, and the phase fails.
    minutes: float
    # What the run needs free where its vardir is, checked before it starts.
    min_free_mib: int
    # Tests that may fail on both the optimised and the plain build (the environment's doing)
    # before the verdict stops trusting the environment and refuses the release.
    max_environment_failures: int


@dataclass(frozen=True)
class TestSuite:
    """How to run a product's test suite from its staged tree."""
    # What the reports call it ("mtr").
    name: str
    # The runner, relative to the staged tree, with its interpreter.
    runner: tuple[str, ...]
    # Options every run passes (a set adds its own; the phase adds vardir, report, parallel, limits).
    options: tuple[str, ...]
    # Where a suite's folder is, relative to the runner's folder (glob patterns with {suite}).
    suite_dirs: tuple[str, ...]
    sets: dict
    default_set: str
    # Other places of the runner in a staged tree, tried after runner's own (another line's layout).
    other_runners: tuple[str, ...] = ()

    def staged_runners(self):
        return (self.runner[-1], *self.other_runners)

    def test_set(self, name):
        if name not in self.sets:
            raise PipelineError(f"unknown test set '{name}' (known: {', '.join(sorted(self.sets))}; or off)")
        return self.sets[name]


@dataclass(frozen=True)
class BuildConfig:
    name: str
    product: Product
    cmake_args: tuple[str, ...]
    # The product line (MAJOR.MINOR) the configuration builds: `--version latest` is its
    # newest version, and a version of another line is refused. None: any version.
    line: str | None = None
    # The Debian suite whose source packages have this line (the deb-src entry the source
    # phase adds, pgo/build/source.py): the release of the platform that ships the line
    # (pgo/platforms.toml `lines`); None: this machine's own suites.
    debian_suite: str | None = None
    # Link-time optimisation (pgo/core/toolchain.py LTO_FLAGS): `lto = true` in every variant and every
    # link, part of the flags fingerprint, so a profile made with it is never used without it, nor the
    # other way. `lto = "server"` sets lto_server too: only the builds that are measured and shipped
    # (optimised, plain) compile with it, and only the product's server binary links with it
    # (packaging/products.toml link_flags_variable); the instrumented build is the configuration's
    # without LTO, so its profile is that configuration's, fingerprint and all (toolchain.fingerprint).
    lto: bool = False
    lto_server: bool = False
    # BOLT after the optimised build (the bolt phase, pgo/build/bolt.py), and the flags it needs from GCC in
    # every variant (pgo/core/toolchain.py BOLT_COMPILE_FLAGS, BOLT_LINK_FLAGS); part of the flags fingerprint.
    bolt: bool = False
    # `pgo package --format deb` through the Debian source package's own debian/rules
    # (pgo/packaging/debrules.py) instead of the hand-written recipe: the tree is a DEB-layout build.
    debian_rules: bool = False
    # CMake's generator: Ninja, or Unix Makefiles where a layout does not generate with Ninja. It
    # changes no compile command and no object path (so no .gcda name): not in the fingerprint.
    generator: str = "Ninja"
    # The distribution's compile and link flags (hardening), before the pipeline's in every variant;
    # {source} is the shared source tree. Part of every variant's flags, so of the fingerprint.
    compile_flags: tuple[str, ...] = ()
    link_flags: tuple[str, ...] = ()
    # The variants that build less (reduced_cmake added to cmake_args): what the training and the
    # baselines run needs; the optimised build, which ships, builds everything. Part of the fingerprint.
    reduced_variants: tuple[str, ...] = ()
    reduced_cmake: tuple[str, ...] = ()
    # The configure-only check (pgo configure-check): features of CMake's feature summary the
    # configuration builds without, and features it must build.
    features_off: tuple[str, ...] = ()
    features_required: tuple[str, ...] = ()
    # Build Debian's source as Debian does, its quilt patches applied (`dpkg-source -x` of the .dsc),
    # in a tree of its own (pgo/build/source.py): the source's identity is the .dsc's checksum.
    debian_patches: bool = False
    # Directories the training must reach besides the product's hot_dirs (the engines and the
    # instrumentation the configuration ships): the check refuses a profile without data there.
    # Not judged for hot coverage in the optimised build.
    trained_dirs: tuple[str, ...] = ()
    # What a release of the configuration takes at most in its builder's folder (GiB: both builds, their
    # staged trees and test runs, the benchmark), measured: `pgo resume`, a release's first step, refuses
    # to start one with less free there. None: not checked.
    disk_gib: float | None = None
    # Built as the distribution builds its own server (its options, rules and compiler): a release's
    # benchmark may take the distribution's packages of the same version as its baseline (`pgo baseline`).
    distribution_baseline: bool = False

    def lto_in(self, variant):
        """Whether a variant's build compiles with LTO (`lto = "server"`: not the instrumented one)."""
        return self.lto and not (self.lto_server and variant == Variant.INSTRUMENTED)

    def variant_cmake_args(self, variant):
        """The CMake options of one variant's build: the reduced variants add reduced_cmake."""
        return self.cmake_args + (self.reduced_cmake if variant in self.reduced_variants else ())

    def variant_features(self, variant):
        """(features the variant may build without, features it must build), for the configure-only check.

        A reduced variant may also go without what its options turn off (-DPLUGIN_X=NO, -DWITH_X=OFF: X),
        and X's own features (X_*: CONNECT_ODBC of CONNECT)."""
        dropped = set()
        for arg in self.variant_cmake_args(variant)[len(self.cmake_args):]:
            name, _, value = arg[2:].partition("=")
            if value.upper() in ("NO", "OFF", "0", "FALSE"):
                dropped.add(name.removeprefix("PLUGIN_").removeprefix("WITH_").upper())

        def allowed(feature):
            return feature in self.features_off or any(feature == d or feature.startswith(d + "_") for d in dropped)
        return allowed, tuple(f for f in self.features_required if not allowed(f))

    def require_version(self, version):
        """Refuse a version of another product line than the configuration's."""
        if self.line and version_line(version) != self.line:
            others = [name for name in config_names() if build_config(name).line == version_line(version)]
            hint = f" (configurations for it: {', '.join(others)})" if others else ""
            raise PipelineError(f"configuration '{self.name}' builds {self.product.name} {self.line}; "
                                f"{version} is of line {version_line(version)}{hint}")
        return version

    def record(self) -> dict[str, Any]:
        """The configuration as JSON data (the work directory's plan, contract.PLAN): read back by
        `from_record`, so that what a build resolved once is what its later commands act on."""
        return asdict(self)


def from_record(record: dict[str, Any]) -> BuildConfig:
    """The BuildConfig a `record()` was made of; PipelineError when it is not one of this pgo's."""
    def frozen(value):
        # JSON has lists where the configuration has tuples (all its sequences are).
        if isinstance(value, list):
            return tuple(frozen(v) for v in value)
        if isinstance(value, dict):
            return {k: frozen(v) for k, v in value.items()}
        return value
    try:
        p = frozen(record["product"])
        if p["tests"] is not None:
            t = p["tests"]
            p["tests"] = TestSuite(**{**t, "sets": {name: TestSet(**s) for name, s in t["sets"].items()}})
        return BuildConfig(**{**frozen(record), "product": Product(**p)})
    except (KeyError, TypeError, AttributeError) as e:
        raise PipelineError(f"a configuration record this pgo does not know ({type(e).__name__}: {e})") from None


def load(path=CONFIG_FILE):
    return read_toml(path, "configuration file")


def config_names(data=None):
    return sorted((data or load())["configs"])


def default_config(data=None):
    """The configuration used wherever none is named: configs.toml's `default`."""
    data = data or load()
    name = data.get("default")
    if name not in data.get("configs", {}):
        raise PipelineError(f"{CONFIG_FILE.name}: default = {name!r} is not a configuration "
                            f"(known: {', '.join(config_names(data))})")
    return name


# The keys a configuration may set (a misspelt one would be ignored: refused instead, as the image
# definitions refuse theirs), and those of its `reduced` table.
CONFIG_KEYS = ("product", "line", "inherits", "cmake", "reduced", "lto", "bolt", "debian_rules", "debian_patches",
               "generator", "compile_flags", "link_flags", "trained_dirs", "features_off", "features_required",
               "disk_gib", "distribution_baseline")
REDUCED_KEYS = ("cmake", "variants")
# `lto = "server"`: LTO in the optimised and plain builds, for the server binary's link alone (BuildConfig.lto).
LTO_SERVER = "server"
RETIRED_KEYS = ("debian_suite",)    # refused below, with what replaced it


def build_config(name, data=None):
    """Resolve a configuration and its `inherits` chain into a BuildConfig."""
    data = data or load()
    configs = data.get("configs", {})
    chain, seen = [], set()
    current = name
    while current:
        if current not in configs:
            known = ", ".join(sorted(configs))
            what = "configuration" if current == name else f"parent configuration of {name}"
            raise PipelineError(f"unknown {what} '{current}' (known: {known})")
        if current in seen:
            raise PipelineError(f"configuration '{name}' inherits from itself")
        seen.add(current)
        for key, allowed in (("", CONFIG_KEYS), ("reduced.", REDUCED_KEYS)):
            table = configs[current] if not key else configs[current].get("reduced", {})
            unknown = sorted(set(table) - set(allowed) - set(RETIRED_KEYS)) if isinstance(table, dict) else []
            if unknown:
                raise PipelineError(f"configuration '{current}': unknown setting '{key}{unknown[0]}' (known: "
                                    f"{', '.join(allowed)})")
        chain.append(configs[current])
        current = configs[current].get("inherits")
    chain.reverse()
    def nearest(key):
        return next((c[key] for c in reversed(chain) if key in c), None)

    product_name = nearest("product")
    if product_name is None:
        raise PipelineError(f"configuration '{name}' names no product")
    args = tuple(arg for c in chain for arg in c.get("cmake", []))
    reduced = nearest("reduced") or {}
    reduced_cmake = tuple(reduced.get("cmake", ()))
    for arg in args + reduced_cmake:
        if not arg.startswith("-D"):
            raise PipelineError(f"configuration '{name}': '{arg}' is not a -D cache setting")
        if any(flag in arg for flag in ("-fprofile", "CMAKE_C_FLAGS", "CMAKE_CXX_FLAGS")):
            raise PipelineError(f"configuration '{name}': '{arg}' sets compile flags; "
                                "the pipeline owns them so all variants stay identical")
        if "-flto" in arg:
            raise PipelineError(f"configuration '{name}': '{arg}' sets LTO flags; set `lto = true` instead, "
                                "so every variant and the flags fingerprint have them")
        if any(flag in arg for flag in ("emit-relocs", "reorder-blocks-and-partition")):
            raise PipelineError(f"configuration '{name}': '{arg}' sets BOLT's flags; set `bolt = true` instead, "
                                "so every variant and the flags fingerprint have them")
    line = nearest("line")
    if line is not None and not re.fullmatch(r"[0-9]+\.[0-9]+", str(line)):
        raise PipelineError(f"configuration '{name}': line '{line}' is not MAJOR.MINOR")
    if nearest("debian_suite") is not None:
        # Which release's source carries a line is the platform table's to say, once.
        raise PipelineError(f"configuration '{name}': debian_suite is no longer set here; the suite of line "
                            f"{line}'s source is the release that ships it ({platforms.PLATFORMS_FILE.name} lines)")
    switches = {key: nearest(key) for key in ("lto", "bolt", "debian_rules", "debian_patches",
                                              "distribution_baseline")}
    lto_server = switches["lto"] == LTO_SERVER
    if lto_server:
        switches["lto"] = True
        if switches["bolt"]:
            raise PipelineError(f"configuration '{name}': lto = \"{LTO_SERVER}\" with bolt: BOLT's flags go into "
                                "every variant, LTO's not into the instrumented build; use lto = true")
        if not load(BINARIES_FILE).get(nearest("product"), {}).get("link_flags_variable"):
            raise PipelineError(f"configuration '{name}': lto = \"{LTO_SERVER}\", but {BINARIES_FILE.name} names no "
                                f"link_flags_variable of product '{nearest('product')}' for its server's own link")
    for key, value in switches.items():
        if value is not None and not isinstance(value, bool):
            raise PipelineError(f"configuration '{name}': {key} = {value!r} is not true or false"
                                + (f' (or "{LTO_SERVER}")' if key == "lto" else ""))
    if switches["distribution_baseline"] and not switches["debian_patches"]:
        raise PipelineError(f"configuration '{name}': distribution_baseline needs debian_patches = true: the "
                            "distribution's packages are a baseline only of its own source, built as it builds it")
    generator = nearest("generator") or "Ninja"
    if generator not in GENERATORS:
        raise PipelineError(f"configuration '{name}': generator {generator!r} is not one the pipeline runs "
                            f"({', '.join(GENERATORS)})")
    compile_flags, link_flags = (tuple(nearest(key) or ()) for key in ("compile_flags", "link_flags"))
    for flag in compile_flags + link_flags:
        if any(owned in flag for owned in ("-fprofile", "-flto", "emit-relocs", "reorder-blocks-and-partition")):
            raise PipelineError(f"configuration '{name}': '{flag}' is a flag the pipeline owns (the profile, "
                                "LTO and BOLT flags: `lto`, `bolt`), so that all variants stay identical")
    trained_dirs = nearest("trained_dirs") or []
    if not isinstance(trained_dirs, list) or not all(isinstance(d, str) and d for d in trained_dirs):
        raise PipelineError(f"configuration '{name}': trained_dirs = {trained_dirs!r} is not a list of folders")
    disk_gib = nearest("disk_gib")
    if disk_gib is not None and (isinstance(disk_gib, bool) or not isinstance(disk_gib, int | float) or disk_gib <= 0):
        raise PipelineError(f"configuration '{name}': disk_gib = {disk_gib!r} is not a size in GiB")
    variants = tuple(reduced.get("variants", ()))
    if Variant.OPTIMIZED in variants or not set(variants) <= {Variant.INSTRUMENTED, Variant.PLAIN}:
        raise PipelineError(f"configuration '{name}': reduced variants {list(variants)}: only the instrumented "
                            "and the plain build may build less; the optimised build is what ships")
    return BuildConfig(name=name, product=product(product_name, data), cmake_args=args, line=line,
                       debian_suite=platforms.source_suite(line),
                       **{key: bool(value) for key, value in switches.items()}, lto_server=lto_server,
                       generator=generator, compile_flags=compile_flags, link_flags=link_flags,
                       reduced_variants=variants if reduced_cmake else (), reduced_cmake=reduced_cmake,
                       features_off=tuple(nearest("features_off") or ()),
                       features_required=tuple(nearest("features_required") or ()),
                       trained_dirs=tuple(trained_dirs), disk_gib=disk_gib)


def server_binary(product_name):
    """{"binary": its path in the build tree, "staged_binary": [its paths in a staged tree], and, where the
    product has one, "link_flags_variable": the CMake variable of the binary's own link flags}."""
    binaries = load(BINARIES_FILE)
    if product_name not in binaries:
        raise PipelineError(f"packaging/products.toml has no entry for product '{product_name}'")
    return binaries[product_name]


def test_set_names(data=None):
    """Every product's test set names (the release form's choices)."""
    data = data or load()
    return sorted({name for p in data.get("products", {}).values() for name in p.get("tests", {}).get("sets", {})})


def product(name, data=None):
    products = (data or load()).get("products", {})
    if name not in products:
        raise PipelineError(f"unknown product '{name}' (known: {', '.join(sorted(products))})")
    p = products[name]
    try:
        return Product(
            name=name,
            comment_variable=p["comment_variable"],
            hot_dirs=tuple(p["hot_dirs"]),
            train=tuple(tuple(cmd) for cmd in p["train"]),
            debian_source=p.get("debian_source"),
            train_report=p.get("train_report"),
            setup_counters=p.get("setup_counters"),
            tests=test_suite(p["tests"]) if "tests" in p else None,
            stage_links=stage_links(name, p.get("stage_links")),
            baseline_packages=tuple(p.get("baseline_packages", ())),
        )
    except KeyError as e:
        raise PipelineError(f"product '{name}' lacks the setting {e}") from e


def stage_links(product_name, links):
    if links is None:
        return None
    if set(links) != {"from", "into", "names"} or not all(isinstance(links[k], str) for k in ("from", "into")):
        raise PipelineError(f"product '{product_name}': stage_links needs exactly from, into (folders of the "
                            f"staged tree) and names, not {sorted(links)}")
    return {"from": links["from"], "into": links["into"], "names": tuple(links["names"])}


def test_suite(t):
    sets = {name: TestSet(name=name, suites=tuple(s["suites"]), optional_suites=tuple(s.get("optional_suites", ())),
                          args=tuple(s.get("args", ())), skip_lists=tuple(s.get("skip", ())),
                          minutes=float(s["minutes"]), min_free_mib=int(s["min_free_mib"]),
                          max_environment_failures=int(s["max_environment_failures"]))
            for name, s in t["sets"].items()}
    if t["default"] not in sets:
        raise PipelineError(f"tests: default = {t['default']!r} is not a test set (known: {', '.join(sorted(sets))})")
    for s in sets.values():
        for skip in s.skip_lists:
            if not (TESTS_DIR / skip).is_file():
                raise PipelineError(f"test set '{s.name}': skip list {TESTS_DIR / skip} is missing")
    return TestSuite(name=t["name"], runner=tuple(t["runner"]), options=tuple(t.get("options", ())),
                     suite_dirs=tuple(t["suite_dirs"]), sets=sets,
                     default_set=t["default"], other_runners=tuple(t.get("other_runners", ())))
