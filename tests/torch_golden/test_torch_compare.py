"""`compare` and `report` against a PyTorch golden, end to end (docs/torch_golden.md): the tiny
Hugging Face Llama runs generate under `Dumper`; the stand-in runs the same checkpoint
(`--weights`) under the probe on the same token ids (the prompt, and torch's tokens
teacher-forced into the decode steps): prefill and 2 decode steps on both sides."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sys
from functools import partial
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parents[1] / "offline"))

from offline_helpers import make_real_dump, need_real, run_cli, side_by_side  # noqa: E402

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

PROMPT = [1, 17, 42, 99, 5, 250, 3, 64]
NEW_TOKENS = 3  # prefill + 2 decode steps
FP16_EPS = 2.0 ** -10


@pytest.fixture(scope="module")
def dumps(tiny_llama_checkpoint, tmp_path_factory):
    """The torch golden (fp32) and stand-in dumps: fp32, fp16, fp32 with an Inf injected
    into layer 1's SwiGLU output, fp32 of the top-level ops alone (save_child false)."""
    need_real()
    import torch
    from transformers import LlamaForCausalLM

    from msprobe_atb.torch import Dumper

    base = tmp_path_factory.mktemp("torch_compare")
    model = LlamaForCausalLM.from_pretrained(tiny_llama_checkpoint).eval()
    with torch.no_grad(), Dumper(model, output=base / "torch", config={
            "dump_enable": True, "task": "tensor", "exec_range": "all", "save_child": True}):
        ids = model.generate(torch.tensor([PROMPT]), max_new_tokens=NEW_TOKENS,
                             do_sample=False)
    tokens = ids[0, len(PROMPT):].tolist()
    same_ids = ["--weights", str(tiny_llama_checkpoint), "--prompt-ids",
                ",".join(map(str, PROMPT)), "--decode-ids", ",".join(map(str, tokens[:-1]))]
    makers = {name: partial(make_real_dump, base / name, dtype, task="tensor", model=same_ids,
                            inject=inject)
              for name, dtype, inject in (("fp32", "fp32", None), ("fp16", "fp16", None),
                                          ("inf", "fp32", "inf:layer=1,op=SwiGLU"))}
    makers["top"] = partial(make_real_dump, base / "top", "fp32", task="tensor",
                            model=same_ids, save_child=False)
    return {"torch": base / "torch", **side_by_side(makers)}


def _compare(dumps, target: str, tmp_path: Path, *extra: str) -> tuple[int, str, list[dict]]:
    out = tmp_path / f"{target}{len(list(tmp_path.iterdir()))}.csv"
    rc, text = run_cli("compare", "-gp", str(dumps["torch"]), "-tp", str(dumps[target]),
                       "-o", str(out), "-j", "1", *extra)
    with open(out, newline="") as f:
        return rc, text, list(csv.DictReader(f))


def _paired(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["verdict"] in ("pass", "fail")]


