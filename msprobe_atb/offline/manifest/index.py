"""`msprobe-atb index DIR...`: a Parquet manifest for dumps that lack one (older
dumps, copies without record logs, msProbe's own dumps), from their tables
(statistic.csv, statistic_extra.csv when present, and the .bin headers).

The rows have the columns of the live manifest (tree/manifest.py). What a dump
without record logs cannot say is left empty: `start_ns`, and `seq` (the
process-wide sequence) where the table has none: `round_seq` then follows the
row order of each round's CSV (or the file times); `bytes`, `time`, stubs and
their targets come from the .bin headers and file times.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import polars as pl

from msprobe_atb.tree.manifest import ManifestWriter, polars_schema
from msprobe_atb.tree.names import os_path, text_of

from ..read.binfile import BinFileError, read_header, resolve
from ..read.layout import DumpNotFound, find_layout
from ..read.manifest import part_files
from ..read.table import open_dump

TO_STATUS = {"bin": "written", "link": "linked"}


def _file_facts(path: str | None, root: Path) -> tuple[int | None, int | None, str | None]:
    """(the tensor's data bytes, mtime ns, a stub's target relative to the dump
    root) of a .bin, from its header (a stub's: its target's); Nones if it cannot
    be read."""
    if not path:
        return None, None, None
    path = os_path(path)  # the table's text form: the file's own name
    try:
        hdr = read_header(path)
        mtime = os.stat(path).st_mtime_ns
    except (BinFileError, OSError):
        return None, None, None
    alias, length = None, hdr.length
    if hdr.is_stub and hdr.alias:
        alias = text_of(os.path.relpath(
            os.path.normpath(os.path.join(os.path.dirname(path), hdr.alias)), root))
        try:
            length = resolve(path).length
        except BinFileError:  # not saved (filter_level 2 kernel stub), or a bad target
            length = None
    return length, mtime, alias


def manifest_frame(df: pl.DataFrame, root: Path,
                   progress: Callable[[int], None] | None = None) -> pl.DataFrame:
    """The offline table (read/table.py) as manifest rows (COLUMNS + device, pid)."""
    facts = []
    for p in df.get_column("path").to_list():
        facts.append(_file_facts(p, root))
        if progress:
            progress(1)
    prefix = text_of(str(root)) + "/"
    path = pl.col("path")
    alias = pl.Series("alias", [a for _, _, a in facts], pl.Utf8)
    out = df.with_columns(
        pl.Series("bytes", [b for b, _, _ in facts], pl.Int64),
        pl.Series("time", [t for _, t, _ in facts], pl.Int64), alias,
        # msProbe's CSVs do not say which files are dedup stubs; their headers do
        pl.when(alias.is_not_null() & (pl.col("status") == "bin")).then(pl.lit("stub"))
        .otherwise(pl.col("status")).alias("status"),
    ).select(
        pl.col("device").cast(pl.Int64), pl.col("pid").cast(pl.Int64), "round",
        (pl.col("seq").rank("ordinal").over("dev_pid", "round") - 1).cast(pl.Int64)
        .alias("round_seq"),
        pl.when(pl.col("seq_exact")).then(pl.col("seq")).alias("seq"),
        pl.lit(None, pl.Int64).alias("start_ns"), "op_id", "op_name", "op_type",
        "stage", "io",
        "index", "dtype", "format", "shape",
        "count", "max", "min", "mean", "norm", "nan", "pinf", "ninf", "zero", "stat_step",
        pl.when(path.str.starts_with(prefix)).then(path.str.slice(len(prefix)))
        .otherwise(path).alias("path"),
        "bytes", pl.lit(None, pl.Utf8).alias("hash"), "alias",
        pl.col("status").replace(TO_STATUS).alias("status"), "note",
        pl.col("time").cast(pl.Datetime("ns", "UTC")),
    )
    return out.cast({k: v for k, v in polars_schema().items() if k in out.columns})


def index_dump(path: str | Path, *, host: str | None = None, force: bool = False,
               progress: Callable[[int], None] | None = None) -> tuple[Path, int, int]:
    """Writes <dump root>/manifest; returns (dump root, rows, files)."""
    layout = find_layout(path)
    root = layout.root
    if root is None or layout.dev_pids is not None:
        raise DumpNotFound(f"{layout.given}: give a whole dump (the output root or its "
                           "atb_dump_data directory); the manifest covers a dump root")
    if part_files(root) and not force:
        raise FileExistsError(f"{root} already has a manifest (use --force to replace it; "
                              "a dump with record logs is better served by "
                              "`msprobe-atb rebuild`)")
    writer = ManifestWriter(root, "index")  # keeps the host an earlier manifest named
    if host:
        writer.host = host
    if force:
        import shutil

        shutil.rmtree(root / "manifest", ignore_errors=True)
    dump = open_dump(root)
    df = dump.tensors.filter(pl.col("device").is_not_null() & pl.col("pid").is_not_null())
    frame = manifest_frame(df, root, progress)
    files = writer.write_table(frame)
    return root, frame.height, files
