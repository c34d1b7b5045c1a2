"""Named build configurations, read from the declarative file pgo/configs.toml."""

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pgo import PipelineError
from pgo.source import version_line

CONFIG_FILE = Path(__file__).with_name("configs.toml")


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


@dataclass(frozen=True)
class BuildConfig:
    name: str
    product: Product
    cmake_args: tuple[str, ...]
    # The product line (MAJOR.MINOR) the configuration builds: `--version latest` is its
    # newest version, and a version of another line is refused. None: any version.
    line: str | None = None
    # The Debian suite whose source packages have this line (the deb-src entry the source
    # phase adds, pgo/source.py); None: this machine's own suites.
    debian_suite: str | None = None
    # Link-time optimisation in every variant (pgo/toolchain.py LTO_FLAGS); part of the flags
    # fingerprint, so a profile made with it is never used without it, nor the other way.
    lto: bool = False

    def require_version(self, version):
        """Refuse a version of another product line than the configuration's."""
        if self.line and version_line(version) != self.line:
            others = [name for name in config_names() if build_config(name).line == version_line(version)]
            hint = f" (configurations for it: {', '.join(others)})" if others else ""
            raise PipelineError(f"configuration '{self.name}' builds {self.product.name} {self.line}; "
                                f"{version} is of line {version_line(version)}{hint}")
        return version


def load(path=CONFIG_FILE):
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise PipelineError(f"cannot read configuration file {path}: {e}") from e


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
        chain.append(configs[current])
        current = configs[current].get("inherits")
    chain.reverse()
    def nearest(key):
        return next((c[key] for c in reversed(chain) if key in c), None)

    product_name = nearest("product")
    if product_name is None:
        raise PipelineError(f"configuration '{name}' names no product")
    args = tuple(arg for c in chain for arg in c.get("cmake", []))
    for arg in args:
        if not arg.startswith("-D"):
            raise PipelineError(f"configuration '{name}': '{arg}' is not a -D cache setting")
        if any(flag in arg for flag in ("-fprofile", "CMAKE_C_FLAGS", "CMAKE_CXX_FLAGS")):
            raise PipelineError(f"configuration '{name}': '{arg}' sets compile flags; "
                                "the pipeline owns them so all variants stay identical")
        if "-flto" in arg:
            raise PipelineError(f"configuration '{name}': '{arg}' sets LTO flags; set `lto = true` instead, "
                                "so every variant and the flags fingerprint have them")
    line = nearest("line")
    if line is not None and not re.fullmatch(r"[0-9]+\.[0-9]+", str(line)):
        raise PipelineError(f"configuration '{name}': line '{line}' is not MAJOR.MINOR")
    lto = nearest("lto")
    if lto is not None and not isinstance(lto, bool):
        raise PipelineError(f"configuration '{name}': lto = {lto!r} is not true or false")
    return BuildConfig(name, product(product_name, data), args, line, nearest("debian_suite"), bool(lto))


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
        )
    except KeyError as e:
        raise PipelineError(f"product '{name}' lacks the setting {e}") from e
