"""`msprobe-atb check CONFIG`: validate a config file offline."""

from __future__ import annotations

import argparse
import json
import sys
import traceback


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate a dump config and show what it will dump",
                       description="Validate a dump config (JSON, or YAML by extension) and "
                                   "print the effective config and what it will dump.")
    p.add_argument("config", help="the config file (.json, .yaml or .yml)")
    p.add_argument("--json", action="store_true", help="print the effective config as JSON")
    p.set_defaults(func=run)


# Exit codes: the load script tells a rejected config from a check that could not run.
VALID, REJECTED, MISSING, CRASHED = 0, 1, 2, 3


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from msprobe_atb.config.describe import describe
    from msprobe_atb.config.golden import validate_golden
    from msprobe_atb.config.loader import ConfigMissing, load_config
    from msprobe_atb.config.schema import ConfigError

    try:
        cfg = load_config(args.config)
        validate_golden(cfg, Path(args.config))  # as the daemon judges it
    except ConfigMissing:
        print(f"{args.config}: no such file", file=sys.stderr)
        return MISSING
    except ConfigError as exc:
        print(f"{exc.source}: invalid config:", file=sys.stderr)
        for problem in exc.problems:
            print(f"  - {problem}", file=sys.stderr)
        return REJECTED
    except Exception:  # a bug in validation: say so, distinctly from a rejection
        traceback.print_exc()
        print(f"{args.config}: internal error while checking the config (a bug in "
              "msprobe-atb; please report it with the file)", file=sys.stderr)
        return CRASHED
    if args.json:
        print(json.dumps(cfg.effective(), indent=2))
        return VALID
    print(f"{args.config}: valid")
    print("effective config:")
    for key, value in cfg.effective().items():
        print(f"  {key:<18} {json.dumps(value)}")
    for note in cfg.notes:
        print(f"note: {note}")
    print("what it does:")
    for line in describe(cfg):
        print(f"  {line}")
    return VALID
