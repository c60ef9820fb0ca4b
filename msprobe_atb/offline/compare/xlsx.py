"""The compare result as an Excel workbook, which is what users of msProbe's
`compare -m atb` open: sheet `summary` holds the printed headline, then the rows
go to `compare` (and `compare_2`, … past a million rows, under Excel's sheet
limit), header frozen, failing verdicts highlighted. openpyxl's streaming
writer keeps memory flat; the file is written under a temporary name and
renamed, so an interrupted run leaves no half workbook."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

import polars as pl
from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
from openpyxl.styles import Font, PatternFill

MAX_ROWS = 1_000_000
BAD = {"fail", "unreadable", "no-data"}
_RED = PatternFill("solid", fgColor="FFC7CE")
_BOLD = Font(bold=True)


def _value(v):
    """Excel has no NaN/Inf and refuses control characters."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, str):
        return ILLEGAL_CHARACTERS_RE.sub("?", v)
    return v


def write_workbook(path: str | Path, rows: pl.DataFrame, summary: str,
                   progress: Callable[[int], None] | None = None) -> Path:
    path = Path(path)
    wb = Workbook(write_only=True)
    ws = wb.create_sheet("summary")
    for line in summary.splitlines():
        ws.append([_value(line)])
    header = rows.columns
    vi = header.index("verdict")
    sheet = None
    for i, r in enumerate(rows.iter_rows()):
        if i % MAX_ROWS == 0:
            sheet = _sheet(wb, i // MAX_ROWS, header)
        vals = [_value(v) for v in r]
        if vals[vi] in BAD:
            vals[vi] = WriteOnlyCell(sheet, vals[vi])
            vals[vi].fill = _RED
        sheet.append(vals)
        if progress and i % 1000 == 999:
            progress(1000)
    if sheet is None:
        _sheet(wb, 0, header)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        wb.save(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _sheet(wb: Workbook, n: int, header: list[str]):
    sheet = wb.create_sheet("compare" if n == 0 else f"compare_{n + 1}")
    sheet.freeze_panes = "A2"
    cells = []
    for h in header:
        c = WriteOnlyCell(sheet, h)
        c.font = _BOLD
        cells.append(c)
    sheet.append(cells)
    return sheet
