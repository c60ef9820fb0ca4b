"""The default dump reads like msProbe's: (1) msProbe's stages only
(docs/msprobe_format.md §5.3), and (2) every tensor the CSV names readable by a reader
as strict as msProbe's compare (which refuses any data= file), while identical tensors
share their disk blocks.
Made the way a user makes it: `msprobe-atb run` with the real shim and daemon, which
also shows what `run` promises: the command's exit code, and the dump complete when it
returns."""

from __future__ import annotations

import csv
import os
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
import xxhash
from e2e_helpers import require_artifacts, run_dump

# msProbe's reader knows these dtypes (docs/msprobe_format.md §7):
# aclDataType -> bytes per element
ITEMSIZE = {0: 4, 1: 2, 2: 1, 3: 4, 9: 8, 12: 1, 27: 2}
# large enough that tensors, not 4 KiB blocks, dominate the disk use
MODEL = ["--layers", "2", "--decode-steps", "1", "--hidden", "256", "--heads", "4"]


def strict_read(path: str) -> bytes:
    """Like msProbe's compare: `key=value` lines up to `$End`, no `data=` attribute,
    a payload of exactly dtype x dims bytes."""
    blob = Path(path).read_bytes()
    head, sep, payload = blob.partition(b"$End=1\n")
    assert sep, f"{path}: no $End"
    attrs = {}
    for line in head.decode().splitlines():
        parts = line.split("=")
        assert len(parts) == 2, f"{path}: header line {line!r}"
        attrs[parts[0]] = parts[1]
    assert "data" not in attrs, f"{path}: a data= stub, which msProbe's reader refuses"
    numel = 1
    for d in filter(None, attrs["dims"].split(",")):
        numel *= int(d)
    assert len(payload) == numel * ITEMSIZE[int(attrs["dtype"])], path
    return payload


def rows(data: Path) -> list[tuple[dict[str, str], dict[str, str]]]:
    out = []
    for stat in sorted(data.glob("*/*/statistic.csv")):
        with open(stat, newline="") as f:
            main = list(csv.reader(f))
        assert all(len(r) == 15 for r in main)  # msProbe's columns, nothing added
        with open(stat, newline="") as f, open(stat.with_name("statistic_extra.csv"),
                                               newline="") as g:
            out += list(zip(csv.DictReader(f), csv.DictReader(g)))
    return out


def assert_content_hashes(data: Path, rows: int, statuses: set[str]) -> None:
    """The manifest's content hash of every row: XXH64 of the payload its file holds,
    as the reference xxhash computes it."""
    manifest = pl.read_parquet(str(data.parent / "manifest" / "**" / "*.parquet"),
                               hive_partitioning=True)
    assert manifest.height == rows
    assert set(manifest.get_column("status")) == statuses
    for path, digest in manifest.select("path", "hash").iter_rows():
        assert digest == f"{xxhash.xxh64_intdigest(strict_read(str(data.parent / path))):016x}"


@pytest.mark.parametrize("abi", [0, 1], ids=["abi0", "abi1"])
def test_default_dump_reads_with_a_strict_reader_and_shares_storage(tmp_path, service_env,
                                                                    abi):
    require_artifacts(abi)
    data = run_dump(tmp_path, service_env, abi, MODEL)
    table = rows(data)
    assert len(table) > 300
    # (1): inputs before, outputs after, nothing else
    bins = [p for p in data.rglob("*.bin")]
    assert {(p.parent.name, p.name.startswith("intensor")) for p in bins} == \
        {("before", True), ("after", False)}
    assert {e["Stage"] for _, e in table} == {"before", "after"}
    # (2): every row's tensor reads; duplicates are links, named in the extra CSV
    statuses = Counter(e["Data Status"] for _, e in table)
    assert set(statuses) == {"bin", "linked"} and statuses["linked"] > statuses["bin"]
    for row, extra in table:
        payload = strict_read(row["Tensor Path"])
        if extra["Data Status"] == "linked":
            assert os.path.samefile(row["Tensor Path"], extra["Shares With"])
            assert strict_read(extra["Shares With"]) == payload
        else:
            assert extra["Shares With"] == ""
    sizes = sum(p.stat().st_size for p in bins)
    blocks = sum(st.st_blocks * 512 for st in {(s.st_dev, s.st_ino): s for s in
                                                (p.stat() for p in bins)}.values())
    assert blocks < 0.6 * sizes, (blocks, sizes)
    assert_content_hashes(data, len(table), {"written", "linked"})


def test_all_stages_on_request_told_apart_by_stage(tmp_path, service_env):
    require_artifacts(1)
    data = run_dump(tmp_path, service_env, 1, MODEL, save_all_stages=True)
    bins = list(data.rglob("*.bin"))
    assert {(p.parent.name, p.name.startswith("intensor")) for p in bins} == \
        {("before", True), ("before", False), ("after", True), ("after", False)}
    table = rows(data)
    key = [(r["Device and PID"], r["Execution Count"], r["Op Id"], r["Input/Output"],
            r["Index"]) for r, _ in table]
    assert len(set(key)) < len(key)  # statistic.csv alone cannot tell the stages apart
    assert len({k + (e["Stage"],) for k, (_, e) in zip(key, table)}) == len(key)
    for row, _ in table:
        strict_read(row["Tensor Path"])


def test_top_level_dump_hashes_each_payload_as_it_writes_it(tmp_path, service_env):
    """Without save_child there is no dedup: the writer hashes each payload piece by
    piece while it writes it; the manifest's hashes are still XXH64 of the files."""
    require_artifacts(1)
    data = run_dump(tmp_path, service_env, 1, MODEL, save_child=False, filter_level=0)
    assert_content_hashes(data, len(rows(data)), {"written"})
