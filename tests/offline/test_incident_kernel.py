"""An overflow incident (ATB names a kernel, not a tensor) gets the device from
its record and the offending tensor from the kernel's outputs the shim sends
after it."""

from __future__ import annotations

from msprobe_atb.tree.incidents import IncidentBook
from msprobe_atb.tree.records import ProcKey

KERNEL_DIR = "1_4711/5/3_Layer/12_LinearOperation/0_MatMulKernel/after"


def _book(tmp_path) -> IncidentBook:
    book = IncidentBook(tmp_path)
    book.add_record(ProcKey(4711, 0), {
        "k": "incident", "seq": 1, "trigger": "overflow", "value": "inf", "round": 5, "dev": 1,
        "path": "LinearOperation_3_12:MatMulKernel", "trigger_ns": 1, "stats": None})
    return book


def _output(book: IncidentBook, index: int, ninf: int) -> None:
    book.add_record(ProcKey(4711, 0), {
        "k": "incident_tensor", "seq": 1, "path": f"{KERNEL_DIR}/outtensor{index}.bin",
        "stats": {"max": "0x1p+0", "min": "-inf" if ninf else "0x0p+0", "nan": 0, "pinf": 0,
                  "ninf": ninf}})


def test_the_device_comes_from_the_record_before_any_output(tmp_path):
    book = _book(tmp_path)
    doc = book.doc(book.incidents[1])
    assert (doc["device"], doc["dev_pid"]) == (1, "1_4711")
    assert doc["first_tensor"]["kernel"] == "MatMulKernel"


def test_the_first_output_holding_inf_is_the_offending_tensor(tmp_path):
    book = _book(tmp_path)
    _output(book, 0, 0)
    _output(book, 1, 1)
    _output(book, 2, 1)  # a later one does not replace it
    ft = book.doc(book.incidents[1])["first_tensor"]
    assert ft["path"] == f"{KERNEL_DIR}/outtensor1.bin" and ft["kernel"] == "MatMulKernel"
    assert (ft["op_id"], ft["io"], ft["index"]) == ("3_12_0", "output", "1")
    assert ft["stats"]["min"] == "-inf" and ft["stats"]["max"] == 1.0


def test_a_finite_output_stands_when_none_holds_inf(tmp_path):
    book = _book(tmp_path)
    _output(book, 0, 0)
    _output(book, 1, 0)
    assert book.doc(book.incidents[1])["first_tensor"]["index"] == "0"
