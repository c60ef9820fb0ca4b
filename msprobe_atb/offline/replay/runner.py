"""Replaying the ops of a dump: a verdict per op, the first op at fault, and the
same ops replayed in a golden dump.

Verdicts: `ok`, `own-error` and `overflow` come from judge.py, output by output
(the op's verdict is its worst output's); `input-bad` when an input already holds
NaN/Inf (named, with the op that produced it, from the dump's graph);
`not-replayable` when the op type or a param value is not implemented, an input
or output was not dumped, or the op is a graph whose children are not in the dump.
An op of a torch dump (a module) replays through torch_ops.py's map of its class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from msprobe_atb.tree.graph import load_layer_graphs, load_model_graphs, upstream

from ..read.binfile import BinFileError, load_bin
from ..read.table import Dump
from .dumpops import DumpedOp, dumped_ops
from .judge import CHUNK, OutputJudge
from .refs import MASK_INPUTS, PREPARE, REFERENCES, RESULT_SHAPES, ROW_INPUTS, NotReplayable
from .torch_ops import torch_reference

REFERENCE_FAILED = "the reference failed on this param and these inputs"
VERDICT_RANK = {"ok": 0, "not-replayable": 1, "input-bad": 2, "overflow": 3, "own-error": 4}
AT_FAULT = ("own-error", "overflow")


@dataclass
class OpResult:
    op: DumpedOp
    verdict: str
    why: str
    outputs: list[dict] = field(default_factory=list)
    bad_input: dict | None = None

    def as_json(self) -> dict:
        out = {"path": self.op.path, "round": self.op.round, "op_id": self.op.op_id,
               "op_type": self.op.op_type, "verdict": self.verdict, "outputs": self.outputs,
               "why": self.why}
        if self.op.module is not None:
            out["module"] = self.op.module
        if self.bad_input:
            out["bad_input"] = self.bad_input
        return out


def _torch_module(op: DumpedOp) -> str:
    """"torch module Linear (model.layers.0.mlp.down_proj)"."""
    return f"torch module {op.op_type} ({op.module or 'its name is not in info/layer'})"


def load_tensors(op: DumpedOp, tensors, what: str) -> list[np.ndarray]:
    want = range(len(tensors) and tensors[-1].index + 1)
    have = {t.index: t for t in tensors}
    missing = [i for i in want if i not in have or not have[i].path]
    refused = next((t for t in tensors if t.refused), None)
    if refused:
        raise NotReplayable(f"{what} {refused.index} {refused.refused}")
    if not any(t.path for t in tensors):
        raise NotReplayable(f"no {what} tensor of it was dumped as a file (a statistics-only "
                            "dump, or a filter that left them out)")
    if missing:
        raise NotReplayable(f"{what} {', '.join(map(str, missing))} not dumped as a file")
    out = []
    for t in tensors:
        try:
            out.append(load_bin(t.path))
        except BinFileError as e:
            raise NotReplayable(f"{what} {t.index} cannot be read: {e.problem}") from None
    return out


def _pieces(op_type: str, param: dict, inputs: list[np.ndarray]):
    """(first row, inputs, whole) to recompute: blocks of about CHUNK elements of the
    row inputs where the op's rows are independent (refs.ROW_INPUTS), else everything
    (whole)."""
    rows = ROW_INPUTS.get(op_type, lambda p, i: None)(param, inputs)
    if not rows:
        yield 0, inputs, True
        return
    width = max(math.prod(inputs[i].shape[1:]) for i in rows) or 1
    step = max(1, CHUNK // width)
    for first in range(0, inputs[rows[0]].shape[0], step):
        yield first, [x[first:first + step] if i in rows else x for i, x in enumerate(inputs)], \
            False


class WrongShape(Exception):
    """The op's result cannot have the shape of its dumped output: a finding."""


