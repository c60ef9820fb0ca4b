"""Cost of the preloaded probe on a running model: none vs asleep vs awake-but-idle.

The stand-in runs with --no-compute, so the time is almost all ATB runtime and
hook traffic: the worst case for the probe's relative overhead. The daemon is
warmed up first so start-up is not counted."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench.common import atb_env, median_time, probe_env, run_atbsim, stop_daemon, write_config
from msprobe_atb.control.block import ControlBlock, dump_root_of

WORKLOAD = ["--no-compute", "--layers", "16", "--hidden", "64", "--requests", "10",
            "--decode-steps", "32"]
REPEAT = 5


def _ops_per_run(output: Path) -> int:
    with ControlBlock(dump_root_of(output)) as block:
        return max(p.ops_seen for p in block.procs() if p.pid)


def run() -> list[str]:
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-") as tmp:
        out, cfg = Path(tmp), Path(tmp) / "config.json"
        base = median_time(lambda: run_atbsim(WORKLOAD, atb_env()), REPEAT)
        write_config(cfg, dump_enable=False)
        env = probe_env(out, cfg)
        run_atbsim(WORKLOAD, env)  # starts the daemon
        asleep = median_time(lambda: run_atbsim(WORKLOAD, env), REPEAT)
        ops = _ops_per_run(out)
        write_config(cfg, dump_enable=True, exec_range="none")
        run_atbsim(WORKLOAD, env)
        idle = median_time(lambda: run_atbsim(WORKLOAD, env), REPEAT)
        stop_daemon(out)
    per_op = (asleep - base) / ops * 1e9 if ops else float("nan")
    return [
        f"workload: atbsim run {' '.join(WORKLOAD)} ({ops} runner setups per run)",
        f"no probe:                    {base * 1e3:8.1f} ms (median of {REPEAT})",
        f"probe asleep:                {asleep * 1e3:8.1f} ms  ratio {asleep / base:.3f}",
        f"probe awake, exec_range none:{idle * 1e3:8.1f} ms  ratio {idle / base:.3f}",
        f"asleep overhead per runner setup (incl. its execute's hooks): {per_op:.0f} ns",
    ]
