"""One list of the control block's fields: control.h's. block.py copies
by the fields cffi reads from it, and the Python views must hold exactly those, so a
field added in C fails here until Python has it."""

from __future__ import annotations

import dataclasses

import cp_helpers  # noqa: F401 (builds the extension if it is missing)

from msprobe_atb.config.compile import CompiledConfig
from msprobe_atb.control.block import (
    _CONFIG_LISTS,
    ControlBlock,
    Incident,
    ProcModel,
    ProcSlot,
    layout_fields,
)


def _names(view, *own: str) -> set[str]:
    return {f.name for f in dataclasses.fields(view)} - set(own)


def _same(struct: str, c_fields: set[str], view, py_fields: set[str], where: str) -> None:
    assert not c_fields - py_fields, (f"fields of struct {struct} (control.h) missing from "
                                      f"{view.__name__} ({where}): {sorted(c_fields - py_fields)}")
    assert not py_fields - c_fields, (f"{view.__name__} ({where}) has fields struct {struct} "
                                      f"(control.h) lacks: {sorted(py_fields - c_fields)}")


def test_compiled_config_is_struct_msp_config():
    c = layout_fields("msp_config")
    _same("msp_config", {*c.numbers, *c.lists}, CompiledConfig, _names(CompiledConfig),
          "config/compile.py")
    assert set(c.lists) == set(_CONFIG_LISTS), "a list of struct msp_config needs a line " \
        "in block.py's _CONFIG_LISTS"
    assert not c.arrays


def test_proc_slot_is_struct_msp_proc():
    p = layout_fields("msp_proc")
    _same("msp_proc", set(p.numbers), ProcSlot,
          _names(ProcSlot, "slot", "models", "writer_head"), "control/block.py")
    assert p.lists == ("models",)
    # pending[] is read by ControlBlock.pending, writer_head[] (n_writers of it) by procs()
    assert p.arrays == ("pending", "writer_head")


def test_proc_model_is_struct_msp_proc_model():
    m = layout_fields("msp_proc_model")
    assert ProcModel._fields == ("name", *m.numbers) and m.arrays == ("name",)


def test_incident_is_struct_msp_incident():
    e = layout_fields("msp_incident")
    _same("msp_incident", set(e.numbers) - {"ready"}, Incident, _names(Incident, "seq", "path"),
          "control/block.py")
    assert e.arrays == ("path",) and not e.lists


def test_every_config_field_goes_through_the_block(tmp_path):
    """Each field with a value of its own (not its default) comes back as it went."""
    lists = {"ranges": ((1, 2), (5, 9)), "ids": ("2", "2_1"), "op_names": ("linear",),
             "devices": (0, 3)}
    numbers = {f.name: (2.5 if f.type == "float" else 2 + i)
               for i, f in enumerate(dataclasses.fields(CompiledConfig)) if f.name not in lists}
    cfg = CompiledConfig(**numbers, **lists)
    with ControlBlock(tmp_path, create=True) as block:
        block.publish(cfg)
        assert block.read_config()[1] == cfg


def test_every_proc_number_goes_through_the_block(tmp_path):
    with ControlBlock(tmp_path, create=True) as block:
        slot = block.claim_proc(1234, 99)
        numbers = [f for f in layout_fields("msp_proc").numbers if f not in ("pid", "start_ns")]
        for i, name in enumerate(numbers):
            block.set_proc_counter(slot, name, 7 + i)
        (view,) = block.procs()
    assert (view.slot, view.pid, view.start_ns) == (slot, 1234, 99)
    assert {name: getattr(view, name) for name in numbers} == \
        {name: 7 + i for i, name in enumerate(numbers)}
