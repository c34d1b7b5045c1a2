"""python3 -m pgo.bench: the `bench` subcommand on its own."""

import argparse
import sys

from pgo.bench import __doc__ as description, add_arguments, main

parser = argparse.ArgumentParser(prog="python3 -m pgo.bench", description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
add_arguments(parser)
sys.exit(main(parser.parse_args()))
