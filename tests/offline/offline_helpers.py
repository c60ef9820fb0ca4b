"""Helpers of the offline tests: running a subcommand in-process, and making a
real dump with the stand-in ATB under the real probe."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from testkit import REPO, atb_home, atbsim_bin, shim_lib

ABI = 1
# The known fault of the injected runs: an Inf in the output of layer 0's
# Attention op, prefill round 0.
INJECT = "inf:layer=0,op=Attention,round=0"
INJECT_OP = "Attention"
# The report's truth tests: an Inf in the SwiGLU output of decoder layer
# TRUTH_LAYER (top-level op TRUTH_LAYER + 1) at prefill round 0, on device 1 only.
TRUTH_LAYER = 1
TRUTH_LAYERS = 3
TRUTH_INJECT = f"inf:layer={TRUTH_LAYER},op=SwiGLU,round=0,device=1"
TRUTH_MODEL = ["--layers", str(TRUTH_LAYERS), "--hidden", "32", "--heads", "2", "--vocab", "64",
               "--prompt-len", "6", "--decode-steps", "2", "--requests", "2", "--seed", "3"]
MODEL = ["--layers", "2", "--hidden", "32", "--heads", "2", "--vocab", "64", "--prompt-len", "6",
         "--decode-steps", "2", "--seed", "3"]


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--enable-logging=stderr", "--v=0",
                  "--virtual-time-budget=10000"]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Real headless Chromium with a fresh profile (skips the test without one)."""
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed: run scripts/install_deps.sh")
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.iterdir()))}"
    return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180)


def console(r: subprocess.CompletedProcess) -> list[str]:
    """The lines a page logged to the console."""
    return [line for line in r.stderr.splitlines() if ":CONSOLE" in line]


def run_cli(*args: str) -> tuple[int, str]:
    """Run an offline subcommand in-process; returns (exit code, stdout)."""
    from msprobe_atb.offline import cli

    p = argparse.ArgumentParser(prog="msprobe-atb")
    cli.register(p.add_subparsers())
    a = p.parse_args(list(args))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = a.func(a)
    return rc, out.getvalue()



def _daemon_alive(out: Path) -> bool:
    """What `msprobe-atb status OUT --json` says of the daemon, asked in-process: a
    Python started to ask it five times a second cost more than the dump's run."""
    from msprobe_atb.control.block import ControlError
    from msprobe_atb.status import collect
    from msprobe_atb.tree.cli import find_dump_root

    try:
        return bool(collect(find_dump_root(out))["daemon"]["alive"])
    except (ControlError, OSError):
        return False


