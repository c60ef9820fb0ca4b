"""Tensor-mode compare: the command on a dump pair, big-tensor throughput and RSS,
small-pair rate, 1 vs 2 workers.

Dumps are generated in a temp dir and removed afterwards:
* the command: `compare --engine in-process -o X.xlsx` in a fresh process, imports
  and workbook included, on one computed hidden-4096 layer dumped in fp32 (golden)
  and fp16 (target) by the stand-in (bench/common.py LAYER_4096: random weights,
  nothing deduplicates); both sides' `.bin` bytes per CPU second of the process
  (its rusage), best of CMD_REPEAT runs, target TARGET_CMD_GB_PER_CPU_S (the
  import of ml_dtypes 0.7 alone once halved it);
* big tensors: BIG_PAIRS fp16 pairs of BIG_ELEMS elements (a round "against
  itself", the target slightly perturbed). The reference is this machine reading
  the same files (both sides, 4 MiB reads into one buffer) in the same run; the
  compare figures are bytes per second of one side (the round) and of both, per
  wall second and per CPU second of the process (this machine is shared: the CPU
  figure is what one core does), and the ratio to that read bandwidth;
* RSS: one pair of HUGE_ELEMS elements (bigger than the 512 MiB budget) compared
  in a fresh process; its peak RSS from the kernel's rusage (os.wait4);
* small pairs: SMALL_PAIRS fp32-vs-fp16 pairs of SMALL_ELEMS elements (the size
  of a 1,888-pair, 28 MB dump), pairs per second of the per-pair stage
  (after start-up: the dump tables are open);
* 1 vs 2 local Dask workers on the big-tensor dump, the cluster already started
  (its start-up is printed apart);
* the local cluster's start-up until its workers are ready, the first in the
  process (its forkserver starts and imports the metric code once) and the next
  (what `--engine auto` hides behind in-process work), and `auto` on the
  big-tensor dump with its threshold (pair_engine.LOCAL_CLUSTER_MIN_S) at 0, so
  that it starts the cluster: wall time vs in-process, pairs done here meanwhile."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from bench.common import LAYER_4096, bin_bytes, dump_model, met, run_measured
from msprobe_atb.offline.compare import pair_engine
from msprobe_atb.offline.compare.pair_engine import pair_metrics
from msprobe_atb.offline.read.binwrite import bin_header

BIG_PAIRS, BIG_ELEMS = 8, 64 << 20  # 8 x 2 x 128 MiB of fp16: a 1 GiB round vs itself
HUGE_ELEMS = 384 << 20  # 2 x 768 MiB of fp16: one pair past the RSS budget
SMALL_PAIRS, SMALL_ELEMS = 1888, 2500  # ~28 MB of fp32 + fp16
RSS_BUDGET_MIB = 512
TARGET_CMD_GB_PER_CPU_S, CMD_REPEAT = 1.0, 3


def _write_bin(path: Path, arr: np.ndarray) -> None:
    code = {np.dtype("float32"): 0, np.dtype("float16"): 1}[arr.dtype]
    with open(path, "wb") as f:
        f.write(bin_header(arr.nbytes, code, (arr.size,)))
        arr.tofile(f)


def _pairs(d: Path, n: int, elems: int, seed: int, golden=np.float16) -> pl.DataFrame:
    """n golden/target (fp16) file pairs; the work table pair_metrics takes."""
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    rows = []
    base = rng.standard_normal(min(elems, 1 << 22)).astype(np.float32)
    for i in range(n):
        g = np.resize(base, elems) * np.float32(1 + i % 7)
        t = (g + np.float32(1e-3) * g).astype(np.float16)
        g = g.astype(golden)
        gp, tp = d / f"g{i}.bin", d / f"t{i}.bin"
        _write_bin(gp, g)
        _write_bin(tp, t)
        rows.append((i, str(gp), str(tp), "float16", elems, np.dtype(golden).name, elems))
    return pl.DataFrame(rows, schema=["_i", "golden_path", "target_path", "target_dtype",
                                      "target_count", "golden_dtype", "golden_count"],
                        orient="row")


def _read_bandwidth(files: list[str]) -> float:
    buf = bytearray(4 << 20)
    view = memoryview(buf)
    total, start = 0, time.perf_counter()
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while n := fh.readinto(view):
                total += n
    return total / (time.perf_counter() - start)


def _bytes(work: pl.DataFrame) -> int:
    return sum(os.path.getsize(p) for c in ("golden_path", "target_path")
               for p in work.get_column(c))


def _timed_metrics(work: pl.DataFrame) -> tuple[pl.DataFrame, float, float]:
    """(rows, wall s, CPU s) of the per-pair stage in this process."""
    start, cpu = time.perf_counter(), time.process_time()
    out, _ = pair_metrics(work, None, None, 1, None)
    return out, time.perf_counter() - start, time.process_time() - cpu


def _cluster_rate(work: pl.DataFrame, jobs: int) -> tuple[float, float, pl.DataFrame]:
    """(start-up s, compare s, rows) on a local cluster of `jobs` worker processes."""
    from msprobe_atb.offline.compare.dask_run import ClusterRun
    pairs = [tuple(r) for r in work.select("golden_path", "target_path",
                                           "target_dtype").iter_rows()]
    sizes = [4 * BIG_ELEMS] * len(pairs)
    out: list = [None] * len(pairs)
    t0 = time.perf_counter()
    with ClusterRun(None, jobs) as run:
        t1 = time.perf_counter()
        run.compare(pairs, sizes, None, None, out, None)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1, pl.DataFrame(out)


def _start_up(jobs: int) -> float:
    """Seconds until a local cluster's workers are ready (imports included)."""
    from msprobe_atb.offline.compare.dask_run import ClusterStart
    t0 = time.perf_counter()
    start = ClusterStart(jobs)
    start.ready.wait()
    t = time.perf_counter() - t0
    start.result()
    start.close()
    return t


