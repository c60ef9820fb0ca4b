"""statistic.csv and statistic_extra.csv rows from tensor records
(docs/msprobe_format.md §8, docs/contracts.md §5).

Cells are escaped, never dropped: a non-numeric cell that a spreadsheet would
run as a formula gets a leading apostrophe; cells with a comma, quote or
newline are quoted, so every row keeps its column count.
"""

from __future__ import annotations

import csv
import io
import math
import posixpath
import threading
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from msprobe_atb.tree.records import hex_float
from msprobe_atb.tree.vocab import dtype_name, format_name

HEADER = ("Device and PID,Execution Count,Op Name,Op Type,Op Id,Input/Output,Index,Dtype,"
          "Format,Shape,Max,Min,Mean,Norm,Tensor Path")
EXTRA_HEADER = ("Sequence,Op Id,Op Name,Input/Output,Index,Element Count,NaN Count,"
                "Pos Inf Count,Neg Inf Count,Zero Count,Data Status,Note,Stage,Shares With")
NA = "N/A"
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NONFINITE = {"nan": "nan", "-nan": "nan", "inf": "inf", "+inf": "inf", "-inf": "-inf"}


def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def safe_cell(cell: str) -> str:
    if cell.startswith(_FORMULA_START) and not is_number(cell):
        return "'" + cell
    return cell


class _RowWriter(threading.local):
    """One csv writer and buffer per thread, reused for every row. Its line
    terminator is CRLF only so that the csv module quotes cells holding a lone
    CR as well as LF; the row itself ends in LF, as msProbe's files do."""

    def __init__(self) -> None:
        self.buf = io.StringIO()
        self.writer = csv.writer(self.buf, lineterminator="\r\n")


_ROWS = _RowWriter()


def csv_line(cells: list[str]) -> str:
    buf = _ROWS.buf
    buf.seek(0)
    buf.truncate()
    _ROWS.writer.writerow([safe_cell(c) for c in cells])
    return buf.getvalue()[:-2] + "\n"


def positional(value: float) -> str:
    """repr's shortest round-trip digits without an exponent (2.287141978740692e-05
    as 0.00002287141978740692, 1e+16 as 10000000000000000.0): msProbe writes no
    exponent, and `sort -n` and string tools on its files read none."""
    text = repr(value)
    if "e" not in text:
        return text
    text = f"{Decimal(text):f}"
    return text if "." in text else text + ".0"


def number(value: object, layout: Callable[[float], str] = repr) -> str:
    """Full precision: ints as ints, doubles as `layout` writes their shortest
    round-trip digits (repr, or positional for statistic.csv)."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return layout(value)
    if isinstance(value, str) and value.strip().lower() in _NONFINITE:
        return _NONFINITE[value.strip().lower()]
    if isinstance(value, str) and (exact := hex_float(value)) is not None:
        return number(exact, layout)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f"({number(value[0], layout)},{number(value[1], layout)})"
    return NA if value is None else str(value)


@dataclass(frozen=True)
class TensorPath:
    """A relative tensor path `{dev}_{pid}/{exec}/{id}_{Name}/.../before/intensor0.bin`."""

    dev_pid: str
    exec_count: str
    ids: tuple[str, ...]
    names: tuple[str, ...]
    io: str
    index: str
    stage: str  # "before" | "after" | "" (not in a stage directory)

    @property
    def round_key(self) -> tuple[str, str]:
        return self.dev_pid, self.exec_count


def parse_tensor_path(path: str) -> TensorPath | None:
    """None for a path that cannot be a tensor's: too short, or climbing with `.`
    or `..` (a record names a file under data/, and nothing else)."""
    parts = [p for p in path.split("/") if p]
    if len(parts) < 3 or "." in parts or ".." in parts:
        return None
    file_name = parts[-1]
    ops = parts[2:-1]
    stage = ""
    if ops and ops[-1] in ("before", "after"):
        stage = ops.pop()
    ids, names = [], []
    for seg in ops:
        op_id, sep, name = seg.partition("_")
        ids.append(op_id)
        names.append(name if sep else "")
    if file_name.startswith("intensor"):
        io_kind, rest = "input", file_name[len("intensor"):]
    elif file_name.startswith("outtensor"):
        io_kind, rest = "output", file_name[len("outtensor"):]
    else:
        io_kind, rest = NA, file_name
    return TensorPath(parts[0], parts[1], tuple(ids), tuple(names), io_kind,
                      rest.split(".", 1)[0], stage)


def _stat(stats: dict | None, key: str, layout: Callable[[float], str] = repr) -> str:
    if not stats or key not in stats or stats[key] is None:
        return NA
    return number(stats[key], layout)


def stat_cells(rec: dict) -> list[str]:
    if rec.get("task") not in ("statistics", "all") or not isinstance(rec.get("stats"), dict):
        return [NA] * 4
    stats = rec["stats"]
    return [_stat(stats, k, positional) for k in ("max", "min", "mean", "norm")]


def _data_path(output_root: str, rel: str) -> str:
    return f"{output_root.rstrip('/')}/atb_dump_data/data/{rel}"


def tensor_path_cell(rec: dict, output_root: str) -> str:
    if rec.get("task") == "statistics" or rec.get("file") == "none":
        return NA
    return _data_path(output_root, str(rec.get("path", "")))


def shares_with_cell(rec: dict, output_root: str) -> str:
    """The Tensor Path of the earlier identical tensor whose storage this row
    shares (a hard link, or a stub's data= target); "" otherwise, also for a
    filter_level-2 kernel stub, which names itself (not saved)."""
    alias, path = rec.get("alias"), str(rec.get("path", ""))
    if rec.get("file") not in ("linked", "stub") or not isinstance(alias, str) or not alias:
        return ""
    target = posixpath.normpath(posixpath.join(posixpath.dirname(path), alias))
    if target == path or target.startswith("../"):
        return ""
    return _data_path(output_root, target)


def statistic_row(rec: dict, tp: TensorPath, output_root: str) -> str:
    names = list(tp.names)
    cells = [
        tp.dev_pid, tp.exec_count, "/".join(names), names[-1] if names else "",
        "_".join(tp.ids), tp.io, tp.index, dtype_name(rec.get("dtype")),
        format_name(rec.get("format")), str(rec.get("dims", "")).replace(",", "x"),
        *stat_cells(rec), tensor_path_cell(rec, output_root),
    ]
    return csv_line(cells)


def extra_row(rec: dict, tp: TensorPath, output_root: str) -> str:
    stats = rec.get("stats") if isinstance(rec.get("stats"), dict) else None
    cells = [
        number(rec.get("seq")), "_".join(tp.ids), "/".join(tp.names), tp.io, tp.index,
        *(_stat(stats, k) for k in ("count", "nan", "pinf", "ninf", "zero")),
        str(rec.get("file", NA)), str(rec.get("note", "")), tp.stage,
        shares_with_cell(rec, output_root),
    ]
    return csv_line(cells)
