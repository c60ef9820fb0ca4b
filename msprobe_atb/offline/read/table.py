"""A dump as one table of tensors (a polars DataFrame), in execution order.

Sources, per round dir: `statistic.csv` (msProbe's 15 columns) joined row by row
with `statistic_extra.csv` (sequence, NaN/Inf/zero counts, data status, and the
stage when a dump saves all four stages). A round dir without a readable CSV is
rebuilt from its `.bin` files, computing the statistics from the data.

msProbe's own dumps read too: no `statistic_extra.csv`, rows in thread-pool
order, statistics with 6 decimals (`stat_step` 1e-6 says so, for compare's
tolerances), rows missing for tensors with `-inf`/`-nan` statistics or lost to
its racing CSV writer (those tensors are read from their `.bin` files, said
once in `problems`). Without a record sequence, rows are put in ATB's execution
order, rebuilt from the op ids: an op's `before` tensors, its children, then
its `after` tensors.

Why polars: it reads many CSVs in one multithreaded, lazily planned scan
(`scan_csv` over the file list), keeps columns typed and compact in Arrow memory,
and does the sort/group/filter work of `stats` and `compare` in native code, so a
dump of millions of rows loads in seconds without pandas' per-object overhead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from msprobe_atb.tree.datafile import not_regular
from msprobe_atb.tree.names import BACKSLASH, os_path, text_of, text_of_bytes

from .binfile import BinFileError, TensorNotSaved, read_header, resolve
from .confine import Confinement, refuse_outside
from .counts import drop_miscounted
from .filestats import FileStats
from .layout import DumpLayout, RoundDir, find_layout
from .manifest import read as read_manifest
from .models import with_models
from .read_errors import read_errors

CSV_COLUMNS = [
    "Device and PID", "Execution Count", "Op Name", "Op Type", "Op Id", "Input/Output",
    "Index", "Dtype", "Format", "Shape", "Max", "Min", "Mean", "Norm", "Tensor Path",
]
EXTRA_COLUMNS = [
    "Sequence", "Op Id", "Op Name", "Input/Output", "Index", "Element Count", "NaN Count",
    "Pos Inf Count", "Neg Inf Count", "Zero Count", "Data Status", "Note",
]
SCHEMA: dict[str, pl.DataType] = {
    "dev_pid": pl.Utf8, "device": pl.Int64, "pid": pl.Int64, "round": pl.Int64,
    "seq": pl.Int64, "op_id": pl.Utf8, "op_name": pl.Utf8, "op_type": pl.Utf8,
    "layer": pl.Utf8, "io": pl.Utf8, "index": pl.Utf8, "dtype": pl.Utf8, "format": pl.Utf8,
    "shape": pl.Utf8, "count": pl.Int64, "max": pl.Float64, "min": pl.Float64,
    "mean": pl.Float64, "norm": pl.Float64, "nan": pl.Int64, "pinf": pl.Int64,
    "ninf": pl.Int64, "zero": pl.Int64, "status": pl.Utf8, "note": pl.Utf8, "path": pl.Utf8,
    "round_dir": pl.Utf8, "source": pl.Utf8, "seq_exact": pl.Boolean, "stage": pl.Utf8,
    "stat_step": pl.Float64,
}
# Data Status values whose Tensor Path is a file holding the tensor or naming it
# ("linked": a hard link to an identical earlier tensor, read like any .bin).
FILE_STATUSES = ("bin", "linked", "stub")
STAT_COLS = ("max", "min", "mean", "norm")
COUNT_COLS = ("count", "nan", "pinf", "ninf", "zero")


@dataclass
class Dump:
    """An opened dump: `tensors` (SCHEMA columns plus derived ones), the layout,
    and the problems met while reading (each naming a file and what is wrong)."""

    layout: DumpLayout
    tensors: pl.DataFrame
    problems: list[str] = field(default_factory=list)
    members: list[DumpLayout] = field(default_factory=list)  # of several roots (dumpset.py)
    # tensors whose statistics were computed from their files (the dump records none
    # for them), and the payload bytes read for them (a hard-linked file once)
    stats_from_files: int = 0
    bytes_read: int = 0

    @property
    def root(self) -> Path | None:
        return self.layout.root

    def layouts(self) -> list[DumpLayout]:
        """The layout of each dump root this one was opened from."""
        return self.members or [self.layout]

    def filter(self, **kw) -> pl.DataFrame:
        return filter_tensors(self.tensors, **kw)


def _unescape(col: str) -> pl.Expr:
    """Undo the writer's formula-injection guard (a leading ' before =+-@ tab CR)."""
    c = pl.col(col)
    return pl.when(c.str.contains(r"^'[=+\-@\t\r]")).then(c.str.slice(1)).otherwise(c)


def _scan(files: list[str], columns: list[str], problems: list[str],
          exact: bool = True) -> pl.DataFrame | None:
    """Read CSVs as text, adding `_dir` and a per-file row number `_row`. The
    header must be `columns` (or, not `exact`, hold them, in any order, among
    others). One bulk scan; on failure, file by file so one bad file is named
    and skipped."""
    if not files:
        return None

    def read(paths: list[str], data: bytes | None = None) -> pl.DataFrame:
        # Ragged rows (msProbe writes complex64 stats unquoted) keep their first
        # columns; their statistics then fail to parse and read as missing.
        if data is None:  # valid UTF-8: the cells in the text form (names.py)
            lf = pl.scan_csv(paths, infer_schema=False, include_file_paths="_file",
                             truncate_ragged_lines=True).with_columns(
                pl.all().exclude("_file").str.replace_all("\\", BACKSLASH, literal=True))
        else:  # a file holding names that are not UTF-8: already in the text form
            lf = pl.read_csv(data, infer_schema=False, truncate_ragged_lines=True).lazy() \
                .with_columns(pl.lit(paths[0]).alias("_file"))
        if not exact:
            lf = lf.select(*columns, *[c for c in ("Stage",) if c in header], "_file")
        return lf.with_columns(
            pl.col("_file").str.replace(r"/[^/]+$", "").alias("_dir"),
            pl.int_range(pl.len(), dtype=pl.Int64).over("_file").alias("_row"),
        ).collect()

    good = []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            header = fh.readline().rstrip("\r\n").split(",")
        if header != columns and (exact or not set(columns) <= set(header)):
            problems.append(f"{f}: header {header[:3]}... does not match the expected "
                            f"{len(columns)} columns ({', '.join(columns[:3])}, ...); skipped "
                            "(tensors are then read from the round's .bin files, if any)")
        else:
            good.append(f)
    try:
        return read(good) if good else None
    except read_errors():
        pass
    frames: list[pl.DataFrame] = []
    for f in good:
        try:
            frames.append(read([f]))
            continue
        except read_errors():
            pass
        try:
            frames.append(read([f], text_of_bytes(Path(f).read_bytes()).encode()))
        except read_errors() as e:
            problems.append(f"{f}: unreadable CSV ({str(e).splitlines()[0]}); "
                            "its tensors are read from the .bin files instead")
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def _csv_files(paths: list[Path], box: Confinement, problems: list[str]) -> list[str]:
    """The CSVs that exist; one that is a symbolic link is named and not read."""
    out = []
    for p in paths:
        if p.is_symlink():
            problems.append(f"{p}: a symbolic link (to {os.path.realpath(p)}), not this "
                            "round's own file; not read")
        elif p.is_file() and box.allows(p):
            out.append(str(p))
        elif os.path.lexists(p) and box.allows(p):
            problems.append(f"{p}: {not_regular(p)}; not read")
    return out


def _from_csvs(rounds: list[RoundDir], problems: list[str],
               box: Confinement) -> pl.DataFrame | None:
    main = _scan(_csv_files([r.csv for r in rounds], box, problems), CSV_COLUMNS, problems)
    if main is None or main.height == 0:
        return None
    extra = _scan(_csv_files([r.extra_csv for r in rounds], box, problems),
                  EXTRA_COLUMNS, problems, exact=False)
    tkey = ["_dir", "Op Id", "Op Name", "Input/Output", "Index"]
    if extra is not None:
        extra = extra.select(
            *tkey, pl.col("Sequence").cast(pl.Int64, strict=False).alias("seq"),
            pl.col("Element Count").cast(pl.Int64, strict=False).alias("count"),
            pl.col("NaN Count").cast(pl.Int64, strict=False).alias("nan"),
            pl.col("Pos Inf Count").cast(pl.Int64, strict=False).alias("pinf"),
            pl.col("Neg Inf Count").cast(pl.Int64, strict=False).alias("ninf"),
            pl.col("Zero Count").cast(pl.Int64, strict=False).alias("zero"),
            pl.col("Data Status").alias("status"), _unescape("Note").alias("note"),
            (pl.when(pl.col("Stage").is_in(["before", "after"])).then(pl.col("Stage"))
             if "Stage" in extra.columns else pl.lit(None, pl.Utf8)).alias("stage"),
            pl.lit(True).alias("_in_extra"))
    if extra is not None and extra.height == main.height and all(
            main.get_column(c).equals(extra.get_column(c)) for c in tkey):
        # The contract: row-aligned files. Checked column by column, then joined as is.
        main = main.hstack(extra.drop(tkey))
    elif extra is not None:
        # Pair the two files by tensor (op id, name, io, index, n-th occurrence), so a
        # row missing from either file costs only that row.
        occ = pl.int_range(pl.len()).over(tkey).alias("_occ")
        main = main.with_columns(occ, pl.lit(True).alias("_in_main"))
        extra = extra.with_columns(occ)
        with_extra = extra.get_column("_dir").unique().implode()
        main = main.join(extra, on=[*tkey, "_occ"], how="full", coalesce=True)
        odd = (main.filter(pl.col("_dir").is_in(with_extra))
               .group_by("_dir").agg(pl.col("_in_extra").is_null().sum().alias("m"),
                                     pl.col("_in_main").is_null().sum().alias("x"))
               .filter((pl.col("m") > 0) | (pl.col("x") > 0)))
        for d, m, x in odd.sort("_dir").iter_rows():
            problems.append(f"{d}: {m} row(s) of statistic.csv have no statistic_extra.csv row "
                            f"and {x} row(s) of statistic_extra.csv have no statistic.csv row "
                            "(the files should be row-aligned); those rows lack counts or "
                            "statistics")
        # Rows only in statistic_extra.csv: process and round from their folder.
        main = main.with_columns(
            pl.col("Device and PID").fill_null(pl.col("_dir").str.extract(r"/(-?\d+_\d+)/\d+$")),
            pl.col("Execution Count").fill_null(pl.col("_dir").str.extract(r"/(\d+)$")),
            pl.col("Op Type").fill_null(pl.col("Op Name").str.split("/").list.last()),
            pl.col("Tensor Path").fill_null("N/A"))
    else:
        main = main.with_columns([pl.lit(None, dtype=SCHEMA[c]).alias(c)
                                  for c in ("seq", *COUNT_COLS, "status", "note", "stage")])
    # msProbe prints statistics with std::to_string: 6 decimals, no exponent. A
    # file whose every float statistic looks like that is read as rounded to 1e-6.
    cells = [pl.col(c.capitalize()) for c in STAT_COLS]
    fixed6 = pl.any_horizontal([c.str.contains(r"^-?\d+\.\d{6}$") for c in cells])
    other = pl.any_horizontal([~c.str.contains(r"^-?(\d+(\.\d{6})?|inf|nan|N/A)$")
                               for c in cells])
    step = (pl.when(fixed6.any().over("_dir") & ~other.any().over("_dir"))
            .then(1e-6).otherwise(0.0))
    path = pl.col("Tensor Path")
    rel = path.str.replace(r"^.*?atb_dump_data/data/[^/]+/[^/]+/", "")
    reroot = path.str.contains("atb_dump_data/data/")
    out = main.select(
        _unescape("Device and PID").alias("dev_pid"),
        pl.col("Execution Count").cast(pl.Int64, strict=False).alias("round"),
        pl.col("seq"),
        _unescape("Op Id").alias("op_id"), _unescape("Op Name").alias("op_name"),
        _unescape("Op Type").alias("op_type"), pl.col("Input/Output").alias("io"),
        _unescape("Index").alias("index"), pl.col("Dtype").alias("dtype"),
        pl.col("Format").alias("format"), pl.col("Shape").alias("shape"),
        *[pl.col(c) for c in COUNT_COLS],
        *[pl.col(c.capitalize()).cast(pl.Float64, strict=False).alias(c) for c in STAT_COLS],
        pl.when((path == "N/A") | ~path.str.ends_with(".bin")).then(None)
        .when(reroot).then(pl.col("_dir").str.replace_all("\\", BACKSLASH, literal=True)
                           + "/" + rel).otherwise(path).alias("path"),
        pl.col("status"), pl.col("note"), pl.col("_dir").alias("round_dir"),
        pl.lit("csv").alias("source"), pl.col("_row"), pl.col("stage"),
        step.alias("stat_step"),
    )
    # msProbe's max/min start at -FLT_MAX/+FLT_MAX and skip NaN: a tensor with no value
    # but NaN keeps them (Max < Min, which no real tensor has). No finite value: NaN,
    # as our own statistics say it.
    no_value = pl.col("max") < pl.col("min")
    return out.with_columns(
        *[pl.when(no_value).then(float("nan")).otherwise(pl.col(c)).alias(c)
          for c in ("max", "min")],
        pl.col("seq").is_not_null().alias("seq_exact"),
        pl.col("seq").fill_null(pl.col("_row")),
        pl.col("status").fill_null(pl.when(pl.col("path").is_null()).then(pl.lit("none"))
                                   .otherwise(pl.lit("bin"))),
    ).drop("_row")


_IO = re.compile(r"^(intensor|outtensor)([^.]*)\.bin$")


def _bin_row(rd: RoundDir, f: Path, problems: list[str], file_stats: FileStats
             ) -> dict | None:
    rel = f.relative_to(rd.path).parts
    m = _IO.match(rel[-1])
    if not m or len(rel) < 3 or rel[-2] not in ("before", "after"):
        return None
    ops = rel[:-2]
    ids, names = zip(*(text_of(seg).partition("_")[::2] for seg in ops))
    row = dict(dev_pid=rd.dev_pid, round=rd.round, seq=None, op_id="_".join(ids),
               op_name="/".join(names), op_type=names[-1],
               io="input" if m.group(1) == "intensor" else "output",
               index=text_of(m.group(2)), path=text_of(str(f)), round_dir=str(rd.path),
               source="bin", status="bin", note=None, seq_exact=False)
    try:
        hdr = read_header(f)
        row.update(dtype=hdr.dtype_name, format=hdr.format_name,
                   shape="x".join(map(str, hdr.dims)), status="stub" if hdr.is_stub else "bin")
        row.update(file_stats.stats(resolve(f)))
    except TensorNotSaved:
        row["note"] = "not saved (filter_level 2 kernel stub)"
    except BinFileError as e:
        problems.append(str(e))
        row.update(status="lost", note=e.problem)
    return row


def _from_bins(rounds: list[RoundDir], problems: list[str],
               listed: frozenset[str] = frozenset()) -> pl.DataFrame | None:
    """Rows for the `.bin` files under the round dirs that are not in `listed`
    (their `seq` is a placeholder: `_finish` puts them in execution order)."""
    rows, file_stats = [], FileStats()
    for rd in rounds:
        for dirpath, _dirs, files in os.walk(rd.path):
            for name in files:
                f = os.path.join(dirpath, name)
                if name.endswith(".bin") and f not in listed:
                    row = _bin_row(rd, Path(f), problems, file_stats)
                    if row:
                        rows.append(row)
    if not rows:
        return None
    rows.sort(key=lambda r: (r["round_dir"], r["path"]))
    for i, r in enumerate(rows):
        r["seq"] = i
    return pl.DataFrame(rows, schema={k: v for k, v in SCHEMA.items() if k not in
                                      ("device", "pid", "layer")}, strict=False)


def _stage(need_order: bool = True) -> pl.Expr:
    """`before` or `after` the op ran. ATB saves inputs and outputs on both sides
    (a `before/outtensor` is the output buffer before it is written). From the
    path when there is one; for statistics-only rows (no path) from the order:
    of two rows of the same tensor in a round, the first is `before`; a lone row
    is msProbe's before-input or after-output."""
    from_path = (pl.when(pl.col("path").str.contains("/before/")).then(pl.lit("before"))
                 .when(pl.col("path").str.contains("/after/")).then(pl.lit("after")))
    if not need_order:
        return from_path
    grp = ["dev_pid", "round", "op_id", "io", "index"]
    n = pl.len().over(grp)
    occ = pl.col("seq").rank("ordinal").over(grp) - 1
    by_order = (pl.when(n == 1).then(pl.when(pl.col("io") == "input").then(pl.lit("before"))
                                     .otherwise(pl.lit("after")))
                .when(occ % 2 == 0).then(pl.lit("before")).otherwise(pl.lit("after")))
    return pl.coalesce(pl.col("stage"), from_path, by_order)


