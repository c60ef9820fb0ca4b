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


def run():
    tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_bisect."))
    try:
        dump = dump_model(tmp / "dump", MODEL, ids="", save_child=True)
        out, wall, cpu, rss = run_measured(["bisect", str(dump), "--json"])
        doc = json.loads(out)
        found = ", ".join(c["path"].split("/", 2)[2] for c in doc["chosen"]) or "no op"
        yield (f"{LAYERS}-layer prefill round: {doc['ops']} ops ({doc['searchable']} "
               f"searchable), {doc['evaluations']} chained runs (bound "
               f"{doc['bound']:.0f}); error {doc['before']:.3g} -> {doc['after']:.3g} "
               f"(target {doc['target']:.3g}) by promoting {found}")
        yield (f"{wall:.1f} s wall (load average {os.getloadavg()[0]:.1f}), {cpu:.1f} CPU s "
               f"(target <= {TARGET_CPU_S:g}: {met(cpu <= TARGET_CPU_S)}), peak RSS "
               f"{rss / 1024:.0f} MiB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
