"""Statistics throughput: the shim's one-pass statistics against the targets and memory speed.

The shim computes max/min/mean/norm and the NaN/Inf/zero counts of every tensor it
writes with `task: statistics` (native/core/mechanisms/stats.c, stats_simd.c). Here it
runs over 32 MiB of fp32/fp16/bf16 (normal values with a few NaN, Inf and zeros), in one
call and as the small tensors of a decode step (16 KiB a call, where per-call costs
show), against our targets (fp32 >= 10, fp16/bf16 >= 8 GB/s per core) and the
floor of this machine: the same thread ORing the same bytes as 256-bit words (the
simplest vectorised reduction; AVX2, as the statistics use), and copying them.
max/min/counts are checked against numpy. Precision: the relative error of mean and
norm against exact sums (math.fsum over float64) on large and adversarial inputs
(medians over PRECISION_SEEDS of each), numpy's float64 error beside it.
Figures are bytes per second of CPU time of one thread, medians of REPEAT runs, so the
load of a shared machine does not move them much."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np

from bench.common import REPO
from msprobe_atb.tree.records import record_float

STATS_BENCH = REPO / "build" / "probe" / "bin" / "stats_bench"
# name, aclDataType, numpy type, target in GB/s per core
DTYPES = (("fp32", 0, np.float32, 10.0), ("fp16", 1, np.float16, 8.0),
          ("bf16", 27, ml_dtypes.bfloat16, 8.0))
MIB = 32
SMALL = 16 << 10  # one tensor of a decode step
SECONDS = 0.5
REPEAT = 3
PRECISION_SEEDS = 3


def _data(np_type) -> np.ndarray:
    a = np.random.default_rng(7).standard_normal((MIB << 20) // np.dtype(np_type).itemsize)
    a[::100_003] = np.nan
    a[5::200_003] = np.inf
    a[7::300_007] = 0.0
    return a.astype(np_type)


def stats_bench(what: str, path: Path, slice_bytes: int, seconds: float = SECONDS) -> dict:
    """stats_bench's key=value figures; the stats JSON under "stats"."""
    out = subprocess.run([str(STATS_BENCH), what, str(path), str(slice_bytes), str(seconds)],
                         check=True, capture_output=True, text=True).stdout
    head, _, stats = out.partition(" stats=")
    got = {k: float(v) for k, v in (kv.split("=") for kv in head.split())}
    if stats:
        got["stats"] = json.loads(stats)
    return got


def _median(what: str, path: Path, slice_bytes: int) -> dict:
    runs = [stats_bench(what, path, slice_bytes) for _ in range(REPEAT)]
    got = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "stats"}
    got["stats"] = runs[-1].get("stats")
    return got


def _numpy_agrees(a: np.ndarray, shim: dict) -> bool:
    d = a.astype(np.float64)
    ref = {"max": np.nanmax(d), "min": np.nanmin(d), "nan": np.isnan(d).sum(),
           "pinf": np.isposinf(d).sum(), "ninf": np.isneginf(d).sum(), "zero": (d == 0).sum()}
    return all(record_float(shim[k]) == float(v) for k, v in ref.items())


def _adversarial(n: int, seed: int) -> dict[str, np.ndarray]:
    """Inputs for the sums: normal, cancelling (x and -x, and a few ones), and huge
    beside tiny (scaled per dtype by `which`)."""
    rng = np.random.default_rng(seed)
    half = rng.standard_normal(n // 2) * 1e3
    cancel = np.concatenate([half, -half, np.ones(8)])
    rng.shuffle(cancel)
    return {"normal": rng.standard_normal(n), "cancelling": cancel,
            "huge+tiny": rng.uniform(-1, 1, n), "which": rng.integers(0, 3, n)}


CASES = ("normal", "cancelling", "huge+tiny")


def _rel(got: float, exact: float) -> float:
    return abs(got - exact) / abs(exact) if exact else abs(got)


def _precision(tmp: Path, seeds: list[dict], code: int, np_type) -> str:
    """Relative errors of mean and norm, the shim's and numpy's, per case: medians over
    the seeds' inputs (a single input's cancellation error is a matter of luck)."""
    info = ml_dtypes.finfo(np_type)
    narrow = info.bits == 16
    scale = np.array([float(info.max) / 4 if narrow else 1e30,
                      float(info.smallest_subnormal) if narrow else 1e-30, 1.0])
    errors = {(k, case): [] for k in ("mean", "norm") for case in CASES}
    for inputs in seeds:
        for case in CASES:
            values = inputs[case] * scale[inputs["which"]] if case == "huge+tiny" else inputs[case]
            a = values.astype(np_type)
            path = tmp / "precision.bin"
            a.tofile(path)
            shim = stats_bench(str(code), path, a.nbytes, 0)["stats"]
            d = a.astype(np.float64)
            exact = {"mean": math.fsum(d) / d.size, "norm": math.sqrt(math.fsum(d * d))}
            ref = {"mean": float(d.mean()), "norm": float(np.linalg.norm(d))}
            for k in ("mean", "norm"):
                errors[k, case].append((_rel(record_float(shim[k]), exact[k]),
                                        _rel(ref[k], exact[k])))
    med = {key: [statistics.median(e) for e in zip(*v)] for key, v in errors.items()}
    return "; ".join(f"{k} " + ", ".join(f"{med[k, c][0]:.1e} ({med[k, c][1]:.1e}) {c}"
                                         for c in CASES) for k in ("mean", "norm"))


def _share(gbps: float, floor: float) -> str:
    return f"{gbps / floor:.0%} of the read floor" if floor else "no read floor without AVX2"


def run() -> list[str]:
    lines = []
    with tempfile.TemporaryDirectory(prefix="msprobe-bench-stats-") as tmp:
        tmp = Path(tmp)
        floor = small_floor = None
        for name, code, np_type, target in DTYPES:
            a = _data(np_type)
            path = tmp / f"{name}.bin"
            a.tofile(path)
            if floor is None:
                floor, small_floor = (_median("floor", path, n) for n in (a.nbytes, SMALL))
                lines.append(f"floor (this thread, the same bytes): read {floor['read_gbps']:.2f}"
                             f" GB/s ({SMALL >> 10} KiB a call: {small_floor['read_gbps']:.2f}),"
                             f" memcpy {floor['copy_gbps']:.2f} GB/s")
            big = _median(str(code), path, a.nbytes)
            small = _median(str(code), path, SMALL)
            met = "met" if big["gbps"] >= target else "NOT met"
            lines.append(f"{name}: {big['gbps']:.2f} GB/s per core (target >= {target:g}: {met},"
                         f" {_share(big['gbps'], floor['read_gbps'])});"
                         f" {SMALL >> 10} KiB a call: {small['ns']:.0f} ns, {small['gbps']:.2f}"
                         f" GB/s ({_share(small['gbps'], small_floor['read_gbps'])});"
                         f" max/min/counts equal numpy's: {_numpy_agrees(a, big['stats'])}")
        seeds = [_adversarial((MIB << 20) // 4, seed) for seed in range(PRECISION_SEEDS)]
        for name, code, np_type, _ in DTYPES:
            lines.append(f"{name} precision, relative error against exact sums (median of"
                         f" {PRECISION_SEEDS} inputs; numpy's):"
                         f" {_precision(tmp, seeds, code, np_type)}")
    return lines
