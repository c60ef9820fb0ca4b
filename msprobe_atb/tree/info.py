"""info/layer and info/model JSON from the graphs ATB reports (spec §6.4).

Tensors get names instead of indices: a layer's are `<layer>_input_i`,
`<layer>_output_i`, `<layer>_internal_i`; a node's ins/outs are looked up in
its parent's list (ins, then outs, then internals) and a node's internals
are `<node opName>_internal_i`. Odd graphs (nodes without inputs or outputs,
missing keys, out-of-range ids, deep nesting) never raise anything but
GraphError, which the caller logs before skipping that graph.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 200
MAX_TENSORS = 1 << 20


class GraphError(ValueError):
    pass


def dumps(obj: Any) -> bytes:
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"
    try:
        return text.encode()
    except UnicodeEncodeError:
        # a name that is not UTF-8 (\udcXX from the record log): ASCII JSON
        # keeps the file valid UTF-8 and the escapes reversible
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def parse_json_object(text: Any, what: str) -> dict:
    if not isinstance(text, str):
        raise GraphError(f"{what} is not a JSON string")
    try:
        obj = json.loads(text)
    except RecursionError:
        raise GraphError(f"{what} is nested too deeply to read") from None
    except ValueError as exc:
        raise GraphError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise GraphError(f"{what} is not a JSON object")
    return obj


def _count(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TENSORS:
        return value
    return 0


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


class _Resolver:
    def __init__(self) -> None:
        self.unresolved = 0

    def lookup(self, pool: list[str], ids: Any) -> list[str]:
        if not isinstance(ids, list):
            return []
        out = []
        for i in ids:
            if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(pool):
                out.append(pool[i])
            else:
                self.unresolved += 1
                out.append(f"unresolved_{i}")
        return out

    def children(self, node_name: str, graph: dict, ins: list[str], outs: list[str],
                 depth: int) -> tuple[list[str], list[dict] | None]:
        """The node's own internal tensors and its resolved children, if any."""
        n_internal = _count(graph.get("internalTensorNum"))
        internals = [f"{node_name}_internal_{i}" for i in range(n_internal)]
        nodes = graph.get("nodes")
        if not isinstance(nodes, list) or not nodes:
            return internals, None
        if depth >= MAX_DEPTH:
            raise GraphError(f"nodes nested deeper than {MAX_DEPTH} levels")
        pool = ins + outs + internals
        return internals, [self.node(n, pool, depth + 1) for n in nodes]

    def node(self, node: Any, pool: list[str], depth: int) -> dict:
        if not isinstance(node, dict):
            node = {}
        name = _text(node.get("opName")) or _text(node.get("name"))
        out: dict[str, Any] = {
            "opName": name,
            "opType": _text(node.get("opType")),
            "param": node.get("param"),
            "inTensors": self.lookup(pool, node.get("inTensorIds")),
            "outTensors": self.lookup(pool, node.get("outTensorIds")),
        }
        internals, children = self.children(name, node, out["inTensors"], out["outTensors"], depth)
        if internals:
            out["internalTensors"] = internals
        if children is not None:
            out["nodes"] = children
        return out


def layer_json(name: str, graph: dict) -> tuple[dict, list[str]]:
    """The info/layer document for a ReportOperationGraph payload, plus warnings."""
    warnings = []
    layer = _text(graph.get("opName")) or name
    if layer != name:
        warnings.append(f'graph opName "{layer}" differs from the reported name "{name}"')
    missing = [k for k in ("opName", "opType", "inTensorNum", "outTensorNum") if k not in graph]
    if missing:
        warnings.append(f"graph {name} lacks {', '.join(missing)}")
    r = _Resolver()
    ins = [f"{layer}_input_{i}" for i in range(_count(graph.get("inTensorNum")))]
    outs = [f"{layer}_output_{i}" for i in range(_count(graph.get("outTensorNum")))]
    internals, children = r.children(layer, graph, ins, outs, 0)
    doc = {
        "opName": layer, "opType": _text(graph.get("opType")), "param": graph.get("param"),
        "inTensors": ins, "outTensors": outs, "internalTensors": internals,
        "nodes": children or [],
    }
    if r.unresolved:
        warnings.append(f"graph {name}: {r.unresolved} tensor ids out of range")
    return doc, warnings


def model_json(topo: dict, graphs: dict[str, dict], counter: int) -> tuple[dict, int, list[str]]:
    """The info/model document: node opType = its old opName, opName gets the
    process's running counter appended, and the stored layer graph of that name
    is merged in. Returns the document, the next counter value and warnings."""
    r = _Resolver()
    nodes = topo.get("nodes")
    out_nodes = []
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, dict):
            node = {}
        old = _text(node.get("opName"))
        new = f"{old}_{counter}"
        counter += 1
        out: dict[str, Any] = {"opName": new, "opType": old}
        out.update((k, v) for k, v in node.items() if k not in ("opName", "opType"))
        graph = graphs.get(new)
        if graph is not None:
            ins = [t for t in out.get("inTensors", []) if isinstance(t, str)]
            outs = [t for t in out.get("outTensors", []) if isinstance(t, str)]
            out["param"] = graph.get("param")
            internals, children = r.children(new, graph, ins, outs, 0)
            if internals:
                out["internalTensors"] = internals
            if children is not None:
                out["nodes"] = children
        out_nodes.append(out)
    doc = dict(topo)
    doc["nodes"] = out_nodes
    warnings = [f"model {topo.get('modelName')}: {r.unresolved} tensor ids out of range"] \
        if r.unresolved else []
    return doc, counter, warnings
