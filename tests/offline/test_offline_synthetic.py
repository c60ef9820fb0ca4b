"""The tools on synthetic dumps (tests/offline/synth.py): table, stats, compare,
overflow, convert; fast and independent of the native build."""

from __future__ import annotations

import json
import shutil

import numpy as np
import polars as pl
import pytest
from offline_helpers import run_cli
from offline_synth import RoundWriter, small_model, write_graphs

from msprobe_atb.offline import compare_dumps, load_bin, open_dump
from msprobe_atb.offline.read.layout import DumpNotFound

INJ = "2_Layer/1_Linear"


def test_open_any_level(synth_pair):
    g, _ = synth_pair
    root = g / "atb_dump_data"
    full = open_dump(g).tensors
    assert full.height == 48 and full.get_column("seq").is_sorted()
    for p in (root, root / "data", root / "data" / "0_4711"):
        assert open_dump(p).tensors.height == 48
    one = open_dump(root / "data" / "0_4711" / "1").tensors
    assert one.height == 24 and set(one.get_column("round")) == {1}
    with pytest.raises(DumpNotFound, match="no dump found"):
        open_dump(root / "data" / "0_4711" / "1" / "1_Layer" / "before")


def test_filters(synth_pair):
    d = open_dump(synth_pair[0])
    assert set(d.filter(op="1_1").get_column("op_id")) == {"1_1"}
    assert set(d.filter(op="linear").get_column("op_id")) == {"1_1", "2_1", "3_1"}
    assert set(d.filter(layer="2").get_column("layer")) == {"2_Layer"}
    assert set(d.filter(round="1").get_column("round")) == {1}
    assert d.filter(device="3").height == 0
    with pytest.raises(ValueError, match="bad number list"):
        d.filter(round="x")


def test_bins_without_csv_and_bad_csv(tmp_path):
    with np.errstate(all="ignore"):
        small_model(tmp_path, inject=(0, "Add"))
    r0 = tmp_path / "atb_dump_data/data/0_4711/0"
    (r0 / "statistic.csv").unlink()
    r1 = tmp_path / "atb_dump_data/data/0_4711/1"
    (r1 / "statistic.csv").write_text("Device and PID,Max\n1,2\n")
    d = open_dump(tmp_path)
    assert set(d.tensors.get_column("source")) == {"bin"}
    assert d.tensors.height == 48
    assert any("statistic.csv: header" in p for p in d.problems)
    first = d.tensors.filter(pl.col("nonfinite")).row(0, named=True)
    assert (first["op_id"], first["io"], first["pinf"]) == ("1_2", "output", 1)


def test_lost_csv_row_kept_from_extra(tmp_path):
    """A row lost from statistic.csv (msProbe's racing writer) is still listed,
    with its counts from statistic_extra.csv; the mismatch is reported."""
    small_model(tmp_path, rounds=1)
    csv = tmp_path / "atb_dump_data/data/0_4711/0/statistic.csv"
    lines = csv.read_text().splitlines()
    csv.write_text("\n".join([lines[0], *lines[1:5], *lines[6:]]) + "\n")
    d = open_dump(tmp_path)
    assert any("1 row(s) of statistic_extra.csv have no statistic.csv row" in p
               for p in d.problems)
    assert d.tensors.height == 24 and d.tensors.get_column("seq").to_list() == list(range(24))
    lost = d.tensors.filter(pl.col("max").is_null()).row(0, named=True)
    assert (lost["seq"], lost["count"], lost["dev_pid"], lost["round"]) == (4, 16, "0_4711", 0)


def test_stats_cli_names_first_nonfinite(synth_pair, tmp_path):
    rc, out = run_cli("stats", str(synth_pair[1]))
    assert rc == 0
    assert f"FIRST NaN/Inf in 0_99: round 0, {INJ} output 0" in out
    rc, out = run_cli("stats", str(synth_pair[1]), "--json", "--round", "1")
    s = json.loads(out)
    assert s["first_nonfinite"] == [] and s["tensors"] == 24
    csv = tmp_path / "t.csv"
    rc, out = run_cli("stats", str(synth_pair[1]), "--layer", "2", "--csv", str(csv))
    assert set(pl.read_csv(csv).get_column("layer")) == {"2_Layer"}