def test_fp32_every_aligned_pair_agrees_within_1e_5(dumps, tmp_path):
    rc, text, rows = _compare(dumps, "fp32", tmp_path)
    paired = _paired(rows)
    assert rc == 0, text
    assert len(paired) > 300 and all(r["verdict"] == "pass" for r in paired)
    # relative to the golden's magnitude (the per-element floor is atol 1e-5)
    for r in paired:
        scale = max(abs(float(r["golden_max"])), abs(float(r["golden_min"])), 1.0)
        assert float(r["max_abs_err"]) <= 1e-5 * scale, r
    # prefill and both decode steps, every role of the layer
    assert {r["round"] for r in paired} == {"0", "1"}
    assert any(r["op"].startswith("6_Decoder_layer") for r in paired)
    hows = {r["alignment"].split(":")[0].split(" (")[0] for r in paired}
    assert {f"layer role {x}" for x in ("input_norm", "qkv", "split_qkv", "rope", "o_proj",
                                        "attn_add", "post_norm", "gate_up", "activation",
                                        "down", "mlp_add")} <= hows
    by = {(r["op"], r["io"], r["index"], r["round"]): r for r in paired}
    qkv = by[("1_Prefill_layer/1_LinearOperation", "output", "0_output", "0")]
    assert qkv["golden_module"] == ("concat(model.layers.0.self_attn.q_proj output 0 | "
                                    "model.layers.0.self_attn.k_proj output 0 | "
                                    "model.layers.0.self_attn.v_proj output 0)")
    assert "concat on the last axis" in qkv["alignment"] and "reshape 1x8x192 -> 8x192" in \
        qkv["alignment"]
    act = by[("2_Prefill_layer/11_ActivationOperation", "output", "0_y", "0")]
    assert act["golden_module"] == "model.layers.1.mlp.down_proj input 0"
    attn = by[("6_Decoder_layer/5_PagedAttentionOperation", "output", "0_attnOut", "1")]
    assert attn["golden_module"] == "model.layers.1.self_attn.o_proj input 0"
    # the final norm: torch normalises every position, ATB the selected row
    norm = by[("3_LmHead/1_RmsNormOperation", "output", "0_y", "0")]
    assert norm["golden_module"] == "model.norm output 0 [rows of lm_head_indices]"
    assert "rows [7] (lm_head_indices)" in norm["alignment"]
    # what has no counterpart is counted, shown with why, and never a pass
    assert "ATB tensors with no torch counterpart" in text and "ReshapeAndCache" in text
    # self_attn, mlp (as wholes) and act_fn (fused into SwiGLU) of both layers
    assert "torch modules with no ATB counterpart: 6" in text
    assert "model.layers.1.mlp.act_fn" in text
    alone = [r for r in rows if r["verdict"] == "target-only" and r["stage"] == "after"
             and r["op"].endswith("RopeOperation")]
    assert alone and all(r["reason"].startswith("no torch golden: Rope") for r in alone)
    torch_only = [r for r in rows if r["verdict"] == "golden-only"]
    assert torch_only and all(r["golden_module"] for r in torch_only)


def test_fp16_every_aligned_pair_within_fp16_tolerance(dumps, tmp_path):
    # Two layers of fp16 rounding: each pair within twice fp16's element tolerance (1e-3)
    # and its largest error within 2 fp16 ulps of the golden's magnitude.
    rc, text, rows = _compare(dumps, "fp16", tmp_path, "--rtol", "2e-3", "--atol", "2e-3")
    paired = _paired(rows)
    assert rc == 0, text
    assert len(paired) > 300 and all(r["verdict"] == "pass" for r in paired)
    for r in paired:
        scale = max(abs(float(r["golden_max"])), abs(float(r["golden_min"])))
        assert float(r["max_abs_err"]) <= 2 * FP16_EPS * scale, r
        # a tensor of one element has no cosine (msProbe's "unsupported")
        one = set(r["target_shape"].split("x")) <= {"1"}
        assert r["cosine"] == "" if one else float(r["cosine"]) > 0.9999, r


def test_injected_inf_is_named_by_atb_op_and_torch_module(dumps, tmp_path):
    rc, text, _ = _compare(dumps, "inf", tmp_path, "--json")
    fd = json.loads(text)["first_divergence"]
    assert rc == 1
    assert fd["op"].startswith("2_Prefill_layer/11_ActivationOperation")
    assert fd["golden_module"] == "model.layers.1.mlp.down_proj input 0"
    assert "act_fn(gate) * up" in fd["alignment"]
    _, text, _ = _compare(dumps, "inf", tmp_path)
    assert "torch golden: model.layers.1.mlp.down_proj input 0" in text


