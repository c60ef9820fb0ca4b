"""The derived dump tree, built from the record logs.

The daemon feeds records as they arrive and flushes periodically; `rebuild`
feeds every log at once and flushes once. Both go through this one class, and
every output depends only on the records (their order within each process's
log) and on whether each process is still running, so the two agree byte for
byte once the processes are gone.
"""

from __future__ import annotations

import bisect
import csv
import datetime as _dt
import io
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from msprobe_atb.tree import fsio
from msprobe_atb.tree.csvfmt import (
    EXTRA_HEADER,
    HEADER,
    csv_line,
    extra_row,
    parse_tensor_path,
    statistic_row,
)
from msprobe_atb.tree.evicted import EvictedRounds
from msprobe_atb.tree.incidents import IncidentBook
from msprobe_atb.tree.info import (
    GraphError,
    InfoBudget,
    dumps,
    layer_json,
    model_json,
    parse_json_object,
)
from msprobe_atb.tree.manifest import ManifestWriter, record_row
from msprobe_atb.tree.records import ProcKey

log = logging.getLogger("msprobe_atb")

RoundKey = tuple[str, str]  # ("{dev}_{pid}", "{exec}")
MARKER = "ROUND_COMPLETE.json"
OVERFLOW_HEADER = "Sequence,Time,Device and PID,Op Id,Kernel Name,Report"
# The overflow events a process's info/overflow CSV lists (the file is rewritten
# whole and its rows are held in memory): with overflow_nums -1 a long service
# reports without end. Later ones are counted (the control block's
# overflow_events, in `status`) and the cut is logged.
OVERFLOW_ROWS = 10_000


class ProcOracle(Protocol):
    """What the builder needs to know about the processes beyond their records."""

    def alive(self, key: ProcKey) -> bool: ...

    def settled(self, key: ProcKey, fed: int) -> bool:
        """True if every tensor the process had selected has its record (or
        never will) in the first `fed` bytes of its record log."""
        ...

    def asleep(self) -> bool: ...


def iso_time(t_ns: int) -> str:
    return _dt.datetime.fromtimestamp(t_ns / 1e9, _dt.timezone.utc).isoformat(
        timespec="milliseconds").replace("+00:00", "Z")


def _named_round(key: object) -> RoundKey | None:
    """The round an exit record's `unrecorded` key names ("" names none)."""
    parts = [x for x in str(key).split("/") if x]
    return (parts[0], parts[1]) if len(parts) == 2 else None


@dataclass
class Round:
    key: RoundKey
    # (sort key, statistic.csv line, statistic_extra.csv line); None once the round
    # is complete and written: its rows live on disk until a later record reopens it
    # (the builder then drops the round itself, see tree/evicted.py).
    rows: list[tuple[tuple[int, int], str, str]] | None = field(default_factory=list)
    count: int = 0
    lost: int = 0
    unlisted: int = 0  # of `lost`: tensors without a row (no record of their own)
    params_lost: int = 0  # op_param.json files not written
    last_t: int = 0
    procs: set[ProcKey] = field(default_factory=set)
    # processes whose shim said the round has all its records (a `round` record)
    said_done: set[ProcKey] = field(default_factory=set)
    dirty: bool = True
    flushed_once: bool = False
    marker: bytes | None = None  # the marker on disk, as we wrote it


@dataclass
class Proc:
    key: ProcKey
    output_root: str | None = None
    dev_hint: int | None = None
    exited: bool = False
    fed: int = 0  # bytes of its record log fed to the builder
    last_round: RoundKey | None = None  # of its record with the highest seq
    last_seq: int = -1
    graphs: dict[str, dict] = field(default_factory=dict)
    layers: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # name -> (dev, json)
    models: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    model_counter: int = 0
    overflow: list[tuple[int, list[str]]] = field(default_factory=list)  # (dev, cells)
    overflow_cut: bool = False  # more than OVERFLOW_ROWS came
    info_dirty: bool = True
    written: dict[tuple[str, ...], bytes] = field(default_factory=dict)  # info files on disk
    info_budget: InfoBudget = field(default_factory=InfoBudget)


# Names that are not UTF-8 come from the record log as surrogate escapes
# (\udcXX, see native/core/mechanisms/jsonw.h); the CSVs hold their raw bytes, so a
# Tensor Path names the file on disk.
def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "surrogateescape")


def _int(value: Any, default: int = -1) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


