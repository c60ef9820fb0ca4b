"""`python -m msprobe_atb.daemon ...`: the daemon command without the rest of the CLI."""

import argparse
import sys

from msprobe_atb.daemon.cli import register

parser = argparse.ArgumentParser(prog="msprobe-atb")
register(parser.add_subparsers(dest="command"))
args = parser.parse_args(["daemon", *sys.argv[1:]])
sys.exit(args.func(args))
