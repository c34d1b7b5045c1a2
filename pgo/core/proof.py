"""What each object of a build was compiled with, read back from the object itself.

The optimised build is a PGO build only where the compiler had the profile in effect. GCC's
warnings cannot tell that: options that switch the profile off (-fno-profile-use) or point it
elsewhere (-fprofile-use=/elsewhere) silence them, and anything between CMake and the compiler
(a compiler launcher) can add such options. So every variant compiles with -frecord-gcc-switches
(pgo/core/toolchain.py): GCC writes the command line its compiler proper ran with into the object's
.GCC.command.line section, and this module reads that back and decides, scanning the options in
order as GCC does (the last of conflicting options wins), what was in effect.

With LTO the objects decide too: each fat object's bytecode carries the profile its compile read
and the optimisation level of each function, and the link keeps both (GCC 12: a link with
-O0 -fno-profile-use added makes the same program).

GCC does not record every option: -D, -I, -include, -w and the -W warnings, -o, -dumpbase and
-dumpdir stay out of the record. A launcher, which can run anything, is therefore also part of
every build phase's identity (pgo/core/toolchain.py build_environment), and the profile's coverage is
counted from the .gcda files themselves, not only from the warnings.
"""

import json
import os
import re
import shlex
import struct
import time
from pathlib import Path

from pgo import PipelineError
from pgo.base.protocol import Variant
from pgo.core.profile import compiled_objects, hot_only, hot_threshold, in_dir, read_counters

SECTION = b".GCC.command.line"
# The families of options that decide whether GCC reads a profile and from where, or makes the code
# count itself instead; `-fno-X` and `-fX=...` are of family X.
USE, DIRECTORY = "profile-use", "profile-dir"
# -fprofile-use switches -fbranch-probabilities on (it is what reads the counters) only when no
# -f[no-]branch-probabilities is given: an explicit -fno-branch-probabilities, before or after it,
# leaves the profile unread (GCC 12, measured).
READS_COUNTERS = "branch-probabilities"
# AutoFDO's sampled profile replaces the .gcda counters: GCC reads none of them with it.
SAMPLED = "auto-profile"
INSTRUMENTS = ("profile-generate", "profile-arcs")
PROFILE_FAMILIES = (USE, READS_COUNTERS, SAMPLED, *INSTRUMENTS)


# --- reading the records --------------------------------------------------------

def elf_sections(path):
    """{name: (offset, size)} of an ELF file's sections; {} when it is no ELF file.

    Read here rather than with readelf, which prints the bytes of a path that are not ASCII
    as something else.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF":
                return {}
            wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
            table, = struct.unpack_from(order + ("Q" if wide else "I"), head, 0x28 if wide else 0x20)
            size, count, names_at = struct.unpack_from(order + "HHH", head, 0x3A if wide else 0x2E)
            if not table:
                return {}
            # name, type, flags, address, offset, size, link
            layout = order + ("IIQQQQI" if wide else "IIIIIII")
            f.seek(table)
            first = struct.unpack_from(layout, f.read(size))
            # More sections than the ELF header's fields hold: the first section header has the numbers.
            count, names_at = count or first[5], first[6] if names_at == 0xFFFF else names_at
            f.seek(table)
            raw = f.read(size * count)
            headers = [struct.unpack_from(layout, raw, number * size) for number in range(count)]
            f.seek(headers[names_at][4])
            names = f.read(headers[names_at][5])
            return {names[header[0]:names.index(b"\0", header[0])].decode("utf-8", "replace"): (header[4], header[5])
                    for header in headers}
    except (OSError, ValueError, struct.error, IndexError):
        return {}


def elf_section(path, name=SECTION):
    """The bytes of one section of an ELF file; None when it has none, or is no ELF file."""
    offset, size = elf_sections(path).get(name.decode(), (None, None))
    if offset is None:
        return None
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(size)


def records(path):
    """The command lines GCC recorded in an object (one per compile that went into it)."""
    data = elf_section(path)
    return [part.decode("utf-8", "surrogateescape") for part in data.split(b"\0") if part] if data else []


def link_time_optimised(path):
    """Whether a linked program or library is an LTO link's: it holds the records of the link's own
    compiles (LTRANS: "GNU GIMPLE 12.2.0 ... -fltrans"), which a link of fat objects' machine code
    (NO_LTO_LINK, or no LTO at all) never has."""
    return any(record.startswith("GNU GIMPLE ") and "-fltrans" in record.split() for record in records(path))


def options_of(record, paths=()):
    """A record's options in order, after its producer ("GNU C17 12.2.0").

    GCC joins the options with spaces and quotes nothing, so the paths the pipeline put into
    options (the profile and the build directory, which may hold spaces) are kept whole.
    """
    kept = {}
    for number, path in enumerate(paths):
        marker = f"\0{number}\0"
        kept[marker] = str(path)
        record = re.sub(re.escape(f"={path}") + r"(?= |$)", "=" + marker, record)   # no backslash in it
    options = re.split(r" (?=-)", record)[1:]
    for marker, path in kept.items():
        options = [option.replace(marker, path) for option in options]
    return options


def in_effect(options):
    """{family: the option that is in effect}, scanned in order as GCC does: the last of
    conflicting options wins. "O" is the optimisation level; DIRECTORY the option that names the
    profile directory (-fprofile-use=DIR, or a later -fprofile-dir=DIR)."""
    state = {}
    for option in options:
        if option.startswith("-O"):
            state["O"] = option
        elif option.startswith("-f"):
            name, named, _ = option[2:].partition("=")
            family = name.removeprefix("no-")
            state[family] = option
            if named and family in (USE, DIRECTORY):
                state[DIRECTORY] = option
    return state


def level(option):
    """GCC's optimisation level of an -O option: -O is -O1, -O4 and above are -O3."""
    value = option[2:] if option else "0"
    if value in ("", "1"):
        return "-O1"
    return f"-O{min(int(value), 3)}" if value.isdigit() else f"-O{value}"


