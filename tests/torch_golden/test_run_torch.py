"""`msprobe-atb run --torch -- python script.py`: a plain script, which imports
nothing of ours, is dumped as `Dumper` dumps it (issue 21 §1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import REPO

SCRIPT = """
import os, sys
import torch
from transformers import LlamaForCausalLM

model = LlamaForCausalLM.from_pretrained(sys.argv[1]).eval()
with torch.no_grad():
    ids = model.generate(torch.tensor([[1, 2, 3, 4, 5]]), max_new_tokens=3, do_sample=False)
print("tokens", ids[0, 5:].tolist(), flush=True)
if sys.argv[2] == "os._exit":
    os._exit(0)  # no atexit: the dumper cannot close its log
sys.exit(int(sys.argv[2]))
"""


def run_torch(tmp_path: Path, *args: str, config: dict | None = None,
              env: dict | None = None) -> subprocess.CompletedProcess:
    cfg = tmp_path / "config.json"
    if config is not None:
        cfg.write_text(json.dumps(config))
        os.chmod(cfg, 0o600)
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, "-m", "msprobe_atb", "run", "--torch", "--output",
                           str(tmp_path / "out"), "--config", str(cfg), "--", *args],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, **(env or {})})


def _tree(out: Path) -> tuple[list[str], dict]:
    (proc,) = (out / "atb_dump_data" / "data").iterdir()
    rounds = sorted(p.name for p in proc.iterdir())
    markers = {r: json.loads((proc / r / "ROUND_COMPLETE.json").read_text()) for r in rounds}
    return rounds, markers


@pytest.mark.parametrize("ending, rc", [("3", 3), ("os._exit", 0)])
def test_a_plain_script_is_dumped_and_its_exit_code_passed_on(tiny_llama_checkpoint, tmp_path,
                                                              ending, rc):
    r = run_torch(tmp_path, sys.executable, str(tmp_path / "script.py"),
                  str(tiny_llama_checkpoint), ending,
                  config={"dump_enable": True, "task": "all", "exec_range": "all"})
    assert r.returncode == rc, r.stderr
    assert "tokens" in r.stdout and "1 dumped a torch model" in r.stdout
    assert "LlamaForCausalLM" in r.stdout and "rounds 0-2 dumped, tensors 60/60 written" in r.stdout
    assert "3 execution-round directories, 3 marked complete" in r.stdout
    rounds, markers = _tree(tmp_path / "out")
    assert rounds == ["0", "1", "2"] and all(m["rows"] == 20 for m in markers.values())
    if ending == "os._exit":
        assert "ended without its exit record" in r.stdout


def test_a_missing_or_refused_config_starts_nothing(tmp_path):
    r = run_torch(tmp_path, sys.executable, "-c", "print('ran')")
    assert r.returncode == 2 and "does not exist" in r.stderr and "ran" not in r.stdout
    r = run_torch(tmp_path, sys.executable, "-c", "print('ran')",
                  config={"dump_enable": True, "task": "overflow_check"})
    assert r.returncode == 2 and "not supported by the torch dumper" in r.stderr
    assert "was not started" in r.stderr and "ran" not in r.stdout


def test_the_sitecustomize_it_shadows_still_runs(tmp_path):
    own = tmp_path / "site"
    own.mkdir()
    # (the run itself starts with this PYTHONPATH too: only the script's Python says it)
    (own / "sitecustomize.py").write_text("import os\nif 'MSPROBE_ATB_TORCH_CONFIG' in "
                                          "os.environ:\n    print('their sitecustomize')\n")
    r = run_torch(tmp_path, sys.executable, "-c", "print('script')",
                  config={"dump_enable": True}, env={"PYTHONPATH": str(own)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:2] == ["their sitecustomize", "script"]
    assert "without dumping: no torch module" in r.stderr


def test_the_first_module_holding_parameters_called_at_top_level_is_the_model(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text(
        "import torch\n"
        "from torch import nn\n"
        "x = nn.ReLU()(torch.randn(2, 4))  # no parameters: not the model\n"
        "model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))\n"
        "with torch.no_grad():\n"
        "    for _ in range(2):\n"
        "        model(x)\n"
        "    model[0](x)  # a submodule called alone, after: part of no round\n")
    r = run_torch(tmp_path, sys.executable, str(script),
                  config={"dump_enable": True, "task": "tensor", "exec_range": "all"})
    assert r.returncode == 0, r.stderr
    assert "Sequential" in r.stdout and "rounds 0-1 dumped, tensors 12/12 written" in r.stdout
    rounds, _ = _tree(tmp_path / "out")
    assert rounds == ["0", "1"]
    (proc,) = (tmp_path / "out" / "atb_dump_data" / "data").iterdir()
    assert sorted(p.name for p in (proc / "1").iterdir() if p.is_dir()) == [
        "0_Linear", "1_ReLU", "2_Linear"]
