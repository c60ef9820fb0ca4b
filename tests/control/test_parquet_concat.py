"""Parquet files put together without decoding them (tree/parquet_concat.py): the
result reads as the inputs one after the other, in polars and in DuckDB, with
its statistics and page indexes still right; files of other schemas are refused."""

from __future__ import annotations

import datetime as dt
import io
import random

import duckdb
import polars as pl
import pytest

from msprobe_atb.tree.parquet_concat import NotConcatenable, _footer, concatenate, encode


def frame(rng: random.Random, n: int, start: int) -> pl.DataFrame:
    def maybe(v):
        return None if rng.random() < 0.1 else v

    return pl.DataFrame({
        "seq": [start + i for i in range(n)],
        "count": [maybe(rng.randrange(1 << 40)) for _ in range(n)],
        "max": [maybe(rng.uniform(-1e6, 1e6)) for _ in range(n)],
        "op_name": [maybe(f"Layer_{rng.randrange(80)}/Op\\x{rng.randrange(256):02x}")
                    for _ in range(n)],
        "path": [f"data/0_1/{start + i}/x.bin" for i in range(n)],
        "time": [dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
                 + dt.timedelta(microseconds=start + i) for i in range(n)],
    }, schema={"seq": pl.Int64, "count": pl.Int64, "max": pl.Float64, "op_name": pl.Utf8,
               "path": pl.Utf8, "time": pl.Datetime("ns", "UTC")})


def written(tmp_path, frames: list[pl.DataFrame], **kw) -> list:
    paths = []
    for i, f in enumerate(frames):
        p = tmp_path / f"in{i}.parquet"
        f.write_parquet(p, compression="zstd", statistics=True, **kw)
        paths.append(p)
    return paths


def concatenated(tmp_path, paths) -> tuple:
    out = tmp_path / "out.parquet"
    with open(out, "wb") as dst:
        rows = concatenate([open(p, "rb") for p in paths], dst)
    return out, rows


@pytest.mark.parametrize("row_group_size", [None, 100])
def test_concatenation_reads_as_its_inputs_in_order(tmp_path, row_group_size):
    rng = random.Random(7)
    frames = [frame(rng, n, start) for n, start in ((1, 0), (500, 1), (0, 501), (1234, 501))]
    paths = written(tmp_path, frames, row_group_size=row_group_size)
    out, rows = concatenated(tmp_path, paths)
    want = pl.concat(frames)
    assert rows == want.height
    assert pl.read_parquet(out).equals(want)
    # pushed-down filters use the moved statistics and page indexes
    got = pl.scan_parquet(out).filter(pl.col("seq").is_between(600, 700)).collect()
    assert got.equals(want.filter(pl.col("seq").is_between(600, 700)))
    q = ("select count(*), sum(seq), min(max), max(max), count(op_name), max(path), min(time)"
         " from read_parquet({}) where seq > 250")
    assert duckdb.sql(q.format(f"'{out}'")).fetchall() == \
        duckdb.sql(q.format([str(p) for p in paths])).fetchall()
    # and again, a concatenation among the inputs
    (tmp_path / "more").mkdir()
    more = written(tmp_path / "more", [frame(rng, 300, 2000)])
    out2 = tmp_path / "out2.parquet"
    with open(out2, "wb") as dst:
        concatenate([open(out, "rb"), open(more[0], "rb")], dst)
    assert pl.read_parquet(out2).equals(pl.concat([want, pl.read_parquet(more[0])]))


def test_footers_round_trip():
    buf = io.BytesIO()
    frame(random.Random(1), 50, 0).write_parquet(buf, statistics=True)
    meta, at = _footer(buf)
    assert encode(meta) == buf.getvalue()[at:-8]


def test_files_of_other_schemas_are_refused(tmp_path):
    rng = random.Random(3)
    paths = written(tmp_path, [frame(rng, 10, 0), frame(rng, 10, 10).drop("count")])
    with pytest.raises(NotConcatenable):
        concatenated(tmp_path, paths)
    (tmp_path / "junk").write_bytes(b"not parquet at all")
    with pytest.raises(NotConcatenable):
        concatenated(tmp_path, [tmp_path / "junk"])
