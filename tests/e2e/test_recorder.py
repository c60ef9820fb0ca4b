"""The flight recorder end to end: a 2-device `atbsim serve` under
the probe, armed, with a fault staged on one rank."""

from __future__ import annotations

import json

import pytest
from e2e_helpers import require_artifacts
from recorder_helpers import (
    FAST,
    arm,
    cli,
    csv_rows,
    incidents,
    op_rounds,
    rearm,
    rounds_on_disk,
    status,
    wait_complete,
    wait_incident,
)
from testkit import save_config, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _artifacts():
    require_artifacts()


def test_inf_on_one_rank_flushes_the_same_rounds_of_every_rank(tmp_path, services,
                                                               service_env):
    arm(tmp_path / "config.json", triggers=["nan", "inf"])
    svc = services(tmp_path, service_env, devices=2,
                   extra=FAST + " --inject -inf:layer=1,op=SwiGLU,round=21,device=1")
    for _ in range(20):
        svc.request(max_tokens=1)
    # armed: nothing on disk for 20 requests
    assert all(not r for r in rounds_on_disk(tmp_path).values())
    for _ in range(20, 30):
        svc.request(max_tokens=1)
    svc.stop()  # the last round written is complete once its process is gone
    wait_complete(tmp_path, want=10)
    wait_incident(tmp_path, 1, [18, 19, 20, 21, 22])
    on_disk = rounds_on_disk(tmp_path)
    assert len(on_disk) == 2
    assert all(r == {18, 19, 20, 21, 22} for r in on_disk.values()), on_disk
    (inc,) = json.loads(cli("incidents", str(tmp_path), "--json").stdout)
    # the report on disk, plus replay's verdict on its first offending op
    verdict = inc.pop("replay")
    diagnosis = inc.pop("diagnosis")
    assert inc == incidents(tmp_path)[0]
    # the root cause, as `diagnose` names it in the incident's process
    assert diagnosis["lines"] == [
        "root cause: 2_Prefill_layer/11_ActivationOperation own-error (device 1, prefill "
        "round 21: output -inf where float64 is " + diagnosis["lines"][0].rpartition(" ")[2]]
    assert cli("diagnose", str(tmp_path), check=False).stdout.splitlines() == \
        diagnosis["lines"]
    assert diagnosis["lines"][0] in cli("incidents", str(tmp_path)).stdout
    assert verdict["verdict"] == "own-error", verdict
    assert verdict["path"].endswith("/21/2_Prefill_layer/11_ActivationOperation"), verdict
    assert verdict["worst"]["dumped"] == "-inf"
    assert inc["trigger"] == "inf" and inc["value"] == "-inf"
    assert inc["round"] == 21 and inc["device"] == 1
    ft = inc["first_tensor"]
    assert ft["op_id"].startswith("2_11") and "ActivationOperation" in ft["op_name"], ft
    assert ft["io"] == "output" and ft["index"] == "0"
    assert {f["dev_pid"].split("_")[0] for f in inc["flushed"]} == {"0", "1"}
    assert inc["feeding_ops"], "the ops feeding it come from info/layer"
    # stats and report show it too
    text = cli("stats", str(tmp_path)).stdout
    assert "FLIGHT RECORDER: 1 incident(s)" in text and "incident 1: inf (-inf)" in text
    page = tmp_path / "report.html"
    assert cli("report", str(tmp_path), "-o", str(page)).returncode == 0
    html = page.read_text()
    section = html.split("<section id='incidents'>")[1].split("</section>")[0]
    assert "Flight recorder incidents" in section and ft["op_id"] in section
    assert "file://" in section  # links to the rounds it wrote


def test_decode_steps_flush_each_ops_own_last_rounds(tmp_path, services, service_env):
    # 3 decode steps per request: decode round 16 is in request 5
    arm(tmp_path / "config.json", triggers=["nan"])
    svc = services(tmp_path, service_env, devices=1,
                   extra=FAST + " --inject nan:layer=0,op=Down,stage=decode,round=16")
    for _ in range(10):
        svc.request(max_tokens=4)
    svc.stop()
    wait_complete(tmp_path, want=9)
    wait_incident(tmp_path, 1, [2, 3, 4, 5, 6, 13, 14, 15, 16, 17])
    found = op_rounds(tmp_path)
    assert any("Prefill" in op for _, op in found) and any("Decoder" in op for _, op in found)
    # the prefill ops' own last executions before the trigger (requests 2..5), and request 6's
    assert all(r == {2, 3, 4, 5, 6} for r in (found[k] for k in found if "Prefill" in k[1]))
    assert all(r == {13, 14, 15, 16, 17} for r in (found[k] for k in found if "Decoder" in k[1]))
    # the top-level ops outside the layers go with their model's rounds
    assert {frozenset(r) for r in found.values()} == {frozenset({2, 3, 4, 5, 6}),
                                                     frozenset({13, 14, 15, 16, 17})}
    (inc,) = incidents(tmp_path)
    assert inc["trigger"] == "nan" and inc["round"] == 16
    assert "Decoder_layer" in inc["first_tensor"]["op_name"]


