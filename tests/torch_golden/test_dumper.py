"""The torch dumper (docs/contracts.md §8): a Hugging Face Llama under `Dumper` writes the
tree the ATB probe writes, and the offline tools read it unchanged."""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from testkit import manifest_rows

from msprobe_atb.config import ConfigError
from msprobe_atb.offline.read.binfile import load_bin

PROMPT = [[1, 2, 3, 4, 5]]
NEW_TOKENS = 3  # the prefill and 2 decode steps: rounds 0, 1, 2
ALL = {"dump_enable": True, "task": "all", "exec_range": "all", "save_child": True}
TOP_LEVEL = ["0_Embedding", "1_LlamaRotaryEmbedding", "2_LlamaDecoderLayer",
             "3_LlamaDecoderLayer", "4_LlamaRMSNorm", "5_Linear"]


@pytest.fixture(scope="module")
def llama(tiny_llama_checkpoint):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(tiny_llama_checkpoint).eval()


def generate(model, out: Path, config) -> list[int]:
    """Runs generate under Dumper; the generated token ids."""
    import torch

    from msprobe_atb.torch import Dumper

    with torch.no_grad(), Dumper(model, output=out, config=config):
        ids = model.generate(torch.tensor(PROMPT), max_new_tokens=NEW_TOKENS, do_sample=False)
    return ids[0, len(PROMPT[0]):].tolist()


@pytest.fixture(scope="module")
def full(llama, tmp_path_factory):
    """(dump root, generated tokens, process dir) of task all, every round, save_child."""
    out = tmp_path_factory.mktemp("torch_full")
    tokens = generate(llama, out, ALL)
    root = out / "atb_dump_data"
    (proc,) = (root / "data").iterdir()
    return root, tokens, proc


def run_cli(*args: str, module: str = "msprobe_atb.offline.cli") -> tuple[int, str]:
    """An offline subcommand run in-process: (exit code, stdout)."""
    p = argparse.ArgumentParser(prog="msprobe-atb")
    importlib.import_module(module).register(p.add_subparsers())
    a = p.parse_args(list(args))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = a.func(a)
    return rc, out.getvalue()


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_rounds_are_forward_calls_and_ops_are_modules_in_call_order(full):
    root, _, proc = full
    assert proc.name == f"0_{os.getpid()}"  # the CPU is device 0
    assert sorted(p.name for p in proc.iterdir()) == ["0", "1", "2"]
    for rnd in proc.iterdir():
        ops = sorted((p.name for p in rnd.iterdir() if p.is_dir()),
                     key=lambda n: int(n.split("_")[0]))
        assert ops == TOP_LEVEL
        mlp = rnd / "3_LlamaDecoderLayer" / "3_LlamaMLP"
        assert sorted(p.name for p in mlp.iterdir()) == [
            "0_Linear", "1_SiLUActivation", "2_Linear", "3_Linear", "after", "before"]
        layer_inputs = sorted(p.name for p in (rnd / "2_LlamaDecoderLayer" / "before").iterdir())
        assert layer_inputs == ["intensor0.bin", "intensor1_position_embeddings_0.bin",
                                "intensor2_position_embeddings_1.bin", "intensor3_position_ids.bin"]
        marker = json.loads((rnd / "ROUND_COMPLETE.json").read_text())
        rows = _rows(rnd / "statistic.csv")
        assert marker["rows"] == len(rows) == len(list(rnd.rglob("*.bin"))) and marker["lost"] == 0
        assert len(_rows(rnd / "statistic_extra.csv")) == len(rows)
    assert list((root / "manifest").rglob("*.parquet"))


