"""Records into the tree builder: each process's record-log lines go to its ingest
kernel (tree/ingest.py), which makes the rows of the tensor records it reads; each
line it leaves is parsed and read here, the Python path beside the kernel: a tensor
record's rows made by the reference (tree/csvfmt.py, tree/manifest.py), and the
other kinds (params, graphs, topology, overflows, attach, incidents, a round's end,
the exit record with the tensors that never got a record of their own).
"""

from __future__ import annotations

from pathlib import Path

from msprobe_atb.tree.csvfmt import extra_row, parse_tensor_path, statistic_row
from msprobe_atb.tree.heldrounds import HeldRounds, Proc, ProcOracle, Round
from msprobe_atb.tree.incidents import IncidentBook
from msprobe_atb.tree.ingest import IngestMemoryError, key_bytes, manifest_cells
from msprobe_atb.tree.manifest import COLUMN_NAMES, record_row
from msprobe_atb.tree.names import raw_bytes
from msprobe_atb.tree.records import ProcKey, RoundKey, record_int


def _named_round(key: object) -> RoundKey | None:
    """The round an exit record's `unrecorded` key names ("" names none)."""
    parts = [x for x in str(key).split("/") if x]
    return (parts[0], parts[1]) if len(parts) == 2 else None


class RecordFeed(HeldRounds):
    """The rounds held, fed with a process's record lines (`feed`) or with records
    the log does not hold (`add`)."""

    def __init__(self, dump_root: Path, oracle: ProcOracle):
        super().__init__(dump_root, oracle)
        self.incidents = IncidentBook(self.dump_root)
        self.exits_seen = 0  # exit records fed: the daemon flushes at once after one

    # ---- feeding ----
    def feed(self, key: ProcKey, data: bytes, offset: int, line: int, parse) -> int:
        """Reads `data`, whole lines of the process's log from byte `offset` and
        line `line` on; the kernel takes the lines it can, `parse(line)` makes a
        record of each other one (None: none) for the Python path. Returns the
        lines read."""
        p = self.proc(key)
        pos, first = 0, line
        while pos < len(data):
            try:
                taken, lines, stopped = p.ingest.feed(data, pos, offset + pos, line)
            except IngestMemoryError as exc:
                self._problem("memory", f"pid {key.pid}: {exc}; reading its records in Python")
                taken, lines, stopped = 0, 0, True
            line += lines
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
        return line - first

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
                p.ingest.param(key_bytes(tp.round_key), record_int(rec.get("seq"), None),
                               record_int(rec.get("t"), 0), rec.get("file") == "lost")
        elif kind == "graph":
            p.info.add_graph(rec, self._problem)
        elif kind == "topo":
            p.info.add_topo(rec, self._problem)
        elif kind == "overflow":
            p.info.add_overflow(rec)
        elif kind == "overflow_output":
            p.info.add_overflow_output(rec)
        elif kind == "attach":
            if isinstance(rec.get("output"), str) and rec["output"]:
                p.output_root = rec["output"]
                p.ingest.set_root(raw_bytes(rec["output"].rstrip("/")))
        elif kind == "exit":
            p.exited = True
            self.exits_seen += 1
            self._add_unrecorded(p, rec)
        elif kind in ("incident", "incident_tensor", "flush"):
            self.incidents.add_record(p.key, rec)
        elif kind == "cut":
            parts = str(rec.get("round", "")).split("/")
            if len(parts) == 2:
                p.cuts[parts[1]] = str(rec.get("why", ""))
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
        stat = raw_bytes(statistic_row(rec, tp, root))
        extra = raw_bytes(extra_row(rec, tp, root))
        man = manifest_cells(dict(zip(COLUMN_NAMES, record_row(rec, tp, p.key.start_ns))))
        if rec.get("file") == "stub" and str(rec.get("note", "")).startswith("hard link refused"):
            self._problem("link-refused", f"pid {p.key.pid}: {path}: {rec['note']} (the file "
                          "system of the dump refuses hard links; msProbe's tools cannot read "
                          "such stubs)")
        p.ingest.add_row(key_bytes(tp.round_key), record_int(rec.get("seq"), None),
                         record_int(rec.get("t"), 0), offset, line, rec.get("file") == "lost", stat,
                         extra, man)

    def _counted_in(self, p: Proc, round_key: RoundKey, rec: dict) -> Round:
        """The round a loss record `rec` of process p counts in, marked as touched."""
        rnd = self._round(round_key)
        rnd.last_t = max(rnd.last_t, record_int(rec.get("t"), 0))
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
        params = record_int(rec.get("params_unrecorded"), 0)
        if params > 0:  # their rounds are not known: the process's last one
            named = [k for k in map(_named_round, unrecorded) if k]
            round_key = p.last_round or (named[-1] if named else None)
            if round_key is None:
                self._problem("params", f"pid {p.key.pid}: {params} op_param.json files were "
                              "not written, in rounds its record log does not name")
            else:
                self._counted_in(p, round_key, rec).params_lost += params
        for key, n in unrecorded.items():
            n = record_int(n, 0)
            round_key = _named_round(key) or p.last_round
            if n <= 0 or round_key is None:
                continue
            rnd = self._counted_in(p, round_key, rec)
            rnd.lost += n
            rnd.unlisted += n
