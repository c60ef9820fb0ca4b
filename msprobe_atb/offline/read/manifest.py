"""Reading the Parquet manifest (tree/manifest.py) as the offline tools' tensor table.

A round is taken from the manifest when the manifest holds all of its rows: for a
manifest built from the record logs, as many rows as the round's
ROUND_COMPLETE.json counts (a round still running, or reopened, is read from its
CSVs instead); for one made by `msprobe-atb index`, every round it lists. A
statistic.csv changed after the manifest was last written (edited by hand, or
copied in) wins over it.

The manifest is data, and is not trusted further than that: only the parts it
owns are read, within row bounds (manifest_parts.py); a process with a text cell
longer than MAX_CELL_BYTES is not read; a round with a row whose `path` leaves the
dump root (confine.py) is read from its CSVs instead. Each is named in problems.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from msprobe_atb.tree.datafile import read_small
from msprobe_atb.tree.manifest import META, manifest_dir

from .confine import Confinement
from .counts import count_problem
from .layout import DumpLayout, RoundDir
from .manifest_parts import owned_parts, wrong_types
from .read_errors import read_errors

# The record's `file` vocabulary of the tensor table, from the manifest's status.
TABLE_STATUS = {"written": "bin"}  # "linked", "stub", ... are the same words
# The longest text cell a manifest may hold: a path is at most PATH_MAX (4096)
# bytes, and every other text cell is shorter than the path of its tensor.
MAX_CELL_BYTES = 4096
TABLE_COLUMNS = ["round", "round_seq", "seq", "op_id", "op_name", "op_type", "stage", "io",
                 "index", "dtype", "format", "shape", "count", "max", "min", "mean", "norm",
                 "nan", "pinf", "ninf", "zero", "stat_step", "path", "status", "note"]


def part_files(dump_root: Path) -> list[str]:
    d = manifest_dir(dump_root)
    return sorted(str(p) for p in d.glob("host=*/device=*/pid=*/part-*.parquet"))


def meta(dump_root: Path) -> dict:
    f = manifest_dir(dump_root) / META
    if f.parent.is_symlink() or f.is_symlink():  # another dump's (manifest_parts.py)
        return {}
    try:
        m = json.loads(read_small(f, "a manifest's meta"))
        return m if isinstance(m, dict) else {}
    except (OSError, ValueError):
        return {}


def scan(files: list[str]) -> pl.LazyFrame:
    """The manifest files as one frame, the partition columns typed."""
    return pl.scan_parquet(files, hive_partitioning=True, hive_schema={
        "host": pl.Utf8, "device": pl.Int64, "pid": pl.Int64})


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _marker_rows(rd: RoundDir) -> int | None:
    try:
        return int(json.loads(read_small(rd.path / "ROUND_COMPLETE.json", "a round marker"))
                   ["rows"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _refuse_rounds(bad: pl.DataFrame, root: Path, dp: str, problems: list[str]) -> set[int]:
    """The rounds of `bad` (rows with a `_why`), each named once in problems: it is
    read from its CSVs instead."""
    for (r,), rows in bad.group_by("round", maintain_order=True):
        problems.append(f"{manifest_dir(root)}: {rows.height} row(s) of process {dp} round {r} "
                        f"refused: {rows.get_column('_why')[0]}; that round is read from its "
                        "CSVs")
    return set(bad.get_column("round").to_list())


def _confined(df: pl.DataFrame, root: Path, dp: str,
              problems: list[str]) -> tuple[pl.DataFrame, set[int]]:
    """The rows with their `path` made absolute (confine.py), and the rounds
    holding a row whose path leaves the root (each named in problems)."""
    box = Confinement(root)
    full = box.confine(str(root) + "/" + df.get_column("path"))
    bad = df.with_columns(full.alias("_full")).filter(
        pl.col("path").is_not_null() & pl.col("_full").is_null())
    bad = bad.with_columns(pl.Series("_why", [box.refusal(p).removeprefix("refused: ")
                                              for p in bad.get_column("path")], pl.Utf8))
    return df.with_columns(full.alias("path")), _refuse_rounds(bad, root, dp, problems)


def _miscounted(df: pl.DataFrame, root: Path, dp: str, problems: list[str]) -> set[int]:
    """The rounds holding a row whose counts are out of range (counts.py), each
    named in problems."""
    bad = df.with_columns(count_problem().alias("_why")).filter(pl.col("_why").is_not_null())
    return _refuse_rounds(bad, root, dp, problems)


def _too_long(df: pl.DataFrame) -> str | None:
    """The first text column holding a cell longer than MAX_CELL_BYTES."""
    longest = df.select(pl.col(pl.Utf8).str.len_bytes().max()).row(0, named=True)
    return next((c for c, n in longest.items() if n is not None and n > MAX_CELL_BYTES), None)


def read(layout: DumpLayout, problems: list[str]) -> tuple[pl.DataFrame | None, set[str]]:
    """(the table rows of the rounds the manifest covers, those round dirs)."""
    if layout.root is None:
        return None, set()
    files = owned_parts(layout.root, problems)
    if not files:
        return None, set()
    from_index = meta(layout.root).get("made_by") == "index"
    data = str(layout.root / "data")
    # Per process, in the tables' order (by "{dev}_{pid}"); a process's file names
    # sort as its rows were written, in execution order.
    by_proc: dict[str, list[str]] = {}
    for f in files:
        dev, pid = (seg.partition("=")[2] for seg in Path(f).parts[-3:-1])
        by_proc.setdefault(f"{dev}_{pid}", []).append(f)
    procs = {}
    for dp, fs in sorted(by_proc.items()):
        try:
            df = pl.read_parquet(fs, columns=TABLE_COLUMNS, glob=False)
        except read_errors() as e:
            problems.append(f"{Path(fs[0]).parent}: unreadable manifest "
                            f"({str(e).splitlines()[0]}); the CSVs are read instead")
            continue
        if (why := wrong_types(df)) is not None:
            problems.append(f"{Path(fs[0]).parent}: {why}; not read, the CSVs are read instead")
            continue
        if (col := _too_long(df)) is not None:
            problems.append(f"{Path(fs[0]).parent}: a {col!r} cell longer than "
                            f"{MAX_CELL_BYTES} bytes; not read, the CSVs are read instead")
            continue
        procs[dp] = df
    newest = max(_mtime(Path(f)) for f in files)
    wanted = {(rd.dev_pid, rd.round): rd for rd in layout.rounds}
    frames, used = [], set()
    for dp, df in procs.items():
        df, refused = _confined(df, layout.root, dp, problems)
        refused |= _miscounted(df, layout.root, dp, problems)
        counts = dict(df.get_column("round").value_counts().iter_rows())
        use = [r for r, n in counts.items() if (rd := wanted.get((dp, r))) is not None
               and r not in refused
               and _mtime(rd.csv) <= newest and (from_index or _marker_rows(rd) == n)]
        if len(use) < len(counts):
            df = df.filter(pl.col("round").is_in(use))
        if df.height:
            dirs = {r: f"{data}/{dp}/{r}" for r in use}
            used.update(dirs.values())
            frames.append(df.with_columns(
                pl.lit(dp).alias("dev_pid"),
                pl.col("round").replace_strict(dirs, return_dtype=pl.Utf8).alias("round_dir")))
    if not frames:
        return None, set()
    df = pl.concat(frames).select(
        "dev_pid", "round", pl.coalesce("seq", "round_seq").alias("seq"), "op_id", "op_name",
        "op_type", "io", "index", "dtype", "format", "shape", "count", "max", "min", "mean",
        "norm", "nan", "pinf", "ninf", "zero", "stat_step",
        pl.col("status").replace(TABLE_STATUS), "note", "path",
        "round_dir", pl.lit("manifest").alias("source"),
        pl.col("seq").is_not_null().alias("seq_exact"), "stage",
    )
    return df, used