def test_manual_trigger_and_status(tmp_path, services, service_env):
    arm(tmp_path / "config.json", triggers=["nan", {"abs_max_over": 60000}])
    svc = services(tmp_path, service_env, devices=1, extra=FAST)
    for _ in range(5):
        svc.request(max_tokens=1)
    (proc,) = status(tmp_path)["processes"]
    rec = proc["recorder"]
    ops = len({op for (_, op) in op_rounds(tmp_path)}) or None
    assert rec["state"] == "armed" and rec["rounds_held"] > 0 and rec["bytes_held"] > 0
    assert rec["rounds_held"] % 4 == 0  # keep_rounds + 1 whole rounds of each op
    assert not rounds_on_disk(tmp_path)[next(iter(rounds_on_disk(tmp_path)))] if ops else True
    # the threshold in force is shown, and the trigger says keep_rounds as it is
    assert '"triggers": ["nan", {"abs_max_over": 60000}]' in cli("status", str(tmp_path)).stdout
    fired = cli("trigger", str(tmp_path), "--wait", "30")
    assert fired.stdout.startswith("incident 1: every process writes the round in progress and "
                                   "the 3 before it (keep_rounds), then 1 more (after_rounds);")
    for _ in range(2):
        svc.request(max_tokens=1)
    svc.stop()
    (inc,) = wait_incident(tmp_path, 1, [1, 2, 3, 4, 5])
    assert list(rounds_on_disk(tmp_path).values()) == [{1, 2, 3, 4, 5}]
    assert inc["trigger"] == "manual" and inc["round"] is None and inc["first_tensor"] is None
    listed = cli("incidents", str(tmp_path)).stdout
    assert listed.startswith(f"incident 1: manual (msprobe-atb trigger) at {inc['time']}\n")
    assert "None" not in listed and "nan" not in listed
    again = cli("trigger", str(tmp_path), check=False)
    assert again.returncode == 1


def test_each_shim_trigger_kind_and_growth(tmp_path, services, service_env):
    """abs_max_over and overflow fire in the shim, growth_over in the control plane
    (from the statistics channel); each edit re-arms with a fresh incident count."""
    cfg = tmp_path / "config.json"
    arm(cfg, triggers=[{"abs_max_over": 1e4}])
    faults = " ".join(f"--inject inf:layer={lay},op={op},round={r}"
                      for lay, op, r in ((0, "GateUp", 3), (1, "SwiGLU", 8), (1, "Down", 13)))
    # computed (a no-compute output buffer keeps an injected inf for later rounds)
    svc = services(tmp_path, service_env, devices=1,
                   extra=f"--hidden 32 --heads 2 --prompt-len 4 {faults}")
    for _ in range(6):
        svc.request(max_tokens=1)
    rearm(cfg, tmp_path, triggers=["overflow"])
    for _ in range(6, 11):
        svc.request(max_tokens=1)
    rearm(cfg, tmp_path, triggers=[{"growth_over": 10}])
    # the control plane's threshold is shown too (the block does not hold it)
    assert '"triggers": [{"growth_over": 10}]' in cli("status", str(tmp_path)).stdout
    for _ in range(11, 17):
        svc.request(max_tokens=1)
    # the daemon evaluates growth_over a little later, while the service runs on
    wait_until(lambda: len(incidents(tmp_path)) == 3, what="three incident reports")
    svc.stop()
    abs_max, overflow, growth = wait_incident(tmp_path, 3, [11, 12, 13, 14])
    assert (abs_max["trigger"], abs_max["round"]) == ("abs_max_over", 3)
    assert abs_max["first_tensor"]["op_id"].startswith("1_")  # layer 0's GateUp
    assert abs_max["flushed_rounds"] == [0, 1, 2, 3, 4]  # armed at 0
    assert (overflow["trigger"], overflow["round"]) == ("overflow", 8)
    assert overflow["first_tensor"]["kernel"] == "SwiGluKernel"
    assert overflow["flushed_rounds"] == [6, 7, 8, 9]  # re-armed at 6
    assert (growth["trigger"], growth["round"]) == ("growth_over", 13)
    assert "envelope" in growth["detail"]


