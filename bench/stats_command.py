"""`msprobe-atb stats` on one computed hidden-4096 layer: CPU, GB per CPU-s, peak RSS.

The dump is made in the run (bench/common.py LAYER_4096: random weights, nothing
deduplicates), once with `task: tensor` as msProbe's shim leaves it (statistic.csv
saying N/A; no statistic_extra.csv, no manifest: `stats` computes the statistics
from the files, the shim's code over chunks) and once with `task: all` (the
statistics come from statistic.csv; no tensor is read). Figures are of a fresh
`stats` process, imports included: bytes of the dump's `.bin` files per CPU second
of the process (its rusage), and its peak RSS against 200 MB plus the largest
tensor. Best of REPEAT runs (the machine is shared)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from bench.common import LAYER_4096, bin_bytes, dump_model, met, run_measured
from msprobe_atb.control.block import dump_root_of

TARGET_GB_PER_CPU_S = 1.0
RSS_ALLOWANCE = 200e6  # bytes, on top of the largest tensor
REPEAT = 3


def _stats(dump: Path, label: str) -> str:
    total, largest = bin_bytes(dump)
    runs = [run_measured(["stats", str(dump)], ok=(0,)) for _ in range(REPEAT)]
    out = runs[0][0]
    cpu = min(r[2] for r in runs)
    rss = max(r[3] for r in runs) * 1024
    rate = total / cpu / 1e9
    said = "says so" if "computed from their .bin files" in out else "says none were read"
    return (f"{label}: {total / 2**20:.0f} MiB in .bin files, {cpu:.2f} CPU s = {rate:.2f} GB "
            f"per CPU-s (target >= {TARGET_GB_PER_CPU_S:g}: {met(rate >= TARGET_GB_PER_CPU_S)});"
            f" peak RSS {rss / 1e6:.0f} MB (target <= 200 MB + the largest tensor "
            f"{largest / 1e6:.0f} MB: {met(rss <= RSS_ALLOWANCE + largest)}); {said}; load "
            f"average {os.getloadavg()[0]:.1f}")


def run():
    tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_stats."))
    try:
        fp32 = LAYER_4096 + ["--dtype", "fp32"]
        tensor = dump_model(tmp / "tensor", fp32)
        # our records carry counts and statistics even for task tensor, kept by
        # statistic_extra.csv and the manifest; msProbe's dump has neither
        root = dump_root_of(tensor)
        shutil.rmtree(root / "manifest")
        for extra in root.rglob("statistic_extra.csv"):
            extra.unlink()
        yield _stats(tensor, "task tensor as msProbe's shim leaves it (statistics from the"
                     " files)")
        shutil.rmtree(tmp / "tensor")
        yield _stats(dump_model(tmp / "all", fp32, task="all"),
                     "task all (statistics from statistic.csv)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
