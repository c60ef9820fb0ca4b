"""Reading the Parquet manifest (tree/manifest.py) as the offline tools' tensor table.

A round is taken from the manifest when the manifest holds all of its rows: for a
manifest built from the record logs, as many rows as the round's
ROUND_COMPLETE.json counts (a round still running, or reopened, is read from its
CSVs instead); for one made by `msprobe-atb index`, every round it lists. A
statistic.csv changed after the manifest was last written (edited by hand, or
copied in) wins over it.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from msprobe_atb.tree.manifest import META, manifest_dir

from .layout import DumpLayout, RoundDir

# The record's `file` vocabulary of the tensor table, from the manifest's status.
TABLE_STATUS = {"written": "bin"}  # "linked", "stub", ... are the same words
TABLE_COLUMNS = ["round", "round_seq", "seq", "op_id", "op_name", "op_type", "stage", "io",
                 "index", "dtype", "format", "shape", "count", "max", "min", "mean", "norm",
                 "nan", "pinf", "ninf", "zero", "stat_step", "path", "status", "note"]


def part_files(dump_root: Path) -> list[str]:
    d = manifest_dir(dump_root)
    return sorted(str(p) for p in d.glob("host=*/device=*/pid=*/part-*.parquet"))


def meta(dump_root: Path) -> dict:
    try:
        m = json.loads((manifest_dir(dump_root) / META).read_text())
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
        return int(json.loads((rd.path / "ROUND_COMPLETE.json").read_text())["rows"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read(layout: DumpLayout, problems: list[str]) -> tuple[pl.DataFrame | None, set[str]]:
    """(the table rows of the rounds the manifest covers, those round dirs)."""
    if layout.root is None:
        return None, set()
    files = part_files(layout.root)
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
    try:
        procs = {dp: pl.read_parquet(fs, columns=TABLE_COLUMNS)
                 for dp, fs in sorted(by_proc.items())}
    except (pl.exceptions.PolarsError, OSError) as e:
        problems.append(f"{manifest_dir(layout.root)}: unreadable manifest "
                        f"({str(e).splitlines()[0]}); the CSVs are read instead")
        return None, set()
    newest = max(_mtime(Path(f)) for f in files)
    wanted = {(rd.dev_pid, rd.round): rd for rd in layout.rounds}
    frames, used = [], set()
    for dp, df in procs.items():
        counts = dict(df.get_column("round").value_counts().iter_rows())
        use = [r for r, n in counts.items() if (rd := wanted.get((dp, r))) is not None
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
        pl.col("status").replace(TABLE_STATUS), "note",
        (pl.lit(str(layout.root) + "/") + pl.col("path")).alias("path"),
        "round_dir", pl.lit("manifest").alias("source"),
        pl.col("seq").is_not_null().alias("seq_exact"), "stage",
    )
    return df, used
