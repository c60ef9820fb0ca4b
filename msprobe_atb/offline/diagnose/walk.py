"""Walking upstream from an anomaly to its root cause, replaying each producer
(replay/runner.py).

The walk starts at the op holding the anomalous tensor (a kernel's tensor is its
op's; a layer's output is the op of the layer that wrote it). Each op met is
replayed: `own-error` (its own result is wrong) ends the walk there, a cause.
Anything else (`overflow`, `input-bad`, `ok`, `not-replayable`) means the trouble
came in through its inputs, so the walk goes on to the producers of its suspect
inputs (those holding NaN/Inf, jumping, or diverging from the golden), across
layers through `info/model`. An input no op produced (a weight, a model input)
that is suspect is a cause itself: it was bad when it entered the dump. A KV cache
is followed instead to the op that wrote the bad value into it in an earlier
round, when the dump holds that op. Such an input is named only when it is bad
for sure (NaN/Inf, or diverging from the golden), not for a jump alone, but for a
weight far past the same weight of the model's other layers. A weight a layer
takes in is named with the op inside it that reads it (info/layer). With no
op or input at fault, the earliest op whose exact result leaves its dtype
(`overflow`) is the cause.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import polars as pl

from msprobe_atb.tree.graph import Node, find_node, upstream

from ..read.table import Dump
from ..replay.dumpops import DumpedOp
from ..replay.runner import OpResult, Replayer, holding_op, op_verdict

# Ops replayed per walk, at most: a walk that has not found its cause by then
# stops and says what it saw.
MAX_REPLAYS = 64
Key = tuple[str, int, str]  # (dev_pid, round, op_id)


@dataclass
class CacheHop:
    """A KV-cache input that carried a bad value from an earlier round."""

    tensor: str  # the model's name of the cache
    reader: DumpedOp
    writer: DumpedOp | None  # the op that wrote the bad value, if the dump holds it


@dataclass
class Cause:
    """What the walk ended at: an op (own-error, overflow), or an input already bad
    when it entered the dump (`verdict` input-bad, `source` its kind and name)."""

    verdict: str  # own-error, overflow, input-bad, or "reported": an overflow reported
    # in an op whose inputs were not dumped (overflow_check), `finding` who found it
    op: DumpedOp  # the op at fault, or the op that read the bad input
    result: OpResult | None = None
    source: dict | None = None  # {"kind": "weight"|"model input"|"KV cache", "tensor"}
    finding: str | None = None


@dataclass
class Walk:
    cause: Cause | None
    replayed: list[OpResult] = field(default_factory=list)  # in the order met
    caches: list[CacheHop] = field(default_factory=list)
    exhausted: bool = False  # stopped at MAX_REPLAYS


def index_of(text) -> int | None:
    """The number an index column starts with ("0_x" -> 0)."""
    head = str(text or "").split("_", 1)[0]
    return int(head) if head.isdigit() else None


def _leaves(node: Node):
    if not node.children:
        yield node
    for k in node.children:
        yield from _leaves(k)


class Walker:
    """Walks upstream in the processes of one dump. `suspects` are the tensors
    (dev_pid, round, op_id, io, index) that look bad, the walk follows them;
    `confirmed` those of them that are bad for sure (NaN/Inf, a divergence from the
    golden): only such an input, no op's output, is named as a cause (a jump alone
    is no proof: a KV cache or an input may grow for good reasons); `outliers`, the
    inputs that jumped against the same input of the other layers: a weight among
    them is named too (anomalies.outlier_inputs)."""

    def __init__(self, dump: Dump, df: pl.DataFrame, suspects: set[tuple],
                 confirmed: set[tuple], outliers: dict[tuple, str] | None = None):
        self.rep = Replayer(dump, df)
        self.suspects = suspects
        self.confirmed = confirmed
        self.outliers = outliers or {}
        self.results: dict[Key, OpResult] = {}

    def op_at(self, tensor: dict) -> DumpedOp | None:
        """The op holding a tensor of the table: its own, or for a kernel's, the op
        running it."""
        parts = str(tensor["op_id"]).split("_")
        for n in range(len(parts), 0, -1):
            op = self.rep.by_id.get((tensor["dev_pid"], tensor["round"], "_".join(parts[:n])))
            if op is not None:
                return op
        return None

    def verdict(self, key: Key) -> OpResult | None:
        """The replay verdict on the op holding a tensor of the table (`key`: its
        dev_pid, round and op_id), as `replay` says it (runner.holding_op and
        op_verdict), from the replays the walks made."""
        op = holding_op(self.rep.by_id, *key)
        return None if op is None else op_verdict(op, self.rep.by_id, self.replay)

    def replay(self, op: DumpedOp) -> OpResult:
        key = (op.dev_pid, op.round, op.op_id)
        if key not in self.results:
            if op.children:  # a graph: judged through its ops
                kids = [self.rep.by_id[(op.dev_pid, op.round, c)] for c in op.children]
                found = [self.replay(k) for k in kids]
                self.results[key] = next((r for r in found if r.verdict == "own-error"),
                                         found[-1])
            else:
                try:
                    self.results[key] = self.rep.replay(op)
                except (OSError, ValueError, MemoryError) as e:  # said, never raised
                    self.results[key] = OpResult(op, "not-replayable", f"replay failed: {e}")
        return self.results[key]

    def _suspect(self, op: DumpedOp, io: str, index: int) -> bool:
        return (op.dev_pid, op.round, op.op_id, io, index) in self.suspects

    def _writer(self, dev_pid: str, round_: int, node: Node, tensor: str) -> DumpedOp | None:
        """The dumped op below `node` that last wrote its `tensor`."""
        for leaf in reversed(list(_leaves(node))):
            if tensor in leaf.outputs:
                op = self.rep.by_id.get((dev_pid, round_, leaf.op_id))
                if op is not None:
                    return op
        return None

    def _reader(self, op: DumpedOp, index: int) -> DumpedOp:
        """The dumped op below graph `op` that first reads its input `index` (from
        info/layer), else `op`: a weight a layer takes in is used by one of its ops
        (a Linear, a norm), and that op is the one a person looks at."""
        found = find_node(self.rep.graphs.get(op.dev_pid, {}), op.op_id) if op.children \
            else None
        if found is None or index >= len(found[0].inputs):
            return op
        tensor = found[0].inputs[index]
        for leaf in _leaves(found[0]):
            if tensor in leaf.inputs and (op.dev_pid, op.round, leaf.op_id) in self.rep.by_id:
                return self.rep.by_id[(op.dev_pid, op.round, leaf.op_id)]
        return op

    def _top_output(self, dev_pid: str, round_: int, gid: str, model_tensor: str
                    ) -> DumpedOp | None:
        """The op inside top-level op `gid` that wrote its output `model_tensor`."""
        graphs = self.rep.graphs.get(dev_pid, {})
        nodes, pos = self.rep.models.get(dev_pid, {}).get(gid, (None, 0))
        top = graphs.get(gid)
        if top is None:
            return self.rep.by_id.get((dev_pid, round_, gid))
        if nodes is None or model_tensor not in nodes[pos].outputs:
            return self._writer(dev_pid, round_, top, top.outputs[0]) if top.outputs else None
        k = nodes[pos].outputs.index(model_tensor)
        return self._writer(dev_pid, round_, top, top.outputs[k]) if k < len(top.outputs) \
            else None

    def source(self, op: DumpedOp, index: int) -> DumpedOp | dict | None:
        """Where input `index` of `op` came from: the op that produced it, or
        {"kind", "tensor"} for an input no op of the dump produced."""
        ups = upstream(self.rep.graphs.get(op.dev_pid, {}), op.op_id, io="input", index=index,
                       max_depth=1, models=self.rep.models.get(op.dev_pid))
        if not ups:
            return None
        u = ups[0]
        if not u.op_id:
            return {"kind": u.op_name.partition(" of ")[0] if " of " in u.op_name
                    else "layer input", "tensor": u.tensor}
        if "_" not in u.op_id:  # another top-level op (a layer) of the model
            return self._top_output(op.dev_pid, op.round, u.op_id, u.tensor)
        made = self.rep.by_id.get((op.dev_pid, op.round, u.op_id))
        if made is not None and made.children:
            found = find_node(self.rep.graphs.get(op.dev_pid, {}), u.op_id)
            return self._writer(op.dev_pid, op.round, found[0], u.tensor) if found else made
        return made

    def _model_tensor(self, op: DumpedOp, index: int) -> str | None:
        """The model's name of output `index` of `op` where the op writes a tensor its
        layer took as an input (an in-place write, as into a KV cache)."""
        graphs = self.rep.graphs.get(op.dev_pid, {})
        found = find_node(graphs, op.op_id)
        gid = op.op_id.split("_")[0]
        top = graphs.get(gid)
        models = self.rep.models.get(op.dev_pid, {})
        if found is None or top is None or gid not in models or index >= len(found[0].outputs):
            return None
        name = found[0].outputs[index]
        nodes, pos = models[gid]
        if name not in top.inputs or top.inputs.index(name) >= len(nodes[pos].inputs):
            return None
        return nodes[pos].inputs[top.inputs.index(name)]

    def cache_writer(self, reader: DumpedOp, cache: str) -> DumpedOp | None:
        """The first op before `reader` that wrote a bad value into the KV cache
        `cache` (the same cache of another model of the process counts: prefill and
        decode share them; their names differ by the model's prefix)."""
        suffix = cache.rsplit("_", 2)[-2:]  # DecoderModel_Decoder_kcache_0: kcache, 0
        for op in self.rep.ops:
            if op.dev_pid != reader.dev_pid or op.seq >= reader.seq or op.children:
                continue
            for t in op.outputs:
                if not self._suspect(op, "output", t.index):
                    continue
                name = self._model_tensor(op, t.index)
                if name is not None and name.rsplit("_", 2)[-2:] == suffix:
                    return op
        return None

    def walk(self, start: DumpedOp, io: str, index: int | None) -> Walk:
        """From the op holding an anomalous tensor (`io`, `index`) up to its cause."""
        out = Walk(None)
        if start.children and io == "output":  # a layer's output: the op that wrote it
            found = find_node(self.rep.graphs.get(start.dev_pid, {}), start.op_id)
            node = found[0] if found else None
            if node is not None and index is not None and index < len(node.outputs):
                start = self._writer(start.dev_pid, start.round, node,
                                     node.outputs[index]) or start
        causes: list[Cause] = []
        overflows: list[Cause] = []
        queue: deque[DumpedOp | tuple[DumpedOp, int]] = deque()
        if io == "input" and index is not None:
            queue.append((start, index))
        else:
            queue.append(start)
        seen: set = set()
        replays = 0
        while queue:
            item = queue.popleft()
            if isinstance(item, tuple):  # an input to trace, not an op to replay
                self._trace(*item, queue, causes, out)
                continue
            op = item
            key = (op.dev_pid, op.round, op.op_id)
            if key in seen:
                continue
            if replays >= MAX_REPLAYS:
                out.exhausted = True
                break
            seen.add(key)
            replays += 1
            r = self.replay(op)
            out.replayed.append(r)
            # a graph's verdict is its first child's at fault: that child is named
            if r.verdict == "own-error":
                causes.append(Cause("own-error", r.op, r))
                continue
            if r.verdict == "overflow":
                overflows.append(Cause("overflow", r.op, r))
            named = (r.bad_input or {}).get("input")
            for t in op.inputs:
                if t.name == named or self._suspect(op, "input", t.index):
                    queue.append((op, t.index))
        found = causes or overflows
        out.cause = min(found, key=lambda c: c.op.seq) if found else None
        return out

    def _trace(self, op: DumpedOp, index: int, queue: deque, causes: list[Cause],
               out: Walk) -> None:
        src = self.source(op, index)
        if isinstance(src, DumpedOp):
            queue.append(src)
        elif isinstance(src, dict):
            if src["kind"] == "KV cache":
                writer = self.cache_writer(op, src["tensor"])
                out.caches.append(CacheHop(src["tensor"], op, writer))
                if writer is not None:
                    queue.append(writer)
                    return
            key = (op.dev_pid, op.round, op.op_id, "input", index)
            reader = self._reader(op, index) if src["kind"] == "weight" else op
            if key in self.confirmed:
                causes.append(Cause("input-bad", reader, source=src))
            elif src["kind"] == "weight" and key in self.outliers:
                causes.append(Cause("input-bad", reader,
                                    source={**src, "what": self.outliers[key]}))
