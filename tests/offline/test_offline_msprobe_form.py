"""Our tools read dumps made by msProbe's own ATB probe (docs/msprobe_format.md): its alias
stubs naming the first occurrence by op id, its 6-decimal CSV in pool order, the
rows it drops for -inf/-nan, and info/layer/{pid}. Fixtures: msprobe_form.py."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from msprobe_form import MsprobeRound, row_kept, to_string
from offline_helpers import run_cli
from offline_synth import RoundWriter, small_model, write_bin, write_graphs

from msprobe_atb.offline import BinFileError, compare_dumps, load_bin, open_dump, read_header
from msprobe_atb.offline.report.page import build_report

INJ = "2_Layer/1_Linear"  # small_model's layer 1 child 1 gets a -inf at round 0


@pytest.fixture(scope="module")
def msprobe_dump(tmp_path_factory):
    """An fp16 dump in msProbe's form with a -inf in 2_Layer/1_Linear's output."""
    root = tmp_path_factory.mktemp("msprobe") / "out"
    with np.errstate(all="ignore"):
        small_model(root, dtype=np.float16, inject=(1, "Linear"), value=-np.inf,
                    writer=MsprobeRound)
    write_graphs(root, "4711")
    return root


def test_fixture_is_msprobe_form(msprobe_dump):
    r0 = msprobe_dump / "atb_dump_data/data/0_4711/0"
    assert not (r0 / "statistic_extra.csv").exists()
    assert not list(r0.rglob("before/outtensor*")) and not list(r0.rglob("after/intensor*"))
    rows = (r0 / "statistic.csv").read_text().splitlines()[1:]
    assert all(",-inf," not in r for r in rows)
    assert len(rows) < len(list(r0.rglob("*.bin")))
    assert rows[0].split(",")[10].count(".") == 1 and len(rows[0].split(",")[10].split(".")[1]) == 6
    stub = r0 / "1_Layer/1_Linear/before/intensor0.bin"
    assert b"data=1_0_outtensor0.bin\n$End=1\n" in stub.read_bytes()
    assert to_string(float("-inf"), False) == "-inf" and not row_kept(["0", "-inf"])
    assert row_kept(["-1.500000", "-3"])


def test_stub_named_by_op_id_reads_as_the_tensor(msprobe_dump, tmp_path):
    r0 = msprobe_dump / "atb_dump_data/data/0_4711/0"
    for stub, real in (("1_Layer/1_Linear/before/intensor0.bin",
                        "1_Layer/0_Norm/after/outtensor0.bin"),
                       ("1_Layer/0_Norm/before/intensor0.bin", "1_Layer/before/intensor0.bin"),
                       ("1_Layer/after/outtensor0.bin", "1_Layer/2_Add/after/outtensor0.bin")):
        assert read_header(r0 / stub).is_stub
        np.testing.assert_array_equal(load_bin(r0 / stub), load_bin(r0 / real))
    # A parameter-named first occurrence (ATB's `outtensor{i}_{irName}.bin`).
    arr = np.arange(4, dtype=np.float32)
    write_bin(tmp_path / "3/7_L/0_A/after/outtensor0_y.bin", arr, 0)
    s = write_bin(tmp_path / "3/7_L/1_B/before/intensor0.bin", b"", 0, (4,),
                  alias="7_0_outtensor0.bin")
    np.testing.assert_array_equal(load_bin(s), arr)
    bad = write_bin(tmp_path / "3/7_L/1_B/before/intensor1.bin", b"", 0, (4,),
                    alias="7_5_outtensor0.bin")
    with pytest.raises(BinFileError, match=r"data=7_5_outtensor0.bin names op 7_5, but .*7_L "
                                           r"has no op dir 5_<Name>"):
        load_bin(bad)


def test_stats_reads_dropped_rows_in_execution_order(msprobe_dump):
    d = open_dump(msprobe_dump)
    files = list((msprobe_dump / "atb_dump_data/data").rglob("*.bin"))
    assert d.tensors.height == len(files) == 48
    said = [p for p in d.problems if "have no statistic.csv row" in p]
    assert len(said) == 1 and "-inf" in said[0]
    step = dict(d.tensors.group_by("source").agg(pl.col("stat_step").unique()).iter_rows())
    assert step == {"csv": [1e-6], "bin": [0.0]}  # from the files: exact
    r0 = d.tensors.filter(pl.col("round") == 0)
    assert r0.get_column("op_id").to_list()[:6] == ["1", "1_0", "1_0", "1_1", "1_1", "1_2"]
    rc, out = run_cli("stats", str(msprobe_dump))
    assert rc == 0
    # the round is named by its model (info/model's "M", neither prefill nor decode)
    assert f"FIRST NaN/Inf in 0_4711: M round 0, {INJ} output 0" in out
    assert "-inf 1" in out.split("FIRST NaN/Inf")[1].splitlines()[0]
    # info/layer/{pid}: msProbe's folder without the device id.
    assert "2_Layer/0_Norm via Layer_2_internal_0" in out
    assert out.count("have no statistic.csv row") == 1


def test_compare_with_msprobe_dump(msprobe_dump, tmp_path):
    small_model(tmp_path / "g")
    res = compare_dumps(open_dump(tmp_path / "g"), open_dump(msprobe_dump))
    assert res.count("golden-only") == res.count("target-only") == res.count("unreadable") == 0
    fd = res.rows.filter((pl.col("verdict") == "fail") & pl.col("primary")).row(0, named=True)
    assert (fd["op"], fd["io"], fd["target_ninf"]) == (INJ, "output", 1)
    assert set(res.rows.filter(pl.col("round") == 1).get_column("verdict")) == {"pass"}
    rc, out = run_cli("compare", "-gp", str(tmp_path / "g"), "-tp", str(msprobe_dump),
                      "-o", str(tmp_path / "c.csv"))
    assert rc == 1 and f"round 0, {INJ} output 0" in out


def _ints(root, writer, task="statistics"):
    """One round of int32 tensors whose mean has more than 6 decimals."""
    w = writer(root / "atb_dump_data" / "data", "0_5", 0, task)
    for i in range(3):
        w.add(f"{i}_Gather", "output", 0, np.array([1, 2, 4 + i], np.int32))
    w.close()
    return root


def test_six_decimal_statistics_compare_within_their_rounding(tmp_path):
    g = _ints(tmp_path / "g", RoundWriter)
    t = _ints(tmp_path / "t", MsprobeRound)
    assert "2.333333" in (t / "atb_dump_data/data/0_5/0/statistic.csv").read_text()
    res = compare_dumps(open_dump(g), open_dump(t))
    assert set(res.rows.get_column("mode")) == {"stats"}
    assert res.count("pass") == 3, res.rows.select("op", "reason").to_dicts()
    bad = tmp_path / "bad"
    _ints(bad, MsprobeRound)
    f = bad / "atb_dump_data/data/0_5/0/statistic.csv"
    f.write_text(f.read_text().replace("2.333333", "2.333340"))
    assert compare_dumps(open_dump(g), open_dump(bad)).count("fail") == 1


def test_convert_and_report_read_msprobe_dump(msprobe_dump, tmp_path):
    out = tmp_path / "npy"
    rc, text = run_cli("convert", str(msprobe_dump / "atb_dump_data"), "-o", str(out))
    assert rc == 0 and "converted 48," in text and "errors 0" in text
    r0 = msprobe_dump / "atb_dump_data/data/0_4711/0"
    stub = r0 / "1_Layer/1_Linear/before/intensor0.bin"
    npy = out / stub.relative_to(msprobe_dump / "atb_dump_data").with_suffix(".npy")
    real = r0 / "1_Layer/0_Norm/after/outtensor0.bin"
    np.testing.assert_array_equal(np.load(npy), load_bin(real))
    page, _ = build_report(open_dump(msprobe_dump, fill_stats=True))
    assert INJ in page and "have no statistic.csv row" in page


def test_statistics_only_msprobe_dump_warns_of_missing_rows(tmp_path):
    with np.errstate(all="ignore"):
        small_model(tmp_path, dtype=np.float16, inject=(0, "Add"), value=-np.inf,
                    task="statistics", writer=MsprobeRound)
    rc, out = run_cli("stats", str(tmp_path))
    assert "such tensors are missing from this dump" in out and "2 round dir(s)" in out


def _no_value_round(root, writer):
    """One round: a tensor of NaN only (msProbe: Max -FLT_MAX, Min FLT_MAX) and one with
    +Inf and -Inf (msProbe drops its row for the -inf Min: read from the file)."""
    w = writer(root / "atb_dump_data" / "data", "0_5", 0)
    w.add("1_Layer", "input", 0, np.array([1, 2, 3, 4], np.float16))
    w.add("1_Layer/0_Norm", "output", 0, np.full(4, np.nan, np.float16))
    w.add("1_Layer", "output", 0, np.array([np.inf, -np.inf, 1, 2], np.float16))
    w.close()
    return root


def test_all_nan_sentinel_reads_as_no_finite_value(tmp_path):
    """msProbe's start values of max/min are no statistics; no warning leaks."""
    t = _no_value_round(tmp_path / "t", MsprobeRound)
    csv_text = (t / "atb_dump_data/data/0_5/0/statistic.csv").read_text()
    flt_max = "340282346638528859811704183484516925440.000000"
    assert f",-{flt_max},{flt_max},nan,nan," in csv_text
    g = tmp_path / "g"
    w = RoundWriter(g / "atb_dump_data" / "data", "0_5", 0)
    for op, io in (("1_Layer", "input"), ("1_Layer/0_Norm", "output"), ("1_Layer", "output")):
        w.add(op, io, 0, np.array([1, 2, 3, 4], np.float32))
    w.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        norm = open_dump(t).tensors.filter(pl.col("op_id") == "1_0").row(0, named=True)
        assert np.isnan(norm["max"]) and np.isnan(norm["min"]) and norm["nonfinite"]
        rc, out = run_cli("stats", str(t))
        assert rc == 0 and "e+38" not in out
        assert "1_Layer                               nan 1_0 output0" in out
        rc, out = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(tmp_path / "c.csv"))
    assert rc == 1
    rows = pl.read_csv(tmp_path / "c.csv").filter(pl.col("op") == "1_Layer/0_Norm")
    assert rows.height == 1 and "e+38" not in str(rows.select("target_max", "target_min").row(0))
