"""The flight recorder end to end (issue 11): a 2-device `atbsim serve` under
the probe, armed, with a fault staged on one rank."""

from __future__ import annotations

import pytest
from e2e_helpers import require_artifacts
from recorder_helpers import (
    FAST,
    arm,
    cli,
    incidents,
    op_rounds,
    rounds_on_disk,
    status,
    wait_complete,
)

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
    on_disk = rounds_on_disk(tmp_path)
    assert len(on_disk) == 2
    assert all(r == {18, 19, 20, 21, 22} for r in on_disk.values()), on_disk
    (inc,) = incidents(tmp_path)
    assert inc["trigger"] == "inf" and inc["value"] == "-inf"
    assert inc["round"] == 21 and inc["device"] == 1
    ft = inc["first_tensor"]
    assert ft["op_id"].startswith("2_11") and "ActivationOperation" in ft["op_name"], ft
    assert ft["io"] == "output" and ft["index"] == "0"
    assert inc["flushed_rounds"] == [18, 19, 20, 21, 22]
    assert {f["dev_pid"].split("_")[0] for f in inc["flushed"]} == {"0", "1"}
    assert inc["feeding_ops"], "the ops feeding it come from info/layer"


def test_decode_steps_flush_each_ops_own_last_rounds(tmp_path, services, service_env):
    # 3 decode steps per request: decode round 16 is in request 5
    arm(tmp_path / "config.json", triggers=["nan"])
    svc = services(tmp_path, service_env, devices=1,
                   extra=FAST + " --inject nan:layer=0,op=Down,stage=decode,round=16")
    for _ in range(10):
        svc.request(max_tokens=4)
    svc.stop()
    wait_complete(tmp_path, want=9)
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
    arm(tmp_path / "config.json", triggers=["nan"])
    svc = services(tmp_path, service_env, devices=1, extra=FAST)
    for _ in range(5):
        svc.request(max_tokens=1)
    (proc,) = status(tmp_path)["processes"]
    rec = proc["recorder"]
    ops = len({op for (_, op) in op_rounds(tmp_path)}) or None
    assert rec["state"] == "armed" and rec["rounds_held"] > 0 and rec["bytes_held"] > 0
    assert rec["rounds_held"] % 4 == 0  # keep_rounds + 1 whole rounds of each op
    assert not rounds_on_disk(tmp_path)[next(iter(rounds_on_disk(tmp_path)))] if ops else True
    fired = cli("trigger", str(tmp_path), "--wait", "30")
    assert "incident 1" in fired.stdout
    for _ in range(2):
        svc.request(max_tokens=1)
    svc.stop()
    wait_complete(tmp_path, want=5)
    assert set(rounds_on_disk(tmp_path).values().__iter__().__next__()) == {1, 2, 3, 4, 5}
    (inc,) = incidents(tmp_path)
    assert inc["trigger"] == "manual" and inc["round"] is None and inc["first_tensor"] is None
    assert inc["flushed_rounds"] == [1, 2, 3, 4, 5]
    again = cli("trigger", str(tmp_path), check=False)
    assert again.returncode == 1