def _execution_order() -> pl.Expr:
    """ATB's call order within a round dir, from the op ids (pre-order: an op's
    `before` tensors, then its children's, then its `after` tensors; inputs
    before outputs; by index). Each id is zero-padded; `!` and `~` sort before
    and after any child id."""
    ids = pl.col("op_id").str.split("_").list.eval(pl.element().str.zfill(9)).list.join(".")
    mark = pl.when(pl.col("stage") == "before").then(pl.lit("!")).otherwise(pl.lit("~"))
    idx = pl.col("index").str.extract(r"^(\d*)").str.zfill(9)
    return pl.concat_str([ids + mark, pl.col("io"), idx, pl.col("index")], separator="|")


def _finish(df: pl.DataFrame) -> pl.DataFrame:
    dev = pl.col("dev_pid").str.extract(r"^(-?\d+)_", 1).cast(pl.Int64, strict=False)
    pid = pl.col("dev_pid").str.extract(r"_(\d+)$", 1).cast(pl.Int64, strict=False)
    layer = (pl.col("op_id").str.split("_").list.first() + "_"
             + pl.col("op_name").str.split("/").list.first())
    df = df.with_columns(dev.alias("device"), pid.alias("pid"), layer.alias("layer"))
    if df.get_column("stage").null_count():  # manifest rows know it already
        df = df.with_columns(_stage(df.get_column("path").null_count() > 0).alias("stage"))
    if not df.get_column("seq_exact").all():
        # No record sequence (msProbe's CSV rows come in thread-pool order; rows read
        # from files have none): the execution order rebuilt from the op ids.
        df = df.with_columns(_execution_order().alias("_ord")).sort(["round_dir", "_ord", "seq"])
        df = df.with_columns(pl.when(pl.col("seq_exact")).then(pl.col("seq"))
                             .otherwise(pl.int_range(pl.len(), dtype=pl.Int64).over("round_dir"))
                             .alias("seq")).drop("_ord")
    df = df.with_columns(pl.col("stat_step").fill_null(0.0))
    df = df.with_columns(
        ((pl.col("stage") == "before") & (pl.col("io") == "input")
         | (pl.col("stage") == "after") & (pl.col("io") == "output")).alias("primary"),
        pl.max_horizontal(pl.col("max").abs(), pl.col("min").abs()).alias("abs_max"),
        pl.when(pl.col("nan").is_not_null())
        .then(pl.col("nan") + pl.col("pinf") + pl.col("ninf") > 0)
        .otherwise(pl.any_horizontal([pl.col(c).is_nan() | pl.col(c).is_infinite()
                                      for c in STAT_COLS]).fill_null(False))
        .alias("nonfinite"),
        (pl.col("op_id") + "|" + pl.col("op_name") + "|" + pl.col("stage") + "|"
         + pl.col("io") + "." + pl.col("index")).alias("key"),
    )
    df = df.select([*SCHEMA, "primary", "abs_max", "nonfinite", "key"])
    # The record sequence orders a whole process; without it (msProbe CSVs, files
    # only) each round dir has its own order, so rounds go first.
    by_round = pl.when(pl.col("seq_exact").all().over("dev_pid")).then(0).otherwise("round")
    keys = ([pl.col("dev_pid"), pl.col("seq")] if df.get_column("seq_exact").all()
            else [pl.col("dev_pid"), by_round, pl.col("seq")])
    return df if in_order(df, keys) else df.sort(keys, nulls_last=True)


