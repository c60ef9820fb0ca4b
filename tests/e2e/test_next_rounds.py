"""Issue 18 §4: rounds a user can aim at, through the real shim and control plane on
the stand-in service. `status` shows each model's current round per process, and
exec_range "next" dumps the next execution of each model, whole, in the rounds the
console and `status` name."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from e2e_helpers import require_artifacts
from testkit import save_config, wait_until

STATS = {"task": "statistics", "dump_enable": True, "save_child": False}


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprobe_atb", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def models(out: Path, env: dict[str, str]) -> dict[int, dict[str, dict]]:
    st = json.loads(cli("status", str(out), "--json", env=env).stdout)
    return {p["pid"]: {m["kind"]: m for m in p["models"]} for p in st["processes"]}


def top_ops(round_dir: Path) -> set[str]:
    """The round's layer-level ops as "{id}_{Name}", from its statistic.csv."""
    with open(round_dir / "statistic.csv", newline="") as f:
        return {f"{r['Op Id'].split('_')[0]}_{r['Op Name'].split('/')[0]}"
                for r in csv.DictReader(f)}


def test_status_shows_each_models_round_and_next_dumps_the_next_execution_whole(
        tmp_path, service_env, services):
    require_artifacts()
    out = tmp_path / "out"
    out.mkdir()
    svc = services(out, service_env, devices=2)
    for _ in range(3):
        svc.request(max_tokens=3)

    def settled():
        """Both ranks done with the last step (the reply can come before the other
        rank's last decode step has ended)."""
        now = models(out, service_env)
        return now if len(now) == 2 and all(
            m["running"] is None for per in now.values() for m in per.values()) and len(
            {per["decode"]["executed"] for per in now.values()}) == 1 else None

    before = wait_until(settled, timeout=60, what="both ranks between requests")
    for per in before.values():
        # three requests: three prefills, and their decode steps counted apart
        assert per["prefill"]["executed"] == per["prefill"]["started"] == 3
        assert per["decode"]["executed"] > 3 and not per["decode"]["exact"]
    decode_next = max(p["decode"]["executed"] for p in before.values())
    text = cli("status", str(out), env=service_env).stdout
    assert f"models: prefill round 2 done; decode round {decode_next - 1} done (asleep, a " \
           "round is counted when it ends)" in text

    # asleep, a shim counts executions at their end only: one may be under way
    # unseen, so the rounds start after the next one
    prefill, decode = 4, decode_next + 1
    save_config(svc.config, **STATS, exec_range="next")
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    st = json.loads(cli("status", str(out), "--json", env=service_env).stdout)
    assert st["config"]["exec_range"] == "next:1"
    assert [(r["kind"], r["first"], r["last"]) for r in st["config"]["next_rounds"]] == \
        [("prefill", prefill, prefill), ("decode", decode, decode)]
    assert f"exec_range next:1, made concrete when published: prefill round {prefill} " \
        f"(DecoderModel_Prefill), decode round {decode} (DecoderModel_Decoder)" \
        in cli("status", str(out), env=service_env).stdout
    svc.request(max_tokens=3)
    svc.request(max_tokens=3)
    # each process says so when it applies the edit (at its next op)
    svc.wait_line(rf"exec_range next: dumping .*DecoderModel_Prefill round {prefill}\b", count=2)
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    check_rounds(out, {prefill: "Prefill_layer", decode: "Decoder_layer"})

    # awake, the shims see executions begin: "next" is the very next one
    now = wait_until(settled, timeout=60, what="both ranks between requests")
    assert all(m["exact"] for per in now.values() for m in per.values())
    text = cli("status", str(out), env=service_env).stdout
    assert f"models: prefill round {prefill} done, next is round {prefill + 1}; decode " \
           "round " in text
    prefill = max(p["prefill"]["next"] for p in now.values())
    decode = max(p["decode"]["next"] for p in now.values())
    save_config(svc.config, **STATS, exec_range="next", _edit=2)
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    st = json.loads(cli("status", str(out), "--json", env=service_env).stdout)
    assert [(r["kind"], r["first"]) for r in st["config"]["next_rounds"]] == \
        [("prefill", prefill), ("decode", decode)]
    svc.request(max_tokens=3)
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    check_rounds(out, {4: "Prefill_layer", decode_next + 1: "Decoder_layer",
                       prefill: "Prefill_layer", decode: "Decoder_layer"})


def check_rounds(out: Path, expect: dict[int, str]) -> None:
    """Each process dumped exactly these rounds, each one model's execution whole."""
    data = out / "atb_dump_data" / "data"
    procs = sorted(data.iterdir())
    assert len(procs) == 2
    for proc in procs:
        assert sorted(int(r.name) for r in proc.iterdir()) == sorted(expect)
        for rnd, layer in expect.items():
            ops = top_ops(proc / str(rnd))
            # every layer-level op of the model's execution, and no op of the other model
            assert len(ops) == 4 and any(layer in n for n in ops), (rnd, ops)
            other = "Decoder_layer" if layer == "Prefill_layer" else "Prefill_layer"
            assert not any(other in n for n in ops), (rnd, ops)
