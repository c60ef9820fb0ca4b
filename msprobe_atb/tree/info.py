"""info/layer and info/model JSON from the graphs ATB reports (docs/msprobe_format.md §6.4).

Tensors get names instead of indices: a layer's are `<layer>_input_i`,
`<layer>_output_i`, `<layer>_internal_i`; a node's ins/outs are looked up in
its parent's list (ins, then outs, then internals) and a node's internals
are `<node opName>_internal_i`. A tensor list that would be empty gets no key,
as msProbe writes them. Odd graphs (nodes without inputs or outputs,
missing keys, out-of-range ids, deep nesting) never raise anything but
GraphError, which the caller logs before skipping that graph; a topo node
with a wrong-typed field is dropped alone, with a warning.

Names multiply a small graph into a large document (a count of 2^20 is 2^20
names), so each document has a size budget, checked before names are made,
and each process a total (InfoBudget); what does not fit is skipped and logged.
JSON has no NaN or Infinity: such constants in a graph become strings.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 200
MAX_TENSORS = 1 << 20
MAX_GRAPH_JSON = 16 << 20  # a reported graph; real ones are kilobytes to a few megabytes
MAX_DOC_BYTES = 16 << 20  # one info/ document
MAX_PROC_INFO_BYTES = 256 << 20  # the documents and graphs one process's info/ keeps
MAX_INT_DIGITS = 4000  # below Python's int-string limit (4300)
NODE_COST = 64  # the keys and brackets of a node in the written document


class GraphError(ValueError):
    pass


def dumps(obj: Any) -> bytes:
    """Strict JSON (a NaN would make the file unreadable), at most MAX_DOC_BYTES."""
    try:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False) + "\n"
        try:
            data = text.encode()
        except UnicodeEncodeError:
            # a name that is not UTF-8 (\udcXX from the record log): ASCII JSON
            # keeps the file valid UTF-8 and the escapes reversible
            data = (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode()
    except ValueError as exc:
        raise GraphError(f"cannot be written as JSON: {exc}") from None
    if len(data) > MAX_DOC_BYTES:
        raise GraphError(f"makes a document of {len(data)} bytes; at most {MAX_DOC_BYTES} "
                         "are written")
    return data


def _constant(name: str) -> str:
    return name  # NaN, Infinity, -Infinity: kept, as strings


def _number(text: str) -> int | float | str:
    """A JSON number as Python's json would read it, unless JSON cannot write it back
    (an overflow to inf) or Python cannot read it (over 4300 digits): then the text."""
    if "." in text or "e" in text or "E" in text:
        value = float(text)
        return value if math.isfinite(value) else text
    return int(text) if len(text) <= MAX_INT_DIGITS else text


def parse_json_object(text: Any, what: str) -> dict:
    if not isinstance(text, str):
        raise GraphError(f"{what} is not a JSON string")
    if len(text) > MAX_GRAPH_JSON:
        raise GraphError(f"{what} is {len(text)} characters of JSON; at most "
                         f"{MAX_GRAPH_JSON} are read")
    try:
        obj = json.loads(text, parse_constant=_constant, parse_float=_number,
                         parse_int=_number)
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
    """Builds one document's nodes and names within its size budget."""

    def __init__(self) -> None:
        self.unresolved = 0
        self.left = MAX_DOC_BYTES

    def spend(self, cost: int, what: str) -> None:
        self.left -= cost
        if self.left < 0:
            raise GraphError(f"{what} would make the document larger than "
                             f"{MAX_DOC_BYTES >> 20} MiB; not written")

    def names(self, prefix: str, n: int) -> list[str]:
        """prefix_0 .. prefix_{n-1}, paid for before they are made."""
        self.spend(n * (len(prefix) + 12), f'{n} tensors named "{prefix}_i"')
        return [f"{prefix}_{i}" for i in range(n)]

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
        self.spend(sum(len(t) + 3 for t in out), f"{len(out)} tensor ids")
        return out

    def children(self, node_name: str, graph: dict, ins: list[str], outs: list[str],
                 depth: int) -> tuple[list[str], list[dict] | None]:
        """The node's own internal tensors and its resolved children, if any."""
        internals = self.names(f"{node_name}_internal", _count(graph.get("internalTensorNum")))
        nodes = graph.get("nodes")
        if not isinstance(nodes, list) or not nodes:
            return internals, None
        if depth >= MAX_DEPTH:
            raise GraphError(f"nodes nested deeper than {MAX_DEPTH} levels")
        pool = ins + outs + internals
        return internals, [self.node(n, pool, depth + 1) for n in nodes]

    def node(self, node: Any, pool: list[str], depth: int) -> dict:
        self.spend(NODE_COST, "the nodes")
        if not isinstance(node, dict):
            node = {}
        name = _text(node.get("opName")) or _text(node.get("name"))
        ins = self.lookup(pool, node.get("inTensorIds"))
        outs = self.lookup(pool, node.get("outTensorIds"))
        internals, children = self.children(name, node, ins, outs, depth)
        out = _tensor_lists({"opName": name, "opType": _text(node.get("opType")),
                             "param": node.get("param")}, ins, outs, internals)
        if children is not None:
            out["nodes"] = children
        return out