def in_order(df: pl.DataFrame, keys: list[pl.Expr]) -> bool:
    """Rows already in `keys` order (no nulls), as the manifest keeps them: then the
    sort, which moves every column of a million-row table, is skipped."""
    ok = pl.lit(True)
    for k in reversed(keys):
        prev = k.shift(1)
        ok = (k > prev) | ((k == prev) & ok)
    return bool(df.select(ok.fill_null(False).slice(1).all()).item()) if df.height > 1 \
        else True


def open_dump(path: str | Path, *, fill_stats: bool = False) -> Dump:
    """Open any dump directory as a Dump; `fill_stats` computes the statistics of
    rows that have none (task=tensor) from their `.bin` files."""
    layout = find_layout(path)
    problems: list[str] = list(layout.refused)
    # Every file path read from the dump's data stays inside it (confine.py).
    box = Confinement(layout.root or layout.given)

    def confined(df: pl.DataFrame | None) -> pl.DataFrame | None:
        return None if df is None else refuse_outside(df, box, problems)

    # The Parquet manifest, where it holds whole rounds; the CSVs for the rest.
    man, in_manifest = read_manifest(layout, problems)
    csv = drop_miscounted(confined(_from_csvs(
        [r for r in layout.rounds if str(r.path) not in in_manifest], problems, box)), problems)
    covered = set(in_manifest)
    if csv is not None:
        covered |= set(csv.get_column("round_dir").unique().to_list())
    bins = confined(_from_bins([r for r in layout.rounds if str(r.path) not in covered],
                               problems))
    parts = [p for p in (man, csv, bins) if p is not None]
    # msProbe's own dumps (no statistic_extra.csv) lack the CSV rows of tensors
    # with -inf/-nan statistics and lose rows to its racing writer: their files
    # that no row lists are added from the files.
    unlisted_dirs = [r for r in layout.rounds if str(r.path) in covered
                     and str(r.path) not in in_manifest and not r.extra_csv.is_file()]
    if unlisted_dirs and csv is not None:
        listed = frozenset(csv.get_column("path").drop_nulls().to_list())
        extra = confined(_from_bins(unlisted_dirs, problems, listed))
        if extra is not None:
            problems.append(
                f"{extra.height} .bin file(s) have no statistic.csv row (msProbe writes no "
                "row for a tensor whose Min is -inf or Mean is -nan, and its CSV writer can "
                "lose rows); they were read from the files")
            parts.append(extra.with_columns(pl.lit("no statistic.csv row: read from the file")
                                            .alias("note")))
        blind = csv.filter(pl.col("round_dir").is_in([str(r.path) for r in unlisted_dirs]))
        if blind.height and blind.get_column("path").null_count() == blind.height:
            problems.append(
                f"{blind.get_column('round_dir').n_unique()} round dir(s) hold only an "
                "msProbe-style statistic.csv (no statistic_extra.csv, no .bin files): msProbe "
                "writes no row for a tensor whose Min is -inf or Mean is -nan, so such tensors "
                "are missing from this dump and cannot be found")
    if not parts:
        df = pl.DataFrame(schema={k: v for k, v in SCHEMA.items() if k not in
                                  ("device", "pid", "layer")})
    else:
        df = pl.concat(parts, how="diagonal_relaxed")
    # A round dir moved out of its tree has no {dev}_{pid}/{round} in its path.
    df = df.with_columns(
        pl.col("dev_pid").fill_null(""), pl.col("round").fill_null(-1))
    dump = Dump(layout, with_models(_finish(df), layout.info), problems)
    if fill_stats:
        fill_missing_stats(dump)
    return dump


