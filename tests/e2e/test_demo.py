"""`make demo` (scripts/demo.sh), one part at a time (DEMO_PARTS), as a user reads it."""

from __future__ import annotations

import re
import subprocess

import pytest
from e2e_helpers import fresh_env, require_artifacts
from testkit import REPO

pytestmark = [pytest.mark.slow, pytest.mark.long]


def test_recorder_act_says_what_it_does_while_it_sends(tmp_path):
    """The recorder act once said nothing while it sent its last 10 requests, then
    jumped from "0 incidents" to "incident 1 ... round 21". Each request's outcome is said,
    with the incident reports so far."""
    require_artifacts(1)
    env = dict(fresh_env(), DEMO_OUT=str(tmp_path / "demo"), DEMO_PARTS="recorder")
    p = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh")], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = p.stdout
    assert "== 1." not in out and "== 8." not in out  # only the part asked for
    act = out[out.index("== 9."):out.index("msprobe-atb incidents")]
    assert act.index("sending 20 requests") < act.index("20 requests served")
    sent = re.findall(r"^  request (\d+): (.*); incident reports: (\d+)$", act, re.M)
    assert [int(n) for n, _, _ in sent] == list(range(21, 31)), act
    failed = [int(n) for n, said, _ in sent if said.startswith("error 500: workers disagree")]
    assert failed == [22], act  # prefill round 21: the 22nd request
    reports = [int(k) for _, _, k in sent]
    assert reports[0] == 0 and reports == sorted(reports) and set(reports) <= {0, 1}, act
    assert "incident 1: inf (-inf) at " in out and ", prefill round 21, device 1, " in out
    # the feeders that are no op (no statistics) are counted, not listed
    fed = re.search(r"^  fed by: (.*)$", out, re.M).group(1)
    assert "- input of" not in fed and re.search(r", and \d+ layer inputs?$", fed), fed


def test_offline_part_replays_the_op_at_fault(tmp_path):
    """The demo shows replay on act 8's dumps: the SwiGLU that took the Inf is
    own-error (its golden replays ok), and a GateUp output scaled by 300 overflows fp16 at
    SwiGLU."""
    require_artifacts(1)
    env = dict(fresh_env(), DEMO_OUT=str(tmp_path / "demo"), DEMO_PARTS="offline")
    p = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh")], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    act = p.stdout[p.stdout.index("== 8b."):]
    assert re.search(r"^own-error +\S+/0/2_Prefill_layer/11_ActivationOperation", act, re.M), act
    assert ("the target's 2_Prefill_layer/11_ActivationOperation is own-error; golden's "
            "replays ok") in act
    assert re.search(r"^overflow +\S+/0/2_Prefill_layer/11_ActivationOperation", act, re.M), act
    assert "< float16 min -65504" in act or "> float16 max 65504" in act


def test_torch_part_names_the_atb_op_and_its_torch_module(tmp_path):
    """The demo's golden-from-PyTorch act dumps a Hugging Face Llama with
    `run --torch`, runs the stand-in on its checkpoint and token ids with an Inf in layer
    1's SwiGLU, and compare names the ATB op and the torch module it was compared with."""
    require_artifacts(1)
    env = dict(fresh_env(), DEMO_OUT=str(tmp_path / "demo"), DEMO_PARTS="torch")
    p = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh")], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    act = p.stdout[p.stdout.index("== 10."):]
    assert re.search(r"torch generated \d+,\d+,\d+;", act), act
    assert "Aligned with the torch golden: 396 ATB tensors" in act, act
    assert re.search(r"^FIRST DIVERGENT op .*: prefill round 0, 2_Prefill_layer/"
                     r"11_ActivationOperation\S* output 0", act, re.M), act
    assert "torch golden: model.layers.1.mlp.down_proj input 0" in act, act
    assert (tmp_path / "demo" / "torch_report.html").is_file()
