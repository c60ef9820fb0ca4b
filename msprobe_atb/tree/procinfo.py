"""A process's info/ documents, from its graph, topo and overflow records:
info/layer/{dev}_{pid}/{Layer}.json, info/model/{dev}_{pid}/{Model}.json and
info/overflow/{dev}_{pid}.csv (contracts §5, §5.1). The directory takes the
record's device, else the process's (the first data/ path that names one), else
just the pid; files written under the pid move once the device is known."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from msprobe_atb.tree import fsio
from msprobe_atb.tree.info import (
    GraphError,
    InfoBudget,
    dumps,
    layer_json,
    model_json,
    parse_json_object,
)
from msprobe_atb.tree.overflow_csv import OverflowLog
from msprobe_atb.tree.records import record_int

log = logging.getLogger("msprobe_atb")

Problem = Callable[[str, str], None]  # (kind, message): logged a few times per kind

# Documents built, by what they are built from: the devices of a service report
# the same graphs (80 layers of a model, each device), and a daemon that builds
# each once over is ~1 ms a graph, tens of ms a model. Bounded by the JSON text
# of its keys (the documents and parsed graphs take about 5x that).
_BUILT: dict[tuple, tuple] = {}
BUILT_TEXT_BYTES = 16 << 20
_built_text = 0


def _memo(key: tuple, text: str, build: Callable[[], tuple]) -> tuple:
    global _built_text
    got = _BUILT.get(key)
    if got is None:
        got = build()  # raises as build does: nothing is kept
        if _built_text + len(text) > BUILT_TEXT_BYTES:
            _BUILT.clear()
            _built_text = 0
        _BUILT[key] = got
        _built_text += len(text)
    return got



@dataclass
class ProcInfo:
    pid: int
    dev_hint: int | None = None  # the device of its first data/ path that names one
    graphs: dict[str, dict] = field(default_factory=dict)
    layers: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # name -> (dev, json)
    models: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    model_counter: int = 0
    overflow: OverflowLog | None = None  # its events, once one came
    dirty: bool = True
    written: dict[tuple[str, ...], bytes] = field(default_factory=dict)  # files on disk
    budget: InfoBudget = field(default_factory=InfoBudget)

    def learn_device(self, dev: int | None) -> None:
        if self.dev_hint is None and dev is not None:
            self.dev_hint = dev
            self.dirty = True

    def _doc(self, rec: dict, kind: str, name_key: str, what: str, build, problem: Problem,
             inputs: tuple = (), keep: object = None):
        """(name, parsed JSON, the built doc, build's extra) of a graph or topo
        record, or None when it is unusable (logged). build(parsed) -> (doc,
        warnings, extra), a function of the record's name and JSON and of the
        hashable `inputs` alone (its result is shared with records like it);
        `keep` is kept alive as long as that result (what ids in inputs name)."""
        name = rec.get(name_key)
        if not isinstance(name, str) or not fsio.valid_component(name + ".json"):
            problem(kind, f"pid {self.pid}: {what} with unusable name {name!r}")
            return None

        def make() -> tuple:
            parsed = parse_json_object(rec.get("json"), f"{what} {name}")
            doc, warnings, extra = build(parsed)
            return parsed, dumps(doc), warnings, extra, keep

        try:
            text = rec.get("json")
            parsed, data, warnings, extra, _ = (
                _memo((kind, name, text, *inputs), text, make) if isinstance(text, str)
                else make())
            # kept: the document, and the parsed graph (about 4 bytes per byte of text)
            refused = self.budget.admit(kind, name, len(data) + 4 * len(rec["json"]))
            if refused:
                raise GraphError(refused)
        except (GraphError, RecursionError) as exc:
            problem(kind, f"pid {self.pid}: skipped {what} {name}: {exc}")
            return None
        for w in warnings:
            problem("graph-warning", f"pid {self.pid}: {w}")
        self.dirty = True
        return name, parsed, (record_int(rec.get("dev")), data), extra

    def add_graph(self, rec: dict, problem: Problem) -> None:
        got = self._doc(rec, "graph", "name", "layer graph",
                        lambda graph: (*layer_json(rec["name"], graph), None), problem)
        if got:
            name, graph, entry, _ = got
            self.graphs[name] = graph
            self.layers[name] = entry

    def add_topo(self, rec: dict, problem: Problem) -> None:
        graphs, counter = self.graphs, self.model_counter

        def build(topo):
            doc, after, warnings = model_json(topo, graphs, counter)
            return doc, warnings, after

        # the graphs by identity: processes that reported the same graphs hold the
        # same parsed ones (the memo's), so their models are built once
        inputs = (counter, tuple(sorted((n, id(g)) for n, g in graphs.items())))
        got = self._doc(rec, "topo", "model", "model topology", build, problem, inputs,
                        keep=list(graphs.values()))
        if got:
            name, _, entry, after = got
            self.models[name] = entry
            self.model_counter = after

    def add_overflow(self, rec: dict) -> None:
        if self.overflow is None:
            self.overflow = OverflowLog(self.pid)
        if self.overflow.add_event(rec):
            self.dirty = True

    def add_overflow_output(self, rec: dict) -> None:
        if self.overflow is not None and self.overflow.add_output(rec):
            self.dirty = True

    def _dir(self, dev: int) -> str:
        if dev < 0:
            dev = self.dev_hint if self.dev_hint is not None else -1
        return f"{dev}_{self.pid}" if dev >= 0 else str(self.pid)

    def files(self) -> dict[tuple[str, ...], bytes]:
        """Every info file of the process, by its path under the dump root."""
        files: dict[tuple[str, ...], bytes] = {}
        for kind, docs in (("layer", self.layers), ("model", self.models)):
            for name, (dev, data) in docs.items():
                files[("info", kind, self._dir(dev), f"{name}.json")] = data
        if self.overflow is not None and self.overflow.events:
            # The overflow file is per process; its device is the first known one.
            sub = self._dir(self.overflow.first_device())
            files[("info", "overflow", f"{sub}.csv")] = self.overflow.text(sub)
        return files
