"""The compiler a build uses, checked before anything is built, and the PGO flags for it."""

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass

from pgo import PipelineError

VARIANTS = ("instrumented", "optimized", "plain")


@dataclass(frozen=True)
class Compiler:
    cc: str
    cxx: str
    version: str   # exact, e.g. "12.2.0": the .gcda format depends on it
    banner: str    # first line of `gcc --version`, names the distribution build
    path: str      # where `cc` resolves on PATH now: names a compiler swapped in between phases

    def identity(self):
        return {"cc": self.cc, "path": self.path, "version": self.version, "banner": self.banner}


def detect(cc="gcc", cxx="g++"):
    for tool in (cc, cxx):
        if shutil.which(tool) is None:
            raise PipelineError(f"compiler '{tool}' not found on PATH (install it, or choose one with --cc/--cxx)")
    banner = _output([cc, "--version"]).splitlines()[0]
    if "gcc" not in banner.lower() and "GCC" not in banner:
        raise PipelineError(f"'{cc}' is not GCC ({banner}); the profile flags are GCC's")
    version = _output([cc, "-dumpfullversion"]).strip()
    cxx_version = _output([cxx, "-dumpfullversion"]).strip()
    if cxx_version != version:
        raise PipelineError(f"C compiler {cc} is GCC {version} but C++ compiler {cxx} is GCC {cxx_version}")
    return Compiler(cc, cxx, version, banner, os.path.realpath(shutil.which(cc)))


def gcov_binary(tool, version):
    """gcov-tool or gcov-dump of exactly this GCC version: the .gcda format is version specific."""
    found = []
    for name in (f"{tool}-{version.split('.')[0]}", tool):
        path = shutil.which(name)
        if path:
            result = subprocess.run([path, "--version"], capture_output=True, text=True)
            words = result.stdout.splitlines()[0].split() if result.stdout else ["?"]
            if words[-1] == version:
                return path
            found.append(f"{name} {words[-1]}")
    raise PipelineError(f"no {tool} of GCC {version} on this machine (found: {', '.join(found) or 'none'}): "
                        "cannot read the .gcda files")


def _output(cmd):
    try:
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise PipelineError(f"'{' '.join(cmd)}' failed: {e}") from e


# Link-time optimisation: a configuration's `lto` setting (pgo/configs.toml), the same flags in
# every variant. GCC still reads the profile when it compiles each object, but decides at the
# link, for the whole program, what is hot (pgo/profile.py quality()).
LTO_FLAGS = (
    # As many LTRANS jobs as make's jobserver gives, else one per CPU (ninja has no jobserver): the
    # number of jobs changes the link's time, not its code.
    "-flto=auto",
    # Objects with machine code beside their LTO bytecode: the installed static libraries
    # (libmariadbclient.a) then link with any compiler, not only this very GCC.
    "-ffat-lto-objects",
)


def built_with_lto(flags):
    """Whether a build's recorded flags (build-info.json `flags`) are an LTO build's."""
    return LTO_FLAGS[0] in flags


def pgo_flags(variant, profile_dir, build_dir, lto=False):
    """Compile and link flags that turn one configuration into one of its variants.

    The object paths of the instrumented and the optimised build must match:
    GCC names each .gcda after its object's path. -fprofile-prefix-path strips
    the build directory from that name, so a profile trained in one build tree
    (or on another machine) applies to any other tree of the same source.
    With lto, LTO_FLAGS go on the compile and on the link of every variant.
    """
    compile_flags, link_flags = _variant_flags(variant, profile_dir, build_dir)
    extra = list(LTO_FLAGS) if lto else []
    return compile_flags + extra, link_flags + extra


def _variant_flags(variant, profile_dir, build_dir):
    prefix = f"-fprofile-prefix-path={build_dir}"
    if variant == "instrumented":
        # prefer-atomic: the server's threads update shared counters; without
        # atomic updates concurrent increments are lost and the profile skews.
        # -ftest-coverage: a .gcno beside each object (the same counters, only notes on the side),
        # so the check can name the functions the training ran and count their entries.
        compile_flags = [f"-fprofile-generate={profile_dir}", "-fprofile-update=prefer-atomic",
                         "-ftest-coverage", prefix]
        # The link pulls in libgcov, which writes the counters at exit.
        return compile_flags, [f"-fprofile-generate={profile_dir}"]
    if variant == "optimized":
        compile_flags = [
            f"-fprofile-use={profile_dir}",
            # Counters of a multi-threaded run can be slightly inconsistent;
            # correct them instead of refusing the profile.
            "-fprofile-correction",
            # Code the training never ran is optimised as without a profile,
            # not for size as if it were cold.
            "-fprofile-partial-training",
            prefix,
            # Mismatches are counted and judged by the pipeline (pgo/profile.py, compiler_warnings),
            # not turned into errors one object at a time.
            "-Wno-error=coverage-mismatch",
            "-Wmissing-profile",
        ]
        return compile_flags, []
    if variant == "plain":
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


def fingerprint(config):
    """Fingerprint of a configuration's flags: a profile applies only to the flags it was made with.

    LTO counts: with it GCC decides what is hot from the whole program's working set, so an LTO
    profile is never taken for one without it. A configuration without LTO has the fingerprint of
    its CMake options alone, as before LTO was a setting: the profiles archived then still match.
    """
    flags = [*config.cmake_args, *(LTO_FLAGS if config.lto else ())]
    return hashlib.sha256(json.dumps(flags).encode()).hexdigest()[:16]
