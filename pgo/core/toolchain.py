"""The compiler a build uses, checked before anything is built, and the PGO flags for it."""

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, replace

from pgo import PipelineError
from pgo.base import process
from pgo.base.checksums import sha256_file
from pgo.base.protocol import Variant

VARIANTS = tuple(Variant)


@dataclass(frozen=True)
class Compiler:
    cc: str
    cxx: str
    version: str   # exact, e.g. "12.2.0": the .gcda format depends on it
    banner: str    # first line of `gcc --version`, names the distribution build
    path: str      # where `cc` resolves on PATH now: names a compiler swapped in between phases

    def identity(self):
        return {"cc": self.cc, "path": self.path, "version": self.version, "banner": self.banner}


def add_compiler_arguments(parser):
    """--cc and --cxx, as every command that compiles or matches a compiler takes them: the environment's
    CC and CXX (a worker image sets them: gcc-14 on debian-13), else gcc and g++."""
    parser.add_argument("--cc", default=os.environ.get("CC", "gcc"), help="C compiler (GCC; default: $CC, else gcc)")
    parser.add_argument("--cxx", default=os.environ.get("CXX", "g++"), help="C++ compiler (default: $CXX, else g++)")


def detect(cc="gcc", cxx="g++"):
    for tool in (cc, cxx):
        if shutil.which(tool) is None:
            raise PipelineError(f"compiler '{tool}' not found on PATH (install it, or choose one with --cc/--cxx)")
    banner = process.output_of([cc, "--version"]).splitlines()[0]
    if "gcc" not in banner.lower() and "GCC" not in banner:
        raise PipelineError(f"'{cc}' is not GCC ({banner}); the profile flags are GCC's")
    version = process.output_of([cc, "-dumpfullversion"]).strip()
    cxx_version = process.output_of([cxx, "-dumpfullversion"]).strip()
    if cxx_version != version:
        raise PipelineError(f"C compiler {cc} is GCC {version} but C++ compiler {cxx} is GCC {cxx_version}")
    return Compiler(cc, cxx, version, banner, os.path.realpath(shutil.which(cc)))


def gcov_binary(tool, version):
    """gcov-tool or gcov-dump of exactly this GCC version: the .gcda format is version specific."""
    found = []
    for name in (f"{tool}-{version.split('.')[0]}", tool):
        path = shutil.which(name)
        if path:
            result = process.run([path, "--version"])
            words = result.stdout.splitlines()[0].split() if result.stdout else ["?"]
            if words[-1] == version:
                return path
            found.append(f"{name} {words[-1]}")
    raise PipelineError(f"no {tool} of GCC {version} on this machine (found: {', '.join(found) or 'none'}): "
                        "cannot read the .gcda files")


# Link-time optimisation: a configuration's `lto` setting (pgo/configs.toml), the same flags in
# every variant. GCC still reads the profile when it compiles each object, but decides at the
# link, for the whole program, what is hot (pgo/core/profile.py quality()).
LTO_FLAGS = (
    # As many LTRANS jobs as make's jobserver gives, else one per CPU (ninja has no jobserver): the
    # number of jobs changes the link's time, not its code.
    "-flto=auto",
    # Objects with machine code beside their LTO bytecode: the installed static libraries
    # (libmariadbclient.a) then link with any compiler, not only this very GCC.
    "-ffat-lto-objects",
)


# `lto = "server"` (pgo/core/config.py BuildConfig.lto): every link but the server binary's takes the
# fat objects' machine code, not their bytecode, so the links that take in the whole server again (the
# embedded server's programs, the unit tests, mariadb-backup: the last 30 minutes of an LTO build of
# `release`, docs/release-lto-10.11.18-release/) cost what they cost without LTO. The server binary's own
# link flags (packaging/products.toml link_flags_variable) come after these and put SERVER_LTO_LINK back.
# Plain -flto, which GCC 12 runs in parallel as -flto=auto does (make's jobserver, else every CPU):
# after -fno-lto, -flto=auto links without LTO (collect2 keeps -fno-lto), -flto with it (measured).
NO_LTO_LINK, SERVER_LTO_LINK = "-fno-lto", "-flto"


# Every variant: GCC writes the options its compiler proper ran with into each object's
# .GCC.command.line section, so the build's own output shows which profile options and which
# optimisation level were in effect for each object (pgo/core/proof.py). Notes beside the code, which
# is the same with it as without (GCC 12: the same .text).
RECORD_FLAGS = ("-frecord-gcc-switches",)


def built_with_lto(flags):
    """Whether a build's recorded flags (build-info.json `flags`) are an LTO build's."""
    return LTO_FLAGS[0] in flags


