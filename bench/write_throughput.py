"""Dump throughput: the probe writing a big model's tensors vs raw disk writes.

The stand-in runs realistic shapes with --no-compute (hidden 4096, 2k-token
prefill). The probe's figure is payload bytes per second of the time dumping
added to the process's run (the same run without the probe is the baseline);
the reference is this machine writing the same bytes, in the same file sizes,
with plain os.write from one thread. Wall times on a shared machine are
noisy, so each side is the median of 3 runs, and the CPU time and minor page
faults the probe adds (from the kernel's rusage of each run) are printed
too: they do not depend on what else the machine is doing."""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import ATBSIM, atb_env, probe_env, stop_daemon, write_config
from msprobe_atb.control.block import ControlBlock, dump_root_of

WORKLOAD = ["--no-compute", "--layers", "2", "--hidden", "4096", "--heads", "32",
            "--vocab", "32000", "--prompt-len", "2048", "--decode-steps", "1"]
REPEAT = 3


@dataclass
class Run:
    wall: float    # seconds
    cpu: float     # user + system seconds of the process
    faults: int    # minor page faults of the process
    rss: int       # peak RSS of the process, KiB


def _run(env: dict[str, str]) -> Run:
    """One `atbsim run WORKLOAD`, with its own rusage (os.wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(ATBSIM), "run", *WORKLOAD], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args)
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_minflt, usage.ru_maxrss)


def _median(runs: list[Run]) -> Run:
    return Run(statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs),
               int(statistics.median(r.faults for r in runs)),
               int(statistics.median(r.rss for r in runs)))


def _raw_write(sizes: list[int], where: Path) -> float:
    payload = b"\x5a" * max(sizes)
    start = time.perf_counter()
    for i, size in enumerate(sizes):
        fd = os.open(where / f"t{i}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
        try:
            os.write(fd, memoryview(payload)[:size])
        finally:
            os.close(fd)
    return time.perf_counter() - start


def _dump(policy: str, task: str = "tensor") -> tuple[Run, int, list[int], int]:
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-") as tmp:
        out, cfg = Path(tmp).resolve(), Path(tmp).resolve() / "config.json"
        write_config(cfg, dump_enable=True, task=task, ids="1", save_child=False,
                     queue_full_policy=policy, queue_budget_mb=256)
        run = _run(probe_env(out, cfg))
        with ControlBlock(dump_root_of(out)) as block:
            proc = max(block.procs(), key=lambda p: p.start_ns)
            written, drops = proc.bytes_written, proc.drops
        sizes = [p.stat().st_size for p in (out / "atb_dump_data" / "data").rglob("*.bin")]
        stop_daemon(out)
        return run, written, sizes, drops


def run() -> list[str]:
    base_runs, probe_runs = [], []
    for _ in range(REPEAT):  # interleaved, so a slow spell hits both sides
        base_runs.append(_run(atb_env()))
        probe_run, written, sizes, _ = _dump("block")
        probe_runs.append(probe_run)
    base, probe = _median(base_runs), _median(probe_runs)
    added = probe.wall - base.wall
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-raw-") as tmp:
        raw = _raw_write(sizes, Path(tmp))
    drop, drop_written, _, drops = _dump("drop")
    stats_run = _dump("block", task="statistics")[0]
    stats_rss = (stats_run.rss - base.rss) / 1024
    mib = written / 2**20
    return [
        f"workload: atbsim run {' '.join(WORKLOAD)}, dumping layer 1 (task tensor),"
        f" 256 MiB queue budget; medians of {REPEAT} interleaved runs",
        f"probe (block policy): {mib:.0f} MiB in {len(sizes)} files; the run took"
        f" {probe.wall:.2f} s vs {base.wall:.2f} s without the probe"
        f" -> {mib / added:.0f} MiB/s of added time",
        f"raw os.write of the same files: {raw:.2f} s -> {mib / raw:.0f} MiB/s;"
        f" probe/raw throughput ratio {raw / added:.2f}",
        f"added by the probe: {probe.cpu - base.cpu:.2f} CPU s"
        f" ({probe.cpu:.2f} vs {base.cpu:.2f}), {probe.faults - base.faults} minor page faults"
        f" ({(probe.faults - base.faults) * 4096 / written:.2f} per 4 KiB dumped, the stand-in's"
        f" own host copy of each tensor included)",
        f"drop policy, 256 MiB budget: ran {drop.wall:.2f} s, wrote"
        f" {drop_written / 2**20:.0f} MiB, dropped {drops} tensors (counted, reported in status)",
        f"task statistics, same run: peak RSS {stats_run.rss / 1024:.0f} MiB vs"
        f" {base.rss / 1024:.0f} MiB without the probe: {stats_rss:+.0f} MiB (target <= +64 MiB)",
    ]
