"""Flight recorder: armed cost per op vs awake dumping and asleep; ring peak vs budget.

The same no-compute model runs a short and a long workload in each variant; the
difference divided by the extra runner setups isolates the per-op cost. Armed,
the shim copies every selected tensor into its ring and scans it (the nan/inf
triggers) and writes nothing; dumping writes every tensor to the temp dir (the
disk is part of dumping's cost)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bench.common import atb_env, median_time, probe_env, run_atbsim, stop_daemon, write_config
from msprobe_atb.control.block import ControlBlock, dump_root_of

BASE = ["--no-compute", "--layers", "4", "--hidden", "128", "--prompt-len", "32",
        "--decode-steps", "4"]
SHORT, LONG = ["--requests", "1"], ["--requests", "5"]
REPEAT = 3
BUDGET_MB = 64


def _slot(output: Path):
    with ControlBlock(dump_root_of(output)) as block:
        return max(block.procs(), key=lambda p: p.start_ns)


def _variant(tmp: Path, name: str, **cfg) -> tuple[float, int, object]:
    out = tmp / name
    out.mkdir()
    config = out / "config.json"
    write_config(config, **cfg)
    env = probe_env(out, config)
    short = median_time(lambda: run_atbsim(BASE + SHORT, env), REPEAT)
    ops_short = _slot(out).ops_seen
    long = median_time(lambda: run_atbsim(BASE + LONG, env), REPEAT)
    slot = _slot(out)
    stop_daemon(out)
    return long - short, slot.ops_seen - ops_short, slot


def run():
    tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_rec."))
    try:
        env = atb_env()
        none = median_time(lambda: run_atbsim(BASE + LONG, env), REPEAT) - median_time(
            lambda: run_atbsim(BASE + SHORT, env), REPEAT)
        asleep, ops, _ = _variant(tmp, "asleep", dump_enable=False)
        dump, _, _ = _variant(tmp, "dump", dump_enable=True, save_child=True)
        armed, _, slot = _variant(
            tmp, "armed", dump_enable=True, save_child=True,
            recorder={"keep_rounds": 3, "budget_mb": BUDGET_MB, "triggers": ["nan", "inf"]})
        per = lambda t: (t - none) / max(ops, 1) * 1e6  # noqa: E731
        yield f"{ops} extra runner setups between the short and the long run"
        yield f"no probe      {none:8.3f} s  (reference)"
        yield f"asleep        {asleep:8.3f} s  {per(asleep):8.2f} us/op over no probe"
        yield f"awake dumping {dump:8.3f} s  {per(dump):8.2f} us/op over no probe"
        yield (f"armed         {armed:8.3f} s  {per(armed):8.2f} us/op over no probe "
               f"({armed / dump if dump else 0:.2f}x dumping's time, nothing written)")
        yield (f"ring peak {slot.rec_peak_bytes / 2**20:.1f} MiB of a {BUDGET_MB} MiB budget "
               f"({slot.rec_peak_bytes / (BUDGET_MB << 20):.0%}), {slot.rec_evicted} whole "
               f"rounds evicted, {slot.rec_lost} tensors lost")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
