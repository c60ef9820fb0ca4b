"""The compare result as an Excel workbook, which is what users of msProbe's
`compare -m atb` open: sheet `summary` holds the printed headline, then the rows
go to `compare` (and `compare_2`, … past a million rows, under Excel's sheet
limit), header frozen, failing verdicts highlighted. XlsxWriter's
constant-memory mode streams each row to disk, so memory stays flat (and its
import costs a compare a third of openpyxl's); every string is written as a
string, never as a formula or a link. The file is written under a temporary
name and renamed, so an interrupted run leaves no half workbook."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import polars as pl
import xlsxwriter

MAX_ROWS = 1_000_000
BAD = {"fail", "unreadable", "no-data"}
# the control characters an .xlsx cannot hold (tab, newline and return it can)
_ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_OPTIONS = {"constant_memory": True, "strings_to_formulas": False, "strings_to_urls": False,
            "strings_to_numbers": False}


def _value(v):
    """Excel has no NaN/Inf and refuses control characters."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, str):
        return _ILLEGAL.sub("?", v)
    return v


def write_workbook(path: str | Path, rows: pl.DataFrame, summary: str,
                   progress: Callable[[int], None] | None = None) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        wb = xlsxwriter.Workbook(str(tmp), _OPTIONS)
        red = wb.add_format({"pattern": 1, "bg_color": "#FFC7CE"})
        bold = wb.add_format({"bold": True})
        ws = wb.add_worksheet("summary")
        for i, line in enumerate(summary.splitlines()):
            ws.write_string(i, 0, _value(line))
        header = rows.columns
        vi = header.index("verdict")
        sheet = None
        for i, r in enumerate(rows.iter_rows()):
            at = i % MAX_ROWS + 1
            if at == 1:
                sheet = _sheet(wb, i // MAX_ROWS, header, bold)
            vals = [_value(v) for v in r]
            sheet.write_row(at, 0, vals)
            if vals[vi] in BAD:
                sheet.write_string(at, vi, vals[vi], red)
            if progress and i % 1000 == 999:
                progress(1000)
        if sheet is None:
            _sheet(wb, 0, header, bold)
        wb.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _sheet(wb: xlsxwriter.Workbook, n: int, header: list[str], bold):
    sheet = wb.add_worksheet("compare" if n == 0 else f"compare_{n + 1}")
    sheet.freeze_panes(1, 0)
    sheet.write_row(0, 0, header, bold)
    return sheet