def _tensor_lists(doc: dict, ins: list[str], outs: list[str], internals: list[str]) -> dict:
    """Adds the tensor lists that are not empty: msProbe writes no key for an
    empty one (an EventOperation has neither inputs nor outputs, a WordEmbedding
    layer no internal tensors)."""
    for key, names in (("inTensors", ins), ("outTensors", outs), ("internalTensors", internals)):
        if names:
            doc[key] = names
    return doc


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
    ins = r.names(f"{layer}_input", _count(graph.get("inTensorNum")))
    outs = r.names(f"{layer}_output", _count(graph.get("outTensorNum")))
    internals, children = r.children(layer, graph, ins, outs, 0)
    doc = _tensor_lists({"opName": layer, "opType": _text(graph.get("opType")),
                         "param": graph.get("param")}, ins, outs, internals)
    doc["nodes"] = children or []
    if r.unresolved:
        warnings.append(f"graph {name}: {r.unresolved} tensor ids out of range")
    return doc, warnings


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _topo_node_problem(node: Any) -> str | None:
    """Why a topo node cannot be used (it is then dropped alone), or None."""
    if not isinstance(node, dict):
        return f"is {_kind(node)}, not an object"
    if "opName" in node and not isinstance(node["opName"], str):
        return f'has "opName" of type {_kind(node["opName"])}, not a string'
    for key in ("inTensors", "outTensors"):
        value = node.get(key, [])
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            return f'has "{key}" that is not a list of tensor names ({_kind(value)})'
    return None


def model_json(topo: dict, graphs: dict[str, dict], counter: int) -> tuple[dict, int, list[str]]:
    """The info/model document: node opType = its old opName, opName gets the
    process's running counter appended, and the stored layer graph of that name
    is merged in. Returns the document, the next counter value and warnings."""
    r = _Resolver()
    nodes = topo.get("nodes")
    out_nodes = []
    warnings = []
    model = _text(topo.get("modelName")) or "(unnamed)"
    for i, node in enumerate(nodes if isinstance(nodes, list) else []):
        counter += 1  # dropped nodes too: later names must match their layer graphs
        problem = _topo_node_problem(node)
        if problem:
            warnings.append(f"model {model}: node {i} dropped: it {problem}")
            continue
        r.spend(NODE_COST, "the nodes")
        old = _text(node.get("opName"))
        new = f"{old}_{counter - 1}"
        # msProbe's key order: the topo node's own (ATB-Models writes them sorted:
        # inTensors, opName, outTensors), opName renamed in place, then opType,
        # internalTensors and nodes added after them
        out: dict[str, Any] = dict(node)
        out["opName"] = new
        out["opType"] = old
        graph = graphs.get(new)
        if graph is not None:  # its internals and children; msProbe takes not its param
            internals, children = r.children(new, graph, node.get("inTensors", []),
                                             node.get("outTensors", []), 0)
            if internals:
                out["internalTensors"] = internals
            if children is not None:
                out["nodes"] = children
        out_nodes.append(out)
    doc = dict(topo)
    doc["nodes"] = out_nodes
    if r.unresolved:
        warnings.append(f"model {model}: {r.unresolved} tensor ids out of range")
    return doc, counter, warnings


class InfoBudget:
    """The bytes one process's info/ documents and stored graphs hold in memory:
    at most MAX_PROC_INFO_BYTES, so the daemon's memory stays bounded."""

    def __init__(self) -> None:
        self.used = 0
        self.sizes: dict[tuple[str, str], int] = {}

    def admit(self, kind: str, name: str, size: int) -> str | None:
        """Accounts a document replacing its namesake; or says why it does not fit."""
        old = self.sizes.get((kind, name), 0)
        if self.used - old + size > MAX_PROC_INFO_BYTES:
            return (f"the process's info/ documents would exceed {MAX_PROC_INFO_BYTES >> 20} "
                    f"MiB (this one: {size} bytes); not written")
        self.used += size - old
        self.sizes[(kind, name)] = size
        return None
