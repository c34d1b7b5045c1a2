"""Benchmark gate: is the PGO build faster than the plain one, measured the way the field learned to.

    pgo bench --baseline PLAIN --candidate PGO --out DIR      measure, report, gate
    pgo bench --from-result DIR/result.json --out DIR          re-render and re-judge
"""

import argparse

from pgo.bench.command import add_arguments, main


def register(subparsers):
    """Add the `bench` subcommand (func=main, returning the exit status) to argparse subparsers."""
    parser = subparsers.add_parser(
        "bench", help="benchmark the PGO build against the plain one and gate publication",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.set_defaults(func=main)
    return parser
