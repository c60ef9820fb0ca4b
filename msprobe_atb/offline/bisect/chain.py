"""The chained forward run of one round of one model: each op takes its inputs from
its producers' outputs in this run (the dataflow of info/model, which holds every
layer graph in the model's tensor names), weights and the round's external inputs
(ids, cos/sin, slots, the dumped KV cache of a decode round) from the dump.

Each op runs in a mode (modes.py): promoted, deployed or emulated. An op that cannot
be recomputed (replay's not-replayable) gives its dumped outputs in every run; an op
whose deployed result misses its dumped output runs emulated. Both are named and kept
out of the search. A run with a set of promoted ops reuses the all-deployed run up to
the first op whose inputs or mode differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from msprobe_atb.tree.graph import model_leaves

from ..read.table import Dump
from ..replay.dumpops import DumpedOp, dumped_ops
from ..replay.refs import REFERENCES, NotReplayable
from ..replay.runner import load_tensors
from . import modes

Source = tuple[int, int]  # (producing step, its output index)


class ChainError(Exception):
    """The round cannot be run chained; the message says why."""


@dataclass
class Step:
    op: DumpedOp
    param: dict
    sources: list[Source | None]  # per input: its producer in the run, or None (dumped)
    dumped_inputs: list[np.ndarray | None]  # kept where the source is the dump
    dtypes: list[str]  # its outputs' dump dtypes
    shapes: list[tuple[int, ...]] = field(default_factory=list)  # its outputs' shapes
    own_error: list[np.ndarray | None] = field(default_factory=list)
    dumped_outputs: list[np.ndarray] = field(default_factory=list)  # kept for fixed steps
    excluded: str | None = None  # why it is kept out of the search
    fixed: bool = False  # not-replayable: its dumped outputs stand in every run


FAILURES = (NotReplayable, ArithmeticError, ValueError, TypeError, IndexError)


def _model_of_round(leaves: dict, ops: list[DumpedOp], model: str | None) -> str:
    """The model asked for, else the one whose leaf ops include the round's first op."""
    if model is not None:
        if model not in leaves:
            raise ChainError(f"no model {model!r} in info/model (it has "
                             f"{', '.join(sorted(leaves)) or 'none'})")
        return model
    for name, ls in leaves.items():
        if any(leaf.op_id == ops[0].op_id for leaf in ls):
            return name
    raise ChainError("info/model names none of the round's ops: the dataflow is unknown")