def _check_shapes(ref_type: str, param: dict, inputs: list[np.ndarray],
                  judges: list[OutputJudge]) -> None:
    """Before computing an op whose result may be far larger than its inputs, its
    result's shapes against the dumped outputs': the work stays bounded by the
    dumped tensors' size, and a result that cannot fit is never made."""
    shapes = RESULT_SHAPES.get(ref_type)
    if shapes is None:
        return
    made = shapes(param, inputs)
    if len(made) != len(judges):
        raise NotReplayable(f"makes {len(made)} outputs, the dump holds {len(judges)}")
    for judge, shape in zip(judges, made):
        problem = judge.shape_problem(shape)
        if problem:
            raise WrongShape(problem.replace("has shape", "would have shape", 1))


class Replayer:
    """Replays ops of one dump; knows its graphs to name the producer of a bad input."""

    def __init__(self, dump: Dump, df: pl.DataFrame | None = None):
        self.dump = dump
        df = dump.tensors if df is None else df
        info = dump.layout.info
        dev_pids = sorted(set(df.get_column("dev_pid").to_list()))
        self.graphs = {dp: load_layer_graphs(info, dp) for dp in dev_pids}
        self.models = {dp: load_model_graphs(info, dp) for dp in dev_pids}
        self.ops = dumped_ops(dump, df)
        self.by_id = {(o.dev_pid, o.round, o.op_id): o for o in self.ops}
        self.callers = {(o.dev_pid, o.round, o.op_id.rpartition("_")[0]) for o in self.ops}

    def producer(self, op: DumpedOp, index: int) -> str:
        ups = upstream(self.graphs.get(op.dev_pid, {}), op.op_id, io="input", index=index,
                       max_depth=1, models=self.models.get(op.dev_pid))
        if not ups:
            return "unknown (no graph in info/ for it)"
        u = ups[0]
        known = self.by_id.get((op.dev_pid, op.round, u.op_id))
        return known.path if known else (u.op_name or u.tensor)

    def replay(self, op: DumpedOp) -> OpResult:
        if op.module is not None:
            mapped = torch_reference(op.op_type, (op.dev_pid, op.round, op.op_id) in self.callers)
            if isinstance(mapped, str):
                return OpResult(op, "not-replayable", f"{_torch_module(op)}: {mapped}")
            return self._recompute(op, *mapped)
        if not op.is_leaf:
            return OpResult(op, "not-replayable", "a graph op whose child ops are not in the "
                            "dump; dump it with \"save_child\": true to replay its ops")
        try:
            param = op.param()
        except ValueError as e:
            return OpResult(op, "not-replayable", str(e))
        return self._recompute(op, op.op_type, param)

    def _recompute(self, op: DumpedOp, ref_type: str, param: dict) -> OpResult:
        """Recomputes the op with the reference of `ref_type` (an ATB op type) and judges
        its dumped outputs against it."""
        ref = REFERENCES.get(ref_type)
        if ref is None:
            return OpResult(op, "not-replayable", f"op type {ref_type} is not implemented "
                            f"(replay implements {', '.join(sorted(REFERENCES))})")
        try:
            if not op.inputs and not op.outputs:
                return OpResult(op, "ok", "no tensors: nothing to recompute")
            # As they are loaded, so that what PREPARE replaces is let go of at once.
            inputs = PREPARE.get(ref_type, lambda p, i: i)(param,
                                                          load_tensors(op, op.inputs, "input"))
            dumped = load_tensors(op, op.outputs, "output")
        except (NotReplayable, ValueError) as e:
            return OpResult(op, "not-replayable", str(e))
        masks = MASK_INPUTS.get(ref_type, lambda p, n: set())(param, len(inputs))
        for t, x in zip(op.inputs, inputs):
            if t.index in masks or not np.issubdtype(x.dtype, np.inexact):
                continue
            bad = ~np.isfinite(x)
            if bad.any():
                src = self.producer(op, t.index)
                return OpResult(op, "input-bad", f"input {t.name} already holds {int(bad.sum())} "
                                f"NaN/Inf, produced by {src}",
                                bad_input={"input": t.name, "nan_inf": int(bad.sum()),
                                           "producer": src})
        judges = [OutputJudge(d, t.dtype) for t, d in zip(op.outputs, dumped)]
        try:
            _check_shapes(ref_type, param, inputs, judges)
            for first_row, part, whole in _pieces(ref_type, param, inputs):
                refs = ref(param, part)
                if len(refs) != len(judges):
                    return OpResult(op, "not-replayable", f"{ref_type} makes {len(refs)} "
                                    f"outputs, the dump holds {len(judges)}")
                for judge, r in zip(judges, refs):
                    judge.add(r, first_row, whole)
        except NotReplayable as e:
            return OpResult(op, "not-replayable", f"{ref_type}: {e}")
        except WrongShape as e:
            return OpResult(op, "own-error", f"{ref_type}: {e}")
        except (ArithmeticError, ValueError, TypeError, IndexError, MemoryError) as e:
            # What a reference did not foresee in crafted params or inputs: said, never
            # raised (tests/fuzz/replay_fuzz.py counts each as a finding).
            return OpResult(op, "not-replayable", f"{ref_type}: {REFERENCE_FAILED} "
                            f"({type(e).__name__}: {e})")
        outs = [j.result() for j in judges]
        for t, o in zip(op.outputs, outs):
            o["output"] = t.name
        worst = max(outs, key=lambda o: VERDICT_RANK[o["verdict"]])
        if worst["verdict"] == "ok":
            why = "every element of every output within its tolerance; largest absolute " \
                  f"error {max(o['max_abs_err'] for o in outs):.3g} ({worst['tolerance']})"
        else:
            why = f"output {worst['output']}: {worst['why']}"
        return OpResult(op, worst["verdict"], why, outs)


