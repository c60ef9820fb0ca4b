"""Shared helpers: the stand-in ATB environment, the probe preload, timing."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ABI = 1
ATB_HOME = REPO / "build" / "atbsim" / f"cxx_abi_{ABI}"
ATBSIM = ATB_HOME / "bin" / "atbsim"
SHIM = REPO / "build" / "lib" / f"libatb_probe_abi{ABI}.so"


def atb_env() -> dict[str, str]:
    """The environment set_env.sh gives, without any probe variable."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("ATB_")}
    env["ATB_HOME_PATH"] = str(ATB_HOME)
    env["LD_LIBRARY_PATH"] = f"{ATB_HOME / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}"
    return env


def probe_env(output: Path, config: Path) -> dict[str, str]:
    env = atb_env()
    env.update(
        LD_PRELOAD=str(SHIM),
        ATB_OUTPUT_DIR=str(output),
        ATB_DUMP_CONFIG=str(config),
        MSPROBE_ATB_PYTHON=sys.executable,
    )
    return env


def write_config(path: Path, **fields) -> None:
    """Writes a config the way an editor would: a new file renamed over the old."""
    base = {
        "task": "tensor",
        "dump_enable": False,
        "exec_range": "all",
        "ids": "",
        "op_name": "",
        "save_child": False,
        "device": "",
        "filter_level": 1,
    }
    base.update(fields)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(base))
    os.replace(tmp, path)


def run_atbsim(args: list[str], env: dict[str, str]) -> float:
    """Runs `atbsim run ARGS` to completion and returns its wall time in seconds."""
    start = time.perf_counter()
    subprocess.run([str(ATBSIM), "run", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def median_time(fn: Callable[[], float], repeat: int) -> float:
    return statistics.median(fn() for _ in range(repeat))


def rss_kib(pid: int) -> int:
    """The process's resident set (VmRSS) in KiB; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except OSError:
        return 0


def stop_daemon(output: Path, wait_s: float | None = None) -> None:
    """`daemon --stop`; it waits `wait_s` for the daemon to finish (its default: 3 s)."""
    env = dict(os.environ, MSPROBE_ATB_STOP_WAIT_S=f"{wait_s:g}") if wait_s is not None else None
    subprocess.run([sys.executable, "-m", "msprobe_atb", "daemon", "--stop", "--output",
                    str(output)], check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, env=env)
