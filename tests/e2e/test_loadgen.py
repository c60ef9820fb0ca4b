"""The load generator of `make bench` (native/tests/loadgen, bench/stats_pace.py)
under the real shim and control plane: the dump holds exactly what it says it
saved, every round is complete and nothing is lost."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from testkit import BUILD, REPO, manifest_rows, shim_lib

ABI = 1  # the build the bench uses
LOADGEN = BUILD / "probe" / "bin" / f"loadgen_abi{ABI}"
LAYERS = 2


def _top_ops(first_id: int, layer: str) -> set[str]:
    """A model's top-level ops as ReportOperationGraph names them (Name_id)."""
    names = ["WordEmbedding", *[layer] * LAYERS, "RmsNormOperation", "LmHead"]
    return {f"{n}_{first_id + i}.json" for i, n in enumerate(names)}


def test_loadgen_dump_holds_what_it_saved(tmp_path, clean_env):
    if not LOADGEN.exists() or not shim_lib(ABI).exists():
        pytest.skip("not built yet (make native-test)")
    out = tmp_path / "out"
    out.mkdir()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "dump_enable": True,
                                  "exec_range": "all", "save_child": True}))
    env = dict(clean_env, LD_PRELOAD=str(shim_lib(ABI)), ATB_OUTPUT_DIR=str(out),
               ATB_DUMP_CONFIG=str(config))
    # paced, so that a shared machine's control plane keeps up
    r = subprocess.run([str(LOADGEN), "--procs", "2", "--seconds", "2", "--layers", str(LAYERS),
                        "--decode-steps", "3", "--batch", "4", "--prefill-tokens", "16",
                        "--rate", "1000"], env=env, capture_output=True, text=True, timeout=300)
    try:
        w = subprocess.run([sys.executable, "-m", "msprobe_atb", "wait", str(out), "--timeout",
                            "120"], cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run([sys.executable, "-m", "msprobe_atb", "daemon", "--stop", "--output",
                        str(out)], cwd=REPO, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert w.returncode == 0, w.stdout + w.stderr  # complete, nothing lost
    devices = [dict(kv.split("=") for kv in line.split()) for line in r.stdout.splitlines()
               if line.startswith("device=")]
    assert sorted(d["device"] for d in devices) == ["0", "1"]
    root = out / "atb_dump_data"
    manifest = manifest_rows(root)
    for d in devices:
        proc = f"{d['device']}_{d['pid']}"
        saved = int(d["saved"])
        assert saved > 0
        rounds = sorted(p for p in (root / "data" / proc).iterdir() if p.is_dir())
        assert len(rounds) == max(int(d["prefill_rounds"]), int(d["decode_rounds"]))
        rows = 0
        for rnd in rounds:
            with open(rnd / "statistic.csv", newline="") as f:
                n = sum(1 for _ in csv.reader(f)) - 1
            marker = json.loads((rnd / "ROUND_COMPLETE.json").read_text())
            assert marker["rows"] == n and marker["lost"] == 0
            rows += n
        assert rows == saved
        assert len(manifest.filter(manifest["pid"] == int(d["pid"]))) == saved
        assert len(list((root / "data" / proc).rglob("op_param.json"))) == int(d["params"])
        models = {p.name for p in (root / "info" / "model" / proc).iterdir()}
        assert models == {"DecoderModel_Prefill.json", "DecoderModel_Decoder.json"}
        # the prefill ran first, so its ops took the first global ids
        layers = {p.name for p in (root / "info" / "layer" / proc).iterdir()}
        assert layers == _top_ops(0, "Prefill_layer") | _top_ops(LAYERS + 3, "Decoder_layer")