def _wait_done(out: Path, timeout: float = 90.0) -> None:
    """Wait until the control-plane daemon has drained the records and exited,
    then rebuild the derived files from the record logs. The rebuild makes these
    tests independent of the live writer's timing (seen once: a live
    statistic.csv lacking a row that statistic_extra.csv had; the rebuild had it)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout and _daemon_alive(out):
        time.sleep(0.2)
    r = subprocess.run([sys.executable, "-m", "msprobe_atb", "rebuild", str(out)],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    if r.returncode != 0:
        raise RuntimeError(f"msprobe-atb rebuild {out} failed: {r.stderr[-2000:]}")


def make_real_dump(out: Path, dtype: str, *, inject: str | tuple[str, ...] | None = None,
                   task: str = "all",
                   filter_level: int = 1, model: list[str] = MODEL,
                   all_stages: bool = False, devices: tuple[int, ...] = (0,),
                   save_child: bool = True) -> Path:
    """Run the stand-in ATB under the real probe with a config enabled from the start
    (`all_stages`: save_all_stages, the opt-in to all four stages), one process per
    device, side by side; `inject`: one --inject spec, or several."""
    out.mkdir(parents=True, exist_ok=True)
    cfg = out / "config.json"
    cfg.write_text(json.dumps({"task": task, "dump_enable": True, "exec_range": "all",
                               "ids": "", "op_name": "", "save_child": save_child, "device": "",
                               "filter_level": filter_level, "save_all_stages": all_stages}))
    home = atb_home(ABI)
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD",) and not k.startswith(("MSPROBE_ATB_", "ATB_"))}
    env.update(ATB_HOME_PATH=str(home), ATB_OUTPUT_DIR=str(out), ATB_DUMP_CONFIG=str(cfg),
               MSPROBE_ATB_PYTHON=sys.executable, LD_PRELOAD=str(shim_lib(ABI)),
               LD_LIBRARY_PATH=f"{home / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}")
    cmd = [str(atbsim_bin(ABI)), "run", "--dtype", dtype, *model]
    for spec in [inject] if isinstance(inject, str) else inject or ():
        cmd += ["--inject", spec]
    procs = [subprocess.Popen([*cmd, "--device", str(d)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for d in devices]
    for p in procs:
        _, err = p.communicate(timeout=120)
        if p.returncode != 0:
            raise RuntimeError(f"atbsim failed ({p.returncode}): {err[-2000:]}")
    _wait_done(out)
    return out


def side_by_side(makers: dict[str, Callable[[], Path]]) -> dict[str, Path]:
    """name -> what its maker made, three makers at a time: most of a real dump's time
    is its control plane finishing, not the stand-in computing."""
    with ThreadPoolExecutor(3) as pool:
        made = {name: pool.submit(make) for name, make in makers.items()}
        return {name: future.result() for name, future in made.items()}


def module_real_dump(tmp_path_factory, name: str, dtype: str, **kw) -> Iterator[Path]:
    """The body of a module-scoped fixture: one real dump (make_real_dump's `kw`) under
    a temporary dir of `name`, removed after the module's tests."""
    need_real()
    base = tmp_path_factory.mktemp(name)
    yield make_real_dump(base / name, dtype, **kw)
    shutil.rmtree(base, ignore_errors=True)


def need_real() -> None:
    missing = [p for p in (atbsim_bin(ABI), shim_lib(ABI)) if not p.exists()]
    if missing:
        pytest.skip(f"real-dump tests need the native build (make): missing {missing}")


def llama_checkpoint(path: Path, *, layers: int, hidden: int, ffn: int, heads: int,
                     vocab: int, scaled: dict[str, float] | None = None) -> Path:
    """A random float32 Hugging Face Llama checkpoint for the stand-in's `--weights`
    (config.json, model.safetensors: written here, no torch), its weights at a trained
    model's scale; `scaled`: tensor name -> factor its weight is multiplied by, the
    weight fault atbsim's --inject cannot make."""
    import numpy as np

    rng = np.random.default_rng(0)
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,),
              "lm_head.weight": (vocab, hidden)}
    for n in range(layers):
        p = f"model.layers.{n}."
        shapes.update({p + "input_layernorm.weight": (hidden,),
                       p + "post_attention_layernorm.weight": (hidden,),
                       **{f"{p}self_attn.{x}_proj.weight": (hidden, hidden) for x in "qkvo"},
                       p + "mlp.gate_proj.weight": (ffn, hidden),
                       p + "mlp.up_proj.weight": (ffn, hidden),
                       p + "mlp.down_proj.weight": (hidden, ffn)})
    header, blobs, at = {}, [], 0
    for name, shape in shapes.items():
        w = (1 + 0.1 * rng.standard_normal(shape) if len(shape) == 1
             else rng.standard_normal(shape) / (1 if "embed" in name else shape[1] ** 0.5))
        blob = (w * (scaled or {}).get(name, 1.0)).astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [at, at + len(blob)]}
        blobs.append(blob)
        at += len(blob)
    head = json.dumps(header).encode()
    path.mkdir(parents=True, exist_ok=True)
    (path / "model.safetensors").write_bytes(len(head).to_bytes(8, "little") + head
                                             + b"".join(blobs))
    (path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": hidden,
        "intermediate_size": ffn, "num_hidden_layers": layers, "num_attention_heads": heads,
        "vocab_size": vocab, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
        "torch_dtype": "float32"}))
    return path
