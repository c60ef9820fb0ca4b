"""compare never reports a pass it did not check: nothing or too
little matched, different structure, statistics vs tensors, and a tensor holding
NaN/Inf, each said in the headline, with exit code 3 where the check is missing."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
from offline_helpers import run_cli
from offline_synth import RoundWriter, small_model, write_graphs

from msprobe_atb.offline import compare_dumps, open_dump
from msprobe_atb.offline.report.page import build_report

INJ = "2_Layer/1_Linear"


def _model(root, names: list[str], dtype=np.float32, task: str = "all", rounds=(0,)):
    """Top-level ops `{i}_{name}`, one input and one output each."""
    x = np.linspace(-1, 1, 8)
    for r in rounds:
        w = RoundWriter(root / "atb_dump_data" / "data", "0_321", r, task)
        for i, n in enumerate(names):
            w.add(f"{i}_{n}", "input", 0, (x * (i + 1)).astype(dtype))
            w.add(f"{i}_{n}", "output", 0, (x * (i + 2)).astype(dtype))
        w.close()
    return root


def _body(out: str) -> str:
    """compare's text after its diagnosis lines (one per process, first)."""
    lines = out.splitlines(keepends=True)
    while lines and lines[0].startswith(("root cause: ", "no cause found")):
        lines.pop(0)
    return "".join(lines)


def llama(layers: int) -> list[str]:
    return ["WordEmbedding", *["Prefill_layer"] * layers, "LmHead"]


def test_different_layer_counts_say_structure_first(tmp_path):
    g, t = _model(tmp_path / "g", llama(4)), _model(tmp_path / "t", llama(2), np.float16)
    res = compare_dumps(open_dump(g), open_dump(t))
    assert res.exit_code() == 3
    # 3_LmHead and 3_Prefill_layer are not paired: different ops.
    at3 = res.rows.filter(pl.col("op_id") == "3")
    assert set(at3.get_column("verdict")) == {"golden-only", "target-only"}
    rc, out = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(tmp_path / "c.csv"))
    assert rc == 3
    # after the diagnosis (of the target alone: its pairs are not trusted)
    assert out.startswith(res.diagnosis["lines"][0] + "\nSTRUCTURE DIFFERS")
    assert "3: golden Prefill_layer, target LmHead" in out
    assert "top-level op counts differ: golden 4 Prefill_layer; target 2 Prefill_layer" in out
    assert "No divergent tensor: all" not in out
    page, info = build_report(open_dump(t), res, str(g))  # refused, with the reasons
    assert "Golden not compared" in page and "op names differ at" in page
    assert info["refused"] and "No divergent tensor" not in page
    # On request, pairs by op id across the names, still saying so first.
    res = compare_dumps(open_dump(g), open_dump(t), pair_by_id=True)
    lm = res.rows.filter(pl.col("op_id") == "3").row(0, named=True)
    assert lm["verdict"] in ("pass", "fail") and "golden name Prefill_layer" in lm["reason"]
    rc, out = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(tmp_path / "d.csv"),
                      "--pair-by-id")
    assert rc == 0 and _body(out).startswith("STRUCTURE DIFFERS") and "as asked" in out


def test_nothing_matched_is_not_a_pass(tmp_path):
    g = _model(tmp_path / "g", llama(2))
    t = _model(tmp_path / "t", llama(2), rounds=(5, 6))  # whole dumps, other rounds
    rc, out = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(tmp_path / "c.csv"))
    assert rc == 3
    assert "NOTHING WAS COMPARED" in out and "no round in common (golden rounds 0, target 5-6)" \
        in out
    assert "No divergent tensor" not in out  # nothing was compared: no line about it
    assert _body(out).startswith("0 pairs compared, 16 target-only, 8 golden-only (processes ")
    rc, out = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(tmp_path / "d.csv"),
                      "--json")
    s = json.loads(out)
    assert rc == 3 and s["exit_code"] == 3 and s["incomplete"] and s["coverage"]["checked"] == 0
    assert s["causes"][0].startswith("no round in common")


