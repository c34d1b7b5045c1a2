"""BOLT, LLVM's post-link optimiser, on the optimised build's server binary (the bolt phase).

GCC's profile decides how each function is compiled; BOLT then lays out the linked program
itself from a profile of that very binary: the hot functions side by side, each one's hot blocks
in a line, its cold blocks away from them (issue 30). The build machines have no LBR (branch
sampling), so the profile comes from BOLT's own instrumentation: the training workload runs
against an instrumented copy of the binary, which writes its counters (.fdata) when it exits, as
the instrumented GCC build writes its .gcda files.

The label follows the proof here too: BOLT's own report of how much of its profile matched the
binary is read back into bolt.json, and the phase fails when it did not match; the optimised
build says PGO+BOLT only where it is staged from a passed check (pgo/build/phases.py stage).
"""

import os
import re
import shutil
from dataclasses import dataclass

from pgo import PipelineError
from pgo.base import platforms, process
from pgo.core.proof import elf_section

# The BOLT of each platform's Debian release (pgo/platforms.toml `bolt`: bolt-19 in bookworm's and
# trixie's main, with its instrumentation runtime in libbolt-19-dev; tools/install-deps.sh), newest
# first, or an llvm-bolt first on PATH.
VERSIONS = platforms.bolt_versions()
INSTALL_HINT = ("tools/install-deps.sh installs "
                + " or ".join(f"bolt-{v} and libbolt-{v}-dev" for v in VERSIONS))
RUNTIME = "libbolt_rt_instr.a"
# What BOLT writes into every binary it rewrote (bolt/README.md, "Identifying a Binary Modified By BOLT").
NOTE = b".note.bolt_info"

# The optimising run, after LLVM's bolt/README.md (Step 3), the options its authors recommend:
OPTIMIZE = (
    # Each function's blocks in the order that keeps the hot path falling through (extended TSP).
    "--reorder-blocks=ext-tsp",
    # Functions that call each other hot, side by side (cache-directed sort: hfsort+ is deprecated
    # for it since LLVM 18; CPython's --enable-bolt moved to it too).
    "--reorder-functions=cdsort",
    # The blocks the training never ran, exception handlers included (MariaDB is C++), out of the hot
    # functions: what GCC's -freorder-blocks-and-partition did, which BOLT needs off (pgo/core/toolchain.py).
    "--split-functions", "--split-all-cold", "--split-eh",
    # The branches the profile executed, before and after: the report's measure of what changed.
    "--dyno-stats",
    # DWARF that describes the moved code: backtraces, debuggers and the debug packages stay right
    # (without it BOLT leaves the old addresses in the debug sections).
    "--update-debug-sections",
)
# Left out: --use-gnu-stack, which CPython's --enable-bolt passes so that strip keeps the binary
# working: it turns the PT_GNU_STACK header into BOLT's code segment, and a binary without one gets
# executable thread stacks from glibc (llvm-project issue 174191; Rust dropped it for that, PR 109945;
# rpmlint refuses the fixture's rpm: missing-PT_GNU_STACK-section). So the BOLTed binary is never
# stripped (binutils' strip breaks BOLT's layout: llvm-project issue 89336). Also left out: --icf
# (folds identical functions: code that compares function pointers breaks; GCC's -fipa-icf already
# folds what is safe), --plt (needs -znow), and the riskier passes CPython adds (--inline-all,
# --indirect-call-promotion, --frame-opt), until a measurement asks for them.

# A profile taken from this very binary matches every function it ran: 0% stale on the fixture, where
# a profile of another binary (the fixture compiled at -O0) put 100% of its samples in stale functions.
# The 5% between is a margin, not yet measured on MariaDB.
MAX_STALE_SHARE = 0.05


@dataclass(frozen=True)
class Tools:
    bolt: str
    merge: str
    version: str

    def identity(self):
        return {"llvm_bolt": self.bolt, "version": self.version}


def tools():
    """llvm-bolt and merge-fdata beside it, once the instrumentation runtime is there too."""
    names = ("llvm-bolt", *(f"llvm-bolt-{version}" for version in VERSIONS))
    found = next((path for path in map(shutil.which, names) if path), None)
    if found is None:
        raise PipelineError(f"BOLT is not installed: no {' or '.join(names)} on PATH ({INSTALL_HINT})")
    # Debian's /usr/bin/llvm-bolt-19 is a link into /usr/lib/llvm-19/bin/, where its merge-fdata is. It is
    # run by that path: llvm-bolt looks for its runtime in ../lib/ of the path it was run by (through
    # the link: /usr/lib/, "BOLT-ERROR: library not found"), and takes a file name only, not a path.
    program = os.path.realpath(found)
    home = os.path.dirname(program)
    merge = os.path.join(home, "merge-fdata")
    runtime = os.path.normpath(os.path.join(home, "..", "lib", RUNTIME))
    for path in (merge, runtime):
        if not os.path.isfile(path):
            raise PipelineError(f"BOLT's {os.path.basename(path)} is not installed beside {program} ({INSTALL_HINT})")
    banner = process.run([program, "--version"]).stdout
    version = re.search(r"LLVM version (\S+)", banner)
    return Tools(program, merge, version[1] if version else "unknown")


def bolted(path):
    return elf_section(path, NOTE) is not None


def original(binary):
    """BOLT's input: the linked binary. BOLT refuses one it rewrote already ("input file was processed
    by BOLT. Cannot re-optimize"), so the linked one is kept beside it (<name>.pre-bolt) for the phase to
    run again; a fresh link replaces the copy."""
    kept = binary.with_name(binary.name + ".pre-bolt")
    if not bolted(binary):
        shutil.copy2(binary, kept)
    elif not kept.is_file():
        raise PipelineError(f"{binary} is BOLTed already and its linked original is gone: run phase optimized again")
    return kept


