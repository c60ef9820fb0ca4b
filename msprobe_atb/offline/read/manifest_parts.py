"""Which Parquet files a dump's manifest owns, and how many rows they may hold.

The writer (tree/manifest.py) makes `part-NNNNNNNN-LK.parquet` files: regular
files in real `host=H/device=D/pid=P` directories under `<root>/manifest`.
Readers (`stats`, `compare`, `report` through manifest.py, and `query`) take
exactly those (`owned_parts`). Anything else there is skipped and named:
* another name: a copy, or a file literally named `part-*.parquet` (which
  DuckDB would read as a glob);
* a symbolic link, to a part or to a directory of another dump;
* a file whose footer cannot be read (zero bytes, truncated, random bytes);
* a process whose parts hold more rows or bytes than its dump can account
  for (`bounds`), checked from the footers (parquet_footer.py) before any row
  is decoded;
* a part whose rows are already in a part taken before it. In a process, a
  row's (`round`, `round_seq`) is unique; a part repeating one is a copy, or
  what a kill between a merge and the removal of its inputs leaves: the merged
  part (the higher level, same first number) is taken, its inputs skipped.
Hidden files (a write in progress) and `_` files (`_manifest.json`) are not parts.

Bounds (the rule "sizes from data are bounded before allocation"): a process's
parts may hold at most one row per MIN_CSV_ROW_BYTES bytes of its round dirs'
statistic.csv files (a row of msProbe's 15 columns has at least 14 commas and a
newline), plus ROUND_SLACK rows per round dir (msProbe writes no CSV row for a
tensor whose Min is -inf; `index` adds those from their files); and their column
data, uncompressed, at most BYTES_PER_CSV_BYTE bytes per byte of its
statistic.csv and statistic_extra.csv files plus ROUND_SLACK_BYTES per round dir
(a manifest row holds what the two CSV rows hold, numbers in 8 bytes instead of
text, its path relative: the stand-in's dumps measure 0.35-0.45). A manifest thus
costs memory in proportion to the dump it describes: 3M rows claimed by a 1 MB
file of a 758-row dump, or short rows that decompress to gigabytes, are refused,
not decoded.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from msprobe_atb.tree.manifest import manifest_dir, polars_schema

from .layout import ROUND
from .parquet_footer import FooterError, footer_sizes
from .read_errors import read_errors

PART_NAME = re.compile(r"^part-(\d{8})-L(\d{1,3})\.parquet$")
PARTITION_DIRS = (re.compile(r"^host=[^/]+$"), re.compile(r"^device=-?\d+$"),
                  re.compile(r"^pid=\d+$"))
PARTITION_LABELS = ("host=NAME", "device=N", "pid=N")
MIN_CSV_ROW_BYTES = 15
ROUND_SLACK = 64
BYTES_PER_CSV_BYTE = 2
ROUND_SLACK_BYTES = 64 << 10
KEY = ["round", "round_seq"]


def bounds(dump_root: Path, dev_pid: str) -> tuple[int, int]:
    """(rows, uncompressed bytes) the manifest of process "{dev}_{pid}" may hold."""
    rows = size = 0
    proc = Path(dump_root) / "data" / dev_pid
    for rd in proc.iterdir() if proc.is_dir() and not proc.is_symlink() else ():
        if ROUND.match(rd.name):
            csvs = [0, 0]
            for i, name in enumerate(("statistic.csv", "statistic_extra.csv")):
                with contextlib.suppress(OSError):
                    csvs[i] = (rd / name).stat().st_size
            rows += csvs[0] // MIN_CSV_ROW_BYTES + ROUND_SLACK
            size += BYTES_PER_CSV_BYTE * sum(csvs) + ROUND_SLACK_BYTES
    return rows, size


def wrong_types(df) -> str | None:
    """How a frame read from parts differs from the writer's column types (a
    footer can declare any type; the readers' arithmetic assumes the writer's)."""
    want = polars_schema()
    bad = [f"{c!r} is {t}, not {want[c]}" for c, t in df.schema.items() if t != want.get(c, t)]
    return "; ".join(bad) or None


def _not_a_part(path: Path) -> str | None:
    """Why a directory entry is not a part of the manifest (None: it is one)."""
    if path.is_symlink():
        return "a symbolic link, not a file the manifest writer made; skipped"
    if not PART_NAME.match(path.name):
        return ("not named as the manifest writer names its parts "
                "(part-NNNNNNNN-LK.parquet); skipped")
    if not path.is_file():
        return "not a regular file; skipped"
    return None


def _partition_dirs(d: Path, depth: int, problems: list[str]) -> list[Path]:
    if depth == len(PARTITION_DIRS):
        return [d]
    out = []
    for p in sorted(d.iterdir()):
        if p.name.startswith((".", "_")):
            continue
        if p.is_symlink() or not p.is_dir() or not PARTITION_DIRS[depth].match(p.name):
            problems.append(f"{p}: not a manifest partition directory (a real directory "
                            f"named {PARTITION_LABELS[depth]}, no symbolic link); skipped")
            continue
        out += _partition_dirs(p, depth + 1, problems)
    return out


def _order(f: Path) -> tuple[int, int]:
    """Take a merged part (higher level) before the parts it was made of."""
    m = PART_NAME.match(f.name)
    return int(m.group(1)), -int(m.group(2))


def _without_repeats(files: list[Path], problems: list[str]) -> list[Path]:
    """The parts, minus those repeating a (round, round_seq) of a part taken
    before them, and minus those whose keys cannot be read."""
    import polars as pl

    if len(files) < 2:  # nothing to repeat (a damaged file: the reader names it)
        return files
    frames, taken = [], []
    for f in files:
        try:
            keys = pl.read_parquet(f, columns=KEY, glob=False)
        except read_errors() as e:
            problems.append(f"{f}: unreadable Parquet ({str(e).splitlines()[0]}); skipped")
            continue
        if (why := wrong_types(keys)) is not None:
            problems.append(f"{f}: {why}; skipped")
            continue
        frames.append(keys.with_columns(pl.lit(len(taken), pl.Int64).alias("_part")))
        taken.append(f)
    if len(taken) < 2:
        return taken
    keys = pl.concat(frames)
    owner = pl.col("_part").min().over(KEY)
    repeats = keys.filter(pl.col("_part") != owner)
    if repeats.height == 0:
        return taken
    firsts = keys.group_by(KEY).agg(pl.col("_part").min().alias("_owner"))
    dup = repeats.join(firsts, on=KEY).group_by("_part").agg(pl.col("_owner").first())
    for part, own in sorted(dup.iter_rows()):
        problems.append(f"{taken[part]}: rows already in {taken[own].name} (a copy, or left "
                        "over from a merge a kill interrupted); skipped, so no row counts twice")
    drop = set(dup.get_column("_part").to_list())
    return [f for i, f in enumerate(taken) if i not in drop]


def owned_parts(dump_root: Path, problems: list[str]) -> list[str]:
    """The part files the manifest owns (see the module doc), sorted by name."""
    top = manifest_dir(dump_root)
    if top.is_symlink():
        problems.append(f"{top}: a symbolic link (to another dump's manifest?); not read")
        return []
    if not top.is_dir():
        return []
    out: list[str] = []
    for d in _partition_dirs(top, 0, problems):
        files = []
        for f in sorted(d.iterdir()):
            if f.name.startswith((".", "_")):
                continue
            why = _not_a_part(f)
            if why:
                problems.append(f"{f}: {why}")
                continue
            try:
                files.append((f, *footer_sizes(f)))
            except (FooterError, OSError) as e:
                problems.append(f"{f}: unreadable Parquet footer ({e}); skipped")
        dev_pid = f"{d.parent.name.partition('=')[2]}_{d.name.partition('=')[2]}"
        rows, size = (sum(x[i] for x in files) for i in (1, 2))
        if files:
            most_rows, most_bytes = bounds(dump_root, dev_pid)
            if rows > most_rows or size > most_bytes:
                problems.append(f"{d}: its parts claim {rows} rows and {size} bytes, more than "
                                f"the {most_rows} rows and {most_bytes} bytes that the CSVs of "
                                f"data/{dev_pid} can account for; not read")
                continue
        out += map(str, _without_repeats(sorted((f for f, *_ in files), key=_order), problems))
    return sorted(out)
