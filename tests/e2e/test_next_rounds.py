"""Rounds a user can aim at, through the real shim and control plane on
the stand-in service. `status` shows each model's current round per process, and
exec_range "next" dumps the next execution of each model, whole, in the rounds the
console and `status` name."""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
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


def settled(out: Path, env: dict[str, str]):
    """Both ranks between requests, each model's counts (the reply can come before the
    other rank's last decode step has ended)."""
    now = models(out, env)
    return now if len(now) == 2 and all(
        m["running"] is None for per in now.values() for m in per.values()) and len(
        {per["decode"]["executed"] for per in now.values()}) == 1 else None


def next_rounds(out: Path, env: dict[str, str]) -> dict[int, dict[str, list[int] | None]]:
    return {pid: {kind: m["next_rounds"] for kind, m in per.items()}
            for pid, per in models(out, env).items()}


@pytest.mark.parametrize("start", ["asleep", "awake_idle"])
def test_next_dumps_the_one_request_sent_after_the_edit(tmp_path, service_env, services, start):
    """Asleep, or awake selecting nothing, the shim counts executions only as they end;
    each process still takes the very next execution of each model after the edit."""
    require_artifacts()
    out = tmp_path / "out"
    out.mkdir()
    svc = services(out, service_env, devices=2)
    if start == "awake_idle":
        save_config(svc.config, **STATS, exec_range="none")
        assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    for _ in range(2):
        svc.request(max_tokens=3)
    before = wait_until(lambda: settled(out, service_env), timeout=60,
                        what="both ranks between requests")
    for per in before.values():
        assert per["prefill"]["executed"] == 2 and not per["decode"]["exact"]
    if start == "asleep":
        decode = before[next(iter(before))]["decode"]["executed"]
        assert f"models: prefill round 1 done; decode round {decode - 1} done (asleep, a " \
               "round is counted when it ends)" in cli("status", str(out), env=service_env).stdout
    prefill, decode = 2, before[next(iter(before))]["decode"]["executed"]

    save_config(svc.config, **STATS, exec_range="next")
    done = cli("wait", str(out), "--timeout", "60", env=service_env)
    assert done.returncode == 0, done.stderr
    # nothing has begun since the edit: no round is chosen, and wait does not say complete
    assert "exec_range next:1 is in force; no process has begun an execution since the " \
           "edit, so no round is chosen yet" in done.stdout and "complete" not in done.stdout
    text = cli("status", str(out), env=service_env).stdout
    assert "exec_range next:1: the next execution of each model after the edit" in text
    assert text.count("exec_range next:1: prefill: the next execution (round not fixed "
                      "yet), decode: the next execution (round not fixed yet)") == 2

    svc.request(max_tokens=3)
    done = cli("wait", str(out), "--timeout", "60", env=service_env)
    assert done.returncode == 0, done.stderr
    chosen = f"prefill round {prefill} (DecoderModel_Prefill), decode round {decode} " \
             "(DecoderModel_Decoder)"
    assert " complete: " in done.stdout and done.stdout.count(chosen) == 2, done.stdout
    assert next_rounds(out, service_env) == {
        pid: {"prefill": [prefill, prefill], "decode": [decode, decode]} for pid in before}
    assert cli("status", str(out), env=service_env).stdout.count(
        f"exec_range next:1: {chosen}") == 2
    # each process says so when it applies the edit (at its next op, asleep), and which
    # rounds as it fixes them
    svc.wait_line(r"exec_range next:1: dumping the next execution of each model", count=2)
    svc.wait_line(rf"exec_range next: dumping .*DecoderModel_Prefill round {prefill}\b", count=2)
    svc.wait_line(rf"exec_range next: dumping .*DecoderModel_Decoder round {decode}\b", count=2)
    check_rounds(out, [prefill], [decode])


