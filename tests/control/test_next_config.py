"""exec_range "next" / "next:N" (rounds a user can aim at): the config forms, the request
the control plane publishes for each such edit, and how status and wait turn the rounds
each process fixed (at the first execution of each model it saw begin after the edit)
into concrete rounds."""

from __future__ import annotations

import json

import pytest

from msprobe_atb import wait
from msprobe_atb.config import ConfigError, compile_config, validate
from msprobe_atb.config.compile import CompiledConfig
from msprobe_atb.control.block import ControlBlock, ProcModel
from msprobe_atb.daemon.controller import Controller
from msprobe_atb.status import _models_view, next_text
from msprobe_atb.tree.models import model_kind, round_label, rounds_label, span_label
from msprobe_atb.wait import State


@pytest.mark.parametrize("text,n", [("next", 1), ("next:3", 3), (" NEXT : 2 ", 2)])
def test_next_forms_are_accepted(text, n):
    cfg = validate({"dump_enable": True, "exec_range": text})
    assert cfg.exec_mode == "next" and cfg.exec_range == f"next:{n}"
    compiled = compile_config(cfg)
    # every op of no known model: its first n rounds; the request number comes at publish
    assert compiled.exec_mode == 2 and compiled.ranges == ((0, n - 1),)
    assert (compiled.next_count, compiled.next_request) == (n, 0)
    assert compile_config(validate({"dump_enable": True, "exec_range": "0,2"})).next_count == 0


@pytest.mark.parametrize("text", ["next:0", "next:", "next:x", "next:-1", "next:1,2"])
def test_bad_next_counts_are_refused_by_name(text):
    with pytest.raises(ConfigError) as e:
        validate({"exec_range": text})
    assert '"exec_range"' in str(e.value) and 'N in "next:N"' in str(e.value)


@pytest.fixture
def block(tmp_path):
    with ControlBlock(tmp_path / "atb_dump_data", create=True) as b:
        yield b


def config(**fields) -> bytes:
    return json.dumps({"dump_enable": True, "task": "statistics", **fields}).encode()


def test_each_next_edit_is_a_new_request_and_a_restart_keeps_it(block, tmp_path):
    """The shims fix their rounds once per request: every applied edit with "next" is a
    new one (also after another exec_range form); a restarted control plane republishing
    the same config keeps the one in force."""
    path = tmp_path / "config.json"
    c = Controller(block, path)
    c.apply(config(exec_range="next:2"))
    first = block.read_config()[1]
    assert (first.next_count, first.exec_mode, first.ranges) == (2, 2, ((0, 1),))
    assert first.next_request > 0
    c.apply(config(exec_range="next:2", save_child=True))
    second = block.read_config()[1].next_request
    c.apply(config(exec_range="0,0"))
    assert block.read_config()[1].next_request == 0
    c.apply(config(exec_range="next:2"))
    third = block.read_config()[1].next_request
    assert len({first.next_request, second, third}) == 3
    Controller(block, path).apply(config(exec_range="next:2"))
    assert block.read_config()[1].next_request == third
    Controller(block, path).apply(config(exec_range="next:3"))
    assert block.read_config()[1].next_request not in (0, third)


def proc(pid: int, alive: bool, *models, picking: int = 0) -> dict:
    return {"pid": pid, "alive": alive, "models": list(models), "next_picking": picking}


def model(name: str, executed: int, rounds: list[int] | None) -> dict:
    return {"model": name, "kind": model_kind(name), "executed": executed,
            "next_rounds": rounds}


def wait_state(*procs) -> State:
    status = {"config": {"exec_range": "next:2", "next_request": 9}, "processes": list(procs)}
    return State(True, "", 0, status)


def test_models_view_turns_a_fixed_request_into_concrete_rounds():
    """A process reports the first round it fixed for the request in force; another
    request's (an earlier edit's) is not this one's."""
    cfg = CompiledConfig(next_request=9, next_count=2)
    view = _models_view([ProcModel("M_Decoder", 61, 60, 9, 59),
                         ProcModel("M_Prefill", 21, 21, 8, 3)], True, cfg)
    assert [(m["kind"], m["next_rounds"]) for m in view] == [("prefill", None),
                                                             ("decode", [59, 60])]
    assert next_text(view) == ("prefill: the next execution (round not fixed yet), "
                               "decode rounds 59-60 (M_Decoder)")


def test_wait_is_not_complete_before_the_fixed_rounds_ran():
    running = wait_state(proc(7, True, model("M_Prefill", 4, [3, 4])),
                         proc(8, True, model("M_Prefill", 5, [3, 4])))
    state = wait._next_ran(running)
    assert not state.done and state.waiting_for == "prefill rounds 3-4 of pid 7 to run " \
        "(exec_range next:2)"
    # an execution of a model not known yet is being dumped: its round is fixed at its end
    picking = wait._next_ran(wait_state(proc(7, True, model("M_Prefill", 4, None), picking=1)))
    assert not picking.done and picking.waiting_for == "an execution of pid 7 begun after the " \
        "edit to end (exec_range next:2; its model and round are fixed then)"
    # ran (or the process is gone, or nothing is fixed yet): complete as far as it goes
    for procs in ([proc(7, True, model("M_Prefill", 5, [3, 4]))],
                  [proc(7, False, model("M_Prefill", 4, [3, 4]))],
                  [proc(7, True, model("M_Prefill", 4, None))]):
        assert wait._next_ran(wait_state(*procs)).done
    assert wait.next_outcome(wait_state(proc(7, True, model("M_Prefill", 4, None))).status) == ""
    assert wait.next_outcome(running.status) == (
        "pid 7: prefill rounds 3-4 (M_Prefill); pid 8: prefill rounds 3-4 (M_Prefill)")


def test_rounds_are_labelled_by_model():
    assert model_kind("DecoderModel_Prefill") == "prefill"
    assert model_kind("DecoderModel_Decoder") == "decode"
    assert model_kind("Encoder") == "prefill" and model_kind("Mystery") == "Mystery"
    assert round_label(21, "DecoderModel_Prefill") == "prefill round 21"
    assert round_label(3) == "round 3"
    assert rounds_label([18, 19, 20, 22], "DecoderModel_Decoder") == "decode rounds 18-20, 22"
    assert span_label(59, 59, "DecoderModel_Decoder") == "decode round 59"


def test_an_incident_names_its_rounds_by_model(tmp_path):
    """The recorder's report said "rounds written: 18, 19, ..., 59, 60", mixing the
    prefill's and the decode's counters."""
    from msprobe_atb.tree.incident_check import checked
    from msprobe_atb.tree.incidents import format_incident

    data = tmp_path / "atb_dump_data" / "data"
    flushed = [{"dev_pid": "1_7", "round": r, "dir": str(data / "1_7" / str(r)),
                "ops": {"2_Prefill_layer" if r < 50 else "6_Decoder_layer": "bin"},
                "models": ["DecoderModel_Prefill" if r < 50 else "DecoderModel_Decoder"]}
               for r in (18, 19, 20, 21, 22, 59, 60)]
    doc = checked({"incident": 1, "trigger": "inf", "round": 21, "device": 1, "pid": 7,
                   "model": "DecoderModel_Prefill", "flushed_rounds": [18, 19, 20, 21, 22, 59, 60],
                   "flushed": flushed}, tmp_path / "atb_dump_data")
    text = format_incident(doc)
    assert ", prefill round 21, device 1, pid 7" in text.splitlines()[0]
    assert "  rounds written: prefill rounds 18-22, decode rounds 59-60" in text
