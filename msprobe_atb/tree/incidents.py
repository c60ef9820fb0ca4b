"""Flight-recorder incident reports: <dump root>/incidents/incident-NNNN.json.

Built from what the shims record (`incident`: the trigger a process fired,
with the offending tensor's statistics; `flush`: the rounds a process wrote
for an incident) and, for the triggers of the control plane and of people,
from the control block's incident table. Rewritten whenever a process adds
rounds to one, so it is complete once every process has written its rounds.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msprobe_atb.tree import fsio
from msprobe_atb.tree.csvfmt import parse_tensor_path
from msprobe_atb.tree.graph import feeder_kinds, load_layer_graphs, load_model_graphs, upstream
from msprobe_atb.tree.incident_check import BadIncident, checked
from msprobe_atb.tree.models import layer_of, model_of_layer, round_label, rounds_by_model
from msprobe_atb.tree.names import text_of, texts
from msprobe_atb.tree.overflow_findings import ATB, ATB_BF16_FINITE, of_report, sentence
from msprobe_atb.tree.records import ProcKey, hex_float, iso_time

log = logging.getLogger("msprobe_atb")

DIR = "incidents"
TRIGGER_NAMES = {1: "nan", 2: "inf", 4: "overflow", 8: "abs_max_over", 16: "growth_over",
                 32: "golden", 64: "manual"}


def file_name(seq: int) -> str:
    return f"incident-{seq:04d}.json"


def _num(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _decoded(v: Any) -> Any:
    """A record's value with the shim's hex-float strings made numbers (lists too)."""
    if isinstance(v, list):
        return [_decoded(x) for x in v]
    exact = hex_float(v) if isinstance(v, str) else None
    return v if exact is None else exact


def _dev_of(dev_pid: str) -> int | None:
    dev = dev_pid.partition("_")[0]
    return int(dev) if dev.isdigit() else None


def _kernel_report(path: str) -> bool:
    """ATB's overflow report names a kernel, "<Type>_<ids>:<Kernel>", not a tensor."""
    return "/" not in path and ":" in path


def _nonfinite(stats: Any) -> bool:
    return isinstance(stats, dict) and any(stats.get(k) for k in ("nan", "pinf", "ninf"))


def _largest(stats: Any) -> float | None:
    """A tensor's finite value of largest magnitude, from its statistics' max and min."""
    ends = [stats.get(k) for k in ("max", "min")] if isinstance(stats, dict) else []
    finite = [v for v in ends if isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(v)]
    return max(finite, key=abs) if finite else None


def _record_stats(rec: dict) -> Any:
    stats = rec.get("stats")
    if isinstance(stats, dict):  # the shim's exact hex doubles, as numbers
        return {k: _num(_decoded(v)) for k, v in stats.items()}
    return stats


def first_tensor(path: str, stats: Any = None, kernel: str | None = None) -> dict | None:
    """The offending tensor, named as the tree names it; the kernel ATB's
    overflow report named, when that fired it (until its output is known,
    the tensor is the kernel's outputs)."""
    if path and _kernel_report(path):
        op, _, kernel = path.partition(":")
        op_type, _, ids = op.partition("_")
        return {"op_id": ids, "op_name": op_type, "kernel": kernel, "io": "output",
                "index": None, "path": path, "stats": stats}
    tp = parse_tensor_path(path) if path else None
    if tp is None:
        return None
    return {"op_id": "_".join(tp.ids), "op_name": "/".join(tp.names), "io": tp.io,
            "index": tp.index, "path": path, "stats": stats,
            **({"kernel": kernel} if kernel else {})}