def fill_missing_stats(dump: Dump) -> None:
    """Compute stats from the files for rows that have a file but no statistics."""
    df = dump.tensors
    need = df.with_row_index("_i").filter(
        pl.col("path").is_not_null() & pl.col("max").is_null() & pl.col("nan").is_null()
        & pl.col("status").is_in(FILE_STATUSES))
    if need.height == 0:
        return
    updates, file_stats = [], FileStats()
    for i, p in zip(need.get_column("_i").to_list(), need.get_column("path").to_list()):
        try:
            st = file_stats.stats(resolve(os_path(p)))
        except BinFileError as e:
            if not isinstance(e, TensorNotSaved):
                dump.problems.append(str(e))
            continue
        updates.append({"_i": i, **{k: st[k] for k in (*STAT_COLS, *COUNT_COLS)}})
    dump.stats_from_files, dump.bytes_read = len(updates), file_stats.bytes_read
    if not updates:
        return
    up = pl.DataFrame(updates, schema={"_i": pl.UInt32, **{k: SCHEMA[k] for k in
                                                           (*STAT_COLS, *COUNT_COLS)}},
                      strict=False)
    merged = df.with_row_index("_i").join(up, on="_i", how="left", suffix="_f")
    merged = merged.with_columns([pl.coalesce(c, f"{c}_f").alias(c)
                                  for c in (*STAT_COLS, *COUNT_COLS)])
    dump.tensors = with_models(_finish(merged.select(list(SCHEMA))), dump.layout.info)