def test_bins_hold_the_tensors_the_model_computed(full, llama):
    _, tokens, proc = full
    emb = llama.model.embed_tokens.weight.detach().numpy()
    r0, r1 = proc / "0", proc / "1"
    assert load_bin(r0 / "0_Embedding/before/intensor0.bin").tolist() == PROMPT
    np.testing.assert_array_equal(load_bin(r0 / "0_Embedding/after/outtensor0.bin")[0],
                                  emb[PROMPT[0]])
    assert load_bin(r1 / "0_Embedding/before/intensor0.bin").tolist() == [[tokens[0]]]
    for r, token in enumerate(tokens):
        logits = load_bin(proc / str(r) / "5_Linear/after/outtensor0.bin")
        assert logits.dtype == np.float32 and logits.shape[-1] == 256
        assert int(logits[0, -1].argmax()) == token


def test_statistics_are_those_of_the_written_tensor(full):
    _, _, proc = full
    rows = _rows(proc / "0" / "statistic.csv")
    row = next(r for r in rows if r["Op Id"] == "3_3_1" and r["Input/Output"] == "output")
    assert row["Op Name"] == "LlamaDecoderLayer/LlamaMLP/SiLUActivation"
    assert row["Dtype"] == "float" and row["Shape"] == "1x5x128"
    arr = load_bin(row["Tensor Path"]).astype(np.float64)
    assert float(row["Max"]) == arr.max() and float(row["Min"]) == arr.min()
    assert float(row["Norm"]) == pytest.approx(np.sqrt((arr * arr).sum()), rel=1e-12)
    ids = next(r for r in rows if r["Op Id"] == "0" and r["Input/Output"] == "input")
    assert (ids["Dtype"], ids["Max"], ids["Min"]) == ("int64", "5", "1")


def test_info_names_each_op_s_module(full):
    root, _, proc = full
    (model,) = (root / "info" / "model" / proc.name).iterdir()
    doc = json.loads(model.read_text())
    assert doc["modelName"] == "LlamaForCausalLM" and doc["framework"] == "torch"
    assert [(n["opName"], n["module"]) for n in doc["nodes"]] == [
        ("Embedding_0", "model.embed_tokens"), ("LlamaRotaryEmbedding_1", "model.rotary_emb"),
        ("LlamaDecoderLayer_2", "model.layers.0"), ("LlamaDecoderLayer_3", "model.layers.1"),
        ("LlamaRMSNorm_4", "model.norm"), ("Linear_5", "lm_head")]
    layer = json.loads((root / "info" / "layer" / proc.name / "LlamaDecoderLayer_3.json")
                       .read_text())
    act = layer["nodes"][3]["nodes"][1]
    assert (act["opName"], act["param"]["module"]) == ("SiLUActivation_3_3_1",
                                                       "model.layers.1.mlp.act_fn")


def test_record_log_is_the_builder_s_input(full):
    root, _, proc = full
    (log,) = (root / ".probe" / "records").iterdir()
    assert log.name.startswith(f"{os.getpid()}-")
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert recs[0]["k"] == "attach" and recs[0]["framework"] == "torch"
    assert recs[-1]["k"] == "exit" and recs[-1]["errors"] == 0
    assert [r["round"] for r in recs if r["k"] == "round"] == [f"{proc.name}/{i}" for i in range(3)]
    tensors = [r for r in recs if r["k"] == "tensor"]
    assert [r["seq"] for r in tensors] == list(range(len(tensors)))
    assert recs[-1]["tensors_written"] == len(tensors)


def test_records_are_as_records_h_declares_them(full):
    """Every kind and field the torch dumper writes is declared for it, of its type, and
    every field declared for it that a clean dump has is there (records.h)."""
    from msprobe_atb.tree import record_schema as rs

    root, _, _ = full
    (log,) = (root / ".probe" / "records").iterdir()
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [p for r in recs for p in rs.problems(r, "torch")] == []
    seen = {(r["k"], k) for r in recs for k in r}
    # a lost tensor's note: none in a clean dump
    assert [f"{f.kind}.{f.name}" for f in rs.lists()[rs.RECORDS]
            if "torch" in f.writers and (f.kind, f.name) not in seen] == ["tensor.note"]


