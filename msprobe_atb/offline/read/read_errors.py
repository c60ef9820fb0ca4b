"""What reading a damaged file with polars can raise, so a reader can name the
file and go on. polars raises PolarsError for what it checks, and for what it
does not, a Rust panic surfaces as pyo3's PanicException: a BaseException,
which `except Exception` lets through to kill the command. (The footer checks
in parquet_footer.py refuse the panics seen; this catches the rest.)"""

from __future__ import annotations


def read_errors() -> tuple[type[BaseException], ...]:
    import polars as pl

    return pl.exceptions.PolarsError, pl.exceptions.PanicException, OSError