def verify_files(dump: Dump) -> int:
    """Check the header, size and alias target of every file in the table (no
    payload is read); each bad file becomes a problem and its row `lost`.
    Returns the number of bad files."""
    df = dump.tensors
    bad: dict[str, str] = {}
    for p in df.filter(pl.col("status").is_in(FILE_STATUSES) & pl.col("path").is_not_null()
                       ).get_column("path").to_list():
        try:
            resolve(os_path(p))
        except TensorNotSaved:
            continue
        except BinFileError as e:
            bad[p] = e.problem
            dump.problems.append(str(e))
    if bad:
        notes = pl.DataFrame({"path": list(bad), "_bad": list(bad.values())})
        df = df.join(notes, on="path", how="left")
        dump.tensors = df.with_columns(
            pl.when(pl.col("_bad").is_not_null()).then(pl.lit("lost"))
            .otherwise(pl.col("status")).alias("status"),
            pl.coalesce("_bad", "note").alias("note")).drop("_bad")
    return len(bad)


def _parse_ints(spec: str | int | Sequence[int]) -> set[int]:
    """'0,2-4' -> {0,2,3,4}."""
    if isinstance(spec, int):
        return {spec}
    if not isinstance(spec, str):
        return set(spec)
    out: set[int] = set()
    for part in filter(None, (s.strip() for s in spec.split(","))):
        lo, sep, hi = part.partition("-")
        try:
            out.update(range(int(lo), int(hi) + 1) if sep else {int(lo)})
        except ValueError:
            raise ValueError(f"bad number list {spec!r}: use e.g. 0,2-4") from None
    return out