def positive(option):
    return option is not None and not option.startswith("-fno-")


# --- what the build asked for ----------------------------------------------------

def requested_levels(build_dir):
    """{object (as compiled_objects names it): the optimisation level its compile command asks for}.

    From CMake's compile_commands.json, which holds the commands CMake generated, without a
    launcher: what the configuration and the source ask for, per object (a project may give one
    source another level).
    """
    path = Path(build_dir) / "compile_commands.json"
    try:
        entries = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise PipelineError(f"cannot read the compile commands of {build_dir} ({e}): configure it again") from None
    levels = {}
    for entry in entries:
        words = entry.get("arguments") or SHELL_WORD.findall(entry["command"])
        output = next((unquoted(words[i + 1]) for i, word in enumerate(words[:-1]) if word == "-o"), None)
        if output:
            obj = os.path.relpath(os.path.join(entry["directory"], output), build_dir)
            levels[obj.removesuffix(".o")] = level(next((w for w in map(unquoted, reversed(words))
                                                         if w.startswith("-O")), None))
    return levels


# A word of a shell command line as it stands, quotes and all: splitting each of MariaDB's ~1,500
# compile commands with shlex takes seconds; only the words read here are unquoted.
SHELL_WORD = re.compile(r"""(?:[^\s'"\\]|\\.|"(?:[^"\\]|\\.)*"|'[^']*')+""")


def unquoted(word):
    return shlex.split(word)[0] if any(c in word for c in "'\"\\") else word


# --- judging ---------------------------------------------------------------------

def faults(state, variant, flags, profile_dir, requested):
    """What in an object's options keeps it from being what its variant must be ([] if nothing).

    The optimised build: every -fprofile-* flag of the pipeline (flags) in effect, the profile
    read from profile_dir, the counters read, no instrumentation. Every other variant: no profile
    option in effect. Both: the optimisation level the build asked for (requested; None: unknown).
    """
    found = []
    if variant == Variant.OPTIMIZED:
        use = state.get(USE)
        if not positive(use):
            found.append(f"{use} cancels -fprofile-use" if use else "no -fprofile-use")
        elif state.get(DIRECTORY, "").partition("=")[2] != str(profile_dir):
            found.append(f"{state.get(DIRECTORY) or 'no profile directory'} instead of -fprofile-use={profile_dir}")
        for flag in flags:
            family = flag[2:].partition("=")[0]
            if flag.startswith("-fprofile-") and family != USE and state.get(family) != flag:
                found.append(f"{state.get(family) or 'no ' + flag} instead of {flag}")
        if state.get(READS_COUNTERS, "").startswith("-fno-"):
            found.append(f"{state[READS_COUNTERS]} leaves the profile unread")
        if positive(state.get(SAMPLED)):
            found.append(f"{state[SAMPLED]} reads a sampled profile instead")
        found += [f"{state[family]} instruments the code" for family in INSTRUMENTS if positive(state.get(family))]
    else:
        found += [f"{state[family]} in a build without profile" for family in PROFILE_FAMILIES
                  if positive(state.get(family))]
    if requested and level(state.get("O")) != requested:
        found.append(f"{state.get('O', 'no -O')} instead of {requested}, what the build asked for")
    return found