class TreeBuilder:
    def __init__(self, dump_root: Path, oracle: ProcOracle):
        self.dump_root = Path(dump_root)
        self.oracle = oracle
        self.rounds: dict[RoundKey, Round] = {}  # rounds not complete, or shared
        self.evicted = EvictedRounds()  # complete rounds let go of (on disk only)
        self.procs: dict[ProcKey, Proc] = {}
        self._error_counts: dict[str, int] = {}
        self.manifest = ManifestWriter(self.dump_root, "records")
        self.incidents = IncidentBook(self.dump_root)
        self.exits_seen = 0  # exit records fed: the daemon flushes at once after one
        # what the last flush could not write (a full disk): file -> why, and the
        # rows of the rounds whose statistic.csv it is
        self.unwritten: dict[str, str] = {}
        self.unwritten_rows = 0
        self.unwritten_procs: set[ProcKey] = set()  # whose files the last flush missed
        self.progress_error = ""  # `rebuild` could not write .probe/built.json
        # rounds the shims said are complete since the last flush: the daemon
        # flushes at once, so that their rows leave memory however far it is behind
        self.said_done = 0

    # ---- problems are logged, a few times per kind, never raised ----
    def _problem(self, kind: str, message: str) -> None:
        n = self._error_counts.get(kind, 0) + 1
        self._error_counts[kind] = n
        if n <= 5:
            log.warning("%s%s", message, " (further ones of this kind are not logged)"
                        if n == 5 else "")

    def proc(self, key: ProcKey) -> Proc:
        p = self.procs.get(key)
        if p is None:
            p = self.procs[key] = Proc(key)
        return p

    # ---- feeding ----
    def add(self, key: ProcKey, records: list[dict]) -> None:
        p = self.proc(key)
        for rec in records:
            try:
                self._add_one(p, rec)
            except Exception as exc:  # a bad record must never stop the tree
                self._problem("record", f"record log of pid {key.pid}: skipped a "
                              f"{rec.get('k')!r} record: {type(exc).__name__}: {exc}")

    def _add_one(self, p: Proc, rec: dict) -> None:
        kind = rec.get("k")
        if kind == "tensor":
            self._add_tensor(p, rec)
        elif kind == "param":
            tp = parse_tensor_path(str(rec.get("path", "")))
            if tp:
                self._learn_device(p, tp.dev_pid)
                self._moved_to(p, tp.round_key, rec)
                if rec.get("file") == "lost":
                    self._counted_in(p, tp.round_key, rec).params_lost += 1
        elif kind == "graph":
            self._add_graph(p, rec)
        elif kind == "topo":
            self._add_topo(p, rec)
        elif kind == "overflow":
            self._add_overflow(p, rec)
        elif kind == "attach":
            if isinstance(rec.get("output"), str) and rec["output"]:
                p.output_root = rec["output"]
        elif kind == "exit":
            p.exited = True
            self.exits_seen += 1
            self._add_unrecorded(p, rec)
        elif kind in ("incident", "flush"):
            self.incidents.add_record(p.key, rec)
        elif kind == "round":
            parts = str(rec.get("round", "")).split("/")
            rnd = self.rounds.get((parts[0], parts[-1])) if len(parts) == 2 else None
            if rnd is not None:  # complete rounds were let go of already
                rnd.said_done.add(p.key)
                self.said_done += 1

    def _learn_device(self, p: Proc, dev_pid: str) -> None:
        if p.dev_hint is None:
            dev = dev_pid.partition("_")[0]
            if dev.isdigit():
                p.dev_hint = int(dev)
                p.info_dirty = True

    @staticmethod
    def _moved_to(p: Proc, round_key: RoundKey, rec: dict) -> None:
        """The round of the latest selection: writer threads finish out of
        order, so the record with the highest seq (taken in execution order)
        tells, not the last one appended."""
        seq = _int(rec.get("seq"))
        if seq >= p.last_seq:
            p.last_seq = seq
            p.last_round = round_key

    def _round(self, key: RoundKey) -> Round:
        """The round, with its rows in memory (read back from disk if it was
        let go of)."""
        rnd = self.rounds.get(key)
        if rnd is None:
            rnd = self.rounds[key] = Round(key)
            owner = self.evicted.take(key)
            if owner is not None:
                self._restore(rnd, owner)
        if rnd.rows is None:
            self._reload(rnd)
        return rnd

    def _output_root(self, p: Proc) -> str:
        return p.output_root or str(self.dump_root.parent)

    def _add_tensor(self, p: Proc, rec: dict) -> None:
        path = rec.get("path")
        tp = parse_tensor_path(path) if isinstance(path, str) else None
        if tp is None:
            self._problem("path", f"pid {p.key.pid}: tensor record with unusable path {path!r}")
            return
        self._learn_device(p, tp.dev_pid)
        self._moved_to(p, tp.round_key, rec)
        rnd = self._round(tp.round_key)
        sort_key = (p.key.start_ns, _int(rec.get("seq"), 0))
        root = self._output_root(p)
        row = (sort_key, statistic_row(rec, tp, root), extra_row(rec, tp, root))
        bisect.insort(rnd.rows, row)
        self.manifest.add(tp.round_key, sort_key, record_row(rec, tp, p.key.start_ns))
        rnd.count = len(rnd.rows)
        rnd.lost += rec.get("file") == "lost"
        if rec.get("file") == "stub" and str(rec.get("note", "")).startswith("hard link refused"):
            self._problem("link-refused", f"pid {p.key.pid}: {path}: {rec['note']} (the file "
                          "system of the dump refuses hard links; msProbe's tools cannot read "
                          "such stubs)")
        rnd.last_t = max(rnd.last_t, _int(rec.get("t"), 0))
        rnd.procs.add(p.key)
        rnd.said_done.discard(p.key)  # a later request reuses the round number
        rnd.dirty = True

    def _counted_in(self, p: Proc, round_key: RoundKey, rec: dict) -> Round:
        """The round a loss record `rec` of process p counts in, marked as touched."""
        rnd = self._round(round_key)
        rnd.last_t = max(rnd.last_t, _int(rec.get("t"), 0))
        rnd.procs.add(p.key)
        rnd.dirty = True
        return rnd

    def _add_unrecorded(self, p: Proc, rec: dict) -> None:
        """Selected tensors that never got a record of their own (the record log
        had no room, or the process was killed: its exit record is then the
        daemon's), counted per round; "" is a round the shim could not name. And
        op_param.json files not written whose record found no room (in no round:
        counted in the process's last one)."""
        unrecorded = rec.get("unrecorded")
        if not isinstance(unrecorded, dict):
            unrecorded = {}
        params = _int(rec.get("params_unrecorded"), 0)
        if params > 0:  # their rounds are not known: the process's last one
            named = [k for k in map(_named_round, unrecorded) if k]
            round_key = p.last_round or (named[-1] if named else None)
            if round_key is None:
                self._problem("params", f"pid {p.key.pid}: {params} op_param.json files were "
                              "not written, in rounds its record log does not name")
            else:
                self._counted_in(p, round_key, rec).params_lost += params
        for key, n in unrecorded.items():
            n = _int(n, 0)
            round_key = _named_round(key) or p.last_round
            if n <= 0 or round_key is None:
                continue
            rnd = self._counted_in(p, round_key, rec)
            rnd.lost += n
            rnd.unlisted += n

    def _info_doc(self, p: Proc, rec: dict, kind: str, name_key: str, what: str, build):
        """(name, parsed JSON, the built doc) of a graph or topo record, or None when
        it is unusable (logged). build(parsed) -> (doc, warnings)."""
        name = rec.get(name_key)
        if not isinstance(name, str) or not fsio.valid_component(name + ".json"):
            self._problem(kind, f"pid {p.key.pid}: {what} with unusable name {name!r}")
            return None
        try:
            parsed = parse_json_object(rec.get("json"), f"{what} {name}")
            doc, warnings = build(parsed)
            data = dumps(doc)
            # kept: the document, and the parsed graph (about 4 bytes per byte of text)
            refused = p.info_budget.admit(kind, name, len(data) + 4 * len(rec["json"]))
            if refused:
                raise GraphError(refused)
        except (GraphError, RecursionError) as exc:
            self._problem(kind, f"pid {p.key.pid}: skipped {what} {name}: {exc}")
            return None
        for w in warnings:
            self._problem("graph-warning", f"pid {p.key.pid}: {w}")
        p.info_dirty = True
        return name, parsed, (_int(rec.get("dev")), data)

    def _add_graph(self, p: Proc, rec: dict) -> None:
        got = self._info_doc(p, rec, "graph", "name", "layer graph",
                             lambda graph: layer_json(rec["name"], graph))
        if got:
            name, graph, entry = got
            p.graphs[name] = graph
            p.layers[name] = entry

    def _add_topo(self, p: Proc, rec: dict) -> None:
        counter = [p.model_counter]

        def build(topo):
            doc, counter[0], warnings = model_json(topo, p.graphs, p.model_counter)
            return doc, warnings

        got = self._info_doc(p, rec, "topo", "model", "model topology", build)
        if got:
            name, _, entry = got
            p.models[name] = entry
            p.model_counter = counter[0]

    def _add_overflow(self, p: Proc, rec: dict) -> None:
        if len(p.overflow) >= OVERFLOW_ROWS:
            if not p.overflow_cut:
                p.overflow_cut = True
                log.warning("process %s: more than %d overflow events; its info/overflow CSV "
                            "lists the first %d, `status` counts them all (overflow_events)",
                            p.key.pid, OVERFLOW_ROWS, OVERFLOW_ROWS)
            return
        kernel = str(rec.get("kernel", ""))
        op_id, sep, name = kernel.partition(":")
        dev = _int(rec.get("dev"))
        t = _int(rec.get("t"), 0)
        p.overflow.append((dev, [str(_int(rec.get("seq"), 0)), iso_time(t) if t else "",
                                 op_id if sep else "", name if sep else kernel, kernel]))
        p.info_dirty = True

    def _restore(self, rnd: Round, owner: ProcKey) -> None:
        """Takes back a round it let go of: its counts from its marker (its rows
        are read back by _reload)."""
        base = ("data", rnd.key[0], rnd.key[1])
        rnd.procs.add(owner)
        rnd.rows, rnd.dirty, rnd.flushed_once = None, False, True
        marker = fsio.read_file(self.dump_root, base + (MARKER,))
        try:
            fields = json.loads(marker or b"")
            rnd.count, rnd.lost = fields["rows"], fields["lost"]
            rnd.unlisted = fields.get("lost_without_row", 0)
            rnd.params_lost = fields.get("params_lost", 0)
            done = fields.get("complete_at")
            rnd.last_t = round(_dt.datetime.fromisoformat(done.replace("Z", "+00:00"))
                               .timestamp() * 1e3) * 1_000_000 if done else 0
            rnd.marker = marker
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            self._problem("reload", f"cannot read back {'/'.join(base + (MARKER,))} ({exc}); "
                          "the round's earlier rows are missing until `msprobe-atb rebuild`")

    def _reload(self, rnd: Round) -> None:
        """Reads back the rows of an evicted round (one process, so the sort key
        is that process's start_ns and the Sequence column)."""
        base = ("data", rnd.key[0], rnd.key[1])
        (start_ns,) = {k.start_ns for k in rnd.procs}
        rnd.rows = []
        try:
            stat = fsio.read_file(self.dump_root, base + ("statistic.csv",))
            extra = fsio.read_file(self.dump_root, base + ("statistic_extra.csv",))
            stat_rows = list(csv.reader(io.StringIO(_text(stat))))[1:]
            extra_rows = list(csv.reader(io.StringIO(_text(extra))))[1:]
            if len(stat_rows) != rnd.count or len(extra_rows) != rnd.count:
                raise ValueError(f"expected {rnd.count} rows")
            rnd.rows = [((start_ns, int(e[0]) if e[0].isdigit() else 0), csv_line(r), csv_line(e))
                        for r, e in zip(stat_rows, extra_rows)]
        except (OSError, ValueError, IndexError) as exc:
            self._problem("reload", f"cannot read back {'/'.join(base)} ({exc}); its earlier "
                          "rows are missing until `msprobe-atb rebuild`")

    # ---- output ----
    def _info_dir(self, p: Proc, dev: int) -> str:
        if dev < 0:
            dev = p.dev_hint if p.dev_hint is not None else -1
        return f"{dev}_{p.key.pid}" if dev >= 0 else str(p.key.pid)

    def _info_files(self, p: Proc) -> dict[tuple[str, ...], bytes]:
        files: dict[tuple[str, ...], bytes] = {}
        for kind, docs in (("layer", p.layers), ("model", p.models)):
            for name, (dev, data) in docs.items():
                files[("info", kind, self._info_dir(p, dev), f"{name}.json")] = data
        if p.overflow:
            # The overflow file is per process; its device is the first known one.
            dev = next((d for d, _ in p.overflow if d >= 0), -1)
            sub = self._info_dir(p, dev)
            body = "".join(csv_line(cells[:2] + [sub] + cells[2:]) for _, cells in p.overflow)
            files[("info", "overflow", f"{sub}.csv")] = _bytes(OVERFLOW_HEADER + "\n" + body)
        return files

    def _write(self, *files: tuple[tuple[str, ...], bytes]) -> bool:
        """Writes files as a unit (all or none replaced); False, logged, on failure;
        a failure of the file system (a full disk, not a refused name) is kept in
        `unwritten`."""
        try:
            fsio.write_files(self.dump_root, files)
            return True
        except (OSError, fsio.UnsafePath) as exc:
            names = ", ".join("/".join(rel) for rel, _ in files)
            self._problem("write", f"cannot write {names}: {exc}")
            if isinstance(exc, OSError):
                for rel, _ in files:
                    self.unwritten["/".join(rel)] = exc.strerror or str(exc)
            return False

    def unwritten_summary(self) -> dict | None:
        """What the last flush could not write, for `.probe/built.json`: the number
        of files, the rows missing from statistic.csv (and from the manifest), the
        first few names and the first reason; None when everything was written."""
        manifest_rows = self.manifest.unwritten_rows()
        if not self.unwritten and not manifest_rows:
            return None
        names = sorted(self.unwritten)
        reason = self.unwritten[names[0]] if names else self.manifest.last_error
        return {"files": len(names), "csv_rows": self.unwritten_rows,
                "manifest_rows": manifest_rows, "names": names[:5], "reason": reason}

    def _flush_info(self, p: Proc) -> None:
        want = self._info_files(p)
        if not p.written:
            # A previous daemon may have written these under {pid} before the
            # device was known.
            for rel in want:
                if rel[2] != str(p.key.pid) and len(rel) == 4:
                    fsio.remove_file(self.dump_root, (*rel[:2], str(p.key.pid), rel[3]))
        for rel in [r for r in p.written if r not in want]:
            fsio.remove_file(self.dump_root, rel)  # moved: the device became known
            del p.written[rel]
        p.info_dirty = False
        for rel, data in want.items():
            if p.written.get(rel) != data:
                if self._write((rel, data)):
                    p.written[rel] = data
                else:
                    p.info_dirty = True  # the next flush tries again
                    self.unwritten_procs.add(p.key)

    def _proc_done_with(self, key: ProcKey, rnd: Round) -> bool:
        p = self.procs.get(key)
        if p is None or p.exited or key in rnd.said_done or not self.oracle.alive(key):
            return True
        return (self.oracle.settled(key, p.fed)
                and (p.last_round != rnd.key or self.oracle.asleep()))

    def _flush_round(self, rnd: Round) -> None:
        base = ("data", rnd.key[0], rnd.key[1])
        if rnd.dirty:
            rows = rnd.rows or []
            stat = HEADER + "\n" + "".join(r[1] for r in rows)
            extra = EXTRA_HEADER + "\n" + "".join(r[2] for r in rows)
            # the pair is row-aligned: never replace one without the other
            if not self._write((base + ("statistic.csv",), _bytes(stat)),
                               (base + ("statistic_extra.csv",), _bytes(extra))):
                if "/".join(base + ("statistic.csv",)) in self.unwritten:
                    self.unwritten_rows += len(rows)
                    self.unwritten_procs |= rnd.procs
                return
        complete = all(self._proc_done_with(k, rnd) for k in rnd.procs)
        if complete:
            self.manifest.round_complete(rnd.key, rnd.count)
            fields = {"rows": rnd.count, "lost": rnd.lost,
                      "complete_at": iso_time(rnd.last_t) if rnd.last_t else None}
            if rnd.unlisted:
                fields["lost_without_row"] = rnd.unlisted
            if rnd.params_lost:
                fields["params_lost"] = rnd.params_lost
            marker = dumps(fields)
            if marker != rnd.marker:
                if self._write((base + (MARKER,), marker)):
                    rnd.marker = marker
                else:
                    self.unwritten_procs |= rnd.procs
            if rnd.marker is not None and len(rnd.procs) == 1:
                rnd.rows = None  # done: keep memory bounded on long runs
                if self.evicted.add(rnd.key, next(iter(rnd.procs))):
                    del self.rounds[rnd.key]
        elif rnd.marker is not None or not rnd.flushed_once:
            # Reopened (a later request reuses this round number), or left by a
            # previous daemon: the round is not complete any more.
            fsio.remove_file(self.dump_root, base + (MARKER,))
            rnd.marker = None
        rnd.dirty = False
        rnd.flushed_once = True

    def flush(self) -> None:
        """Writes what changed: CSVs of rounds with new records, info files,
        and the completion markers of rounds whose processes are done."""
        self.unwritten = {}
        self.unwritten_rows = 0
        self.unwritten_procs = set()
        for p in self.procs.values():
            if p.info_dirty:
                self._flush_info(p)
        for rnd in list(self.rounds.values()):
            if rnd.dirty or rnd.marker is None or not rnd.flushed_once:
                self._flush_round(rnd)
        self.manifest.flush()
        self.incidents.flush()
        self.said_done = 0

    def round_count(self) -> int:
        """Rounds built, those let go of included."""
        return len(self.rounds) + len(self.evicted)

    def pending_markers(self) -> int:
        return sum(1 for r in self.rounds.values() if r.marker is None)
