"""`compare` against a torch-format golden, aligned by structure: the golden is the
handcrafted torch tree of torch_from_atb.py (Hugging Face Llama's modules holding what
the stand-in's fp32 run computed), the targets real stand-in dumps under the probe."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "offline"))

from offline_helpers import make_real_dump, need_real, run_cli  # noqa: E402
from torch_from_atb import torch_from_atb  # noqa: E402

MODEL = ["--layers", "2", "--hidden", "32", "--heads", "2", "--vocab", "64", "--prompt-len",
         "6", "--decode-steps", "2", "--seed", "3"]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    need_real()
    base = tmp_path_factory.mktemp("align")
    d = {dt: make_real_dump(base / dt, dt, task="tensor", model=MODEL)
         for dt in ("fp32", "fp16")}
    d["inf"] = make_real_dump(base / "inf", "fp32", task="tensor", model=MODEL,
                              inject="inf:layer=1,op=SwiGLU")
    d["torch"] = torch_from_atb(d["fp32"], base / "torch")
    return d


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _compare(dumps, target: str, tmp_path: Path, *extra: str) -> tuple[int, str, list[dict]]:
    out = tmp_path / f"{target}.csv"
    rc, text = run_cli("compare", "-gp", str(dumps["torch"]), "-tp", str(dumps[target]),
                       "-o", str(out), "-j", "1", *extra)
    return rc, text, _rows(out)


def test_fp32_every_aligned_pair_agrees(dumps, tmp_path):
    rc, text, rows = _compare(dumps, "fp32", tmp_path)
    paired = [r for r in rows if r["verdict"] in ("pass", "fail")]
    assert rc == 0, text
    assert paired and all(r["verdict"] == "pass" for r in paired)
    assert all(float(r["max_rel_err"] or 0) <= 1e-5 for r in paired)
    by_op = {(r["op"], r["io"], r["index"], r["round"]): r for r in paired}
    # the fused QKV Linear against q|k|v concatenated, the SwiGLU against down_proj's input
    qkv = by_op[("1_Prefill_layer/1_LinearOperation", "output", "0_output", "0")]
    assert qkv["golden_module"].startswith("concat(model.layers.0.self_attn.q_proj output 0")
    act = by_op[("2_Prefill_layer/11_ActivationOperation", "output", "0_y", "0")]
    assert act["golden_module"] == "model.layers.1.mlp.down_proj input 0"
    # the LM head: torch's logits of every position, cut to ATB's selected row
    head = by_op[("3_LmHead", "output", "0", "0")]
    assert head["golden_module"] == "lm_head output 0 [rows of lm_head_indices]"
    assert "lm_head_indices" in head["alignment"]
    # prefill and both decode steps
    assert {r["round"] for r in paired} == {"0", "1"}
    assert any(r["op"].startswith("6_Decoder_layer") for r in paired)
    # unmatched on both sides is counted and shown, never a pass
    assert "ATB tensors with no torch counterpart" in text and "Rope" in text
    only = [r for r in rows if r["verdict"] == "golden-only"]
    assert only and all(r["golden_module"] for r in only)
    assert all(r["reason"].startswith("no torch golden") for r in rows
               if r["verdict"] == "target-only" and r["stage"] == "after")


def test_fp16_within_fp16_tolerance(dumps, tmp_path):
    rc, text, rows = _compare(dumps, "fp16", tmp_path)
    paired = [r for r in rows if r["verdict"] in ("pass", "fail")]
    assert rc == 0, text
    assert paired and all(r["verdict"] == "pass" for r in paired)
    assert {r["rtol"] for r in paired if r["target_dtype"] == "float16"} == {"0.001"}


def test_injected_inf_names_the_atb_op_and_its_torch_module(dumps, tmp_path):
    rc, text, _ = _compare(dumps, "inf", tmp_path, "--json")
    import json
    fd = json.loads(text)["first_divergence"]
    assert rc == 1
    assert fd["op"].startswith("2_Prefill_layer/11_ActivationOperation")
    assert fd["golden_module"] == "model.layers.1.mlp.down_proj input 0"
    rc, text, _ = _compare(dumps, "inf", tmp_path)
    assert "torch golden: model.layers.1.mlp.down_proj input 0" in text


def test_a_mapping_rule_changes_exactly_its_pair(dumps, tmp_path):
    inferred = tmp_path / "mapping.yaml"
    _, _, before = _compare(dumps, "fp32", tmp_path, "--write-mapping", str(inferred))
    doc = yaml.safe_load(inferred.read_text())
    rule = next(r for r in doc["rules"] if r["atb"] == "*_Prefill_layer/6_LinearOperation"
                and r["io"] == "output")
    assert rule["torch"] == ["model.layers.{layer}.self_attn.o_proj output 0"]
    # one pair: layer 1's o_proj output, against its input instead
    doc["rules"].insert(0, {"atb": "2_Prefill_layer/6_LinearOperation", "io": "output",
                            "index": 0, "torch": ["model.layers.1.self_attn.o_proj input 0"]})
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(doc))
    rc, text, after = _compare(dumps, "fp32", tmp_path, "--mapping", str(edited))
    key = ("op", "round", "stage", "io", "index")
    b = {tuple(r[k] for k in key): r for r in before}
    changed = [r for r in after if b[tuple(r[k] for k in key)]["golden_module"]
               != r["golden_module"] or b[tuple(r[k] for k in key)]["verdict"] != r["verdict"]]
    assert [(r["op"], r["io"], r["verdict"]) for r in changed] == [
        ("2_Prefill_layer/6_LinearOperation", "output", "fail")]
    assert changed[0]["golden_module"] == "model.layers.1.self_attn.o_proj input 0"
    assert "by the mapping file" in text and rc == 1


def test_report_overlays_the_torch_golden(dumps, tmp_path):
    out = tmp_path / "r.html"
    rc, text = run_cli("report", str(dumps["inf"]), "--golden", str(dumps["torch"]),
                       "-o", str(out), "-j", "1", "--json")
    import json
    info = json.loads(text)
    page = out.read_text()
    assert rc == 0 and "layer-compare" in info["sections"]
    assert info["first_divergence"]["golden_module"] == "model.layers.1.mlp.down_proj input 0"
    assert "golden Prefill_layer" in page or "golden " in page  # the dotted golden lines
    assert "model.layers.1.mlp.down_proj" in page


def test_mapping_needs_a_torch_golden(dumps, tmp_path):
    rc, _ = run_cli("compare", "-gp", str(dumps["fp32"]), "-tp", str(dumps["fp16"]),
                    "-o", str(tmp_path / "x.csv"), "--mapping", str(tmp_path / "m.yaml"))
    assert rc == 2
