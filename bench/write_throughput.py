"""Dump throughput: the probe writing a big model's tensors vs raw disk writes.

The stand-in runs realistic shapes with --no-compute (hidden 4096, 2k-token
prefill). The probe's figure is payload bytes per second of the time dumping
added to the process's run (the same run without the probe is the baseline);
the reference is this machine writing the same bytes, in the same file sizes,
with plain os.write from one thread."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from bench.common import atb_env, median_time, probe_env, run_atbsim, stop_daemon, write_config
from msprobe_atb.control.block import ControlBlock, dump_root_of

WORKLOAD = ["--no-compute", "--layers", "2", "--hidden", "4096", "--heads", "32",
            "--vocab", "32000", "--prompt-len", "2048", "--decode-steps", "1"]


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


def _dump(policy: str) -> tuple[float, int, list[int], int]:
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-") as tmp:
        out, cfg = Path(tmp).resolve(), Path(tmp).resolve() / "config.json"
        write_config(cfg, dump_enable=True, task="tensor", ids="1", save_child=False,
                     queue_full_policy=policy, queue_budget_mb=256)
        seconds = run_atbsim(WORKLOAD, probe_env(out, cfg))
        with ControlBlock(dump_root_of(out)) as block:
            proc = max(block.procs(), key=lambda p: p.start_ns)
            written, drops = proc.bytes_written, proc.drops
        sizes = [p.stat().st_size for p in (out / "atb_dump_data" / "data").rglob("*.bin")]
        stop_daemon(out)
        return seconds, written, sizes, drops


def run() -> list[str]:
    base = median_time(lambda: run_atbsim(WORKLOAD, atb_env()), 3)
    seconds, written, sizes, _ = _dump("block")
    added = seconds - base
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-raw-") as tmp:
        raw = _raw_write(sizes, Path(tmp))
    drop_seconds, drop_written, _, drops = _dump("drop")
    mib = written / 2**20
    return [
        f"workload: atbsim run {' '.join(WORKLOAD)}, dumping layer 1 (task tensor)",
        f"probe (block policy): {mib:.0f} MiB in {len(sizes)} files; the run took {seconds:.2f} s"
        f" vs {base:.2f} s without the probe -> {mib / added:.0f} MiB/s of added time",
        f"raw os.write of the same files: {raw:.2f} s -> {mib / raw:.0f} MiB/s;"
        f" probe/raw throughput ratio {raw / added:.2f}",
        f"drop policy, 256 MiB budget: ran {drop_seconds:.2f} s, wrote"
        f" {drop_written / 2**20:.0f} MiB, dropped {drops} tensors (counted, reported in status)",
    ]
