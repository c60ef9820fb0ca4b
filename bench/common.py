"""Shared helpers: the stand-in ATB environment, the probe preload, timing."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
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


# One decoder layer at hidden 4096 with computed (non-constant) data: the weights
# (~320 M elements of the layer's ~340 M dumped) are random, so nothing deduplicates;
# a 64-token prompt keeps the stand-in's naive kernels to tens of seconds.
LAYER_4096 = ["--layers", "1", "--hidden", "4096", "--heads", "32", "--vocab", "32000",
              "--prompt-len", "64", "--decode-steps", "1"]


def dump_model(out: Path, model: list[str], *, ids: str = "1", task: str = "tensor",
               save_child: bool = False) -> Path:
    """Round 0 of `atbsim run MODEL` dumped into `out` (created) with ids/task/save_child,
    its derived files complete and its daemon gone (a daemon lingering after `wait`
    would write into the dump while a figure is taken or the dump is removed)."""
    out.mkdir(parents=True)
    cfg = out / "config.json"
    write_config(cfg, task=task, dump_enable=True, exec_range="0", ids=ids,
                 save_child=save_child)
    subprocess.run([str(ATBSIM), "run", *model], env=probe_env(out, cfg), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "msprobe_atb", "wait", str(out), "--timeout", "600"],
                   check=True, stdout=subprocess.DEVNULL)
    stop_daemon(out)
    return out


def bin_bytes(root: Path) -> tuple[int, int]:
    """(total, largest) bytes of the `.bin` files under root (hard links once)."""
    seen, sizes = set(), []
    for f in root.rglob("*.bin"):
        st = f.stat()
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            sizes.append(st.st_size)
    return sum(sizes), max(sizes, default=0)


# Starts a command from a small process and reports its own wall, CPU and peak RSS:
# a peak RSS read by the bench's own wait4 would be at least the bench's (Linux keeps a
# process's high-water mark across the fork and exec that start it, and a bench that
# has held big tensors is gigabytes).
_LAUNCHER = """
import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
_, status, usage = os.wait4(pid, 0)
os.write(int(sys.argv[1]), f"{time.perf_counter() - start} {usage.ru_utime + usage.ru_stime}"
         f" {usage.ru_maxrss} {status}".encode())
"""


def run_measured(args: list[str], ok: tuple[int, ...] = (0, 1)
                 ) -> tuple[str, float, float, int]:
    """(stdout, wall s, CPU s, peak RSS in KiB) of a fresh `python -m msprobe_atb ARGS`,
    from its own rusage, taken by a small launcher (_LAUNCHER)."""
    read_end, write_end = os.pipe()
    with tempfile.TemporaryFile("w+") as out, os.fdopen(read_end, "rb") as figures:
        try:
            p = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(write_end), "-m",
                                  "msprobe_atb", *args], stdout=out, stderr=subprocess.DEVNULL,
                                 pass_fds=(write_end,))
        finally:
            os.close(write_end)
        p.wait()
        wall, cpu, rss, status = figures.read().split()
        rc = os.waitstatus_to_exitcode(int(status))
        if rc not in ok:
            raise RuntimeError(f"msprobe-atb {' '.join(args)} failed ({rc})")
        out.seek(0)
        return out.read(), float(wall), float(cpu), int(rss)


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"