def test_stats_only_dump(tmp_path):
    with np.errstate(all="ignore"):
        small_model(tmp_path, task="statistics", inject=(2, "Norm"))
    assert not list(tmp_path.rglob("*.bin"))
    rc, out = run_cli("stats", str(tmp_path))
    assert "FIRST NaN/Inf in 0_4711: round 0, 3_Layer/0_Norm output 0" in out


def test_tensor_only_dump_stats_from_files(tmp_path):
    with np.errstate(all="ignore"):
        small_model(tmp_path, task="tensor", inject=(0, "Linear"))
    d = open_dump(tmp_path)
    assert d.tensors.get_column("max").null_count() == d.tensors.height
    rc, out = run_cli("stats", str(tmp_path))
    assert "round 0, 1_Layer/1_Linear output 0" in out


def test_compare_synthetic(synth_pair, tmp_path):
    g, t = synth_pair
    res = compare_dumps(open_dump(g), open_dump(t))
    rows = res.rows
    assert rows.height == 48 and res.count("golden-only") == 0
    fd = rows.filter(pl.col("verdict") == "fail").row(0, named=True)
    assert (fd["op"], fd["io"], fd["nonfinite_match"], fd["target_pinf"]) == \
        (INJ, "output", False, 1)
    clean = rows.filter(pl.col("round") == 1)
    assert set(clean.get_column("verdict")) == {"pass"}
    assert clean.get_column("within_tol").min() >= 0.99
    out = tmp_path / "res.csv"
    rc, text = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(out))
    assert rc == 1 and out.exists()
    assert f"FIRST DIVERGENT op (target execution order): round 0, {INJ} output 0" in text
    assert f"round 0 {INJ}:" in text.split("Largest error growth")[1].splitlines()[1]


def test_an_error_from_exact_inputs_is_no_ratio(tmp_path):
    # a finite wrong value in INJ's output: its input is exact (error 0), so its
    # growth has no ratio (it read "0 -> 0.8 (x8e+06)", from a hidden 1e-7 floor)
    g, t = small_model(tmp_path / "g"), small_model(tmp_path / "t", inject=(1, "Linear"),
                                                    value=5.0, pid=99)
    rc, text = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(tmp_path / "c.csv"))
    growth = text.split("Largest error growth")[1].splitlines()[1:]
    assert rc == 1 and f"round 0 {INJ}: 0 -> " in growth[0], text
    assert growth[0].endswith(" (from zero)")
    assert all(" (x" not in line for line in growth if ": 0 -> " in line)
    rc, text = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o",
                       str(tmp_path / "c2.csv"), "--json")
    first = json.loads(text)["error_growth"][0]
    assert (first["op"], first["err_in"], first["growth"], first["from_zero"]) == \
        (INJ, 0.0, None, True)
    rc, _ = run_cli("report", str(t), "--golden", str(g), "-o", str(tmp_path / "r.html"))
    page = (tmp_path / "r.html").read_text()
    table = page.split("<section id='error-growth'>")[1].split("</section>")[0]
    row = table.split("<tbody>")[1].split("</tr>")[0]
    assert rc == 0 and ">" + INJ.replace("/", "/<wbr>") + "<" in row
    assert row.endswith("<td>from zero</td>"), row


def test_compare_mismatched_structure(tmp_path):
    small_model(tmp_path / "g", layers=3)
    small_model(tmp_path / "t", layers=2, dtype=np.float16)
    r = tmp_path / "t/atb_dump_data/data/0_4711/0"
    w = RoundWriter(r.parent.parent, "0_4711", 0)  # rewrite round 0 with an extra op
    w.add("9_Extra", "input", 0, np.ones(3, np.float32))
    w.close()
    res = compare_dumps(open_dump(tmp_path / "g"), open_dump(tmp_path / "t"))
    assert res.count("golden-only") > 0 and res.count("target-only") == 1
    rc, text = run_cli("compare", "-gp", str(tmp_path / "g"), "-tp", str(tmp_path / "t"),
                       "-o", str(tmp_path / "o"))
    assert "target-only: round 0 9_Extra before input 0" in text
    assert "golden-only: round 0 1_Layer before input 0" in text
    assert list((tmp_path / "o").glob("atb_tensor_compare_result_*.csv"))