def _ancestors(op: DumpedOp):
    parts = op.op_id.split("_")
    for n in range(len(parts), 0, -1):
        yield (op.dev_pid, op.round, "_".join(parts[:n]))


def select(ops: list[DumpedOp], wanted: list[str]) -> list[DumpedOp]:
    """Ops named by id (`1_11`) or by folder path (a suffix, or a part with a `/`),
    with the child ops of a named graph."""
    def named(o: DumpedOp, w: str) -> bool:
        return o.op_id == w or o.path.endswith(w) or ("/" in w and w in o.path)
    roots = {(o.dev_pid, o.round, o.op_id) for o in ops if any(named(o, w) for w in wanted)}
    return [o for o in ops if any(a in roots for a in _ancestors(o))]


def replayable(ops: list[DumpedOp]) -> list[DumpedOp]:
    """The ops that get a verdict: leaf ops, and graphs with no child op in the dump
    (a graph with children is judged through them)."""
    return [o for o in ops if o.is_leaf or not o.children]


def first_at_fault(results: list[OpResult]) -> OpResult | None:
    return next((r for r in results if r.verdict in AT_FAULT), None)


def holding_op(by_id: dict, dev_pid: str, round_: int, op_id: str) -> DumpedOp | None:
    """The op that holds a tensor of `op_id` in `by_id` (Replayer.by_id): the nearest
    of its ops that is a graph with child ops in the dump, a leaf op, a torch module
    or the top-level op (a kernel's tensor is judged as its op's)."""
    parts = op_id.split("_")
    for n in range(len(parts), 0, -1):
        op = by_id.get((dev_pid, round_, "_".join(parts[:n])))
        if op is not None and (op.children or op.is_leaf or op.module is not None or n == 1):
            return op
    return None


def op_verdict(op: DumpedOp, by_id: dict, replay) -> OpResult:
    """The verdict on `op` by `replay` (a function of one op): a graph's is the first
    of its ops at fault, else its last op's."""
    if op.children:
        results = [replay(by_id[(op.dev_pid, op.round, c)]) for c in op.children]
        return first_at_fault(results) or results[-1]
    return replay(op)
