"""The derived dump tree, built from the record logs.

The daemon feeds the logs' lines as they arrive and flushes periodically;
`rebuild` feeds every log at once and flushes once. Both go through this one
class, and every output depends only on the records (their order within each
process's log) and on whether each process is still running, so the two agree
byte for byte once the processes are gone.

The files only grow: the ingest kernel (tree/ingest.py) turns each process's
tensor records into rows and holds a round's rows until they may be appended
in sequence order (the process said the round has all its records, or had none
in flight, or ended); a flush appends them to statistic.csv and
statistic_extra.csv and hands their manifest lines to the manifest. A round's
ROUND_COMPLETE.json is its commit, written last, once its files are synced. A
round this builder has not written yet (an earlier daemon's, or none) is written
anew at its first flush, so a restarted daemon and `rebuild` replace whatever a
crash left.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import re
import time
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
from msprobe_atb.tree.ingest import (
    Ingest,
    IngestMemoryError,
    RoundInfo,
    Taken,
    key_bytes,
    manifest_cells,
)
from msprobe_atb.tree.manifest import COLUMN_NAMES, ManifestWriter, record_row
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
# Rows a process may have held in the kernel before they are let out of order:
# a round that never ends and never has a moment with nothing in flight would
# otherwise hold all of its rows in memory.
HELD_BYTES = 64 << 20
END = 1 << 62  # a log offset past every record


class ProcOracle(Protocol):
    """What the builder needs to know about the processes beyond their records."""

    def alive(self, key: ProcKey) -> bool: ...

    def settled(self, key: ProcKey, fed: int) -> bool:
        """True if every tensor the process had selected has its record (or
        never will) in the first `fed` bytes of its record log."""
        ...

    def quiet_at(self, key: ProcKey) -> int | None:
        """A size its record log had when no tensor of the process was between
        its selection and its record (every lower seq was in the log), or None."""
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
    count: int = 0  # rows in its files
    lost: int = 0
    unlisted: int = 0  # of `lost`: tensors without a row (no record of their own)
    params_lost: int = 0  # op_param.json files not written
    last_t: int = 0
    last_seq: int = -1  # the highest seq in its files (-1: not known, read back)
    procs: set[ProcKey] = field(default_factory=set)
    # processes whose shim said the round has all its records (a `round` record)
    said_done: set[ProcKey] = field(default_factory=set)
    on_disk: bool = False  # its CSVs are this builder's: rows are appended to them
    synced: bool = True  # no row appended since its files were last synced
    dirty: bool = True  # changed since the last flush
    flushed_once: bool = False
    marker: bytes | None = None  # the marker on disk, as we wrote it
    # rows taken from the kernel that a failed write (a full disk) left to write
    pending: list[Taken] = field(default_factory=list)


@dataclass
class Proc:
    key: ProcKey
    ingest: Ingest
    output_root: str | None = None
    dev_hint: int | None = None
    exited: bool = False
    fed: int = 0  # bytes of its record log fed to the builder
    lines: int = 0  # lines in them
    last_round: RoundKey | None = None  # of its record with the highest seq
    graphs: dict[str, dict] = field(default_factory=dict)
    layers: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # name -> (dev, json)
    models: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    model_counter: int = 0
    overflow: list[tuple[int, list[str]]] = field(default_factory=list)  # (dev, cells)
    overflow_cut: bool = False  # more than OVERFLOW_ROWS came
    info_dirty: bool = True
    written: dict[tuple[str, ...], bytes] = field(default_factory=dict)  # info files on disk
    info_budget: InfoBudget = field(default_factory=InfoBudget)
    held_said: bool = False  # rows were let out of order for memory (logged once)
    manifest_since: float | None = None  # when its oldest manifest row not in a file came


# Names that are not UTF-8 come from the record log as surrogate escapes
# (\udcXX, see native/core/mechanisms/jsonw.h); the CSVs hold their raw bytes, so a
# Tensor Path names the file on disk.
def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _int(value: Any, default: int = -1) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _seq(rec: dict) -> int | None:
    seq = rec.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


# One CSV record: cells outside quotes hold no line break (csvfmt quotes them).
_CSV_RECORD = re.compile(rb'(?:[^"\n]|"[^"]*")*\n')


def _seq_of(extra_row: bytes) -> int:
    """The Sequence of a statistic_extra.csv row (0 without one, as the records sort)."""
    cell = extra_row.split(b",", 1)[0]
    return int(cell) if cell.lstrip(b"-").isdigit() else 0


def _merged(stat: bytes, extra: bytes, new_stat: bytes, new_extra: bytes) -> tuple[bytes, bytes]:
    """A round's files (stat, extra) with rows that arrived after rows of a
    higher seq were appended (new_stat, new_extra), put in sequence order: the
    rows of both, sorted by the Sequence column of statistic_extra.csv (stable:
    the earlier rows first among equals, a row without one as seq 0, as the
    records sort)."""
    pairs = list(zip(_CSV_RECORD.findall(stat)[1:], _CSV_RECORD.findall(extra)[1:]))
    pairs += zip(_CSV_RECORD.findall(new_stat), _CSV_RECORD.findall(new_extra))
    pairs.sort(key=lambda pair: _seq_of(pair[1]))
    return (_bytes(HEADER + "\n") + b"".join(p[0] for p in pairs),
            _bytes(EXTRA_HEADER + "\n") + b"".join(p[1] for p in pairs))


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
        # flushes at once, so that their markers follow however far it is behind
        self.said_done = 0
        self.late_rows = 0  # rows merged into place after rows of a higher seq

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
            p = self.procs[key] = Proc(key, Ingest(key.start_ns))
            p.ingest.set_root(_bytes(self._output_root(p).rstrip("/")))
        return p

    # ---- feeding ----
    def feed(self, key: ProcKey, data: bytes, offset: int, line: int, parse) -> None:
        """Reads `data`, whole lines of the process's log from byte `offset` and
        line `line` on; the kernel takes the lines it can, `parse(line)` makes a
        record of each other one (None: none) for the Python path."""
        p = self.proc(key)
        pos = 0
        while pos < len(data):
            try:
                taken, stopped = p.ingest.feed(data, pos, offset + pos, line)
            except IngestMemoryError as exc:
                self._problem("memory", f"pid {key.pid}: {exc}; reading its records in Python")
                taken, stopped = 0, True
            line += data.count(b"\n", pos, pos + taken)
            pos += taken
            if not stopped:
                break
            end = data.index(b"\n", pos)
            rec = parse(data[pos:end])
            if rec is not None:
                self._add_python(p, rec, offset + pos, line)
            pos, line = end + 1, line + 1
        p.fed = offset + len(data)
        p.lines = line

    def add(self, key: ProcKey, records: list[dict]) -> None:
        """Records that are not in the log (an exit record it had no room for)."""
        p = self.proc(key)
        for rec in records:
            self._add_python(p, rec, p.fed, p.lines)

    def _add_python(self, p: Proc, rec: dict, offset: int, line: int) -> None:
        try:
            self._add_one(p, rec, offset, line)
        except Exception as exc:  # a bad record must never stop the tree
            self._problem("record", f"record log of pid {p.key.pid}: skipped a "
                          f"{rec.get('k')!r} record: {type(exc).__name__}: {exc}")

    def _add_one(self, p: Proc, rec: dict, offset: int, line: int) -> None:
        kind = rec.get("k")
        if kind == "tensor":
            self._add_tensor(p, rec, offset, line)
        elif kind == "param":
            tp = parse_tensor_path(str(rec.get("path", "")))
            if tp:
                p.ingest.param(key_bytes(tp.round_key), _seq(rec),
                               _int(rec.get("t"), 0), rec.get("file") == "lost")
        elif kind == "graph":
            self._add_graph(p, rec)
        elif kind == "topo":
            self._add_topo(p, rec)
        elif kind == "overflow":
            self._add_overflow(p, rec)
        elif kind == "attach":
            if isinstance(rec.get("output"), str) and rec["output"]:
                p.output_root = rec["output"]
                p.ingest.set_root(_bytes(rec["output"].rstrip("/")))
        elif kind == "exit":
            p.exited = True
            self.exits_seen += 1
            self._add_unrecorded(p, rec)
        elif kind in ("incident", "flush"):
            self.incidents.add_record(p.key, rec)
        elif kind == "round":
            parts = str(rec.get("round", "")).split("/")
            if len(parts) == 2:
                p.ingest.round_said(key_bytes((parts[0], parts[-1])))

    def _add_tensor(self, p: Proc, rec: dict, offset: int, line: int) -> None:
        """A tensor record the kernel left: its rows made here, by the reference."""
        path = rec.get("path")
        tp = parse_tensor_path(path) if isinstance(path, str) else None
        if tp is None:
            self._problem("path", f"pid {p.key.pid}: tensor record with unusable path {path!r}")
            return
        root = self._output_root(p)
        stat = _bytes(statistic_row(rec, tp, root))
        extra = _bytes(extra_row(rec, tp, root))
        man = manifest_cells(dict(zip(COLUMN_NAMES, record_row(rec, tp, p.key.start_ns))))
        if rec.get("file") == "stub" and str(rec.get("note", "")).startswith("hard link refused"):
            self._problem("link-refused", f"pid {p.key.pid}: {path}: {rec['note']} (the file "
                          "system of the dump refuses hard links; msProbe's tools cannot read "
                          "such stubs)")
        p.ingest.add_row(key_bytes(tp.round_key), _seq(rec),
                         _int(rec.get("t"), 0), offset, line, rec.get("file") == "lost", stat,
                         extra, man)

    def _round(self, key: RoundKey) -> Round:
        """The round, read back from its marker if it was let go of."""
        rnd = self.rounds.get(key)
        if rnd is None:
            rnd = self.rounds[key] = Round(key)
            owner = self.evicted.take(key)
            if owner is not None:
                self._restore(rnd, owner)
        return rnd

    def _output_root(self, p: Proc) -> str:
        return p.output_root or str(self.dump_root.parent)

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
        self._sync(p)  # the process's last round, from what was read before this record
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

    def _sync(self, p: Proc) -> list[RoundInfo]:
        """What the kernel read since the last look: per round, its tensors (a
        later request reusing the round reopens it), the shim's word that it
        has all its records, lost params; the process's last round and device."""
        infos = p.ingest.rounds()
        for info in infos:
            if info.tensors or info.params_lost or info.held:
                rnd = self._round(info.key)
            elif info.key in self.rounds:
                rnd = self.rounds[info.key]
            else:
                continue  # the shim's word on a round already complete
            rnd.procs.add(p.key)
            if info.tensors:
                rnd.said_done.discard(p.key)
                rnd.dirty = True
            if info.said:
                rnd.said_done.add(p.key)
                self.said_done += 1
            if info.params_lost:
                rnd.params_lost += info.params_lost
                rnd.dirty = True
            rnd.last_t = max(rnd.last_t, info.max_t)
        state = p.ingest.state()
        p.last_round = state.last_round
        if p.dev_hint is None and state.dev is not None:
            p.dev_hint = state.dev
            p.info_dirty = True
        return infos

    def _release(self, p: Proc) -> None:
        """Lets the rows go that may be appended: every row of a process that
        ended, and the rows read below a log size at which it had nothing in
        flight (any later tensor has a higher seq). A process holding more than
        HELD_BYTES lets all go (their order then rests on the late-row merge)."""
        if p.exited or not self.oracle.alive(p.key):
            p.ingest.release(END)
            return
        quiet = self.oracle.quiet_at(p.key)
        if quiet is not None:
            p.ingest.release(quiet)
        if p.ingest.state().held_bytes > HELD_BYTES:
            if not p.held_said:
                p.held_said = True
                log.warning("pid %d: over %d MiB of statistic.csv rows held waiting for the "
                            "end of their round; appending them now (a row that arrives "
                            "later is merged into place)", p.key.pid, HELD_BYTES >> 20)
            p.ingest.release(END)

    def built(self, key: ProcKey) -> tuple[int, int]:
        """(bytes, lines) of the process's log whose records are in the derived
        files: up to the first record of a row still held."""
        p = self.procs[key]
        state = p.ingest.state()
        return (state.min_offset, state.min_line) if state.min_offset >= 0 else (p.fed, p.lines)

    def held_rows(self) -> int:
        return sum(p.ingest.state().held_rows for p in self.procs.values())

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
        """Takes back a round it let go of: its counts from its marker; its rows
        stay in its files, and new ones are appended."""
        base = ("data", rnd.key[0], rnd.key[1])
        rnd.procs.add(owner)
        rnd.dirty, rnd.flushed_once, rnd.on_disk = False, True, True
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
                          "its counts restart from 0 until `msprobe-atb rebuild`")
        # the seq of its last row: a row that sorts before it is merged into place
        tail = fsio.read_tail(self.dump_root, base + ("statistic_extra.csv",), 64 << 10)
        last = _CSV_RECORD.findall(tail or b"")
        if len(last) > 1 or (last and not tail.startswith(b"Sequence")):
            rnd.last_seq = _seq_of(last[-1])

    # ---- output ----
    def _write(self, *files: tuple[tuple[str, ...], bytes], append: bool = False) -> bool:
        """Writes files as a unit (all or none replaced, or appended to); False,
        logged, on failure; a failure of the file system (a full disk, not a
        refused name) is kept in `unwritten`."""
        try:
            if append:
                fsio.append_files(self.dump_root, files)
            else:
                fsio.write_files(self.dump_root, files)
            return True
        except (OSError, fsio.UnsafePath) as exc:
            names = ", ".join("/".join(rel) for rel, _ in files)
            self._problem("write", f"cannot write {names}: {exc}")
            if isinstance(exc, OSError):
                for rel, _ in files:
                    self.unwritten["/".join(rel)] = exc.strerror or str(exc)
            return False

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

    def _take(self, rnd: Round) -> None:
        """Takes the round's released rows from its processes' kernels (the
        older process first: rows sort by process start, then seq)."""
        keyb = key_bytes(rnd.key)
        for key in sorted(rnd.procs):
            p = self.procs.get(key)
            base = rnd.count + sum(t.rows for t in rnd.pending)
            taken = p.ingest.take(keyb, base, rnd.last_seq) if p is not None else None
            if taken is not None:
                rnd.pending.append(taken)
                rnd.dirty = True

    def _append(self, rnd: Round) -> bool:
        """Writes the round's taken rows: a new file pair (the round's first write
        by this builder), an append, or for rows that sort before rows already
        there, the pair rewritten in order. False when they stay pending."""
        base = ("data", rnd.key[0], rnd.key[1])
        stat_rel, extra_rel = base + ("statistic.csv",), base + ("statistic_extra.csv",)
        taken = rnd.pending
        stat = b"".join(t.stat for t in taken)
        extra = b"".join(t.extra for t in taken)
        late = rnd.on_disk and any(t.late for t in taken)
        if late:
            merged = _merged(fsio.read_file(self.dump_root, stat_rel) or b"",
                             fsio.read_file(self.dump_root, extra_rel) or b"", stat, extra)
            ok = self._write((stat_rel, merged[0]), (extra_rel, merged[1]))
        elif rnd.on_disk:
            # statistic_extra.csv first: msProbe's tools read statistic.csv alone
            ok = self._write((extra_rel, extra), (stat_rel, stat), append=True)
        else:
            ok = self._write((stat_rel, _bytes(HEADER + "\n") + stat),
                             (extra_rel, _bytes(EXTRA_HEADER + "\n") + extra))
        if not ok:
            if "/".join(stat_rel) in self.unwritten:
                self.unwritten_rows += sum(t.rows for t in taken)
                self.unwritten_procs |= rnd.procs
            return False
        rows = sum(t.rows for t in taken)
        if late:
            self.late_rows += rows
            log.info("%s: %d row(s) arrived after rows of a higher seq; merged into place",
                     "/".join(base), rows)
        for t in taken:
            rnd.count += t.rows
            rnd.lost += t.lost
            rnd.last_seq = max(rnd.last_seq, t.last_seq)
        rnd.pending = []
        rnd.on_disk = True
        rnd.synced = rnd.synced and not rows
        return True

    def _proc_done_with(self, key: ProcKey, rnd: Round) -> bool:
        p = self.procs.get(key)
        if p is not None and p.ingest.held(key_bytes(rnd.key)):
            return False  # rows of it still to come
        if p is None or p.exited or key in rnd.said_done or not self.oracle.alive(key):
            return True
        return (self.oracle.settled(key, p.fed)
                and (p.last_round != rnd.key or self.oracle.asleep()))

    def _flush_round(self, rnd: Round) -> None:
        base = ("data", rnd.key[0], rnd.key[1])
        self._take(rnd)
        if rnd.pending or not rnd.on_disk:
            if rnd.marker is not None:
                # reopened (a later request reuses the round number): not complete
                # while its new rows go in
                fsio.remove_file(self.dump_root, base + (MARKER,))
                rnd.marker = None
            if not self._append(rnd):
                return
        complete = all(self._proc_done_with(k, rnd) for k in rnd.procs)
        if complete:
            fields = {"rows": rnd.count, "lost": rnd.lost,
                      "complete_at": iso_time(rnd.last_t) if rnd.last_t else None}
            if rnd.unlisted:
                fields["lost_without_row"] = rnd.unlisted
            if rnd.params_lost:
                fields["params_lost"] = rnd.params_lost
            marker = dumps(fields)
            if marker != rnd.marker:
                if not rnd.synced:
                    # the marker says the files are complete: they must be on disk first
                    try:
                        fsio.sync_files(self.dump_root, [base + ("statistic.csv",),
                                                         base + ("statistic_extra.csv",)])
                        rnd.synced = True
                    except (OSError, fsio.UnsafePath) as exc:
                        self._problem("sync", f"cannot sync {'/'.join(base)}: {exc}")
                if rnd.synced and self._write((base + (MARKER,), marker)):
                    rnd.marker = marker
                else:
                    self.unwritten_procs |= rnd.procs
            if rnd.marker is not None and len(rnd.procs) == 1:
                # done: keep memory bounded on long runs
                if self.evicted.add(rnd.key, next(iter(rnd.procs))):
                    del self.rounds[rnd.key]
        elif rnd.marker is not None or not rnd.flushed_once:
            # left by a previous daemon, or the round is open again
            fsio.remove_file(self.dump_root, base + (MARKER,))
            rnd.marker = None
        rnd.dirty = False
        rnd.flushed_once = True

    def flush(self, idle: bool = False) -> None:
        """Appends the rows that may go, writes what changed of info/, and the
        markers of the rounds whose processes are done with them; `idle` (no
        record came since the last flush): the manifest's buffered rows too."""
        self.unwritten = {}
        self.unwritten_rows = 0
        self.unwritten_procs = set()
        for p in self.procs.values():
            self._release(p)
            self._sync(p)
        for p in self.procs.values():
            if p.info_dirty:
                self._flush_info(p)
        for rnd in list(self.rounds.values()):
            try:
                self._flush_round(rnd)
            except Exception as exc:  # one round must not stop the others or the daemon
                self._problem("round", f"cannot build round {'/'.join(rnd.key)}: "
                              f"{type(exc).__name__}: {exc} (`msprobe-atb rebuild` retries)")
        self._flush_manifest(idle)
        self.incidents.flush()
        self.said_done = 0

    def _flush_manifest(self, idle: bool) -> None:
        """The manifest rows of the rows appended: a part of each process's when
        the manifest says they are worth one, or nothing new comes (`idle`)."""
        now = time.monotonic()
        for p in self.procs.values():
            rows = p.ingest.manifest_rows()
            if not rows:
                p.manifest_since = None
                continue
            if p.manifest_since is None:
                p.manifest_since = now
            if idle or self.manifest.due(rows, now - p.manifest_since):
                self.manifest.write(p.ingest.manifest_frame())
                p.manifest_since = None

    def finish(self) -> None:
        """The last flush of a builder: the manifest's rows all in its files."""
        self.flush(idle=True)

    def round_count(self) -> int:
        """Rounds built, those let go of included."""
        return len(self.rounds) + len(self.evicted)

    def pending_markers(self) -> int:
        return sum(1 for r in self.rounds.values() if r.marker is None)