def test_a_mapping_rule_changes_exactly_its_pair(dumps, tmp_path):
    inferred = tmp_path / "mapping.yaml"
    _, _, before = _compare(dumps, "fp32", tmp_path, "--write-mapping", str(inferred))
    doc = yaml.safe_load(inferred.read_text())
    rule = next(r for r in doc["rules"] if r["atb"] == "*_Prefill_layer/6_LinearOperation"
                and r["io"] == "output")
    assert rule["torch"] == ["model.layers.{layer}.self_attn.o_proj output 0"]
    # the inferred file as given: the same pairs
    _, _, same = _compare(dumps, "fp32", tmp_path, "--mapping", str(inferred))
    assert [(r["op"], r["golden_module"], r["verdict"]) for r in same] == \
        [(r["op"], r["golden_module"], r["verdict"]) for r in before]
    # one more rule, for layer 1's o_proj output alone: against o_proj's input
    doc["rules"].insert(0, {"atb": "2_Prefill_layer/6_LinearOperation", "io": "output",
                            "index": 0, "torch": ["model.layers.1.self_attn.o_proj input 0"]})
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(doc))
    rc, text, after = _compare(dumps, "fp32", tmp_path, "--mapping", str(edited))
    key = ("op", "round", "stage", "io", "index", "golden_module")
    changed = {tuple(r[k] for k in key) for r in after} ^ {tuple(r[k] for k in key)
                                                            for r in before}
    assert changed == {
        ("2_Prefill_layer/6_LinearOperation", "0", "after", "output", "0_output",
         "model.layers.1.self_attn.o_proj output 0"),
        ("2_Prefill_layer/6_LinearOperation", "0", "after", "output", "0_output",
         "model.layers.1.self_attn.o_proj input 0")}
    assert [r["verdict"] for r in after if r["op"] == "2_Prefill_layer/6_LinearOperation"
            and r["io"] == "output"] == ["fail"]
    assert "(396 by the mapping file)" in text and rc == 1  # every rule is in the file


def test_report_overlays_the_torch_golden(dumps, tmp_path):
    out = tmp_path / "r.html"
    rc, text = run_cli("report", str(dumps["inf"]), "--golden", str(dumps["torch"]),
                       "-o", str(out), "-j", "1", "--json")
    info = json.loads(text)
    page = out.read_text()
    assert rc == 0 and "layer-compare" in info["sections"]
    assert info["first_divergence"]["golden_module"] == "model.layers.1.mlp.down_proj input 0"
    assert "model.layers.1.mlp.down_proj input 0" in page  # the headline names it
    assert "golden dev 0 \\u00b7 round 0" in page  # its dotted lines over the ATB layers


def _norm_lines(page: str) -> dict[str, dict[str, dict[str, float]]]:
    """The report's norm plot: line dash -> round -> {layer: drawn value} (one device)."""
    spec = page.split("<section id='layers'>")[1].split("data-plot='plot")[1]
    fig = json.loads(spec.split(">", 1)[1].split("</script>")[0])
    out: dict[str, dict[str, dict[str, float]]] = {}
    for t in fig["data"]:
        if "lines" in t["mode"]:
            out.setdefault(t["line"]["dash"], {})[t["name"].rsplit(" ", 1)[1]] = {
                x: y for x, y in zip(t["x"], t["y"]) if y is not None}
    return out


def test_the_torch_overlay_is_drawn_over_the_aligned_tensors_alone(dumps, tmp_path):
    # torch's largest norm was drawn against this dump's over all its tensors, KV
    # caches too (no torch counterpart): a 2x gap where every pair passes
    rc, text, rows = _compare(dumps, "fp32", tmp_path)
    out = tmp_path / "r.html"
    assert rc == 0 and run_cli("report", str(dumps["fp32"]), "--golden", str(dumps["torch"]),
                               "-o", str(out), "-j", "1")[0] == 0
    lines = _norm_lines(out.read_text())
    same, torch, whole = lines["dash"], lines["dot"], lines["solid"]
    files: dict[str, dict[str, float]] = {}  # round -> layer -> largest aligned norm
    for r in _paired(rows):
        if r["target_dtype"] == "float":
            at = files.setdefault(r["round"], {})
            layer = r["op"].split("/")[0]
            at[layer] = max(at.get(layer, 0.0), float(r["target_norm"]))
    assert set(same) == set(torch) == set(files) == {"0", "1"}
    for rnd, drawn in same.items():
        assert drawn == pytest.approx(files[rnd], rel=1e-6)
        assert torch[rnd] == pytest.approx(drawn, rel=1e-4)  # every pair passes: no gap
    # this dump's KV caches are still drawn, on its solid line
    assert any(whole[rnd][x] > 1.5 * v for rnd in same for x, v in same[rnd].items())