def test_the_offline_tools_read_a_torch_dump(full, tmp_path):
    root, _, _ = full
    rc, out = run_cli("stats", str(root))
    assert rc == 0 and "LlamaForCausalLM rounds 0-2" in out and "No NaN/Inf" in out
    rc, out = run_cli("compare", "-gp", str(root), "-tp", str(root), "-o", str(tmp_path / "cmp"))
    n = len(list((root / "data").rglob("*.bin")))
    assert rc == 0 and f"pass {n}, fail 0" in out
    rc, _ = run_cli("report", str(root), "--golden", str(root), "-o",
                    str(tmp_path / "report.html"))
    assert rc == 0 and (tmp_path / "report.html").stat().st_size > 0
    rc, out = run_cli("query", "--format", "json", str(root),
                      "SELECT count(*) AS n, count(DISTINCT round) AS rounds FROM tensors",
                      module="msprobe_atb.offline.manifest.cli")
    assert rc == 0 and json.loads(out) == [{"n": n, "rounds": 3}]


@pytest.mark.parametrize("config, wanted", [
    # round 1 only, top-level op 3 only (no children without save_child)
    ({"exec_range": "1", "ids": "3"}, {"1/3_LlamaDecoderLayer"}),
    # op_name matches the class name of the last segment at any depth
    ({"exec_range": "0,1", "op_name": "silu"},
     {f"{r}/{i}_LlamaDecoderLayer/3_LlamaMLP/1_SiLUActivation" for r in (0, 1) for i in (2, 3)}),
    # an id with save_child: the op and everything below it
    ({"exec_range": "2", "ids": "2_3", "save_child": True},
     {"2/2_LlamaDecoderLayer/3_LlamaMLP"}
     | {f"2/2_LlamaDecoderLayer/3_LlamaMLP/{c}" for c in ("0_Linear", "1_SiLUActivation",
                                                          "2_Linear", "3_Linear")}),
])
def test_selection_is_the_probe_s(llama, tmp_path, config, wanted):
    generate(llama, tmp_path, {"dump_enable": True, "task": "tensor", **config})
    (proc,) = (tmp_path / "atb_dump_data" / "data").iterdir()
    ops = {str(f.parent.parent.relative_to(proc)) for f in proc.rglob("*.bin")}
    assert ops == wanted


def test_statistics_task_writes_rows_and_no_files(llama, tmp_path):
    generate(llama, tmp_path, {"dump_enable": True, "task": "statistics", "exec_range": "0"})
    (proc,) = (tmp_path / "atb_dump_data" / "data").iterdir()
    assert not list(proc.rglob("*.bin"))
    rows = _rows(proc / "0" / "statistic.csv")
    # top level: embedding 1+1, rotary 2+2, layers 2 x (4+1), norm 1+1, lm_head 1+1
    assert len(rows) == 20 and all(r["Tensor Path"] == "N/A" and r["Max"] != "N/A" for r in rows)


def test_tensor_task_s_manifest_has_the_statistics(llama, tmp_path):
    generate(llama, tmp_path, {"dump_enable": True, "task": "tensor", "exec_range": "0"})
    root = tmp_path / "atb_dump_data"
    (proc,) = (root / "data").iterdir()
    rows = _rows(proc / "0" / "statistic.csv")
    # statistic.csv as msProbe writes it for task tensor; the counts beside it
    assert rows and all(r[c] == "N/A" for r in rows for c in ("Max", "Min", "Mean", "Norm"))
    extra = _rows(proc / "0" / "statistic_extra.csv")
    assert [int(e["Element Count"]) for e in extra] == [
        load_bin(r["Tensor Path"]).size for r in rows]
    m = manifest_rows(root).to_dicts()
    assert len(m) == len(rows)
    for r in m:
        arr = load_bin(root / r["path"]).astype(np.float64)
        assert (r["max"], r["min"]) == (arr.max(), arr.min())
        assert r["norm"] == pytest.approx(np.sqrt((arr * arr).sum()), rel=1e-12)


def test_dump_enable_false_writes_nothing(llama, tmp_path):
    generate(llama, tmp_path, {"dump_enable": False, "exec_range": "all"})
    assert not (tmp_path / "atb_dump_data").exists()


