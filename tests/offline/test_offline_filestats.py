"""Statistics a dump does not record are filled from the files by the shim's own
code, one chunk in memory at a time; a dump that records them is
not read at all, and `stats` says which it did."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from offline_helpers import run_cli
from offline_synth import small_model, write_bin

from msprobe_atb.offline import open_dump
from msprobe_atb.offline.read import filestats
from msprobe_atb.offline.read.binfile import load_payload, resolve
from msprobe_atb.offline.read.metrics import CHUNK, Reader
from msprobe_atb.offline.read.tensorstats import tensor_stats


def _tensor_task(root) -> None:
    """As the shim writes a `task: tensor` dump: no counts either (N/A)."""
    for f in root.rglob("statistic_extra.csv"):
        df = pl.read_csv(f, infer_schema=False)
        counts = ["Element Count", "NaN Count", "Pos Inf Count", "Neg Inf Count", "Zero Count"]
        df.with_columns(pl.lit("N/A").alias(c) for c in counts).write_csv(f)


EXACT = ("count", "max", "min", "nan", "pinf", "ninf", "zero")


def _same(got: dict, ref: dict) -> None:
    for k in EXACT:
        assert got[k] == ref[k] or (np.isnan(got[k]) and np.isnan(ref[k])), (k, got, ref)
    for k in ("mean", "norm"):  # chunk sums in another order than numpy's pairwise ones
        assert got[k] == pytest.approx(ref[k], rel=1e-12, nan_ok=True), (k, got, ref)


def _tensors() -> dict[str, tuple[np.ndarray, int]]:
    """Tensors over several chunks: NaN/Inf/zeros spread, a chunk all NaN."""
    rng = np.random.default_rng(5)
    n = 2 * CHUNK + 12345
    f = (rng.standard_normal(n) * 50).astype(np.float64)
    f[::9973], f[5::100_003], f[7::70_001], f[11::50_021] = 0, np.inf, -np.inf, np.nan
    f[CHUNK:2 * CHUNK] = np.nan
    ints = rng.integers(-1000, 1000, n)
    return {"float32": (f.astype(np.float32), 0), "float16": (f.astype(np.float16), 1),
            "float64": (f, 11), "all-nan": (np.full(n, np.nan, np.float32), 0),
            "int32": (ints.astype(np.int32), 3), "int64": (ints, 9),
            "uint8": ((ints % 256).astype(np.uint8), 4), "bool": ((ints > 0), 12),
            "bf16": (((f.astype(np.float32).view(np.uint32)) >> 16).astype(np.uint16), 27),
            "complex64": ((f[:1000] + 1j * f[1000:2000]).astype(np.complex64), 16)}


def test_payload_statistics_equal_numpys_with_one_chunk_in_memory(tmp_path):
    reader = Reader()
    for name, (arr, code) in _tensors().items():
        hdr = resolve(write_bin(tmp_path / f"{name}.bin", arr.tobytes(), code, arr.shape))
        _same(filestats.payload_stats(hdr, reader), tensor_stats(load_payload(hdr)))
    # the buffer holds a chunk (the last absorbs the tail), never a whole tensor
    assert reader._buf.nbytes < 2 * CHUNK * 8


def test_filled_statistics_are_those_a_statistics_dump_records(tmp_path):
    with np.errstate(all="ignore"):
        small_model(tmp_path / "all", inject=(1, "Linear"), dtype=np.float16)
        small_model(tmp_path / "tensor", inject=(1, "Linear"), dtype=np.float16, task="tensor")
    _tensor_task(tmp_path / "tensor")
    recorded = open_dump(tmp_path / "all").tensors
    filled_dump = open_dump(tmp_path / "tensor", fill_stats=True)
    filled = filled_dump.tensors
    assert filled_dump.stats_from_files == filled.height == recorded.height == 48
    cols = ["max", "min", "mean", "norm", "nan", "pinf", "ninf", "zero", "count"]
    for a, b in zip(recorded.select(cols).iter_rows(named=True),
                    filled.select(cols).iter_rows(named=True)):
        _same(b, a)


def test_stats_reads_no_tensor_of_a_dump_that_records_statistics(tmp_path, monkeypatch):
    with np.errstate(all="ignore"):
        small_model(tmp_path / "all", inject=(1, "Linear"))
        small_model(tmp_path / "tensor", inject=(1, "Linear"), task="tensor")
    _tensor_task(tmp_path / "tensor")

    def refuse(*_a):
        raise AssertionError("a tensor was read for its statistics")
    monkeypatch.setattr(filestats.Reader, "read", refuse)
    monkeypatch.setattr(filestats, "load_payload", refuse)
    rc, out = run_cli("stats", str(tmp_path / "all"))
    assert rc == 0 and "FIRST NaN/Inf in 0_4711: round 0, 2_Layer/1_Linear output 0" in out
    assert "computed from their .bin files" not in out
    monkeypatch.undo()
    rc, out = run_cli("stats", str(tmp_path / "tensor"))
    assert "FIRST NaN/Inf in 0_4711: round 0, 2_Layer/1_Linear output 0" in out
    assert "statistics of 48 tensors computed from their .bin files (" in out