def test_mapping_options_need_a_torch_golden(dumps, tmp_path):
    rc, _ = run_cli("compare", "-gp", str(dumps["fp32"]), "-tp", str(dumps["fp16"]),
                    "-o", str(tmp_path / "x.csv"), "--write-mapping", str(tmp_path / "m.yaml"))
    assert rc == 2 and not (tmp_path / "m.yaml").exists()


def test_a_mapping_rule_can_take_columns_of_torch_tensors(dumps, tmp_path):
    # ATB's split k against columns 64:128 of q|k|v (hidden 64): k_proj's output again
    rule = {"atb": "*_Prefill_layer/2_SplitOperation", "io": "output", "index": 1,
            "torch": [f"model.layers.{{layer}}.self_attn.{p}_proj output 0" for p in "qkv"],
            "cols": [64, 128]}
    f = tmp_path / "cols.yaml"
    f.write_text(yaml.safe_dump({"rules": [rule]}))
    rc, text, rows = _compare(dumps, "fp32", tmp_path, "--mapping", str(f))
    split_k = [r for r in rows if r["op"] == "1_Prefill_layer/2_SplitOperation"
               and r["io"] == "output" and r["index"].startswith("1")]
    assert rc == 0, text
    assert [r["verdict"] for r in split_k] == ["pass"]
    assert split_k[0]["golden_module"].endswith("[..., 64:128]")
    assert "columns 64:128" in split_k[0]["alignment"]


def test_top_level_ops_alone_align_by_order(dumps, tmp_path):
    # no child ops in the dump: the repeated top-level op is the decoder layer
    rc, text, rows = _compare(dumps, "top", tmp_path)
    paired = _paired(rows)
    assert rc == 0, text
    assert all(r["verdict"] == "pass" for r in paired)
    assert {(r["op"], r["io"], r["golden_module"]) for r in paired if r["round"] == "0"} >= {
        ("0_WordEmbedding", "output", "model.embed_tokens output 0"),
        ("2_Prefill_layer", "input", "model.layers.1 input 0"),
        ("6_Decoder_layer", "output", "model.layers.1 output 0"),
        ("7_LmHead", "output", "lm_head output 0 [rows of lm_head_indices]")}


def test_diagnose_against_the_torch_golden(dumps):
    """The root cause of the injected Inf, named against the torch golden as compare
    says it; the clean fp32 run has none."""
    rc, text = run_cli("diagnose", str(dumps["inf"]), "--golden", str(dumps["torch"]), "-j", "1")
    assert rc == 1 and text.startswith("root cause: 2_Prefill_layer/11_ActivationOperation "
                                       "own-error (prefill round 0: output inf where "), text
    _, compared = run_cli("compare", "-gp", str(dumps["torch"]), "-tp", str(dumps["inf"]),
                          "-o", str(dumps["inf"].parent / "diagnosed.csv"), "-j", "1")
    assert compared.startswith(text)
    rc, text = run_cli("diagnose", str(dumps["fp32"]), "--golden", str(dumps["torch"]), "-j", "1")
    assert (rc, text) == (0, "no cause found\n")


def test_bisect_measures_the_logits_against_a_torch_golden(dumps):
    """The torch golden's logits are the LM head's last token row; an fp32 stand-in run
    of the same checkpoint is within fp32 noise of it, an fp16 one within its dtype's
    own noise: no op needs promotion."""
    from msprobe_atb.cli import main
    for name, most in (("fp32", 1e-5), ("fp16", 1e-2)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(["bisect", str(dumps[name]), "--golden", str(dumps["torch"]), "--json"])
        doc = json.loads(out.getvalue())
        assert rc == 0 and doc["golden"] == str(dumps["torch"]), doc
        assert doc["before"] < most and doc["chosen"] == [], doc