def test_config_file_is_read_as_check_reads_it(llama, tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("dump_enable: true\ntask: tensor\nexec_range: '1'\n")
    os.chmod(cfg, 0o600)
    generate(llama, tmp_path / "out", cfg)
    (proc,) = (tmp_path / "out" / "atb_dump_data" / "data").iterdir()
    assert [p.name for p in proc.iterdir()] == ["1"]


@pytest.mark.parametrize("config, says", [
    ({"dump_enable": True, "task": "tensors"}, 'did you mean "tensor"'),
    ({"dump_enable": True, "task": "overflow_check"}, "not supported by the torch dumper"),
    ({"dump_enable": True, "exec_rnage": "all"}, 'did you mean "exec_range"'),
    ("/nonexistent/config.json", "does not exist"),
    (42, "give the path of a config file"),
])
def test_a_bad_config_is_refused_before_anything_runs(llama, tmp_path, config, says):
    from msprobe_atb.torch import Dumper

    with pytest.raises(ConfigError, match=says):
        Dumper(llama, output=tmp_path, config=config)
    assert not (tmp_path / "atb_dump_data").exists()


def test_the_probe_and_the_tools_never_import_torch():
    import subprocess
    import sys

    code = ("import sys, msprobe_atb.cli as c; c.build_parser(); "
            "import msprobe_atb.offline.compare.dumps, msprobe_atb.tree.drain; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"


def test_stats_traces_a_nan_through_the_modules_that_fed_it(tiny_llama_checkpoint, tmp_path):
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_llama_checkpoint).eval()
    with torch.no_grad():
        model.model.layers[1].mlp.up_proj.weight[0, 0] = float("inf")
    generate(model, tmp_path, {**ALL, "task": "statistics", "exec_range": "0"})
    rc, out = run_cli("stats", str(tmp_path))
    first = out[out.index("FIRST NaN/Inf"):]
    # up_proj's output is the first; what fed it (the post-attention norm) was finite
    assert "3_LlamaDecoderLayer/3_LlamaMLP/2_Linear output 0" in first.splitlines()[0]
    assert "fed by" in first
    assert "3_LlamaDecoderLayer/2_LlamaRMSNorm via LlamaDecoderLayer_3_internal_" in first
    assert "NaN/Inf=no" in first.split("3_LlamaDecoderLayer/2_LlamaRMSNorm")[1].splitlines()[0]
    doc = json.loads(next((tmp_path / "atb_dump_data/info/model").glob("*/*.json")).read_text())
    rotary, layer0, layer1 = doc["nodes"][1:4]
    assert layer1["inTensors"][0] == layer0["outTensors"][0]  # the hidden state passed on
    assert layer0["inTensors"][1:3] == layer1["inTensors"][1:3] == rotary["outTensors"]


def test_a_build_waits_for_another_torch_process_s_build(tmp_path, monkeypatch):
    """Without a control block the lock's holder is another torch process of the dump
    (a forked child's close beside its parent's): its build ends, then this one runs,
    rather than leaving the tree unbuilt with "a control-plane daemon runs"."""
    import torch
    from torch import nn

    from msprobe_atb.control import lockfile
    from msprobe_atb.torch import Dumper
    from msprobe_atb.torch.build import build_tree

    model = nn.Sequential(nn.Linear(4, 4))
    with torch.no_grad(), Dumper(model, output=tmp_path, config={"dump_enable": True}):
        model(torch.ones(1, 4))
    root = tmp_path / "atb_dump_data"
    (marker,) = root.glob("data/*/0/ROUND_COMPLETE.json")
    marker.unlink()
    held = [lockfile.try_lock(root)]  # the other process's build
    real = lockfile.try_lock

    def try_lock(dump_root, *args):
        fd = real(dump_root, *args)
        if fd is None and held:  # refused once: the other build ends now
            os.close(held.pop())
        return fd

    monkeypatch.setattr(lockfile, "try_lock", try_lock)
    assert build_tree(root) is None
    assert not held and marker.exists()
