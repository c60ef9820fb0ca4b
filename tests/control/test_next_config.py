"""exec_range "next" / "next:N" (issue 18 §4): the config forms, and how the control
plane turns them into concrete rounds per model from the processes' counts."""

from __future__ import annotations

import pytest

from msprobe_atb.config import ConfigError, compile_config, validate
from msprobe_atb.control.block import ProcSlot
from msprobe_atb.daemon import nextrounds
from msprobe_atb.tree.models import model_kind, round_label, rounds_label, span_label


@pytest.mark.parametrize("text,n", [("next", 1), ("next:3", 3), (" NEXT : 2 ", 2)])
def test_next_forms_are_accepted(text, n):
    cfg = validate({"dump_enable": True, "exec_range": text})
    assert cfg.exec_mode == "next" and cfg.exec_range == f"next:{n}"
    compiled = compile_config(cfg)
    # every op of a model not seen yet: its first n rounds; the models come at publish
    assert compiled.exec_mode == 2 and compiled.ranges == ((0, n - 1),)
    assert compiled.model_ranges == ()


@pytest.mark.parametrize("text", ["next:0", "next:", "next:x", "next:-1", "next:1,2"])
def test_bad_next_counts_are_refused_by_name(text):
    with pytest.raises(ConfigError) as e:
        validate({"exec_range": text})
    assert '"exec_range"' in str(e.value) and 'N in "next:N"' in str(e.value)


def slot(pid: int, models, flags: int = 0) -> ProcSlot:
    zeros = {f: 0 for f in ProcSlot.__dataclass_fields__
             if f not in ("slot", "pid", "flags", "models")}
    return ProcSlot(slot=pid, pid=pid, flags=flags, models=tuple(models), **zeros)


class FakeBlock:
    def __init__(self, *snapshots):
        self.snapshots = list(snapshots)

    def procs(self):
        return self.snapshots[0] if len(self.snapshots) == 1 else self.snapshots.pop(0)


@pytest.fixture
def everyone_alive(monkeypatch):
    monkeypatch.setattr(nextrounds, "is_alive", lambda pid, start: pid != 99)


EXACT = nextrounds.PROC_MODELS_EXACT


def test_each_model_gets_its_own_next_rounds_from_the_live_processes(everyone_alive):
    block = FakeBlock([
        slot(1, [("M_Prefill", 21, 21), ("M_Decoder", 59, 59)], flags=EXACT),
        slot(2, [("M_Prefill", 21, 20), ("M_Decoder", 60, 59)], flags=EXACT),  # one ahead
        slot(99, [("M_Prefill", 500, 500)], flags=EXACT),  # dead, of an earlier service
        slot(3, [("M_Prefill", 700, 700)], flags=4 | EXACT),  # exited
    ])
    assert nextrounds.next_rounds(block, 2) == (("M_Decoder", 60, 61), ("M_Prefill", 21, 22))


def test_an_asleep_process_may_be_in_an_execution_unseen(everyone_alive):
    """Asleep, a shim counts executions at their end only: the first round surely
    begun after the publish is the one after the next."""
    block = FakeBlock([slot(1, [("M_Prefill", 21, 21), ("M_Decoder", 59, 59)])])
    assert nextrounds.next_rounds(block, 1) == (("M_Decoder", 60, 60), ("M_Prefill", 22, 22))


def test_an_execution_begun_before_the_publish_is_never_selected(everyone_alive):
    """The counts move between the read and the publish: published again."""
    before = [slot(1, [("M_Decoder", 59, 59)], flags=EXACT)]
    moved = [slot(1, [("M_Decoder", 60, 59)], flags=EXACT)]
    published = []
    block = FakeBlock(before, moved, moved)
    assert nextrounds.settle(block, 1, published.append) == (("M_Decoder", 60, 60),)
    assert published == [(("M_Decoder", 59, 59),), (("M_Decoder", 60, 60),)]


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