def test_far_fewer_matched_names_the_selection(tmp_path):
    g = _model(tmp_path / "g", ["Layer"] * 8)
    t = tmp_path / "t"
    w = RoundWriter(t / "atb_dump_data" / "data", "0_321", 0)
    x = np.linspace(-1, 1, 8)
    for i in range(7, 14):  # other op ids: only op 7 is in both
        w.add(f"{i}_Layer", "input", 0, (x * (i + 1)).astype(np.float32))
        w.add(f"{i}_Layer", "output", 0, (x * (i + 2)).astype(np.float32))
    w.close()
    res = compare_dumps(open_dump(g), open_dump(t))
    assert res.count("pass") == 2 and res.count("fail") == 0 and res.exit_code() == 3
    rc, out = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(tmp_path / "c.csv"))
    assert rc == 3 and "NOT A PASS: only 2 of the smaller dump's 14 tensors" in out
    # the pairs, not the rows of both sides, are what was compared
    assert _body(out).startswith("2 pairs compared, 12 target-only, 14 golden-only (processes "
                          "0_321→0_321)\n")
    assert "the dumps selected different ops: golden 8 op ids, target 7, 1 in common" in out
    rc, _ = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(tmp_path / "d.csv"),
                    "--min-matched", "0.1")
    assert rc == 0


def test_statistics_vs_tensors_compared_by_statistics(tmp_path):
    g = small_model(tmp_path / "g", task="statistics")
    t = small_model(tmp_path / "t", task="tensor", dtype=np.float16)
    res = compare_dumps(open_dump(g), open_dump(t))
    assert res.count("pass") == 48 and set(res.rows.get_column("mode")) == {"stats"}
    rc, out = run_cli("compare", "-gp", str(g), "-tp", str(t), "-o", str(tmp_path / "c.csv"))
    assert rc == 0
    assert "the golden dump has statistics only" in out
    with np.errstate(all="ignore"):
        small_model(tmp_path / "bad", task="tensor", dtype=np.float16, inject=(1, "Linear"))
    rc, out = run_cli("compare", "-gp", str(g), "-tp", str(tmp_path / "bad"), "-o",
                      str(tmp_path / "d.csv"))
    assert rc == 1 and f"round 0, {INJ} output 0 [stats]\n  NaN/Inf: target 1 +Inf; golden " \
        "none (different counts)" in out
    assert "target dump's statistics were computed from its .bin files" in out


def test_nonfinite_leads_the_headline(synth_pair, tmp_path):
    rc, out = run_cli("compare", "-gp", str(synth_pair[0]), "-tp", str(synth_pair[1]),
                      "-o", str(tmp_path / "c.csv"))
    assert rc == 1
    block = out.split("FIRST DIVERGENT op")[1].splitlines()
    assert block[0].endswith(f"round 0, {INJ} output 0 [tensor]")
    assert block[1] == "  NaN/Inf: target 1 +Inf; golden none (different positions)"
    assert block[2] == "  cosine, max abs err, max rel err: N/A (NaN/Inf at different positions)"
    assert block[3].startswith("  over the elements finite on both sides (of 16): rmse")


def test_layer_counts_from_the_model_topology(tmp_path):
    """A target that dumped fewer layers of the same model is a selection (exit by
    verdicts); one whose model has fewer layers (info/model) is another model."""
    g = small_model(tmp_path / "g")
    write_graphs(g, "0_4711")
    t = small_model(tmp_path / "t", dtype=np.float16)
    write_graphs(t, "0_4711")
    for r in (0, 1):  # the target dumped layer 1 only (config ids "1")
        d = t / f"atb_dump_data/data/0_4711/{r}"
        for f in ("statistic.csv", "statistic_extra.csv"):
            lines = (d / f).read_text().splitlines()
            (d / f).write_text("\n".join([lines[0], *lines[1:9]]) + "\n")
    res = compare_dumps(open_dump(g), open_dump(t))
    assert res.scope.structure == [] and res.exit_code() == 0 and res.count("pass") == 16
    model = t / "atb_dump_data/info/model/0_4711/M.json"
    m = json.loads(model.read_text())
    m["nodes"] = m["nodes"][:2]
    model.write_text(json.dumps(m))
    res = compare_dumps(open_dump(g), open_dump(t))
    assert res.scope.structure == ["model M differs (info/model): golden 3 Layer; target 2 Layer"]
    assert res.exit_code() == 3
