"""The Parquet manifest: one row per tensor record, beside the CSVs.

Layout (hive-style, so DuckDB, polars, Spark and Trino read it as one dataset):

    <dump root>/manifest/host=<host>/device=<dev>/pid=<pid>/part-<n>-L<level>.parquet
    <dump root>/manifest/_manifest.json     who made it, for which host (readers skip `_` files)

A row is written when it is appended to its round's statistic.csv (rows go in in
sequence order, so `round_seq`, the position within the round, is its line
there); a round reopened by a later request adds its new rows after the
earlier ones. The ingest kernel keeps a process's rows in columns until the tree
builder takes them as a frame worth a file (tree/ingest.py). The partition
columns live in the directory names only. `seq` is the process's
SaveTensor sequence (null in a manifest that `index` made from a dump without
one). `stat_step` is the rounding step of the statistics: 0 (full precision)
from the records, 1e-6 for msProbe's 6-decimal CSVs. `bytes` is the tensor's
data size (a stub's data is in its alias' file). Cells that statistic.csv
also has are spelt as there (`index` "0" or "0_query", `shape` "4x64", dtype and
format names), so the two read alike.

File count and memory: the rows not in a file yet wait in the ingest kernel,
PART_ROWS of them at most for all processes together (~30 MB): then, or when
they are PART_AGE_S old, or the builder is idle or finishes, each process's
rows become a file (with 8 processes at full rate, ~8,000 rows); whenever FANIN files
of one level pile up they are merged into one file of the next level (named after
the first of them, so the names sort as the rows were emitted, i.e. in execution
order), until a file holds BIG_ROWS rows. A part is encoded where it is taken
(ManifestWriter.encode, on the builder's thread), so what waits for a slow disk
is its file's bytes, not its frame. A merge copies the files' row groups as
they are (tree/parquet_concat.py), so a big file is made of its parts' row
groups. A service running 100,000 rounds therefore keeps O(FANIN x levels) small
files per process plus one file per BIG_ROWS rows, never a file per tensor or per
round.

Why polars writes it (and not pyarrow's ParquetWriter, which appends row groups
to an open file): a Parquet file is readable only once its footer is written, so a
live manifest must consist of closed files anyway; polars is already the offline
tools' engine, writes each file from one typed frame in native code, and brings
no second Arrow stack into the daemon.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from msprobe_atb.tree import fsio
from msprobe_atb.tree.csvfmt import TensorPath
from msprobe_atb.tree.parquet_concat import NotConcatenable, concatenate
from msprobe_atb.tree.records import record_float
from msprobe_atb.tree.vocab import dtype_name, format_name

log = logging.getLogger("msprobe_atb")

DIR = "manifest"
META = "_manifest.json"
VERSION = 1
FANIN = 16
BIG_ROWS = 1_000_000
PART_ROWS = 65_536
PART_AGE_S = 2.0
MERGE_ROW_GROUP = 65_536  # rows a decoding merge holds at once (its output's row groups)
HOST_ENV = "MSPROBE_ATB_HOST"

# The record's `file` -> the manifest's status (unknown values are kept as they are).
STATUS = {"bin": "written", "link": "linked", "linked": "linked", "stub": "stub",
          "lost": "lost", "none": "none"}
STAGES = ("before", "after")

# Column order of a row tuple; types as polars names (resolved when writing).
COLUMNS: tuple[tuple[str, str], ...] = (
    ("round", "Int64"), ("round_seq", "Int64"), ("seq", "Int64"), ("start_ns", "Int64"),
    ("op_id", "Utf8"), ("op_name", "Utf8"), ("op_type", "Utf8"), ("stage", "Utf8"),
    ("io", "Utf8"), ("index", "Utf8"),
    ("dtype", "Utf8"), ("format", "Utf8"), ("shape", "Utf8"), ("count", "Int64"),
    ("max", "Float64"), ("min", "Float64"), ("mean", "Float64"), ("norm", "Float64"),
    ("nan", "Int64"), ("pinf", "Int64"), ("ninf", "Int64"), ("zero", "Int64"),
    ("stat_step", "Float64"),
    ("path", "Utf8"), ("bytes", "Int64"), ("hash", "Utf8"), ("alias", "Utf8"),
    ("status", "Utf8"), ("note", "Utf8"), ("time", "Datetime(ns, UTC)"),
)
COLUMN_NAMES = tuple(c for c, _ in COLUMNS)
PARTITION_TYPES = {"host": "VARCHAR", "device": "INTEGER", "pid": "BIGINT"}

Partition = tuple[int, int]  # (device, pid)


def preload() -> None:
    """Imports polars on a thread of its own (once): a builder calls it at its
    first manifest rows, so that their first part, PART_AGE_S later, does not
    stop the build for the import (0.15-0.3 s here, more on a cold cache), and
    the daemon's memory takes its one step while the first rounds are built."""
    global _preloading
    if _preloading is None:
        _preloading = threading.Thread(target=_import_polars, name="polars-import", daemon=True)
        _preloading.start()