def _cold_start_up(jobs: int) -> float:
    """_start_up in a fresh process (its forkserver not yet running)."""
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent.parent)!r}); "
            f"from bench.compare_speed import _start_up; print(_start_up({jobs}))")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout)


def _auto(work: pl.DataFrame, jobs: int) -> tuple[float, pl.DataFrame, pair_engine.EngineReport]:
    """(wall s, rows, report) of `--engine auto` forced over its threshold."""
    saved = pair_engine.LOCAL_CLUSTER_MIN_S
    pair_engine.LOCAL_CLUSTER_MIN_S = 0.0
    try:
        t0 = time.perf_counter()
        out, report = pair_metrics(work, None, None, jobs, None)
        return time.perf_counter() - t0, out, report
    finally:
        pair_engine.LOCAL_CLUSTER_MIN_S = saved


def _rss_child(work: pl.DataFrame) -> float:
    """Peak RSS (MiB) of a fresh process comparing the first pair of `work`: its
    VmHWM (rusage's maxrss would include the parent's pages from before exec)."""
    code = ("import sys; from msprobe_atb.offline.read.metrics import file_metrics; "
            "m = file_metrics(sys.argv[1], sys.argv[2], 'float16', None, None); "
            "assert m['state'] == 'ok' and m['within_tol'] > 0.9, m; "
            "print([x for x in open('/proc/self/status') if x.startswith('VmHWM')][0])")
    g, t = work.row(0)[1:3]
    out = subprocess.run([sys.executable, "-c", code, g, t], capture_output=True, text=True,
                         check=True).stdout
    return int(out.split()[1]) / 1024


def _command(tmp: Path) -> str:
    """The compare command on a golden fp32 / target fp16 pair of dumps of one layer."""
    golden = dump_model(tmp / "golden", LAYER_4096 + ["--dtype", "fp32"])
    target = dump_model(tmp / "target", LAYER_4096 + ["--dtype", "fp16"])
    nbytes = bin_bytes(golden)[0] + bin_bytes(target)[0]
    args = ["compare", "-gp", str(golden), "-tp", str(target), "--engine", "in-process",
            "-o", str(tmp / "compare.xlsx")]
    cpu = min(run_measured(args)[2] for _ in range(CMD_REPEAT))
    shutil.rmtree(tmp)
    rate = nbytes / cpu / 1e9
    return (f"compare command, in-process, one hidden-4096 layer fp32 vs fp16 "
            f"({nbytes / 2**20:.0f} MiB both sides): {cpu:.2f} CPU s = {rate:.2f} GB per "
            f"CPU-s (target >= {TARGET_CMD_GB_PER_CPU_S:g}: "
            f"{met(rate >= TARGET_CMD_GB_PER_CPU_S)}; load average {os.getloadavg()[0]:.1f})")


