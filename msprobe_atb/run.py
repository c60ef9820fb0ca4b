"""`msprobe-atb run [--output DIR] [--config FILE] -- CMD ARGS...`: one dump, start to end.

Loads the probe exactly as `source scripts/load_atb_probe.sh` does (the script
itself checks the ATB environment and the config and picks the shim), runs the
command with that environment, waits until everything it selected is written and
the derived files are built, prints the summary, and lets the control plane
finish (as unload_atb_probe.sh does). The command's exit code is passed through,
like `msit llm dump --exec`.

With `--torch` the command is a Python script running a torch model: the torch
dumper is set up in its Python at start-up (torch/autostart.py) instead of the
probe, and builds the derived files itself when the script exits. Either way the
run waits for the processes CMD started that dump, too (a forked child, a
service left running), up to --timeout.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from msprobe_atb.argtypes import seconds_or_zero

REPO = Path(__file__).resolve().parent.parent
LOAD = REPO / "scripts" / "load_atb_probe.sh"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run", help="load the probe, run a command, wait for its dump, print the summary",
        description="Load the probe (as `source scripts/load_atb_probe.sh` does), run CMD "
        "with it, wait until every tensor it selected is written and statistic.csv and "
        "info/ are built, print the summary and let the control plane finish. The exit "
        "code is CMD's (128+N if a signal N ended it).",
        usage="msprobe-atb run [--torch] [--output DIR] [--config FILE] [--timeout S] "
              "-- CMD [ARGS...]")
    p.add_argument("--output", default=os.getcwd(), metavar="DIR",
                   help="output root; the dump goes to DIR/atb_dump_data (default: the "
                        "current directory)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="the dump config, which must exist, editable while CMD runs (default: "
                        "config.json in the current directory)")
    p.add_argument("--timeout", type=seconds_or_zero, default=120.0, metavar="S",
                   help="after CMD exits, how long to wait for its dump to be complete (120)")
    p.add_argument("--torch", action="store_true",
                   help="CMD is a Python script running a torch model (model.generate or "
                        "model(...)): dump it with the torch dumper, no script change; the "
                        "first module holding parameters called at top level is the model")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                   help="the command to run under the probe")
    p.set_defaults(func=run)


def probe_env(output: str, config: str) -> dict[str, str] | None:
    """The environment after sourcing the load script, or None if it refused
    (it has said why on stderr)."""
    script = 'source "$1" --output="$2" --config="$3" >&2 && env -0'
    p = subprocess.run(["bash", "-c", script, "bash", str(LOAD), output, config],
                       stdout=subprocess.PIPE, env=os.environ.copy())
    if p.returncode != 0:
        return None
    env = {}
    for item in p.stdout.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep and key not in (b"_", b"SHLVL", b"PWD", b"OLDPWD"):
            env[os.fsdecode(key)] = os.fsdecode(value)
    return env


def run_command(cmd: list[str], env: dict[str, str]) -> int:
    """Runs CMD to its end; its exit code (128+N for signal N), 126/127 if it cannot
    start. Ctrl-C and kill go to the command; we stay to finish the dump."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            child = subprocess.Popen(cmd, env=env)
        except OSError as exc:
            print(f"msprobe-atb run: cannot start {cmd[0]}: {exc.strerror or exc}",
                  file=sys.stderr)
            return 127 if isinstance(exc, FileNotFoundError) else 126
        signal.signal(signal.SIGTERM, lambda *_: child.terminate())
        rc = child.wait()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 128 - rc if rc < 0 else rc


def run(args: argparse.Namespace) -> int:
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        print("msprobe-atb run: no command given: msprobe-atb run [--output DIR] "
              "[--config FILE] -- CMD [ARGS...]", file=sys.stderr)
        return 2
    output = os.path.abspath(args.output)
    config = os.path.abspath(args.config or "config.json")
    if not os.path.lexists(config):
        # A service's config may be created later (the load script allows it); a
        # one-shot run would dump nothing and pass.
        print(f"msprobe-atb run: error: the config file {config} does not exist; a run dumps "
              "what its config selects: give --config FILE (presets are in configs/ of "
              f"msprobe-atb); {cmd[0]} was not started", file=sys.stderr)
        return 2
    if args.torch:
        return _run_torch(cmd, output, config, args.timeout)
    return _run_probe(cmd, output, config, args.timeout)


def _run_torch(cmd: list[str], output: str, config: str, timeout: float) -> int:
    from msprobe_atb.torch.runcmd import finish, prepare

    env = prepare(cmd, output, config)
    if env is None:
        return 2
    since = time.time_ns()
    rc = run_command(cmd, env)
    finish(cmd, rc, output, config, since, timeout)
    return rc


def _run_probe(cmd: list[str], output: str, config: str, timeout: float) -> int:
    from msprobe_atb.control.block import dump_root_of
    from msprobe_atb.control.probefiles import has_control_block
    from msprobe_atb.daemon.cli import stop
    from msprobe_atb.status import collect, render
    from msprobe_atb.wait import EXIT_TIMEOUT, outcome, wait_reporting

    env = probe_env(output, config)
    if env is None:
        print("msprobe-atb run: the probe could not be loaded (see above); "
              f"{cmd[0]} was not started", file=sys.stderr)
        return 2
    rc = run_command(cmd, env)
    dump_root = dump_root_of(output)
    if not has_control_block(dump_root):
        print(f"msprobe-atb run: {cmd[0]} exited ({rc}) without attaching the probe (is it an "
              "ATB process of the environment in ATB_HOME_PATH?); nothing was dumped",
              file=sys.stderr)
        return rc
    # Processes CMD started and left running are attached too: their dump is part of it.
    done = wait_reporting(dump_root, timeout, "msprobe-atb run", until_exit=True)
    if done is None:
        return rc
    code, state = done
    stop(output)  # the control plane finishes now rather than after its linger
    state.status = collect(dump_root)  # one look for the summary and the last line
    print(render(state.status))
    if code == EXIT_TIMEOUT:
        still = [p["pid"] for p in state.status["processes"] if p["alive"]]
        print(f"msprobe-atb run: the dump is not complete after {timeout:g} s "
              f"(waiting for {state.waiting_for})"
              + (f"; {len(still)} process(es) {cmd[0]} started still run and dump (pid "
                 f"{', '.join(map(str, still))}): the counts above are not final"
                 if still else ""), file=sys.stderr)
    else:
        print(f"{dump_root}: {outcome(state)}")
    return rc
