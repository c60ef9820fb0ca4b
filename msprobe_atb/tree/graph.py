"""Dataflow from the `info/layer` graphs (docs/msprobe_format.md §6.4): which ops feed a tensor.

A layer JSON has `opName` (`Layer_7`: the top-level op, global id 7), and `nodes`
in child order; node i of op `7` is op `7_i` in the data tree, recursively. Each
node lists resolved tensor names in `inTensors`/`outTensors`, so the producer of
a tensor is the last node before the consumer (in execution order) that lists it
as an output. Malformed graphs are skipped with a note, never fatal.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from msprobe_atb.tree.datafile import MAX_INFO, read_small
from msprobe_atb.tree.names import text_of, texts


@dataclass
class Node:
    op_id: str
    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    children: list[Node] = field(default_factory=list)


@dataclass
class Upstream:
    op_id: str  # the producing op's id path ("" for a layer input)
    op_name: str
    tensor: str  # the graph tensor name that links them
    consumer: str  # the op id that reads it
    depth: int


def _names(v) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


def _node(obj: dict, op_id: str, depth: int = 0) -> Node:
    if depth > 200:
        raise ValueError("graph nested deeper than 200 levels")
    kids = obj.get("nodes") if isinstance(obj.get("nodes"), list) else []
    return Node(op_id, str(obj.get("opName", "")), str(obj.get("opType", "")),
                _names(obj.get("inTensors")), _names(obj.get("outTensors")),
                [_node(k, f"{op_id}_{i}", depth + 1) for i, k in enumerate(kids)
                 if isinstance(k, dict)])


_GID = re.compile(r"_(\d+)$")


def load_layer_graphs(info: Path | None, dev_pid: str | None = None,
                      problems: list[str] | None = None) -> dict[str, Node]:
    """Top-level op id -> its graph, from info/layer/{dev_pid}/*.json (all
    processes if dev_pid is None or its folder is missing)."""
    graphs: dict[str, Node] = {}
    for f in _info_jsons(info, "layer", dev_pid):
        try:
            obj = texts(json.loads(read_small(f, "an info/layer graph", MAX_INFO)
                                   .decode("utf-8", "surrogateescape")))
            m = _GID.search(str(obj.get("opName", ""))) or _GID.search(f.stem)
            if not m:
                raise ValueError("no trailing _<id> in opName or file name")
            graphs.setdefault(m.group(1), _node(obj, m.group(1)))
        except (OSError, ValueError, AttributeError, RecursionError) as e:
            if problems is not None:
                problems.append(f"{text_of(str(f))}: layer graph skipped ({e})")
    return graphs


def _info_jsons(info: Path | None, kind: str, dev_pid: str | None) -> list[Path]:
    """The JSON files of info/{kind}/{dev_pid}/, else of info/{kind}/{pid}/ (msProbe
    names the folder by pid alone when it cannot query the device), else of every
    process's folder if dev_pid is None or neither folder exists."""
    base = info / kind if info is not None else None
    if base is None or not base.is_dir():
        return []
    mine = [base / n for n in (dev_pid, (dev_pid or "").rpartition("_")[2]) if n]
    dirs = next(([d] for d in mine if d.is_dir()), None) or \
        sorted(p for p in base.iterdir() if p.is_dir())
    return [f for d in dirs for f in sorted(d.glob("*.json"))]


@dataclass
class ModelNode:
    """A top-level op in a model topology (info/model): global id, name, tensors."""

    gid: str
    name: str
    inputs: list[str]
    outputs: list[str]
    model: str


def load_model_graphs(info: Path | None, dev_pid: str | None = None,
                      problems: list[str] | None = None) -> dict[str, tuple[list[ModelNode], int]]:
    """Top-level op id -> (its model's nodes in order, its position), from
    info/model/{dev_pid}/*.json, whose node names end in the global op id."""
    out: dict[str, tuple[list[ModelNode], int]] = {}
    for f in _info_jsons(info, "model", dev_pid):
        try:
            obj = texts(json.loads(read_small(f, "an info/model graph", MAX_INFO)
                                   .decode("utf-8", "surrogateescape")))
            name = str(obj.get("modelName", f.stem))
            nodes = []
            for n in obj.get("nodes") or []:
                m = _GID.search(str(n.get("opName", "")))
                if m:
                    nodes.append(ModelNode(m.group(1), str(n["opName"]),
                                           _names(n.get("inTensors")),
                                           _names(n.get("outTensors")), name))
            for i, n in enumerate(nodes):
                out.setdefault(n.gid, (nodes, i))
        except (OSError, ValueError, AttributeError, TypeError, RecursionError) as e:
            if problems is not None:
                problems.append(f"{text_of(str(f))}: model graph skipped ({e})")
    return out


def _from_model(models: dict[str, tuple[list[ModelNode], int]], top: Node, tensor: str,
                depth: int) -> Upstream | None:
    """The top-level op that produced input `tensor` of layer `top`, from its model."""
    if top.op_id not in models or tensor not in top.inputs:
        return None
    nodes, pos = models[top.op_id]
    k = top.inputs.index(tensor)
    if k >= len(nodes[pos].inputs):
        return None
    mt = nodes[pos].inputs[k]
    for n in reversed(nodes[:pos]):
        if mt in n.outputs:
            return Upstream(n.gid, n.name, mt, top.op_id, depth)
    kind = "weight" if "_weight_" in mt else "KV cache" if "cache" in mt.lower() \
        else "model input"
    return Upstream("", f"{kind} of {nodes[pos].model}", mt, top.op_id, depth)


def _walk(node: Node, path: list[Node]):
    """Pre-order: (node, ancestors)."""
    yield node, path
    for k in node.children:
        yield from _walk(k, [*path, node])


def find_node(graphs: dict[str, Node], op_id: str) -> tuple[Node, list[Node]] | None:
    top = graphs.get(op_id.split("_")[0])
    if top is None:
        return None
    for node, anc in _walk(top, []):
        if node.op_id == op_id:
            return node, anc
    return None


def upstream(graphs: dict[str, Node], op_id: str, io: str = "output", index: int | None = None,
             max_depth: int = 4,
             models: dict[str, tuple[list[ModelNode], int]] | None = None) -> list[Upstream]:
    """The ops feeding `op_id` (its inputs, or one input if io == 'input'), then
    their feeders, up to max_depth hops, nearest first. A tensor that enters the
    top-level op from outside is traced through info/model to the top-level op
    that produced it (or reported with op_id '' as a layer input). A kernel
    (not a graph node) is looked up as the op that runs it, with all its inputs."""
    found = find_node(graphs, op_id)
    while found is None and "_" in op_id:
        op_id, index = op_id.rsplit("_", 1)[0], None
        found = find_node(graphs, op_id)
    if found is None:
        return []
    top = graphs[op_id.split("_")[0]]
    order = [n for n, _ in _walk(top, [])]
    pos = {n.op_id: i for i, n in enumerate(order)}
    leaves_before: dict[str, list[Node]] = {}

    def producer(tensor: str, before: Node) -> Node | None:
        # The latest node before `before` (pre-order) that writes `tensor`, preferring
        # the deepest writer (a kernel over its parent op) at the same position.
        if before.op_id not in leaves_before:
            leaves_before[before.op_id] = order[: pos[before.op_id]]
        for n in reversed(leaves_before[before.op_id]):
            if tensor in n.outputs and not before.op_id.startswith(n.op_id + "_"):
                return n
        return None

    node = found[0]
    start = node.inputs if io == "output" or index is None else node.inputs[index:index + 1]
    out: list[Upstream] = []
    seen: set[str] = set()
    frontier = [(t, node) for t in start]
    for depth in range(1, max_depth + 1):
        nxt = []
        for tensor, consumer in frontier:
            p = producer(tensor, consumer)
            if p is None:
                if tensor not in seen:
                    seen.add(tensor)
                    via_model = _from_model(models or {}, top, tensor, depth)
                    out.append(via_model or Upstream("", f"input of {top.name or top.op_id}",
                                                     tensor, consumer.op_id, depth))
                continue
            if p.op_id in seen:
                continue
            seen.add(p.op_id)
            out.append(Upstream(p.op_id, p.name, tensor, consumer.op_id, depth))
            nxt += [(t, p) for t in p.inputs]
        frontier = nxt
    return out


def kv_cache_of(graphs: dict[str, Node], models: dict[str, tuple[list[ModelNode], int]],
                op_id: str, io: str, index: int | None) -> str | None:
    """The model's name of the KV cache that input `index` of `op_id` is, when no op
    of its layer wrote it before: a NaN/Inf it holds was written in an earlier round."""
    if io != "input" or index is None:
        return None
    ups = upstream(graphs, op_id, io="input", index=index, max_depth=1, models=models)
    return ups[0].tensor if ups and not ups[0].op_id and \
        ups[0].op_name.startswith("KV cache") else None


def feeder_kinds(names: list[str]) -> str:
    """'12 weights, 1 model input': feeders that are no op (no statistics), counted by
    kind, from the names upstream gives them ('weight of M', 'model input of M',
    'input of Layer')."""
    kinds = Counter("layer input" if n.startswith("input of ") else n.partition(" of ")[0]
                    for n in names)
    return ", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in kinds.items())


@dataclass
class Leaf:
    """A leaf op of a model's execution, its tensors named in the model's one namespace."""

    op_id: str
    inputs: list[str]
    outputs: list[str]


def _leaves(obj: dict, op_id: str, out: list[Leaf], depth: int = 0) -> None:
    kids = [k for k in obj.get("nodes") or [] if isinstance(k, dict)]
    if depth > 200:
        raise ValueError("graph nested deeper than 200 levels")
    if not kids:
        out.append(Leaf(op_id, _names(obj.get("inTensors")), _names(obj.get("outTensors"))))
    for i, k in enumerate(kids):
        _leaves(k, f"{op_id}_{i}", out, depth + 1)


def model_leaves(info: Path | None, dev_pid: str | None = None,
                 problems: list[str] | None = None) -> dict[str, list[Leaf]]:
    """Model name -> its leaf ops in execution order, from info/model/{dev_pid}/*.json
    (each node holds its layer graph, its tensors resolved into the model's names), so
    a tensor's producer is the last leaf before its reader that writes it."""
    out: dict[str, list[Leaf]] = {}
    for f in _info_jsons(info, "model", dev_pid):
        try:
            obj = texts(json.loads(read_small(f, "an info/model graph", MAX_INFO)
                                   .decode("utf-8", "surrogateescape")))
            leaves: list[Leaf] = []
            for n in obj.get("nodes") or []:
                m = _GID.search(str(n.get("opName", "")))
                if m:
                    _leaves(n, m.group(1), leaves)
            out.setdefault(str(obj.get("modelName", f.stem)), leaves)
        except (OSError, ValueError, AttributeError, TypeError, RecursionError) as e:
            if problems is not None:
                problems.append(f"{text_of(str(f))}: model graph skipped ({e})")
    return out