def prove(build_dir, variant, flags, profile_dir, hot_dirs):
    """Read every object's record of its options and judge it (faults()).

    Returns {"objects", "recorded", "in_effect": [objects whose every record passed],
    "faults": {object: [fault, ...]}, "hot_faults": how many of them are hot, "first_fault": the
    first (hot, if any) object with faults, or None, "seconds"}.
    A hot object without a record, or whose compile command CMake does not list, is a fault too:
    nothing proves what it was compiled with.
    """
    started = time.monotonic()
    build_dir = Path(build_dir)
    requested = requested_levels(build_dir)
    objects = compiled_objects(build_dir)
    proven, found, recorded = [], {}, 0
    for obj in objects:
        hot = any(in_dir(obj, d) for d in hot_dirs)
        lines = records(build_dir / f"{obj}.o")
        recorded += bool(lines)
        problems = []
        if hot and not lines:
            problems.append("no record of the options it was compiled with (.GCC.command.line)")
        if hot and obj not in requested:
            problems.append("no compile command in compile_commands.json")
        for line in lines:
            state = in_effect(options_of(line, (profile_dir, build_dir)))
            problems += [p for p in faults(state, variant, flags, profile_dir, requested.get(obj))
                         if p not in problems]
        if problems:
            found[obj] = problems
        elif lines:
            proven.append(obj)
    hot_faults = hot_only(found, hot_dirs)
    return {"objects": len(objects), "recorded": recorded, "in_effect": proven, "faults": found,
            "hot_faults": len(hot_faults), "first_fault": (hot_faults or sorted(found) or [None])[0],
            "seconds": round(time.monotonic() - started, 3)}


# --- what the profile did to the code ----------------------------------------------

# Where GCC puts a function the profile shows hot (-freorder-functions, on at -O2): .text.hot, or
# .text.hot.<name> with -ffunction-sections. Without a profile only __attribute__((hot)) does (16 of
# MariaDB 10.11's InnoDB sources: TRANSACTIONAL_TARGET). Startup code (main, static constructors) goes
# to .text.startup whatever the profile says.
HOT_TEXT, STARTUP_TEXT = ".text.hot", ".text.startup"


def laid_out(path, kind):
    """Whether an object holds code in sections of a kind (HOT_TEXT, STARTUP_TEXT)."""
    return any((name == kind or name.startswith(kind + ".")) and size for name, (_, size) in elf_sections(path).items())


def profile_trace(path):
    """Whether an object holds code GCC laid out as hot: the trace a profile read leaves."""
    return laid_out(path, HOT_TEXT)


def traces(build_dir, profile_dir, hot_objects, gcov_dump="gcov-dump"):
    """Which hot objects show in their code that their compile read the profile.

    The records (prove()) say what the compiler was told; a compile that looked for its .gcda where
    there is none (a wrapper that compiles to another path, as distcc and icecc do in effect, or the
    profile moved) compiles as without a profile, and -w hides even its warning. So the code is read
    too: an object whose profile has a block at or above GCC's hot threshold (pgo/core/profile.py
    hot_threshold) is expected to hold code in .text.hot, unless its hot blocks may all be startup
    code (it has .text.startup and no .text.hot). Measured on MariaDB 10.11.18 minimal (GCC 12): 233
    hot objects with hot code, 227 with .text.hot, the other 6 with startup code; the 88 without startup
    code all with .text.hot.

    Returns {"expected": [objects whose profile has hot code], "traced": [those with .text.hot code],
    "startup": [the others, which have startup code]}.
    """
    build_dir, profile_dir = Path(build_dir), Path(profile_dir)
    gcda = {obj: profile_dir / (obj.replace("/", "#") + ".gcda") for obj in hot_objects}
    with_data = [path for path in gcda.values() if path.is_file() and path.stat().st_size > 0]
    counters = read_counters(with_data, gcov_dump) if with_data else {}
    expected = sorted(obj for obj, path in gcda.items() if str(path) in counters
                      and any(ran and hottest >= hot_threshold(counters[str(path)])
                              for hottest, ran in counters[str(path)]["functions"]))
    traced = [obj for obj in expected if laid_out(build_dir / f"{obj}.o", HOT_TEXT)]
    startup = [obj for obj in expected if obj not in traced and laid_out(build_dir / f"{obj}.o", STARTUP_TEXT)]
    return {"expected": expected, "traced": traced, "startup": startup}
