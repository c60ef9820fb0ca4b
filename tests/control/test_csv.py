"""statistic.csv rows: header, vocabulary, precision, N/A rules, escaping."""

from __future__ import annotations

import csv
import io

from msprobe_atb.tree.csvfmt import (
    EXTRA_HEADER,
    HEADER,
    csv_line,
    extra_row,
    parse_tensor_path,
    safe_cell,
    statistic_row,
)
from msprobe_atb.tree.vocab import dtype_name, format_name

MSPROBE_HEADER = ("Device and PID,Execution Count,Op Name,Op Type,Op Id,Input/Output,Index,"
                  "Dtype,Format,Shape,Max,Min,Mean,Norm,Tensor Path")


def row(rec, out="/out"):
    tp = parse_tensor_path(rec["path"])
    line = statistic_row(rec, tp, out)
    cells = next(csv.reader(io.StringIO(line)))
    assert len(cells) == 15, cells
    return cells


def rec(**kw):
    base = {"k": "tensor", "seq": 0,
            "path": "0_42/3/2_Layer/1_LinearOperation/before/intensor1_x.bin",
            "format": 2, "dtype": 27, "dims": "36,128", "task": "tensor", "file": "bin",
            "stats": None}
    base.update(kw)
    return base


def test_header_is_msprobes():
    assert HEADER == MSPROBE_HEADER
    assert EXTRA_HEADER.split(",")[0] == "Sequence" and len(EXTRA_HEADER.split(",")) == 14


def test_tensor_task_row():
    assert row(rec()) == [
        "0_42", "3", "Layer/LinearOperation", "LinearOperation", "2_1", "input", "1_x", "bf16",
        "nd", "36x128", "N/A", "N/A", "N/A", "N/A",
        "/out/atb_dump_data/data/0_42/3/2_Layer/1_LinearOperation/before/intensor1_x.bin"]


def test_output_index_and_kernel_path():
    cells = row(rec(path="1_7/0/5_Prefill_layer/0_Attn/2_MatMulKernel/after/outtensor0.bin"))
    assert cells[2:7] == ["Prefill_layer/Attn/MatMulKernel", "MatMulKernel", "5_0_2", "output",
                          "0"]


def test_vocabulary():
    assert [dtype_name(i) for i in (0, 1, 27, 12, 16, 99, -1)] == [
        "float", "float16", "bf16", "bool", "complex64", "undefined(99)", "undefined(-1)"]
    assert [format_name(i) for i in (2, 29, -1)] == ["nd", "fractal_nz", "undefined(-1)"]
    assert dtype_name("1") == "float16"


def test_statistics_full_precision_without_exponent_and_na_path():
    """Shortest round-trip digits written positionally, as msProbe's %f files
    are: `sort -n` and string tools see no exponent; float() reads them back."""
    stats = {"max": 1e-07, "min": -0.1234567890123456789, "mean": 2.287141978740692e-05,
             "norm": 1e16}
    cells = row(rec(task="statistics", file="none", dtype=0, stats=stats))
    assert cells[10:14] == ["0.0000001", "-0.12345678901234568", "0.00002287141978740692",
                            "10000000000000000.0"]
    assert cells[14] == "N/A"
    assert [float(c) for c in cells[10:14]] == list(stats.values())
    tiny = row(rec(task="statistics", file="none", dtype=0, stats={"max": -2.5e-310}))[10]
    assert tiny == "-0." + "0" * 309 + "25" and float(tiny) == -2.5e-310


def test_int_stats_stay_ints():
    cells = row(rec(task="all", dtype=3, stats={"max": 7, "min": -3, "mean": 1.5, "norm": 9.0}))
    assert cells[10:14] == ["7", "-3", "1.5", "9.0"]
    assert cells[14].endswith("intensor1_x.bin")


def test_nonfinite_values_kept_as_numbers():
    cells = row(rec(task="all", stats={"max": "inf", "min": "-inf", "mean": "nan", "norm": "nan"}))
    assert cells[10:14] == ["inf", "-inf", "nan", "nan"]


def test_complex_values_are_quoted():
    line = statistic_row(rec(task="all", dtype=16,
                             stats={"max": [1.5, -2.0], "min": [0.0, 0.0], "mean": [0.25, 1.0],
                                    "norm": 3.0}),
                         parse_tensor_path(rec()["path"]), "/out")
    assert '"(1.5,-2.0)"' in line
    cells = next(csv.reader(io.StringIO(line)))
    assert len(cells) == 15 and cells[10] == "(1.5,-2.0)"


def test_formula_injection_escaped_not_dropped():
    assert safe_cell("=cmd|' /C calc'!A0") == "'=cmd|' /C calc'!A0"
    assert safe_cell("+1+2x") == "'+1+2x"
    assert safe_cell("@SUM(A1)") == "'@SUM(A1)"
    assert safe_cell("\tx") == "'\tx"
    assert safe_cell("-inf") == "-inf" and safe_cell("-1.5e-3") == "-1.5e-3"
    assert safe_cell("-nope") == "'-nope"
    cells = row(rec(path="0_42/0/2_=HYPERLINK(x)/before/intensor0.bin"))
    assert cells[2] == "'=HYPERLINK(x)" and cells[3] == "'=HYPERLINK(x)"


def test_commas_and_newlines_quoted():
    cells = row(rec(path='0_42/0/2_a,b"c\nd/before/intensor0.bin'))
    assert cells[2] == 'a,b"c\nd'


def test_extra_row():
    tp = parse_tensor_path(rec()["path"])
    line = extra_row(rec(seq=9, task="all", stats={"count": 4, "nan": 1, "pinf": 0, "ninf": 2,
                                                     "zero": 1, "max": 1}), tp, "/out")
    assert line == "9,2_1,Layer/LinearOperation,input,1_x,4,1,0,2,1,bin,,before,\n"
    lost = extra_row(rec(seq=3, file="lost", note="disk full"), tp, "/out")
    assert lost.endswith(",N/A,N/A,N/A,N/A,N/A,lost,disk full,before,\n")


def test_extra_row_names_the_storage_it_shares():
    """A hard link (or a stub where links are refused) names the Tensor Path of the
    identical earlier tensor; a filter_level-2 kernel stub names itself: not shared."""
    path = "0_42/0/2_Layer/1_LinearOperation/after/outtensor0.bin"
    tp = parse_tensor_path(path)
    want = "/out/atb_dump_data/data/0_42/0/2_Layer/before/intensor0.bin"
    for file in ("linked", "stub"):
        cells = extra_row(rec(path=path, file=file, alias="../../before/intensor0.bin"),
                          tp, "/out").rstrip("\n").split(",")
        assert cells[10] == file and cells[12:] == ["after", want]
    own = extra_row(rec(path=path, file="stub", alias="outtensor0.bin"), tp, "/out")
    assert own.endswith(",stub,,after,\n")


def test_quoting_matches_the_csv_module():
    """Same as csv.writer, except that a bare CR is quoted too (the module leaves it
    bare with a "\\n" line terminator, and readers then split the row)."""
    import random

    rng = random.Random(7)
    alphabet = 'ab,"\n\r =+-@1.\t'
    for _ in range(2000):
        cells = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
                 for _ in range(15)]
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([safe_cell(c) for c in cells])
        if not any("\r" in c for c in cells):
            assert csv_line(cells) == buf.getvalue()
        assert next(csv.reader(io.StringIO(csv_line(cells)))) == [safe_cell(c) for c in cells]
