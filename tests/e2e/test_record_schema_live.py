"""The records the real shim writes, on the stand-in, are as records.h declares them
(tests/test_record_schema.py checks the sources; this, what they write): every kind
and field declared for the shim, none missing, each value of its declared type. The
runs between them write every kind the stand-in can make the shim write."""

from __future__ import annotations

import json
from pathlib import Path

from e2e_helpers import require_artifacts, run_atbsim

from msprobe_atb.tree import record_schema as rs

ABI = 1
MODEL = ["--layers", "2", "--hidden", "32", "--vocab", "64", "--prompt-len", "4",
         "--decode-steps", "1"]


def _inject(dtype: str, fault: str) -> list[str]:
    """The stand-in in `dtype` with `fault` in layer 1's SwiGLU output, round 0."""
    return ["--dtype", dtype, "--inject", f"{fault}:layer=1,op=SwiGLU"]


# each run: its config and the stand-in's arguments besides MODEL
RUNS = {
    # two requests: round 0 is left, and its round record written
    "rounds": ({"task": "all", "dump_enable": True, "exec_range": "all"}, ["--requests", "2"]),
    # ATB reports the Inf: its overflow event and the kernel's outputs
    "reported": ({"task": "overflow_check", "dump_enable": True,
                  "overflow_check": {"overflow_nums": 1}}, _inject("fp16", "inf")),
    # ATB does not report NaN, the probe's scan finds it
    "probe_scan": ({"task": "overflow_check", "dump_enable": True,
                    "overflow_check": {"overflow_nums": 1, "probe_scan": True}},
                   _inject("fp16", "nan")),
    # an overflow incident of the flight recorder (ATB's report), with the rounds it
    # flushes and the kernel's outputs; armed at exit: the rounds it held dropped
    "incident": ({"task": "all", "dump_enable": True, "exec_range": "all", "save_child": True,
                  "recorder": {"keep_rounds": 1, "after_rounds": 1, "triggers": ["overflow"]}},
                 _inject("bf16", "value=0x1p121")),
    # an overflow incident on what ATB's scan misses
    "incident_found": ({"task": "tensor", "dump_enable": True, "exec_range": "all",
                        "save_child": True, "recorder": {"keep_rounds": 0, "after_rounds": 0,
                                                         "triggers": ["overflow"]}},
                       _inject("fp16", "nan")),
}
# optional fields the stand-in cannot make the shim write (tests/probe's hook host makes
# lost and refused tensors and params, and probe_helpers.Dump.records checks its records)
UNWRITTEN = {
    "tensor.note": "an empty tensor, one of a dtype without statistics, or a lost one",
    "param.note": "an op_param.json the shim could not write",
    "exit.params_unrecorded": "a lost op_param.json whose record found no room (a full disk)",
}
# kinds likewise (the hook host writes them, checked the same way)
UNWRITTEN_KINDS = {
    "cut": "a hold on an edit ended by the monitor: an execution that called no hook for "
           "MSPROBE_ATB_HOLD_IDLE_MS (tests/probe/test_probe_next.py)",
}


def _records(tmp_path: Path, env: dict[str, str]) -> list[dict]:
    """The records of every run, in order."""
    out: list[dict] = []
    for name, (config, args) in RUNS.items():
        root = run_atbsim(tmp_path / name, env, config, ABI, [*MODEL, *args])
        for log in sorted((root / "atb_dump_data" / ".probe" / "records").glob("*.jsonl")):
            out += [json.loads(line) for line in log.read_text().splitlines()]
    return out


def test_the_shims_records_are_as_declared(tmp_path, clean_env):
    require_artifacts(ABI)
    records = _records(tmp_path, clean_env)
    bad: dict[str, dict] = {}
    for rec in records:
        for problem in rs.problems(rec, "shim"):
            bad.setdefault(problem, rec)
    assert not bad, "\n".join(f"{p}: {json.dumps(r)[:300]}" for p, r in bad.items())
    assert {r["k"] for r in records} == set(rs.kinds()) - set(UNWRITTEN_KINDS), \
        "a kind no run wrote"
    seen = {(r["k"], k) for r in records for k in r}
    never = [f"{f.kind}.{f.name}" for f in rs.lists()[rs.RECORDS]
             if "shim" in f.writers and (f.kind, f.name) not in seen
             and f"{f.kind}.{f.name}" not in UNWRITTEN and f.kind not in UNWRITTEN_KINDS]
    assert not never, f"declared for the shim, written by no run: {never}"