class Chain:
    """One round of one model, ready to be run chained."""

    def __init__(self, dump: Dump, round_: int, model: str | None = None, progress=None):
        df = dump.tensors
        if not df.height:
            raise ChainError(f"the dump holds no tensor in round {round_}")
        self.dev_pid = sorted(set(df.get_column("dev_pid").to_list()))[0]
        ops = [o for o in dumped_ops(dump, df) if o.dev_pid == self.dev_pid and o.is_leaf]
        if not ops:
            raise ChainError(f"no op of round {round_} was dumped with its op_param.json (dump "
                             "with \"save_child\": true: configs/precision_search.json)")
        leaves = model_leaves(dump.layout.info, self.dev_pid)
        self.model = _model_of_round(leaves, ops, model)
        by_id = {o.op_id: o for o in ops}
        order = [leaf for leaf in leaves[self.model] if leaf.op_id in by_id]
        if not order:
            raise ChainError(f"no op of {self.model} was dumped in round {round_}")
        self.round = round_
        self.steps: list[Step] = []
        writers: dict[str, Source] = {}
        for leaf in order:
            op = by_id[leaf.op_id]
            sources = [writers.get(t) for t in leaf.inputs[:len(op.inputs)]]
            sources += [None] * (len(op.inputs) - len(sources))
            self.steps.append(self._step(op, sources, self._shape))
            for j, t in enumerate(leaf.outputs[:len(op.outputs)]):
                writers[t] = (len(self.steps) - 1, j)
            if progress:
                progress(1)
        self._base: list[list[np.ndarray]] | None = None

    def _shape(self, src: Source) -> tuple[int, ...] | None:
        shapes = self.steps[src[0]].shapes
        return shapes[src[1]] if src[1] < len(shapes) else None

    @staticmethod
    def _step(op: DumpedOp, sources: list[Source | None], shape_of) -> Step:
        dtypes = [t.dtype for t in op.outputs]
        try:
            param = op.param()
        except ValueError as e:
            param, why = {}, str(e)
        else:
            why = None if op.op_type in REFERENCES else f"op type {op.op_type} has no reference"
        step = Step(op, param, sources, [], dtypes)
        try:
            if why:
                raise NotReplayable(why)
            inputs = load_tensors(op, op.inputs, "input")
            dumped = load_tensors(op, op.outputs, "output")
            reference = modes.values(REFERENCES[op.op_type](param, inputs))
            if [r.shape for r in reference] != [d.shape for d in dumped]:
                raise NotReplayable("its reference's outputs differ from the dumped ones in "
                                    "number or shape")
        except FAILURES as e:
            step.excluded, step.fixed = f"not replayable: {e}", True
            step.dumped_outputs = _load_quietly(op)
            step.shapes = [d.shape for d in step.dumped_outputs]
            step.dumped_inputs = [None] * len(sources)
            return step
        # A producer whose output is not the shape this op read (a graph that does not
        # describe the dump) does not feed it: its dumped input does.
        step.sources = [src if src is None or shape_of(src) == x.shape else None
                        for src, x in zip(sources, inputs)]
        step.own_error = modes.own_error(reference, dumped, dtypes)
        step.shapes = [d.shape for d in dumped]
        if not modes.reproduces(modes.deployed(reference, step.own_error, dtypes), dumped):
            step.excluded = ("its deployed result misses its dumped output (the float64 "
                             "reference leaves the dtype's range or is NaN); it runs emulated")
        step.dumped_inputs = [x if s is None else None for x, s in zip(inputs, step.sources)]
        return step

    @property
    def searchable(self) -> list[int]:
        return [i for i, s in enumerate(self.steps) if s.excluded is None]

    def _compute(self, i: int, ins: list[np.ndarray], mode: str) -> list[np.ndarray]:
        s = self.steps[i]
        try:
            outs = modes.values(REFERENCES[s.op.op_type](s.param, ins))
        except FAILURES as e:
            raise ChainError(f"{s.op.path}: its reference failed on the chained inputs "
                             f"({type(e).__name__}: {e})") from None
        if mode == "promoted":
            return modes.promoted(s.op.op_type, outs, s.dtypes)
        if mode == "emulated" or s.excluded:
            return modes.emulated(outs, s.dtypes)
        return modes.deployed(outs, s.own_error, s.dtypes)

    def run(self, promoted: frozenset[int] = frozenset(), rest: str = "deployed"
            ) -> list[list[np.ndarray]]:
        """Every step's outputs with the steps in `promoted` promoted and the others in
        mode `rest` ("deployed", "emulated" or "promoted")."""
        base = self._base if rest == "deployed" else None
        out: list[list[np.ndarray]] = []
        changed = set()
        for i, s in enumerate(self.steps):
            if s.fixed:  # its dumped outputs, whatever its inputs
                out.append(s.dumped_outputs)
                continue
            moved = i in promoted or any(src is not None and src[0] in changed
                                         for src in s.sources)
            if base is not None and not moved:
                out.append(base[i])
                continue
            ins = [out[src[0]][src[1]] if src is not None else x
                   for src, x in zip(s.sources, s.dumped_inputs)]
            out.append(self._compute(i, ins, "promoted" if i in promoted else rest))
            changed.add(i)
        if rest == "deployed" and not promoted:
            self._base = out
        return out

    def dumped_output(self, i: int) -> np.ndarray:
        """Step i's dumped output 0."""
        return load_tensors(self.steps[i].op, self.steps[i].op.outputs[:1], "output")[0]

    def step_of(self, op_id: str) -> int:
        """The step that makes op `op_id`'s output (a graph: its last leaf op)."""
        for i in range(len(self.steps) - 1, -1, -1):
            oid = self.steps[i].op.op_id
            if oid == op_id or oid.startswith(op_id + "_"):
                return i
        raise ChainError(f"no op {op_id} in {self.model}'s round {self.round} "
                         f"(ops {self.steps[0].op.op_id} to {self.steps[-1].op.op_id})")


def _load_quietly(op: DumpedOp) -> list[np.ndarray]:
    """A not-replayable op's dumped outputs, to stand in for it (an output that cannot
    be read makes the round unrunnable: its consumers would have nothing)."""
    try:
        return load_tensors(op, op.outputs, "output")
    except (NotReplayable, ValueError) as e:
        raise ChainError(f"{op.path} cannot be recomputed and its outputs cannot be read "
                         f"({e})") from None