def filter_tensors(df: pl.DataFrame, *, op: str | None = None, layer: str | None = None,
                   round: str | int | Iterable[int] | None = None,
                   device: str | int | Iterable[int] | None = None,
                   io: str | None = None) -> pl.DataFrame:
    """op: an op id (`5_1`, with its descendants) or a case-insensitive substring of
    the op name path; layer: the top-level op's id, its name, or a trailing layer
    number of its name (`Layer_3`); round/device: numbers or lists like '0,2-3'."""
    if op:
        low = op.lower()
        df = df.filter((pl.col("op_id") == op) | pl.col("op_id").str.starts_with(op + "_")
                       | pl.col("op_name").str.to_lowercase().str.contains(low, literal=True))
    if layer:
        lid = pl.col("layer").str.split("_").list.first()
        lname = pl.col("layer").str.splitn("_", 2).struct.field("field_1").str.to_lowercase()
        df = df.filter((lid == layer) | (lname == layer.lower())
                       | lname.str.ends_with("_" + layer.lower()))
    if round is not None and round != "":
        df = df.filter(pl.col("round").is_in(sorted(_parse_ints(round))))
    if device is not None and device != "":
        df = df.filter(pl.col("device").is_in(sorted(_parse_ints(device))))
    if io:
        df = df.filter(pl.col("io") == io)
    return df


def op_path(op_id: str | None, op_name: str | None) -> str:
    """'2_0', 'Layer/Attn' -> '2_Layer/0_Attn' (ids and names paired per segment);
    what is known of a row with an empty Op Id or Op Name cell."""
    if op_id is None or op_name is None:
        return op_name or op_id or "?"
    ids, names = op_id.split("_"), op_name.split("/")
    if len(ids) != len(names):
        return f"{op_id} {op_name}"
    return "/".join(f"{i}_{n}" for i, n in zip(ids, names))