def run() -> list[str]:
    lines = []
    with tempfile.TemporaryDirectory(prefix="compare_speed_") as tmp:
        tmp = Path(tmp)
        lines.append(_command(tmp / "command"))
        big = _pairs(tmp / "big", BIG_PAIRS, BIG_ELEMS, 1)
        nbytes = _bytes(big)
        files = [*big.get_column("golden_path"), *big.get_column("target_path")]
        _read_bandwidth(files)  # warm the page cache, as for the compare
        read_bw = _read_bandwidth(files)
        res, t_big, cpu_big = _timed_metrics(big)
        assert res.get_column("state").to_list() == ["ok"] * BIG_PAIRS
        side = nbytes / 2
        lines += [
            f"big tensors: {BIG_PAIRS} fp16 pairs of {BIG_ELEMS:,} elements, a "
            f"{side / 2**30:.2f} GiB round vs itself",
            f"read bandwidth of the same files (reference): {read_bw / 1e9:.2f} GB/s",
            f"compare, in-process: round {side / t_big / 1e9:.2f} GB/s per wall s, "
            f"{side / cpu_big / 1e9:.2f} GB/s per CPU s (target >= 1 GB/s per core); both "
            f"sides {nbytes / cpu_big / 1e9:.2f} GB/s per CPU s = "
            f"{nbytes / cpu_big / read_bw:.2f} x read bandwidth",
        ]
        # auto first: its cluster is the first of this process, as in a `compare` run
        t, rows, rep = _auto(big, 2)
        assert rows.get_column("cosine").to_list() == res.get_column("cosine").to_list()
        lines.append(f"--engine auto forced onto a local cluster of 2 workers: {t:.2f} s wall "
                     f"incl. its start-up (x{t_big / t:.2f} vs in-process; {rep.in_process} of "
                     f"{BIG_PAIRS} pairs done in-process while it started)")
        est = pair_engine.estimated_seconds(nbytes // 2, nbytes // 2, BIG_PAIRS)
        lines.append(f"local Dask cluster start-up, 2 workers ready: {_cold_start_up(2):.1f} s "
                     f"the first in a process, {_start_up(2):.1f} s the next (auto starts it "
                     f"from {pair_engine.LOCAL_CLUSTER_MIN_S:g} s of estimated in-process work; "
                     f"this dump: {est:.1f} s, measured {t_big:.1f} s)")
        for jobs in (1, 2):
            start, t, rows = _cluster_rate(big, jobs)
            assert rows.get_column("cosine").to_list() == res.get_column("cosine").to_list()
            lines.append(f"local Dask cluster, {jobs} worker(s), started: round "
                         f"{side / t / 1e9:.2f} GB/s per wall s (x{t_big / t:.2f} vs "
                         f"in-process; start-up {start:.1f} s; load average "
                         f"{os.getloadavg()[0]:.1f})")
        for f in files:
            os.unlink(f)
        huge = _pairs(tmp / "huge", 1, HUGE_ELEMS, 2)
        rss = _rss_child(huge)
        lines.append(f"RSS: one pair of {HUGE_ELEMS:,} elements ({_bytes(huge) / 2**30:.2f} GiB):"
                     f" peak {rss:.0f} MiB (budget {RSS_BUDGET_MIB} MiB)")
        for f in (*huge.get_column("golden_path"), *huge.get_column("target_path")):
            os.unlink(f)
        small = _pairs(tmp / "small", SMALL_PAIRS, SMALL_ELEMS, 3, golden=np.float32)
        _timed_metrics(small.head(50))  # imports and first calls
        _, t_small, cpu_small = _timed_metrics(small)
        lines.append(f"small tensors: {SMALL_PAIRS} pairs, {_bytes(small) / 1e6:.0f} MB: "
                     f"{t_small:.2f} s, {SMALL_PAIRS / t_small:,.0f} pairs/s per wall s, "
                     f"{SMALL_PAIRS / cpu_small:,.0f} per CPU s, 1 core (target >= 2,000 "
                     "pairs/s)")
    return lines


if __name__ == "__main__":
    for line in run():
        print(line)