# BOLT (pgo/build/bolt.py): a configuration's `bolt` setting, the same flags in every variant, so that the
# variants still differ only in the profile flags, and in the flags fingerprint: a profile is never
# taken across them (the compile flag changes the code GCC makes, and so the .gcda it writes).
BOLT_COMPILE_FLAGS = (
    # GCC 8 and later split each function into a hot and a .cold part by default; BOLT does that
    # split itself, from its own profile, and does not take GCC's (LLVM's bolt/README.md: "BOLT is
    # currently incompatible with the -freorder-blocks-and-partition compiler option"; a MySQL built
    # by GCC 10 without this flag crashed after BOLT, llvm-project issue 62307).
    "-fno-reorder-blocks-and-partition",
)
BOLT_LINK_FLAGS = (
    # The linker keeps the relocations in the program: without them BOLT may only rewrite each
    # function where it is (no function reordering, no hot text section); with them it moves code
    # freely ("enabling relocation mode" in its output; bolt/README.md, Step 0).
    "-Wl,--emit-relocs",
)


def pgo_flags(variant, profile_dir, build_dir, lto=False, bolt=False, base=((), ()), server_lto_only=False):
    """Compile and link flags that turn one configuration into one of its variants.

    The object paths of the instrumented and the optimised build must match:
    GCC names each .gcda after its object's path. -fprofile-prefix-path strips
    the build directory from that name, so a profile trained in one build tree
    (or on another machine) applies to any other tree of the same source.
    With lto, LTO_FLAGS go on the compile and on the link (server_lto_only: NO_LTO_LINK after them on
    the link); with bolt, the BOLT flags do. base: the configuration's own (the distribution's)
    compile and link flags, first, so that the pipeline's come after them.
    """
    compile_flags, link_flags = _variant_flags(variant, profile_dir, build_dir)
    extra = list(LTO_FLAGS) if lto else []
    link_lto = extra + [NO_LTO_LINK] if lto and server_lto_only else extra
    compile_bolt, link_bolt = (list(BOLT_COMPILE_FLAGS), list(BOLT_LINK_FLAGS)) if bolt else ([], [])
    return (list(base[0]) + compile_flags + list(RECORD_FLAGS) + extra + compile_bolt,
            list(base[1]) + link_flags + link_lto + compile_bolt + link_bolt)


def config_flags(variant, config, profile_dir="PROFILE_DIR", build_dir="BUILD_DIR", source_dir="SOURCE_DIR"):
    """pgo_flags of a configuration's variant (placeholders for the paths: what records name)."""
    base = tuple(tuple(flag.replace("{source}", str(source_dir)) for flag in flags)
                 for flags in (config.compile_flags, config.link_flags))
    return pgo_flags(variant, profile_dir, build_dir, lto=config.lto_in(variant), bolt=config.bolt, base=base,
                     server_lto_only=config.lto_server)


def _variant_flags(variant, profile_dir, build_dir):
    prefix = f"-fprofile-prefix-path={build_dir}"
    if variant == Variant.INSTRUMENTED:
        # prefer-atomic: the server's threads update shared counters; without
        # atomic updates concurrent increments are lost and the profile skews.
        # -ftest-coverage: a .gcno beside each object (the same counters, only notes on the side),
        # so the check can name the functions the training ran and count their entries.
        compile_flags = [f"-fprofile-generate={profile_dir}", "-fprofile-update=prefer-atomic",
                         "-ftest-coverage", prefix]
        # The link pulls in libgcov, which writes the counters at exit.
        return compile_flags, [f"-fprofile-generate={profile_dir}"]
    if variant == Variant.OPTIMIZED:
        compile_flags = [
            f"-fprofile-use={profile_dir}",
            # Counters of a multi-threaded run can be slightly inconsistent;
            # correct them instead of refusing the profile.
            "-fprofile-correction",
            # Code the training never ran is optimised as without a profile,
            # not for size as if it were cold.
            "-fprofile-partial-training",
            prefix,
            # Mismatches are counted and judged by the pipeline (pgo/core/profile.py, compiler_warnings),
            # not turned into errors one object at a time.
            "-Wno-error=coverage-mismatch",
            "-Wmissing-profile",
        ]
        return compile_flags, []
    if variant == Variant.PLAIN:
        return [], []
    raise PipelineError(f"unknown build variant '{variant}' (known: {', '.join(VARIANTS)})")


def lto_tools(compiler):
    """CMake options that archive with this compiler's own gcc-ar, gcc-ranlib and gcc-nm.

    They load its LTO plugin, so a static library's symbol index names what its objects' LTO
    parts define, as the LTO link sees them; binutils' own tools need the plugin installed for them.
    """
    directory, name = os.path.split(compiler.path)
    head, gcc, suffix = name.rpartition("gcc")
    if not gcc:
        raise PipelineError(f"LTO needs GCC's gcc-ar beside the compiler, but {compiler.path} is not named gcc*")
    options = []
    for variable, tool in (("AR", "ar"), ("RANLIB", "ranlib"), ("NM", "nm")):
        path = os.path.join(directory, f"{head}gcc-{tool}{suffix}")
        if not os.access(path, os.X_OK):
            raise PipelineError(f"LTO needs {path}, the gcc-{tool} of the compiler {compiler.path}: "
                                "install it with that compiler")
        options.append(f"-DCMAKE_{variable}={path}")
    return options


