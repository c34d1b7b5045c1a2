"""The one error path of every command of this repository (pgo, pgo.bench, vm_images, ./release).

A failure the user can act on is a PipelineError (or a subclass: ImageError, SettingsError, ...);
the command ends with one line `PROG: error: MESSAGE` on stderr and a non-zero status. The
Buildbot steps and ./release read that line back (error_reason) as the reason a step failed, so
the line's format and its parser stand here together.
"""

import argparse
import re
import sys


class PipelineError(Exception):
    """A failure the user can act on; the CLI prints it as one line and exits non-zero."""

    exit_code = 1


def error_line(message: object, prog: str = "pgo") -> str:
    """A command's failure in one line on stderr, the reason `./release` shows for a failed step."""
    return f"{prog}: error: {message}"


# `pgo: error:`, `pgo build: error:` (usage), `bench: error:`, `vm_images: error:`, `release: error:`
ERROR = re.compile(r"^[\w.]+(?: [\w-]+)*: error: (?P<message>.+)$")


def error_reason(log_lines: list[str]) -> str | None:
    """The message of the last error line among log_lines, or None."""
    for line in reversed(log_lines):
        match = ERROR.match(line.strip())
        if match:
            return match["message"]
    return None


def fail(prog: str, message: object, exit_code: int = 1) -> int:
    """Say why a command failed, in its one line; returns the command's exit status."""
    print(error_line(message, prog), file=sys.stderr)
    return exit_code


def run_command(parser: argparse.ArgumentParser, argv: list[str] | None, prog: str) -> int:
    """Parse argv and run the chosen subcommand (its `func`): the main() of every CLI here.

    A PipelineError, and an OSError (a disk that filled up, a folder that went away), end it with
    one line, like every other error; an interrupt with status 130.
    """
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except PipelineError as e:
        return fail(prog, e, e.exit_code)
    except OSError as e:
        where = f": {e.filename}" if e.filename else ""
        return fail(prog, f"{e.strerror or e}{where}")
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
