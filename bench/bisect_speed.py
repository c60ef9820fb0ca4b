"""Precision search: `bisect` of a 32-layer stand-in round, its wall and CPU time, peak memory.

The round is the prefill at the stand-in's default sizes, fp16, with one op's output
scaled by 1.05 as its fault.

Wall time is of a fresh `msprobe-atb bisect` process, as a user pays it (start-up,
reading the dump, every chained run); CPU seconds and peak RSS are its rusage. The
machine is shared: the load average is printed."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from bench.common import dump_model, met, run_measured

LAYERS = 32
MODEL = ["--layers", str(LAYERS), "--dtype", "fp16", "--decode-steps", "1",
         "--inject", "scale=1.05:layer=20,op=PostNorm"]
TARGET_CPU_S = 600.0


def _figures(doc: dict, wall: float, cpu: float, rss: int) -> list[str]:
    found = ", ".join(c["path"].split("/", 2)[2] for c in doc["chosen"]) or "no op"
    return [f"{LAYERS}-layer prefill round: {doc['ops']} ops ({doc['searchable']} searchable), "
            f"{doc['evaluations']} chained runs (bound {doc['bound']:.0f}); error "
            f"{doc['before']:.3g} -> {doc['after']:.3g} (target {doc['target']:.3g}) by "
            f"promoting {found}",
            f"{wall:.1f} s wall (load average {os.getloadavg()[0]:.1f}), {cpu:.1f} CPU s "
            f"(target <= {TARGET_CPU_S:g}: {met(cpu <= TARGET_CPU_S)}), peak RSS "
            f"{rss / 1024:.0f} MiB"]


def run():
    tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_bisect."))
    try:
        dump = dump_model(tmp / "dump", MODEL, ids="", save_child=True)
        out, wall, cpu, rss = run_measured(["bisect", str(dump), "--json"])
        yield from _figures(json.loads(out), wall, cpu, rss)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