def test_golden_divergence_fp16_against_fp32(tmp_path, services, service_env):
    golden = tmp_path / "golden"
    golden.mkdir()
    save_config(golden / "config.json", task="statistics", dump_enable=True, exec_range="all",
                save_child=True)
    model = "--hidden 32 --heads 2 --prompt-len 4"
    svc = services(golden, service_env, devices=1, extra=f"--dtype fp32 {model}")
    for _ in range(6):
        svc.request(max_tokens=1)
    svc.stop()
    wait_complete(golden, want=6, incident=False)  # its statistic.csv files are all in
    target = tmp_path / "target"
    target.mkdir()
    gold = {"golden": "../golden/atb_dump_data", "rtol": 0.05}
    arm(target / "config.json", triggers=[gold])
    svc = services(target, service_env, devices=1, extra=f"--dtype fp16 {model}")
    for _ in range(3):
        svc.request(max_tokens=1)
    # fp16 stays within 5 % of fp32 here: nothing fires, nothing is written
    st = status(target)
    assert st["rejected_edit"] == "" and st["config"]["recorder"]["triggers"] == [gold]
    assert st["recorder"]["incidents"] == 0
    assert not any(rounds_on_disk(target).values())
    rearm(target / "config.json", target, triggers=[{**gold, "rtol": 0.001}])
    for _ in range(3):
        svc.request(max_tokens=1)
    wait_until(lambda: incidents(target), what="the golden incident")
    svc.stop()
    (inc,) = wait_incident(target, 1, [3, 4])
    assert inc["trigger"] == "golden" and inc["round"] == 3 and inc["value"] > 0.001
    assert "vs golden" in inc["detail"]  # re-armed at round 3, after_rounds 1


def test_budget_evicts_whole_rounds_and_says_when_one_does_not_fit(tmp_path, services,
                                                                   service_env):
    cfg = tmp_path / "config.json"
    arm(cfg, triggers=["nan"], budget_mb=24)
    svc = services(tmp_path, service_env, devices=1,
                   extra="--no-compute --hidden 256 --heads 2 --prompt-len 64")
    for _ in range(6):
        svc.request(max_tokens=1)
    (proc,) = status(tmp_path)["processes"]
    rec = proc["recorder"]
    assert rec["bytes_held"] <= 24 << 20 and rec["peak_bytes"] <= 24 << 20
    assert rec["evicted_rounds"] > 4 * 2  # more than keep_rounds alone evicts
    cli("trigger", str(tmp_path), "--wait", "30")
    svc.request(max_tokens=1)
    rearm(cfg, tmp_path, triggers=["nan"], budget_mb=1)
    svc.request(max_tokens=1)
    svc.wait_line(r"recorder: budget_mb 1 cannot hold one round")
    (proc,) = status(tmp_path)["processes"]
    assert proc["recorder"]["budget_too_small"] and proc["recorder"]["lost"] > 0
    svc.stop()
    # every op round written is whole: as many tensors as the round after the trigger

    def written():
        docs = incidents(tmp_path)
        rounds = docs[0]["flushed_rounds"] if docs else []
        marks = list((tmp_path / "atb_dump_data" / "data").glob("*/*/ROUND_COMPLETE.json"))
        return docs if rounds and rounds[-1] == 6 and len(marks) == len(rounds) else None

    (inc,) = wait_until(written, what="the manual incident's rounds, complete")
    rows = csv_rows(tmp_path)
    counts = {}
    for ops in rows.values():
        for op, n in ops.items():
            counts.setdefault(op, set()).add(n)
    assert all(len(n) == 1 for n in counts.values()), counts
    per_op: dict[str, int] = {}
    for f in inc["flushed"]:
        for op in f["ops"]:
            per_op[op] = per_op.get(op, 0) + 1
    assert min(per_op.values()) < 5  # the budget held fewer than keep_rounds + 1 of some op
    (proc,) = status(tmp_path)["processes"]
    # it exited armed: what the 1 MiB ring held was dropped, and status says so
    assert proc["recorder"]["exit_dropped_ring"] is True


def test_flush_on_exit_writes_the_ring_of_an_exiting_process(tmp_path, services, service_env):
    """A process that exits armed writes what its ring holds when flush_on_exit is
    true: its last keep_rounds + 1 rounds, reported as an "exit" incident."""
    cfg = tmp_path / "config.json"
    arm(cfg, triggers=["nan"], flush_on_exit=True)
    svc = services(tmp_path, service_env, devices=1, extra=FAST)
    for _ in range(6):
        svc.request(max_tokens=1)
    assert all(not r for r in rounds_on_disk(tmp_path).values())  # armed: nothing written
    svc.stop()
    wait_complete(tmp_path, 4)
    (rounds,) = rounds_on_disk(tmp_path).values()
    assert rounds == {2, 3, 4, 5}, rounds  # the last keep_rounds + 1 = 4 prefill rounds
    (inc,) = incidents(tmp_path)
    assert inc["trigger"] == "exit" and inc["flushed_rounds"] == [2, 3, 4, 5]
    (proc,) = status(tmp_path)["processes"]
    assert proc["recorder"]["exit_dropped_ring"] is False
