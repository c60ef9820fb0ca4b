"""Offline tools on a 1M-row statistics dump: open, stats, filter, compare.

The dump (statistic.csv + statistic_extra.csv, 100 round dirs, and a golden twin)
is generated in a temp dir and removed afterwards.

`run()` returns lines of measured figures; `python bench/offline_scale.py [rows]`
prints them."""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from msprobe_atb.offline.compare import compare_dumps
from msprobe_atb.offline.summary import summarize
from msprobe_atb.offline.table import CSV_COLUMNS, EXTRA_COLUMNS, open_dump

ROUNDS = 100
LAYERS = 40
OPS_PER_LAYER = 30  # children per layer; each op has 1 input and 1 output row


def _write_dump(root: Path, rows: int, *, noise: float, inject: bool, seed: int) -> None:
    """`rows` statistics rows over ROUNDS round dirs of one process."""
    rng = np.random.default_rng(seed)
    per_round = max(2 * (OPS_PER_LAYER + 1), rows // ROUNDS)
    layers = max(1, per_round // (2 * (OPS_PER_LAYER + 1)))
    ids, names, ios = [], [], []
    for layer in range(1, layers + 1):
        for child in [None, *range(OPS_PER_LAYER)]:
            oid = f"{layer}" if child is None else f"{layer}_{child}"
            name = "Layer" if child is None else f"Layer/Op{child}"
            ids += [oid, oid]
            names += [name, name]
            ios += ["input", "output"]
    n = len(ids)
    for r in range(ROUNDS):
        d = root / "atb_dump_data" / "data" / "0_1000" / str(r)
        d.mkdir(parents=True, exist_ok=True)
        base = np.abs(rng.standard_normal(n)) + 1.0
        norm = base * (1 + noise * rng.standard_normal(n))
        pinf = np.zeros(n, dtype=np.int64)
        if inject and r == ROUNDS // 2:
            pinf[n // 2:] = 1
            norm[n // 2:] = np.inf
        main = pl.DataFrame({
            "Device and PID": ["0_1000"] * n, "Execution Count": [str(r)] * n,
            "Op Name": names, "Op Type": [x.split("/")[-1] for x in names], "Op Id": ids,
            "Input/Output": ios, "Index": ["0"] * n, "Dtype": ["float16"] * n,
            "Format": ["nd"] * n, "Shape": ["4x64"] * n, "Max": base, "Min": -base,
            "Mean": base / 100, "Norm": norm, "Tensor Path": ["N/A"] * n,
        })
        main.select(CSV_COLUMNS).write_csv(d / "statistic.csv")
        extra = pl.DataFrame({
            "Sequence": np.arange(n) + r * n, "Op Id": ids, "Op Name": names,
            "Input/Output": ios, "Index": ["0"] * n, "Element Count": [256] * n,
            "NaN Count": [0] * n, "Pos Inf Count": pinf, "Neg Inf Count": [0] * n,
            "Zero Count": [0] * n, "Data Status": ["none"] * n, "Note": [""] * n,
        })
        extra.select(EXTRA_COLUMNS).write_csv(d / "statistic_extra.csv")


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run(rows: int = 1_000_000) -> list[str]:
    tmp = Path(tempfile.mkdtemp(prefix="offline_scale_"))
    try:
        _, t_gen = _timed(lambda: (
            _write_dump(tmp / "golden", rows, noise=0.0, inject=False, seed=1),
            _write_dump(tmp / "target", rows, noise=1e-4, inject=True, seed=1)))
        size = sum(f.stat().st_size for f in (tmp / "target").rglob("*.csv"))
        dump, t_open = _timed(lambda: open_dump(tmp / "target"))
        n = dump.tensors.height
        s, t_stats = _timed(lambda: summarize(dump))
        _, t_filter = _timed(lambda: dump.filter(layer="3", round="10-20").height)
        golden = open_dump(tmp / "golden")
        res, t_cmp = _timed(lambda: compare_dumps(golden, dump))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        first = s["first_nonfinite"][0]["op"] if s["first_nonfinite"] else "-"
        return [
            f"offline_scale: {n} CSV rows in {ROUNDS} round dirs, {size / 2**20:.0f} MiB of "
            f"CSV per dump (generated in {t_gen:.1f} s)",
            f"open_dump (statistic.csv + statistic_extra.csv): {t_open:.2f} s "
            f"({n / t_open / 1e6:.2f} M rows/s)",
            f"stats summary (first NaN/Inf = {first}, per layer): {t_stats:.2f} s",
            f"filter --layer 3 --round 10-20: {t_filter * 1000:.0f} ms",
            f"compare stats-only, {res.rows.height} rows ({res.count('fail')} fail): "
            f"{t_cmp:.2f} s",
            f"peak RSS of this process: {rss:.0f} MiB on {os.cpu_count()} CPUs",
        ]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    for line in run(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000):
        print(line)