def _import_polars() -> None:
    import polars  # noqa: F401


_preloading: threading.Thread | None = None


def polars_schema() -> dict[str, Any]:
    import polars as pl

    types = {"Int64": pl.Int64, "Utf8": pl.Utf8, "Float64": pl.Float64,
             "Datetime(ns, UTC)": pl.Datetime("ns", "UTC")}
    return {c: types[t] for c, t in COLUMNS}


def manifest_dir(dump_root: Path) -> Path:
    return Path(dump_root) / DIR


def host_name(dump_root: Path) -> str:
    """$MSPROBE_ATB_HOST; else the host an existing manifest names (a dump copied
    to another machine and rebuilt there keeps its origin); else this machine's."""
    env = os.environ.get(HOST_ENV, "").strip()
    if env:
        return env
    try:
        meta = json.loads((manifest_dir(dump_root) / META).read_text())
        if isinstance(meta.get("host"), str) and meta["host"]:
            return meta["host"]
    except (OSError, ValueError, AttributeError):
        pass
    return socket.gethostname() or "localhost"


def _float(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (list, tuple)) and len(v) == 2:
        # complex64's [re, im] (statistic.csv keeps the pair): its modulus |z|, as
        # the offline tools' statistics of a complex tensor read from its .bin
        re, im = _float(v[0]), _float(v[1])
        return None if re is None or im is None else math.hypot(re, im)
    return record_float(v)


