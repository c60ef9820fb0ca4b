"""Which tensor of a torch dump feeds which op, for info/ (the `inTensorIds` /
`outTensorIds` of ATB's graphs and the tensor names of its model topology), so that
`stats` can trace a NaN to the ops feeding it as it does in an ATB dump.

A tensor is known by identity (the same Python object passed on), through a weak
reference, so no activation lives longer for it. An op's pool is numbered as ATB
numbers a graph's tensors: its inputs, its outputs, then its internal tensors: what
its children read or write that is neither (made by the op's own code, e.g. a
residual add, or by a child). The model's tensors are named instead:
`{Model}_input_{i}` (the top module's arguments) and `{Model}_internal_{n}`."""

from __future__ import annotations

import weakref

import torch


class Slot:
    """One tensor of a pool; its number is set when the op ends."""

    __slots__ = ("kind", "id")

    def __init__(self, kind: str):
        self.kind = kind  # "in", "out" or "internal"
        self.id = -1


class _Registry:
    """Tensor identity -> a value, valid while the tensor lives."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[weakref.ref, object]] = {}

    def get(self, t: torch.Tensor):
        hit = self._by_id.get(id(t))
        return hit[1] if hit is not None and hit[0]() is t else None

    def put(self, t: torch.Tensor, value) -> None:
        self._by_id[id(t)] = (weakref.ref(t), value)


class Pool:
    """The tensors of one op (a frame of the dumper)."""

    def __init__(self, inputs: list[torch.Tensor]):
        self._known = _Registry()
        self.ins = [Slot("in") for _ in inputs]
        for t, s in zip(inputs, self.ins):
            self._known.put(t, s)
        self.outs: list[Slot] = []
        self.internals: list[Slot] = []
        self.children: list[tuple[dict, list[Slot], list[Slot]]] = []  # node, its ins, outs

    def slots(self, found: list[torch.Tensor]) -> list[Slot]:
        """The slots of tensors a child reads or writes; new ones are internal."""
        out = []
        for t in found:
            s = self._known.get(t)
            if s is None:
                s = Slot("internal")
                self.internals.append(s)
                self._known.put(t, s)
            out.append(s)
        return out

    def finish(self, outputs: list[torch.Tensor], node: dict) -> None:
        """Numbers the pool (an internal tensor that is an output becomes that output)
        and writes the ids into the children's nodes and the count into `node`."""
        for t in outputs:
            s = self._known.get(t)
            if s is None or s.kind != "internal":
                s = Slot("out")
            s.kind = "out"
            self.outs.append(s)
        internals = [s for s in self.internals if s.kind == "internal"]
        for i, s in enumerate([*self.ins, *self.outs, *internals]):
            s.id = i
        node["internalTensorNum"] = len(internals)
        for child, ins, outs in self.children:
            child["inTensorIds"] = [s.id for s in ins]
            child["outTensorIds"] = [s.id for s in outs]


class ModelNames:
    """The model-level names of the tensors the top-level ops read and write."""

    def __init__(self, model: str, inputs: list[torch.Tensor]):
        self.model = model
        self._known = _Registry()
        for i, t in enumerate(inputs):
            self._known.put(t, f"{model}_input_{i}")
        self.internals = 0

    def names(self, found: list[torch.Tensor]) -> list[str]:
        out = []
        for t in found:
            name = self._known.get(t)
            if name is None:
                name = f"{self.model}_internal_{self.internals}"
                self.internals += 1
                self._known.put(t, name)
            out.append(name)
        return out
