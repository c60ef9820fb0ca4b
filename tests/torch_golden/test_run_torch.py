"""`msprobe-atb run --torch -- python script.py`: a plain script, which imports
nothing of ours, is dumped as `Dumper` dumps it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import REPO

pytestmark = pytest.mark.long  # started first (tests/conftest.py)

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
              env: dict | None = None, options: tuple[str, ...] = ()
              ) -> subprocess.CompletedProcess:
    cfg = tmp_path / "config.json"
    if config is not None:
        cfg.write_text(json.dumps(config))
        os.chmod(cfg, 0o600)
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    return subprocess.run([sys.executable, "-m", "msprobe_atb", "run", "--torch", *options,
                           "--output", str(tmp_path / "out"), "--config", str(cfg), "--", *args],
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


# The child runs the model only once its parent has exited (the pipe's end of file):
# a run that returned with its command would miss it.
FORKED = """
import multiprocessing, os, sys
import torch
from torch import nn

def child_rounds():
    with torch.no_grad():
        model(x)
        model(x)

model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
x = torch.randn(2, 4)
with torch.no_grad():
    model(x)
if sys.argv[1] == "os.fork":
    gone_r, gone_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(gone_w)
        os.read(gone_r, 1)
        child_rounds()
        sys.exit(0)
else:
    p = multiprocessing.get_context("fork").Process(target=child_rounds)
    p.start()
    pid = p.pid
print("child", pid, flush=True)
"""


@pytest.mark.parametrize("fork", ["os.fork", "multiprocessing"])
def test_a_forked_child_is_a_process_of_its_own_and_the_run_waits_for_it(tmp_path, fork):
    script = tmp_path / "forked.py"
    script.write_text(FORKED)
    r = run_torch(tmp_path, sys.executable, str(script), fork,
                  config={"dump_enable": True, "task": "tensor", "exec_range": "all"})
    assert r.returncode == 0, r.stderr
    child = r.stdout.split("child ")[1].split()[0]
    root = tmp_path / "out" / "atb_dump_data"
    procs = {p.name.partition("_")[2]: sorted(x.name for x in p.iterdir())
             for p in (root / "data").iterdir()}
    (parent,) = set(procs) - {child}
    assert procs == {parent: ["0"], child: ["0", "1"]}
    for pid, rounds in procs.items():
        for rnd in rounds:
            assert (root / "data" / f"0_{pid}" / rnd / "statistic.csv").exists()
            assert (root / "data" / f"0_{pid}" / rnd / "ROUND_COMPLETE.json").exists()
    for log in (root / ".probe" / "records").iterdir():  # each its own, to its exit record
        recs = [json.loads(line) for line in log.read_text().splitlines()]
        assert recs[-1]["k"] == "exit" and sum(x["k"] == "exit" for x in recs) == 1
    assert "processes:   2 dumped a torch model" in r.stdout
    assert f"pid {parent}: Sequential (torch" in r.stdout
    assert re.search(rf"pid {parent}: .*exited; rounds 0 dumped, tensors 4/4", r.stdout)
    assert re.search(rf"pid {child}: .*exited; rounds 0-1 dumped, tensors 8/8", r.stdout)
    assert "3 execution-round directories, 3 marked complete" in r.stdout
    assert r.stdout.rstrip().splitlines()[-1] == (
        f"{root}: 12 selected tensors written by 2 process(es)")


def test_a_run_that_times_out_says_which_forked_children_still_run(tmp_path):
    script = tmp_path / "stays.py"
    script.write_text("import os, torch\nfrom torch import nn\n"
                      "model = nn.Linear(2, 2)\nmodel(torch.ones(1, 2))\n"
                      "r, w = os.pipe()\n"
                      "if os.fork() == 0:\n"
                      "    null = os.open(os.devnull, os.O_WRONLY)\n"
                      "    os.dup2(null, 1), os.dup2(null, 2)  # the run's output can end\n"
                      "    os.read(r, 1)  # never written: runs on\n")
    r = run_torch(tmp_path, sys.executable, str(script), options=("--timeout", "0"),
                  config={"dump_enable": True, "exec_range": "all"})
    child = re.search(r"1 process\(es\) \S+ started still run and dump \(pid (\d+)\)", r.stderr)
    try:
        assert r.returncode == 0 and child, r.stderr
        assert "msprobe-atb run: the dump is not complete after 0 s" in r.stderr
        assert "processes:   2 dumped a torch model" in r.stdout
        assert "selected tensors written by" not in r.stdout  # no count claimed as final
        pid = child.group(1)
        assert re.search(rf"pid {pid}: .*, running; rounds none dumped", r.stdout)
        # status reads a torch dump's record logs (it has no control block)
        st = subprocess.run([sys.executable, "-m", "msprobe_atb", "status", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=120)
        assert st.returncode == 0, st.stderr
        assert "processes:   2 dumped a torch model" in st.stdout
        assert re.search(rf"pid {pid}: .*, running;", st.stdout)
        assert re.search(r"pid \d+: Linear \(torch .*, exited; rounds 0 dumped", st.stdout)
        assert "selected tensors written by" not in st.stdout
        js = subprocess.run([sys.executable, "-m", "msprobe_atb", "status", "--json",
                             str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
        assert js.returncode == 2 and "a torch dump" in js.stderr
    finally:
        if child:
            os.kill(int(child.group(1)), signal.SIGKILL)
