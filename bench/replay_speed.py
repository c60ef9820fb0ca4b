"""Op replay: `replay --all` of a 2-layer round at the stand-in's default sizes, of one
layer at hidden 4096 with a 2k-token prefill, and each op's peak memory against its
own tensors.

Wall times are of a fresh `msprobe-atb replay` process, as a user pays them (start-up,
reading the dump, recomputing in float64, judging), with its default workers (`-j`: one
per core; the large layer's ops run on them); CPU seconds are its
rusage, its workers' included. The machine is shared: the load average is printed.
The large layer is dumped with `--no-compute` (the stand-in's naive kernels would take
minutes at that size), so its outputs are not the op's results and some verdicts are
own-error: replay does the same work either way. Peak memory is what numpy and Python
allocate while one op is replayed (tracemalloc), divided by the bytes of that op's
dumped tensors."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import tracemalloc
from pathlib import Path

from bench.common import dump_model, met, run_measured

SMALL = ["--layers", "2", "--dtype", "fp32"]  # the stand-in's default sizes otherwise
LARGE = ["--no-compute", "--layers", "1", "--hidden", "4096", "--heads", "32", "--vocab",
         "32000", "--prompt-len", "2048", "--decode-steps", "1"]
TARGET_SMALL_S, TARGET_LARGE_S, TARGET_PEAK = 5.0, 20.0, 4.0


def _replay(dump: Path) -> tuple[float, float, dict, int]:
    """(wall s, CPU s, the JSON result, peak RSS in KiB) of one fresh replay process."""
    out, wall, cpu, rss = run_measured(["replay", str(dump), "--all", "--round", "0", "--json"])
    return wall, cpu, json.loads(out), rss


def _peaks(dump: Path) -> list[tuple[float, str, int, int]]:
    """Per op: (peak / own tensors, op, peak bytes, own bytes)."""
    from msprobe_atb.offline.read.binfile import resolve
    from msprobe_atb.offline.read.table import open_dump
    from msprobe_atb.offline.replay.runner import Replayer, replayable
    rep = Replayer(open_dump(dump))
    out = []
    for op in replayable(rep.ops):
        own = sum(resolve(t.path).length for t in op.inputs + op.outputs if t.path)
        tracemalloc.start()
        rep.replay(op)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if own:
            out.append((peak / own, op.rel, peak, own))
    return out


def run():
    tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_replay."))
    try:
        small = dump_model(tmp / "small", SMALL, ids="", save_child=True)
        wall, _, doc, _ = _replay(small)
        worst = max((o["max_rel_err"] for op in doc["ops"] for o in op["outputs"]), default=0)
        verdicts = {v: sum(o["verdict"] == v for o in doc["ops"])
                    for v in {o["verdict"] for o in doc["ops"]}}
        yield (f"2-layer round, default sizes, fp32: {len(doc['ops'])} ops in {wall:.2f} s wall "
               f"(target <= {TARGET_SMALL_S:g} s); verdicts {verdicts}; largest relative "
               f"error {worst:.3g} (|d-r| / max(|r|, the dtype's smallest normal))")
        large = dump_model(tmp / "large", LARGE, ids="1", save_child=True)
        wall, cpu, doc, rss = _replay(large)
        peaks = sorted(_peaks(large), reverse=True)
        largest = max(own for _, _, _, own in peaks)
        yield (f"1 layer, hidden 4096, 2048-token prefill: {len(doc['ops'])} ops in {wall:.1f} s "
               f"wall (target <= {TARGET_LARGE_S:g} s: {met(wall <= TARGET_LARGE_S)}; load "
               f"average {os.getloadavg()[0]:.1f}), {cpu:.1f} CPU s; peak RSS "
               f"{rss / 1024:.0f} MiB, {rss * 1024 / largest:.2f}x the largest op's own "
               f"tensors ({largest / 2**20:.0f} MiB; Python and its libraries included)")
        ratio, op, peak, own = peaks[0]
        yield (f"peak memory per op (numpy and Python allocations while it is replayed): at "
               f"most {ratio:.2f}x its own tensors ({op}: {peak / 2**20:.0f} MiB for "
               f"{own / 2**20:.0f} MiB; target <= {TARGET_PEAK:g}x: {met(ratio <= TARGET_PEAK)})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
