"""Test-only dumps of one crafted leaf op, for replay's regression tests and its
fuzzer: the op's dumped inputs and outputs, and its op_param.json as given."""

from __future__ import annotations

import contextlib
import io
import json
import tracemalloc
from pathlib import Path

import numpy as np
from offline_synth import RoundWriter

from msprobe_atb.cli import main

DEV_PID = "0_4711"


def crafted_op(root: Path, op_type: str, param: str | bytes | dict, inputs: list[np.ndarray],
               outputs: list[np.ndarray]) -> Path:
    """The output root of a dump of one op `0_{op_type}` (round 0)."""
    w = RoundWriter(root / "atb_dump_data" / "data", DEV_PID, 0, task="all")
    op = f"0_{op_type}"
    for i, x in enumerate(inputs):
        w.add(op, "input", i, x)
    for i, y in enumerate(outputs):
        w.add(op, "output", i, y)
    w.close()
    text = json.dumps(param) if isinstance(param, dict) else param
    (w.dir / op / "op_param.json").write_bytes(text.encode() if isinstance(text, str) else text)
    return root


def op_dir(root: Path, op_type: str) -> Path:
    return root / "atb_dump_data" / "data" / DEV_PID / "0" / f"0_{op_type}"


def traced(fn, *args):
    """(fn(*args), the peak of the bytes Python and numpy allocated meanwhile)."""
    tracemalloc.start()
    try:
        out = fn(*args)
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def replay_json(root: Path) -> tuple[int, dict, str]:
    """`msprobe-atb replay ROOT --all --json` in this process: (exit code, document,
    stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["replay", str(root), "--all", "--json"])
    return rc, (json.loads(out.getvalue()) if out.getvalue() else {}), err.getvalue()