def instrument(tools, binary, output, fdata, log):
    """An instrumented copy of binary at output (where the training runs it), writing fdata.<pid>.fdata.

    Its counters are updated atomically (lock-prefixed increments, BOLT's default): the server's
    threads lose none, as -fprofile-update=prefer-atomic does for GCC's.
    """
    log.run([tools.bolt, binary, "-o", output, "--instrument",
             f"--instrumentation-file={fdata}",
             # Each process its own file: the bootstraps and the server would overwrite one file.
             "--instrumentation-file-append-pid",
             # The runtime reads its tables from the binary's file: named here rather than found
             # through /proc/self/map_files, which a container may not let it read.
             f"--instrumentation-binpath={output}"])


def merge(tools, files, merged, log):
    log.run([tools.merge, *files, "-o", merged])


def optimize(tools, binary, profile, output, log):
    """The BOLTed binary at output; BOLT's report of it (report())."""
    said = []
    status = log.run([tools.bolt, binary, "-o", output, f"--data={profile}", *OPTIMIZE], watch=said.append,
                     check=False)
    if status:
        if any("no valid profile data found" in line for line in said):
            raise PipelineError(f"BOLT found no profile data in {profile}: the training ran no code of "
                                f"{output.name} (log: {log.path})")
        error = next((line.strip() for line in reversed(said) if "ERROR" in line), "no error line")
        raise PipelineError(f"llvm-bolt failed with status {status}: {error} (log: {log.path})")
    return report(said)


# BOLT 19's report lines (llvm-bolt's output on the fixture; older and newer BOLTs word them alike).
PROFILED = re.compile(r"BOLT-INFO: (\d+) out of (\d+) functions in the binary \([\d.]+%\) have non-empty "
                      r"execution profile")
STALE_FUNCTIONS = re.compile(r"BOLT-WARNING: (\d+) \([\d.]+% of all profiled\) functions? ha(?:ve|s) invalid "
                             r"\(possibly stale\) profile")
STALE_SAMPLES = re.compile(r"BOLT-WARNING: (\d+) out of (\d+) samples in the binary \([\d.]+%\) belong to "
                           r"functions with invalid")
IGNORED = re.compile(r"BOLT-INFO: profile for (\d+) objects was ignored")
LAYOUT = re.compile(r"BOLT-INFO: basic block reordering modified layout of (\d+) functions")
SPLIT = re.compile(r"BOLT-INFO: splitting separates (\d+) hot bytes from (\d+) cold bytes")
HOT_TEXT = re.compile(r"BOLT-INFO: setting __hot_(start|end) to 0x([0-9a-f]+)")
TAKEN = re.compile(r"^\s*(\d+) : taken branches\b")
RELOCATIONS = "BOLT-INFO: enabling relocation mode"


def report(said):
    """BOLT's figures from its output: how much of the profile matched, how much code it moved.

    BOLT counts the profile's samples only where some are stale: `samples` is None when none are.
    """
    figures = {"functions": 0, "profiled_functions": 0, "stale_functions": 0, "samples": None,
               "stale_samples": 0, "ignored_objects": 0, "layout_changed_functions": 0,
               "hot_bytes": 0, "cold_bytes": 0, "hot_text_bytes": 0, "taken_branches": [],
               "relocations": any(RELOCATIONS in line for line in said)}
    hot = {}
    for line in said:
        for pattern, keys in ((PROFILED, ("profiled_functions", "functions")), (STALE_FUNCTIONS, ("stale_functions",)),
                              (STALE_SAMPLES, ("stale_samples", "samples")), (IGNORED, ("ignored_objects",)),
                              (LAYOUT, ("layout_changed_functions",)), (SPLIT, ("hot_bytes", "cold_bytes"))):
            match = pattern.search(line)
            if match:
                figures.update(zip(keys, map(int, match.groups())))
        match = HOT_TEXT.search(line)
        if match:
            hot[match[1]] = int(match[2], 16)
        match = TAKEN.match(line)
        if match:
            figures["taken_branches"].append(int(match[1]))
    if len(hot) == 2:
        figures["hot_text_bytes"] = hot["end"] - hot["start"]
    # The dyno-stats: before, then after the optimisations.
    before, after = (figures.pop("taken_branches") + [None, None])[:2]
    figures["taken_branches"] = {"before": before, "after": after}
    samples = figures["samples"]
    figures["stale_share"] = figures["stale_samples"] / samples if samples else 0.0
    return figures


def judge(figures, binary_name, output):
    """The check: passed, and what failed (one line each): a profile that is not this binary's never
    gets the PGO+BOLT label."""
    problems = []
    if not figures["relocations"]:
        problems.append(f"BOLT found no relocations in {binary_name}, so it could not move its functions "
                        "(linked without -Wl,--emit-relocs?)")
    if not figures["profiled_functions"]:
        problems.append(f"BOLT's profile matched none of the {figures['functions']} functions of {binary_name}: "
                        "it is no profile of this binary")
    elif figures["stale_share"] > MAX_STALE_SHARE:
        problems.append(f"{figures['stale_share']:.0%} of BOLT's profile samples are in functions of {binary_name} "
                        f"whose profile does not match them ({figures['stale_functions']} stale functions; at most "
                        f"{MAX_STALE_SHARE:.0%}): a profile of another binary")
    if figures["profiled_functions"] and not figures["hot_text_bytes"]:
        problems.append(f"BOLT moved no code of {binary_name} into its hot text")
    if not problems and not bolted(output):
        problems.append(f"BOLT's output {output} has no {NOTE.decode()} note: it is not a BOLTed binary")
    return {**figures, "passed": not problems, "problems": problems}