def test_next_n_from_awake_takes_n_executions_and_wait_waits_for_them(
        tmp_path, service_env, services):
    """Awake and dumping (the shims see executions begin), "next:2": two prefills and
    the first two decode steps; `wait` is not complete before the second prefill ran."""
    require_artifacts()
    out = tmp_path / "out"
    out.mkdir()
    svc = services(out, service_env, devices=2)
    save_config(svc.config, **STATS, exec_range="0,0")
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    svc.request(max_tokens=3)
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    now = wait_until(lambda: settled(out, service_env), timeout=60,
                     what="both ranks between requests")
    assert all(m["exact"] for per in now.values() for m in per.values())
    text = cli("status", str(out), env=service_env).stdout
    assert "models: prefill round 0 done, next is round 1; decode round " in text
    prefill, decode = 1, now[next(iter(now))]["decode"]["next"]

    save_config(svc.config, **STATS, exec_range="next:2")
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    svc.request(max_tokens=3)
    # the second prefill of the two has not run: not complete
    early = cli("wait", str(out), "--timeout", "2", env=service_env)
    assert early.returncode == 3 and f"prefill rounds {prefill}-{prefill + 1} of pid " \
        in early.stderr, early.stderr
    svc.request(max_tokens=3)
    done = cli("wait", str(out), "--timeout", "60", env=service_env)
    assert done.returncode == 0 and done.stdout.count(
        f"prefill rounds {prefill}-{prefill + 1} (DecoderModel_Prefill), decode rounds "
        f"{decode}-{decode + 1} (DecoderModel_Decoder)") == 2, done.stdout
    check_rounds(out, [0, prefill, prefill + 1], [0, decode, decode + 1])


@pytest.mark.parametrize("execute", ["sync", "async"])
def test_an_edit_storm_marks_no_round_complete_that_lacks_ops(tmp_path, service_env,
                                                              services, execute):
    """Two request threads and a storm of edits (next, next:2, none),
    most of them published while an execution runs (a wider model's executions last
    longer than the daemon takes to publish). An execution begun under a config that
    dumps it ("all" before the storm, "next" in it) is dumped whole: every round
    marked complete holds all of each model's ops or none of them. Before, an edit
    between two ops of such an execution left the rest unselected (a decode round of
    2 of its 4 ops, marked complete): over a dozen rounds a run. With ATB's async
    execute (docs/atb_hooks.md §9) the end is reported before the last ops ran."""
    require_artifacts()
    out = tmp_path / "out"
    out.mkdir()
    if execute == "async":
        service_env = {**service_env, "ATB_OPERATION_EXECUTE_ASYNC": "1"}
    svc = services(out, service_env, devices=1, extra="--hidden 256")
    save_config(svc.config, **STATS, exec_range="all")
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    svc.request(max_tokens=3)
    assert cli("wait", str(out), "--timeout", "60", env=service_env).returncode == 0
    (proc,) = (out / "atb_dump_data" / "data").iterdir()
    # round 0 holds the first prefill and decode step, round 1 a decode step alone
    decode = top_ops(proc / "1")
    models = [top_ops(proc / "0") - decode, decode]
    assert all(len(ops) == 4 for ops in models), models

    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            svc.request(max_tokens=8)

    clients = [threading.Thread(target=client) for _ in range(2)]
    for c in clients:
        c.start()
    pace = random.Random(30)
    try:
        for i in range(90):
            save_config(svc.config, **STATS, exec_range=("next", "next:2", "none")[i % 3])
            stop.wait(pace.uniform(0.02, 0.05))  # the daemon publishes most of them
    finally:
        stop.set()
        for c in clients:
            c.join()
    save_config(svc.config, **STATS, exec_range="none")
    assert cli("wait", str(out), "--timeout", "120", env=service_env).returncode == 0
    marked = [m.parent for m in proc.glob("*/ROUND_COMPLETE.json")]
    assert len(marked) > 2  # the storm's edits took rounds
    short = {rnd.name: sorted(top_ops(rnd)) for rnd in marked
             if any(top_ops(rnd) & ops and ops - top_ops(rnd) for ops in models)}
    assert not short, short


def check_rounds(out: Path, prefill: list[int], decode: list[int]) -> None:
    """Each process dumped exactly these rounds of each model, each execution whole (a
    round directory holds both models' ops when their counts meet)."""
    expect: dict[int, set[str]] = {}
    for rounds, layer in ((prefill, "Prefill_layer"), (decode, "Decoder_layer")):
        for r in rounds:
            expect.setdefault(r, set()).add(layer)
    data = out / "atb_dump_data" / "data"
    procs = sorted(data.iterdir())
    assert len(procs) == 2
    for proc in procs:
        assert sorted(int(r.name) for r in proc.iterdir()) == sorted(expect)
        for rnd, layers in expect.items():
            ops = top_ops(proc / str(rnd))
            # every layer-level op of each model's execution, and no op of another
            assert len(ops) == 4 * len(layers), (rnd, ops)
            assert {x for x in ("Prefill_layer", "Decoder_layer") if any(x in n for n in ops)} \
                == layers, (rnd, ops)