@dataclass
class Incident:
    seq: int
    trigger: str = "?"
    reported: Any = None  # the trigger's own value (ATB's report: Inf as it read it)
    t_ns: int = 0
    round: int | None = None
    pid: int | None = None
    dev_pid: str | None = None
    path: str = ""
    stats: Any = None
    kernel: str | None = None  # the overflow trigger's kernel
    finding: str | None = None  # the overflow trigger's: who found it (overflow_findings)
    outputs: list[tuple[str, bool]] = field(default_factory=list)  # ATB's report: its kernel's
    largest: float | None = None  # ATB's report: its outputs' value of largest magnitude
    detail: str = ""
    rounds: dict[tuple[str, str, str], dict] = field(default_factory=dict)
    dirty: bool = True
    written: bytes | None = None

    @property
    def value(self) -> Any:
        """The trigger's value; for a false report of ATB's the value it misread
        (a finite bf16 +-2^121), not an Inf the output does not hold."""
        if self.finding == ATB_BF16_FINITE and self.largest is not None:
            return self.largest
        return self.reported


class IncidentBook:
    def __init__(self, dump_root: Path):
        self.dump_root = Path(dump_root)
        self.incidents: dict[int, Incident] = {}
        self.output_roots: dict[ProcKey, str] = {}

    def _get(self, seq: int) -> Incident:
        inc = self.incidents.get(seq)
        if inc is None:
            inc = self.incidents[seq] = Incident(seq)
        return inc

    # ---- feeding ----
    def add_trigger(self, seq: int, trigger: str, value: Any, t_ns: int, round_: int | None,
                    path: str, pid: int | None, stats: Any = None, detail: str = "",
                    device: int | None = None, finding: str | None = None) -> None:
        """`device` names the process's device when `path` does not (a kernel);
        `finding` is the probe's, of an overflow ATB's scan misses."""
        inc = self._get(seq)
        fresh = inc.trigger == "?" or (stats is not None and inc.stats is None)
        if not fresh:
            return
        inc.trigger, inc.reported, inc.t_ns, inc.path = trigger, value, t_ns, path
        inc.round = round_ if round_ is not None and round_ >= 0 else None
        inc.pid = pid or None
        tp = parse_tensor_path(path) if path else None
        if tp:
            inc.dev_pid = tp.dev_pid
        elif device is not None and device >= 0 and inc.pid:
            inc.dev_pid = f"{device}_{inc.pid}"
        inc.stats = stats if stats is not None else inc.stats
        inc.detail = detail or inc.detail
        if trigger == "overflow":
            inc.finding = finding or of_report(inc.outputs)
        inc.dirty = True

    def add_kernel_output(self, seq: int, path: str, stats: Any, dtype: str) -> None:
        """An output of the kernel an overflow incident names (the shim sends
        them as they are saved, after the report): the first holding NaN or
        Inf, else the first, becomes its offending tensor; all of them say
        whether ATB's report was a finite bf16 read as an fp16 Inf."""
        inc = self._get(seq)
        inc.outputs.append((dtype, _nonfinite(stats)))
        largest = _largest(stats)
        if largest is not None and (inc.largest is None or abs(largest) > abs(inc.largest)):
            inc.largest = largest
        if inc.finding in (ATB, ATB_BF16_FINITE):
            inc.finding = of_report(inc.outputs)
            inc.dirty = True
        tp = parse_tensor_path(path)
        first = _kernel_report(inc.path)
        better = bool(inc.kernel) and _nonfinite(stats) and not _nonfinite(inc.stats)
        if tp is None or not (first or better):
            return
        if first:
            inc.kernel = inc.path.partition(":")[2]
        inc.path, inc.stats, inc.dev_pid = path, stats, tp.dev_pid
        inc.dirty = True

    def add_record(self, key: ProcKey, rec: dict) -> None:
        kind = rec.get("k")
        seq = rec.get("incident") if kind == "flush" else rec.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            return
        if kind == "incident":
            dev = rec.get("dev")
            self.add_trigger(seq, str(rec.get("trigger", "?")), _num(_decoded(rec.get("value"))),
                             int(rec.get("trigger_ns") or rec.get("t") or 0), rec.get("round"),
                             str(rec.get("path", "")), key.pid, _record_stats(rec),
                             device=dev if isinstance(dev, int) and not isinstance(dev, bool)
                             else None, finding=str(rec.get("finding") or "") or None)
            return
        if kind == "incident_tensor":
            self.add_kernel_output(seq, str(rec.get("path", "")), _record_stats(rec),
                                   str(rec.get("dtype", "")))
            return
        inc = self._get(seq) if seq else self._get(0)
        if seq == 0 and inc.trigger == "?":
            inc.trigger, inc.t_ns = "exit", int(rec.get("t") or 0)
            inc.detail = "flush_on_exit: a process exited while armed"
        for r in rec.get("rounds") or []:
            d = str(r.get("dir", "")) if isinstance(r, dict) else ""
            parts = d.split("/")
            if len(parts) != 3:
                continue
            entry = inc.rounds.setdefault((parts[0], parts[1], parts[2]),
                                          {"n": 0, "as": str(r.get("as", ""))})
            n = r.get("n")
            entry["n"] += n if isinstance(n, int) and not isinstance(n, bool) else 0
            inc.dirty = True

    def add_block(self, block) -> None:
        """Entries of the block's incident table (the control plane's and the
        trigger command's incidents have no record of their own)."""
        try:
            top = block.rec_claimed
        except Exception:  # an old or foreign block: nothing to read
            return
        for seq in range(max(1, top - 63), top + 1):
            if seq in self.incidents and self.incidents[seq].trigger != "?":
                continue
            e = block.read_incident(seq)
            if e is None:
                continue
            manual = e.kind == 64  # a person: no value, round, process or tensor
            self.add_trigger(seq, TRIGGER_NAMES.get(e.kind, "?"),
                             None if manual else _num(e.value), e.t_ns, e.round, e.path,
                             e.pid, None, "msprobe-atb trigger" if manual else "")

    # ---- output ----
    def doc(self, inc: Incident) -> dict:
        rounds = sorted({int(r) for (_, r, _) in inc.rounds if r.isdigit()})
        graphs: dict[str, dict] = {}  # dev_pid -> its info/model topologies, read once

        def model_of(dev_pid: str | None, layer: str) -> str | None:
            if dev_pid not in graphs:
                graphs[dev_pid] = self._graphs(dev_pid)
            return model_of_layer(layer, graphs[dev_pid])

        files: dict[tuple[str, str], dict] = {}
        for (dev_pid, rnd, op), entry in sorted(inc.rounds.items(),
                                                key=lambda kv: (kv[0][0], int(kv[0][1])
                                                                if kv[0][1].isdigit() else 0)):
            where = files.setdefault((dev_pid, rnd), {
                "dev_pid": dev_pid, "round": int(rnd) if rnd.isdigit() else rnd,
                "dir": text_of(str(self.dump_root / "data" / dev_pid / rnd)), "ops": {},
                "models": []})
            where["ops"][text_of(op)] = entry["as"]
            of_op = model_of(dev_pid, op)
            if of_op and text_of(of_op) not in where["models"]:
                where["models"].append(text_of(of_op))
        ft = texts(first_tensor(inc.path, inc.stats, inc.kernel))
        return {
            "incident": inc.seq, "trigger": inc.trigger, "value": inc.value,
            "finding": sentence(inc.finding) or None,
            "time": iso_time(inc.t_ns) if inc.t_ns else None, "t_ns": inc.t_ns,
            "round": inc.round, "pid": inc.pid,
            "model": model_of(inc.dev_pid, layer_of(ft["op_id"], ft["op_name"])) if ft else None,
            "device": _dev_of(inc.dev_pid) if inc.dev_pid else None, "dev_pid": inc.dev_pid,
            "first_tensor": ft, "feeding_ops": self._feeders(inc, ft), "detail": inc.detail,
            "flushed_rounds": rounds, "flushed": list(files.values()),
        }

    def _graphs(self, dev_pid: str | None) -> dict:
        """The process's model topologies (info/model), for the model of each op."""
        return load_model_graphs(self.dump_root / "info", dev_pid) if dev_pid else {}

    def _feeders(self, inc: Incident, ft: dict | None) -> list[dict]:
        if not ft or not inc.dev_pid:
            return []
        graphs = load_layer_graphs(self.dump_root / "info", inc.dev_pid)
        index = int(ft["index"]) if str(ft["index"]).isdigit() else None
        return [{"op_id": u.op_id, "op_name": u.op_name, "tensor": u.tensor,
                 "feeds": u.consumer, "hops": u.depth}
                for u in upstream(graphs, ft["op_id"], ft["io"], index)]

    def flush(self) -> None:
        for inc in self.incidents.values():
            if not inc.dirty or inc.trigger == "?":
                continue
            data = (json.dumps(self.doc(inc), indent=2) + "\n").encode()
            if data != inc.written:
                try:
                    fsio.write_files(self.dump_root, [((DIR, file_name(inc.seq)), data)])
                    inc.written = data
                except (OSError, fsio.UnsafePath) as exc:
                    log.warning("cannot write %s/%s: %s", DIR, file_name(inc.seq), exc)
                    continue
            inc.dirty = False