def test_compare_round_dirs_and_stats_mode(tmp_path):
    with np.errstate(all="ignore"):
        small_model(tmp_path / "g", task="statistics")
        small_model(tmp_path / "t", task="statistics", dtype=np.float16, inject=(0, "Add"))
    gr = tmp_path / "g/atb_dump_data/data/0_4711/0"
    tr = tmp_path / "moved/0_77/5"  # a round dir copied elsewhere, another round number
    shutil.copytree(tmp_path / "t/atb_dump_data/data/0_4711/0", tr)
    res = compare_dumps(open_dump(gr), open_dump(tr))
    assert set(res.rows.get_column("mode")) == {"stats"}
    fd = res.rows.filter(pl.col("verdict") == "fail").row(0, named=True)
    assert fd["op"] == "1_Layer/2_Add" and "pinf count 0 vs 1" in fd["reason"]


def test_overflow_derived(synth_pair):
    rc, out = run_cli("overflow", str(synth_pair[1]))
    lines = out.splitlines()
    assert "from the statistics" in lines[0]
    assert lines[1].endswith(f"round 0 {INJ}")
    assert "+inf 1" in out


def test_overflow_from_log(synth_pair, tmp_path):
    t = tmp_path / "t"
    shutil.copytree(synth_pair[1], t)
    ov = t / "atb_dump_data/info/overflow"
    ov.mkdir(parents=True)
    (ov / "0_99.csv").write_text("Sequence,Kernel,Device\n4,Linear_2_1:MulKernel,0\n")
    rc, out = run_cli("overflow", str(t))
    assert "from the overflow log" in out
    assert f"#1 0_99 round 0 {INJ} kernel Linear_2_1:MulKernel" in out
    assert "outtensor0.bin" in out


def test_convert_round_trip_and_resume(synth_pair, tmp_path, capsys):
    src = synth_pair[1] / "atb_dump_data"
    out = tmp_path / "npy"
    rc, text = run_cli("convert", str(src), "-o", str(out), "-j", "2")
    assert rc == 0 and "converted 48," in text
    bins = sorted(src.rglob("*.bin"))
    for b in bins:
        npy = out / b.relative_to(src).with_suffix(".npy")
        np.testing.assert_array_equal(np.load(npy), load_bin(b))
    victim = out / bins[0].relative_to(src).with_suffix(".npy")
    victim.unlink()
    rc, text = run_cli("convert", str(src), "-o", str(out))
    assert "converted 1, up to date 47," in text
    one = tmp_path / "one.npy"
    rc, text = run_cli("convert", str(bins[0]), "-o", str(one))
    assert np.load(one).shape == load_bin(bins[0]).shape
    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    f = sorted(bad.rglob("*.bin"))[3]
    f.write_bytes(f.read_bytes()[:-1])
    rc, text = run_cli("convert", str(bad), "-o", str(tmp_path / "npy2"))
    assert rc == 1 and "converted 47," in text and "errors 1" in text
    # a .bin linked to a file outside the tree is named, not read
    linked = sorted(bad.rglob("*.bin"))[5]
    linked.unlink()
    outside = tmp_path / "outside.bin"
    shutil.copy(bins[5], outside)
    linked.symlink_to(outside)
    capsys.readouterr()
    rc, text = run_cli("convert", str(bad), "-o", str(tmp_path / "npy3"))
    assert rc == 1 and "converted 46," in text and "errors 2" in text
    assert f"{linked}: refused: a link out of the dump root {bad} (to {outside})" \
        in capsys.readouterr().err
    assert not (tmp_path / "npy3" / linked.relative_to(bad).with_suffix(".npy")).exists()


