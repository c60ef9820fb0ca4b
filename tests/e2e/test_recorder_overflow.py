"""An incident the overflow trigger fires is as complete as one a tensor's
statistics fire (README's own trigger list, a 2-device service, the fault on
either device), and carries the root cause `diagnose` names."""

from __future__ import annotations

import json

import pytest
from e2e_helpers import require_artifacts
from recorder_helpers import arm, cli, wait_complete, wait_incident

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _artifacts():
    require_artifacts()


@pytest.mark.parametrize("device", [0, 1])
def test_overflow_incident_names_the_offending_tensor(tmp_path, services, service_env,
                                                      device):
    arm(tmp_path / "config.json", triggers=["nan", "inf", "overflow", {"abs_max_over": 60000}])
    svc = services(tmp_path, service_env, devices=2,
                   extra="--hidden 32 --heads 2 --prompt-len 4 --layers 3"
                   f" --inject -inf:layer=2,op=Down,round=5,device={device}")
    for _ in range(10):
        svc.request(max_tokens=1)
    svc.stop()
    wait_complete(tmp_path, want=10)
    wait_incident(tmp_path, 1, [2, 3, 4, 5, 6])
    (inc,) = json.loads(cli("incidents", str(tmp_path), "--json").stdout)
    assert (inc["trigger"], inc["round"], inc["device"]) == ("overflow", 5, device)
    assert inc["dev_pid"] == f"{device}_{inc['pid']}" and inc["model"] == "DecoderModel_Prefill"
    # the kernel ATB reported, located in what the recorder kept: its output, with statistics
    ft = inc["first_tensor"]
    assert ft["kernel"] == "MatMulKernel" and ft["op_id"] == "3_12_0", ft
    assert ft["path"] == f"{inc['dev_pid']}/5/3_Prefill_layer/12_LinearOperation/" \
        "0_MatMulKernel/after/outtensor0.bin"
    assert (ft["io"], ft["index"]) == ("output", "0")
    assert ft["stats"]["ninf"] == 1 and ft["stats"]["min"] == "-inf"
    assert any(f["op_id"] == "3_11" for f in inc["feeding_ops"]), inc["feeding_ops"]
    assert inc["replay"]["verdict"] == "own-error", inc["replay"]
    # the root cause, the same in the incident and in diagnose
    (line,) = inc["diagnosis"]["lines"]
    assert line.startswith("root cause: 3_Prefill_layer/12_LinearOperation own-error "
                           f"(device {device}, prefill round 5: output -inf where float64 is "
                           ), line
    assert cli("diagnose", str(tmp_path), check=False).stdout.splitlines() == [line]
    text = cli("incidents", str(tmp_path)).stdout
    assert f"\n  {line}" in text
    assert f", prefill round 5, device {device}, pid " in text
    assert "first offending tensor: 3_12_0 Prefill_layer/LinearOperation/MatMulKernel output 0" \
        in text and "ninf 1" in text and "fed by: 3_11 " in text
    assert "None" not in text