def read_incidents(dump_root: Path) -> list[dict]:
    """Every incident report of a dump, in order; one that cannot be read or has
    the wrong shape is named with the reason (incident_check.py)."""
    out = []
    d = Path(dump_root) / DIR
    for f in sorted(d.glob("incident-*.json")) if d.is_dir() else []:
        try:
            out.append(checked(json.loads(f.read_bytes()), dump_root))
        except BadIncident as exc:
            out.append({"incident": f.name, "trigger": "?", "error": f"refused: {exc}"})
        except (OSError, ValueError, RecursionError) as exc:
            out.append({"incident": f.name, "trigger": "?", "error": f"unreadable: {exc}"})
    return out


def _value(v) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def rounds_written(doc: dict) -> str:
    """The rounds an incident wrote, by model: "prefill rounds 18-22, decode rounds 59-63"."""
    pairs = [(f["round"], m) for f in doc.get("flushed") or [] if isinstance(f["round"], int)
             for m in f.get("models") or [None]]
    listed = {r for r, _ in pairs}
    pairs += [(r, None) for r in doc.get("flushed_rounds") or [] if r not in listed]
    return rounds_by_model(pairs)


def format_incident(doc: dict) -> str:
    """An incident report as `incidents` and the offline summary print it."""
    if "error" in doc:
        return f"{doc['incident']}: {doc['error']}"
    ft = doc.get("first_tensor") or {}
    where = (f"{ft.get('op_id')} {ft.get('op_name')} {ft.get('io')} {ft.get('index')}"
             if ft else "-")
    value = doc.get("value")
    why = (f" ({_value(value)})" if value is not None
           else f" ({doc['detail']})" if doc.get("detail") else "")
    known = [round_label(doc["round"], doc.get("model"))] if doc.get("round") is not None else []
    known += [f"{k} {doc[k]}" for k in ("device", "pid") if doc.get(k) is not None]
    lines = [f"incident {doc.get('incident')}: {doc.get('trigger')}{why} at {doc.get('time')}"
             + "".join(f", {k}" for k in known),
             *([f"  {doc['finding']}"] if doc.get("finding") else []),
             f"  first offending tensor: {where}"]
    stats = ft.get("stats") if ft else None
    if isinstance(stats, dict):
        lines.append("    " + ", ".join(f"{k} {_value(stats[k])}" for k in
                                          ("max", "min", "mean", "norm", "nan", "pinf", "ninf")
                                          if k in stats))
    feeders = doc.get("feeding_ops") or []
    if feeders:
        # inputs: no statistics; a feeder may name nothing (both fields may be null)
        rest = [f["op_name"] or "unnamed feeder" for f in feeders if not f["op_id"]]
        lines.append("  fed by: " + ", ".join(
            [*(f"{f['op_id']} {f['op_name']}" for f in feeders if f["op_id"])][:6]
            + ([f"and {feeder_kinds(rest)}"] if rest else [])))
    lines.append(f"  rounds written: {rounds_written(doc) or 'none yet'}")
    for f in doc.get("flushed") or []:
        lines.append(f"    {f['dir']}")
    return "\n".join(lines)