def _count(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def record_row(rec: dict, tp: TensorPath, start_ns: int) -> tuple:
    """One manifest row (COLUMNS order, round_seq still unset) from a tensor record;
    its names as the record has them (the text form is made for the whole frame)."""
    rel = str(rec.get("path", "")).strip("/")
    segs = rel.split("/")
    stats = rec.get("stats") if isinstance(rec.get("stats"), dict) else {}
    file = str(rec.get("file", ""))
    status = STATUS.get(file, file)
    alias = rec["alias"] if isinstance(rec.get("alias"), str) else None
    alias_rel = (os.path.normpath(os.path.join("data", os.path.dirname(rel), alias))
                 if isinstance(alias, str) and alias else None)
    if alias_rel is not None and not alias_rel.startswith("data/"):  # leaves data/
        alias_rel = None
    t = _count(rec.get("t"))
    names = tp.names
    return (
        int(tp.exec_count) if tp.exec_count.isdigit() else -1, None, _count(rec.get("seq")),
        start_ns, "_".join(tp.ids), "/".join(names),
        names[-1] if names else "",
        segs[-2] if len(segs) > 1 and segs[-2] in STAGES else None,
        tp.io, tp.index, dtype_name(rec.get("dtype")), format_name(rec.get("format")),
        str(rec.get("dims", "")).replace(",", "x"),
        _count(stats.get("count")),
        *(_float(stats.get(k)) for k in ("max", "min", "mean", "norm")),
        *(_count(stats.get(k)) for k in ("nan", "pinf", "ninf", "zero")), 0.0,
        None if status == "none" else f"data/{rel}", _count(rec.get("size")),
        rec["hash"] if isinstance(rec.get("hash"), str) else None, alias_rel,
        status, str(rec["note"]) if rec.get("note") else None,
        t,
    )


def partition_of(dev_pid: str) -> Partition | None:
    dev, _, pid = dev_pid.partition("_")
    try:
        return int(dev), int(pid)
    except ValueError:
        return None


@dataclass
class _Part:
    name: str
    level: int
    rows: int
    first: int  # the emission number of its first batch


@dataclass
class Encoded:
    """A process partition's rows as the bytes of their Parquet file, made on the
    builder's thread: what waits for the disk is ~15 bytes a row, not the
    frame's ~200."""
    part: Partition
    data: bytes
    rows: int

    @classmethod
    def of(cls, part: Partition, df) -> Encoded:
        buf = io.BytesIO()
        df.write_parquet(buf, compression="zstd", statistics=True)
        return cls(part, buf.getvalue(), df.height)


@dataclass
class _Partition:
    parts: list[_Part] = field(default_factory=list)
    next_n: int = 0
    unwritten: list[Encoded] = field(default_factory=list)  # in order; a failed write's stay
    replaced: bool = False  # what an earlier writer left of it is removed


class ManifestWriter:
    """Buffers rows per process partition, writes and compacts the partition
    files. Problems are logged, never raised: the manifest is an addition and
    must not stop the CSVs."""

    def __init__(self, dump_root: Path, made_by: str):
        self.dump_root = Path(dump_root)
        self.made_by = made_by
        self.host = host_name(self.dump_root)
        self.partitions: dict[Partition, _Partition] = {}
        self._started = False
        self.failed = 0
        self.last_error = ""  # why the last flush failed ("" once one succeeds)

    def _host_dir(self) -> tuple[str, ...]:
        return (DIR, f"host={self.host}")

    def _pdir(self, part: Partition) -> tuple[str, ...]:
        return (*self._host_dir(), f"device={part[0]}", f"pid={part[1]}")

    def _start(self) -> None:
        """This writer derives its host's manifest from the record logs, as the
        CSVs are, one process partition at a time: a partition is replaced when
        this writer first writes to it (_replace), so a restarted daemon's
        manifest keeps the earlier daemon's rows of a process until it has read
        that process's log again, and keeps for good the partitions it has no
        log for (like the CSVs of those rounds: an `index`ed dump in the same
        root, a process whose record log was removed)."""
        self._started = True
        meta = {"version": VERSION, "made_by": self.made_by, "host": self.host,
                "partitions": ["host", "device", "pid"], "types": PARTITION_TYPES}
        fsio.write_files(self.dump_root, [((DIR, META), json.dumps(meta, indent=1).encode())])

    @staticmethod
    def due(rows: int, age_s: float) -> bool:
        """A process's rows are worth a file: PART_ROWS of them, or PART_AGE_S old."""
        return rows >= PART_ROWS or age_s >= PART_AGE_S

    @staticmethod
    def encode(frame) -> list[Encoded]:
        """A frame of rows (COLUMNS and `_part`, "{dev}_{pid}") as one file's bytes
        per process partition; rows of a `_part` that names no partition have
        none. Touches no writer state, so it runs on the builder's thread."""
        parts = frame.get_column("_part")
        # a process's rows are of one partition but for odd paths ("-1_4711")
        if parts.len() and (parts == parts[0]).all():
            groups = {(parts[0],): frame}
        else:
            groups = frame.partition_by("_part", as_dict=True)
        out = []
        for (dev_pid,), rows in groups.items():
            part = partition_of(str(dev_pid))
            if part is not None:
                out.append(Encoded.of(part, rows.drop("_part")))
        return out

    def write(self, encoded: list[Encoded]) -> None:
        """Writes each encoded part as a new file of its partition, after what a
        failed write left."""
        try:
            if not self._started:
                self._start()
            for e in encoded:
                self.partitions.setdefault(e.part, _Partition()).unwritten.append(e)
            for part, state in self.partitions.items():
                while state.unwritten:
                    self._write_part(part, state, state.unwritten[0], 0)
                    state.unwritten.pop(0)
                self._compact(part, state)
            self.last_error = ""
        except Exception as exc:  # the manifest must never stop the daemon or the CSVs
            self.failed += 1
            self.last_error = exc.strerror if isinstance(exc, OSError) and exc.strerror \
                else f"{type(exc).__name__}: {exc}"
            if self.failed <= 5:
                log.warning("cannot write the manifest under %s: %s: %s (the CSVs are "
                            "unaffected; `msprobe-atb rebuild` recreates it)",
                            manifest_dir(self.dump_root), type(exc).__name__, exc)

    def unwritten_rows(self) -> int:
        """Rows not in a manifest file because a write failed."""
        return sum(e.rows for p in self.partitions.values() for e in p.unwritten) \
            if self.last_error else 0

    def _replace(self, part: Partition, state: _Partition) -> None:
        if not state.replaced:
            import shutil

            shutil.rmtree(self.dump_root.joinpath(*self._pdir(part)), ignore_errors=True)
            state.replaced = True

    def _write_part(self, part: Partition, state: _Partition, e: Encoded, level: int) -> _Part:
        self._replace(part, state)
        p = _Part(f"part-{state.next_n:08d}-L{level}.parquet", level, e.rows, state.next_n)
        state.next_n += 1
        fsio.write_files(self.dump_root, [((*self._pdir(part), p.name), e.data)], durable=True)
        state.parts.append(p)
        return p

    def _merge(self, part: Partition, group: list[_Part]) -> _Part:
        """One file of the next level from `group`: their row groups copied as
        they are (tree/parquet_concat.py); files it cannot put together so (of
        an earlier version's schema) are merged by polars, streamed."""
        base = self.dump_root.joinpath(*self._pdir(part))
        first = group[0]
        new = _Part(f"part-{first.first:08d}-L{first.level + 1}.parquet", first.level + 1,
                    sum(p.rows for p in group), first.first)
        paths = [base / p.name for p in group]
        rel = (*self._pdir(part), new.name)

        def copy(f) -> None:
            with contextlib.ExitStack() as stack:
                concatenate([stack.enter_context(open(p, "rb")) for p in paths], f)

        try:
            fsio.write_streamed(self.dump_root, rel, copy, durable=True)
        except NotConcatenable as exc:
            import polars as pl

            log.info("merging %s by decoding it: %s", base, exc)
            lazy = pl.scan_parquet(paths)
            fsio.write_streamed(self.dump_root, rel, lambda f: lazy.sink_parquet(
                f, compression="zstd", statistics=True, row_group_size=MERGE_ROW_GROUP),
                durable=True)
        return new

    def _compact(self, part: Partition, state: _Partition) -> None:
        while True:
            levels: dict[int, list[_Part]] = {}
            for p in state.parts:
                if p.rows < BIG_ROWS:
                    levels.setdefault(p.level, []).append(p)
            full = next((ps for _, ps in sorted(levels.items()) if len(ps) >= FANIN), None)
            if full is None:
                return
            group = full[:FANIN]
            # the merged file goes in before its inputs go, so a reader listing the
            # directory in between may count rows twice but never miss one
            new = self._merge(part, group)
            for p in group:
                fsio.remove_file(self.dump_root, (*self._pdir(part), p.name))
                state.parts.remove(p)
            state.parts.append(new)
            state.parts.sort(key=lambda p: p.first)

    def write_table(self, df) -> int:
        """Writes a whole manifest at once (`index`): a frame of COLUMNS plus
        `device` and `pid`, split into files of at most BIG_ROWS rows per process.
        Returns the number of files."""
        self._start()
        n = 0
        for (dev, pid), rows in sorted(df.partition_by("device", "pid", as_dict=True).items()):
            state = self.partitions.setdefault((dev, pid), _Partition())
            rows = rows.select(COLUMN_NAMES)
            for start in range(0, rows.height, BIG_ROWS):
                self._write_part((dev, pid), state,
                                 Encoded.of((dev, pid), rows.slice(start, BIG_ROWS)), 0)
                n += 1
        return n
