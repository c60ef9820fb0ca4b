"""Time from saving config.json to the running process applying it (msProbe: >= 5 s).

A stand-in model serves requests in a loop while the config is rewritten (by
rename, as editors do); the latency is measured until the process's slot in the
control block reports the new generation, i.e. its next op runs with it."""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import ATBSIM, probe_env, stop_daemon, write_config
from msprobe_atb.control.block import ControlBlock, dump_root_of

LOOP = ["run", "--no-compute", "--layers", "2", "--requests", "1000000", "--decode-steps", "4"]


def _wait(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.0005)
    return False


def _latencies(samples: int, events: bool) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-") as tmp:
        out, cfg = Path(tmp), Path(tmp) / "config.json"
        write_config(cfg, dump_enable=False)
        env = probe_env(out, cfg)
        if not events:
            env["MSPROBE_ATB_NO_EVENTS"] = "1"
        proc = subprocess.Popen([str(ATBSIM), *LOOP], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        result = []
        try:
            block_path = dump_root_of(out) / ".probe" / "control.block"
            if not _wait(block_path.exists, 30):
                raise RuntimeError("the probe did not attach within 30 s")
            with ControlBlock(dump_root_of(out)) as block:
                _wait(lambda: any(p.pid == proc.pid for p in block.procs()), 30)

                def applied_gen() -> int:
                    return next(p.config_generation for p in block.procs() if p.pid == proc.pid)

                for i in range(samples):
                    # Alternate between two configs that dump nothing, so only control is timed.
                    before = block.generation
                    write_config(cfg, dump_enable=True, exec_range="none" if i % 2 else
                                 "1000000,1000001")
                    t0 = time.perf_counter()
                    applied = _wait(lambda before=before: block.generation != before and
                                    applied_gen() == block.generation,
                                    30)
                    if applied:
                        result.append(time.perf_counter() - t0)
                    time.sleep(0.05)
        finally:
            proc.terminate()
            proc.wait()
            stop_daemon(out)
        return result


def _summary(name: str, values: list[float]) -> str:
    if not values:
        return f"{name}: no edit was applied"
    ms = sorted(v * 1e3 for v in values)
    return (f"{name}: median {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms "
            f"over {len(ms)} edits")


def run() -> list[str]:
    return [
        _summary("watchdog events", _latencies(20, events=True)),
        _summary("poll only (no file events)", _latencies(3, events=False)),
        "target: < 100 ms with events; msProbe needs >= 5 s and up to 16384 op setups",
    ]
