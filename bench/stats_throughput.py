"""Statistics throughput: the shim's one-pass statistics vs numpy's on the same data.

The shim computes max/min/mean/norm and the NaN/Inf/zero counts of every tensor it
writes with `task: statistics` (native/core/mechanisms/stats.c, stats_simd.c). Here both sides
run over the same 32 MiB of fp32/fp16/bf16 (normal values with a few NaN, Inf and
zeros); numpy's reference is what the tests compare against: the float64 copy, then
nanmax/nanmin/mean/norm and the counts. Figures are bytes per second of CPU time of
one thread, so the load of a shared machine does not move them much."""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

from bench.common import REPO
from msprobe_atb.tree.records import record_float

STATS_BENCH = REPO / "build" / "probe" / "bin" / "stats_bench"
# (name, ATB dtype code, numpy type, GB/s per core the issue asks for: fp32 at
# memory speed, the half types with their conversion)
DTYPES = (("fp32", 0, np.float32, 10.0), ("fp16", 1, np.float16, 8.0),
          ("bf16", 27, ml_dtypes.bfloat16, 8.0))
MIB = 32


def _data(np_type) -> np.ndarray:
    a = np.random.default_rng(7).standard_normal((MIB << 20) // np.dtype(np_type).itemsize)
    a[::100_003] = np.nan
    a[5::200_003] = np.inf
    a[7::300_007] = 0.0
    return a.astype(np_type)


def _numpy(a: np.ndarray) -> tuple[float, dict]:
    start = time.process_time()
    d = a.astype(np.float64)
    got = {"max": float(np.nanmax(d)), "min": float(np.nanmin(d)), "mean": float(d.mean()),
           "norm": float(np.linalg.norm(d)), "nan": int(np.isnan(d).sum()),
           "pinf": int(np.isposinf(d).sum()), "ninf": int(np.isneginf(d).sum()),
           "zero": int((d == 0).sum())}
    return a.nbytes / (time.process_time() - start) / 1e9, got


def run() -> list[str]:
    lines = []
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-stats-") as tmp:
        for name, code, np_type, target in DTYPES:
            a = _data(np_type)
            path = Path(tmp) / f"{name}.bin"
            a.tofile(path)
            out = subprocess.run([str(STATS_BENCH), str(code), str(path)], check=True,
                                 capture_output=True, text=True).stdout
            gbps = float(out.split()[0].split("=")[1])
            shim = json.loads(out.split("stats=", 1)[1])
            ref_gbps, ref = _numpy(a)
            exact = ("max", "min", "nan", "pinf", "ninf", "zero")
            same = all(record_float(shim[k]) == ref[k] for k in exact)
            met = "met" if gbps >= target else "NOT met"
            lines.append(f"{name}: shim {gbps:.2f} GB/s per core (target >= {target:g}: {met}),"
                         f" numpy {ref_gbps:.2f} GB/s on the same {MIB} MiB:"
                         f" ratio {gbps / ref_gbps:.1f}; max/min/counts equal: {same}")
    return lines