def test_msprobe_style_csv(tmp_path):
    """msProbe's own statistic.csv: no statistic_extra.csv, rows in pool order,
    6-decimal values, `-nan`, and an unquoted complex64 row with 19 columns."""
    small_model(tmp_path, rounds=2, task="statistics")
    for r in (0, 1):
        d = tmp_path / f"atb_dump_data/data/0_4711/{r}"
        (d / "statistic_extra.csv").unlink()
        lines = (d / "statistic.csv").read_text().splitlines()
        head, rows = lines[0], lines[1:]
        rows[2] = rows[2].rsplit(",", 5)[0] + ",0.000000,-nan,-nan,-nan,N/A"
        rows.append(f"0_4711,{r},Layer/Rope,Rope,1_9,output,0,complex64,nd,2,(1.0,2.0),"
                    "(0.5,0.1),(0.7,1.0),2.5,N/A")
        (d / "statistic.csv").write_text("\n".join([head, *rows[::-1]]) + "\n")
    dump = open_dump(tmp_path)
    t = dump.tensors
    assert t.height == 50 and not t.get_column("seq_exact").any()
    assert t.get_column("round").to_list() == [0] * 25 + [1] * 25  # rounds in order
    cx = t.filter(pl.col("dtype") == "complex64").row(0, named=True)
    assert cx["max"] is None and cx["op_id"] == "1_9" and cx["path"] is None
    nanrow = t.filter(pl.col("mean").is_nan())
    assert nanrow.height == 2 and nanrow.get_column("nonfinite").all()
    res = compare_dumps(open_dump(tmp_path), dump)
    assert res.count("golden-only") == res.count("target-only") == 0


def test_upstream_from_layer_and_model_graphs(tmp_path):
    with np.errstate(all="ignore"):
        small_model(tmp_path, inject=(1, "Add"))
    write_graphs(tmp_path, "0_4711")
    (tmp_path / "atb_dump_data/info/layer/0_4711/Layer_3.json").write_text("{not json")
    from msprobe_atb.offline.stats.summary import summarize
    s = summarize(open_dump(tmp_path))
    first = s["first_nonfinite"][0]
    assert first["op"] == "2_Layer/2_Add"
    ups = [(u["op_id"], u["tensor"], u["hops"]) for u in first["upstream"]]
    assert ups[:2] == [("2_1", "Layer_2_internal_1", 1), ("1", "M_internal_1", 1)]
    assert ("2_0", "Layer_2_internal_0", 2) in ups
    assert first["upstream"][0]["nonfinite"] is False
    assert any("Layer_3.json: layer graph skipped" in p for p in s["problems"])
    rc, out = run_cli("stats", str(tmp_path))
    assert "2_Layer/1_Linear via Layer_2_internal_1  NaN/Inf=no" in out
    assert "1_Layer via M_internal_1" in out


def test_msprobe_lost_rows_recovered_from_files(tmp_path):
    small_model(tmp_path, rounds=1)
    d = tmp_path / "atb_dump_data/data/0_4711/0"
    (d / "statistic_extra.csv").unlink()
    lines = (d / "statistic.csv").read_text().splitlines()
    (d / "statistic.csv").write_text("\n".join(lines[:-3]) + "\n")  # 3 rows lost
    dump = open_dump(tmp_path)
    assert dump.tensors.height == 24
    assert dump.tensors.filter(pl.col("source") == "bin").height == 3
    assert any("3 .bin file(s) have no statistic.csv row" in p for p in dump.problems)


def test_pair_processes_by_device_then_order():
    from msprobe_atb.offline.compare.dumps import pair_processes

    def procs(*dp):
        return pl.DataFrame({"dev_pid": list(dp), "device": [int(x.split("_")[0]) for x in dp]})

    pairs, notes = pair_processes(procs("0_10", "1_11", "2_12"), procs("1_90", "0_91"))
    assert pairs == [("0_10", "0_91"), ("1_11", "1_90")]
    assert notes == ["golden process 2_12 has no target counterpart"]
    pairs, _ = pair_processes(procs("0_10", "0_11"), procs("0_90", "0_91"))
    assert pairs == [("0_10", "0_90"), ("0_11", "0_91")]


def test_convert_raw_bits(tmp_path):
    from offline_synth import write_bin

    bits = np.array([0x3F80, 0xC000], dtype=np.uint16)  # bf16 1.0, -2.0
    src = write_bin(tmp_path / "in" / "a" / "outtensor0.bin", bits.tobytes(), 27, (2,))
    run_cli("convert", str(tmp_path / "in"), "-o", str(tmp_path / "f"))
    np.testing.assert_array_equal(np.load(tmp_path / "f/a/outtensor0.npy"), [1.0, -2.0])
    run_cli("convert", str(src), "-o", str(tmp_path / "r.npy"), "--raw")
    raw = np.load(tmp_path / "r.npy")
    assert raw.dtype == np.uint16 and raw.tolist() == [0x3F80, 0xC000]