def fingerprint(config, environment=None):
    """Fingerprint of what a configuration's builds are compiled with: a profile applies only to a
    build made the same way.

    The CMake options (a reduced variant's too), LTO (with it GCC decides what is hot from the whole
    program's working set, so an LTO profile is never taken for one without it), BOLT's flags, every
    variant's flags (the distribution's among them), and the build environment (build_environment()):
    a profile made through one compiler launcher is never used through another, nor without it.
    With `lto = "server"` the configuration's without LTO: its instrumented build is that one's, so its
    profile is too, and the optimised build's own proof (pgo/core/proof.py) says whether GCC took it.
    """
    if config.lto_server:
        config = replace(config, lto=False, lto_server=False)
    flags = {variant: config_flags(variant, config) for variant in VARIANTS}
    # A reduced variant's options (pgo/core/config.py) join only when there are any: the fingerprints of
    # the configurations without them stay what their archived profiles were stored under.
    reduced = [[list(config.reduced_variants), list(config.reduced_cmake)]] if config.reduced_cmake else []
    return hashlib.sha256(json.dumps([list(config.cmake_args), flags, environment or {}, *reduced])
                          .encode()).hexdigest()[:16]


# The environment a build runs in, where it changes the code the same source and flags compile to
# without showing in the flags (CMake 3.25, GCC 12). Each of these goes into the identity of what a
# build phase makes (pgo/core/contract.py) and into the flags fingerprint:
#   CMAKE_<LANG>_COMPILER_LAUNCHER, CMAKE_<LANG>_LINKER_LAUNCHER: CMake runs every compile (link)
#     through the launcher, which may add, drop or change options (ccache and distcc setups).
#     The launcher's program is named with its checksum: a script changed between phases is a
#     changed launcher.
#   GCC_EXEC_PREFIX, COMPILER_PATH: where GCC's driver finds its compiler proper, assembler and
#     linker, other programs than the compiler identity names.
#   CPATH, C_INCLUDE_PATH, CPLUS_INCLUDE_PATH: header directories before the system's.
#   LIBRARY_PATH: library directories of the link (with LTO, the link compiles).
#   ASMFLAGS: CMake's default flags for assembler sources; the pipeline sets only C's and C++'s.
# Left out, because they change no code: CFLAGS, CXXFLAGS and LDFLAGS (CMake reads them only to
# initialise the flags the pipeline sets on every configure), CMAKE_GENERATOR (the pipeline passes
# -G, the configuration's generator: the same commands either way) and CMAKE_CONFIGURATION_TYPES
# (multi-configuration generators only), CMAKE_EXPORT_COMPILE_COMMANDS (the pipeline sets it),
# DEPENDENCIES_OUTPUT and SUNPRO_DEPENDENCIES (dependency files),
# SOURCE_DATE_EPOCH (only what __DATE__ and __TIME__ expand to: reproducible builds set it for
# every release, and a profile still fits).
LAUNCHER = re.compile(r"CMAKE_[A-Z]+_(COMPILER|LINKER)_LAUNCHER")
BUILD_ENVIRONMENT = ("GCC_EXEC_PREFIX", "COMPILER_PATH", "CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH",
                     "LIBRARY_PATH", "ASMFLAGS")
# Refused, not recorded: each would change what the configuration builds, the same way in every
# variant, where pgo/configs.toml names the configuration and the pipeline chooses the compiler.
REFUSED_ENVIRONMENT = {
    # CMake >= 3.22: the build type when the configuration names none (MariaDB's mysql_release does
    # not): another optimisation level for every object, the optimised build's proof included.
    "CMAKE_BUILD_TYPE": "it would change the configuration's build type",
    # CMake >= 3.21: a file that may set the compiler and any flag, and change between phases unseen.
    "CMAKE_TOOLCHAIN_FILE": "a toolchain file may set the compiler and any flag",
}


def build_environment(environ=os.environ):
    """{variable: value} of the environment variables a build's code depends on (see above).

    Raises PipelineError for a variable the pipeline refuses.
    """
    for name, why in REFUSED_ENVIRONMENT.items():
        if environ.get(name):
            raise PipelineError(f"{name} is set in the environment ({environ[name]!r}): {why}; unset it "
                                "(a configuration's CMake options are in pgo/configs.toml, the compiler is --cc/--cxx)")
    names = sorted(name for name in environ if LAUNCHER.fullmatch(name)) + list(BUILD_ENVIRONMENT)
    return {name: launcher(environ[name]) if LAUNCHER.fullmatch(name) else environ[name]
            for name in names if environ.get(name)}


def launcher(value):
    """'/usr/bin/ccache (sha256 0123456789ab)': a launcher (a CMake list: program, then arguments),
    its program named with its checksum."""
    program = shutil.which(value.split(";")[0])
    return f"{value} (sha256 {sha256_file(program)[:12]})" if program else f"{value} (not found)"
