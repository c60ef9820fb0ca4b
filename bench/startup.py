"""CLI start-up: wall clock of a fresh process, beside the target of 0.3 s each.

Each command runs as a user types it: `msprobe-atb` from the PATH the load script sets
(scripts/bin), `status` and `wait` on a small finished dump (one process, two rounds of
a 2-layer model), and `source scripts/load_atb_probe.sh` in a fresh bash with that
dump's valid config (the load script checks it with the control plane's Python).
The CPU time beside each figure is what the process itself costs, whatever else runs."""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import ATB_HOME, ATBSIM, REPO, atb_env, write_config

TARGET_S = 0.3
REPEAT = 7
CLI = REPO / "scripts" / "bin" / "msprobe-atb"


def _cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run, the CPU of every process it started included."""
    cpu, start = _cpu(), time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, _cpu() - cpu


def _line(name: str, argv: list[str], env: dict[str, str]) -> str:
    _timed(argv, env)  # the first run warms the page cache, as a user's second call finds it
    runs = [_timed(argv, env) for _ in range(REPEAT)]
    wall = sorted(w for w, _ in runs)
    median = statistics.median(wall)
    verdict = "meets" if median <= TARGET_S else "MISSES"
    return (f"{name:<34} median {median:5.3f} s (min {wall[0]:5.3f}, max {wall[-1]:5.3f}; "
            f"CPU {statistics.median(c for _, c in runs):5.3f} s) over {REPEAT} runs; "
            f"target <= {TARGET_S} s: {verdict}")


def _small_dump(out: Path, env: dict[str, str]) -> Path:
    config = out / "config.json"
    write_config(config, task="all", dump_enable=True, exec_range="0,1")
    subprocess.run([str(CLI), "run", "--output", str(out), "--config", str(config), "--",
                    str(ATBSIM), "run", "--layers", "2"], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return config


def run():
    env = atb_env()
    out = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_startup."))
    try:
        config = _small_dump(out, env)
        yield (f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a busy "
               "machine stretches the wall clock, not the CPU time)")
        yield _line("msprobe-atb --version", [str(CLI), "--version"], env)
        yield _line("msprobe-atb --help", [str(CLI), "--help"], env)
        yield _line("msprobe-atb status DIR (finished)", [str(CLI), "status", str(out)], env)
        yield _line("msprobe-atb wait DIR (finished)", [str(CLI), "wait", str(out)], env)
        load = (f"source {shlex.quote(str(REPO / 'scripts' / 'load_atb_probe.sh'))} "
                f"--output={shlex.quote(str(out))} --config={shlex.quote(str(config))}")
        yield _line("source load_atb_probe.sh", ["bash", "--norc", "--noprofile", "-c", load],
                    dict(env, ATB_HOME_PATH=str(ATB_HOME)))
    finally:
        shutil.rmtree(out, ignore_errors=True)
