"""compare speaks msProbe's and msit's spellings and writes the Excel workbook
msProbe users open."""

from __future__ import annotations

import openpyxl
import pytest
from offline_helpers import run_cli

from msprobe_atb.offline.compare.dumps import RESULT_COLUMNS


def _results(d, ext):
    return sorted(d.glob(f"atb_tensor_compare_result_*.{ext}"))


@pytest.mark.parametrize("spelling", [
    ["-m", "atb", "-gp", "{g}", "-tp", "{t}", "-o", "{o}"],
    ["-m", "atb", "--golden_path", "{g}", "--target_path", "{t}", "--output_path", "{o}"],
    ["--golden-path", "{g}", "-mp", "{t}", "-o", "{o}"],
    ["-gp", "{g}", "--my-path", "{t}", "--output-path", "{o}"],
])
def test_spellings_write_msprobe_named_results(synth_pair, tmp_path, spelling):
    g, t = synth_pair
    o = tmp_path / "out"
    rc, out = run_cli("compare", *[s.format(g=g, t=t, o=o) for s in spelling])
    assert rc == 1 and "FIRST DIVERGENT op" in out
    assert len(_results(o, "csv")) == 1 and len(_results(o, "xlsx")) == 1


def test_default_output_dir(synth_pair, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out = run_cli("compare", "-m", "atb", "-gp", str(synth_pair[0]), "-tp",
                      str(synth_pair[1]))
    assert rc == 1 and _results(tmp_path / "output", "xlsx")


def test_other_mode_refused(synth_pair):
    rc, _ = run_cli("compare", "-m", "pytorch", "-gp", str(synth_pair[0]), "-tp",
                    str(synth_pair[1]))
    assert rc == 2


def test_xlsx_reads_back(synth_pair, tmp_path):
    f = tmp_path / "result.xlsx"
    rc, out = run_cli("compare", "-gp", str(synth_pair[0]), "-tp", str(synth_pair[1]),
                      "-o", str(f))
    assert rc == 1 and f"All rows: {f}" in out and not list(tmp_path.glob("*.csv"))
    wb = openpyxl.load_workbook(f, read_only=True)
    assert wb.sheetnames == ["summary", "compare"]
    summary = [r[0] for r in wb["summary"].iter_rows(values_only=True)]
    assert any(str(line).startswith("FIRST DIVERGENT op") for line in summary)
    rows = list(wb["compare"].iter_rows(values_only=True))
    assert list(rows[0]) == RESULT_COLUMNS and len(rows) == 49
    by = [dict(zip(rows[0], r)) for r in rows[1:]]
    bad = [r for r in by if r["verdict"] == "fail"]
    assert bad and bad[0]["op"] == "2_Layer/1_Linear" and bad[0]["target_pinf"] == 1
    assert all(isinstance(r["cosine"], float) for r in by if r["verdict"] == "pass")


def test_progress_has_a_total(synth_pair):
    from msprobe_atb.offline import compare_dumps, open_dump
    totals, done = [], []
    compare_dumps(open_dump(synth_pair[0]), open_dump(synth_pair[1]), total=totals.append,
                  progress=done.append)
    assert totals == [48] and sum(done) == 48


def test_workbook_keeps_strings_as_text_and_splits_its_sheets(tmp_path, monkeypatch):
    import polars as pl

    from msprobe_atb.offline.compare import xlsx
    monkeypatch.setattr(xlsx, "MAX_ROWS", 2)
    rows = pl.DataFrame({"op": ["=1+1", "https://x.example/a", "a\x01b"],
                         "cosine": [float("nan"), 0.5, None],
                         "verdict": ["pass", "fail", "pass"]})
    f = xlsx.write_workbook(tmp_path / "r.xlsx", rows, "=HYPERLINK(1)\nsecond line")
    assert [p.name for p in tmp_path.iterdir()] == ["r.xlsx"]  # no temporary left
    wb = openpyxl.load_workbook(f)
    assert wb.sheetnames == ["summary", "compare", "compare_2"]
    assert [r[0] for r in wb["summary"].iter_rows(values_only=True)] == [
        "=HYPERLINK(1)", "second line"]
    assert wb["summary"]["A1"].data_type == "s"  # a string, not a formula
    first, second = wb["compare"], wb["compare_2"]
    assert first.freeze_panes == "A2" and second.freeze_panes == "A2"
    assert [list(r) for r in first.iter_rows(values_only=True)] == [
        ["op", "cosine", "verdict"], ["=1+1", "nan", "pass"], ["https://x.example/a", 0.5, "fail"]]
    assert first["A2"].data_type == "s" and not first["A3"].hyperlink
    assert first["C3"].fill.fgColor.rgb.endswith("FFC7CE") and first["C2"].fill.fill_type is None
    assert first["A1"].font.b
    assert [list(r) for r in second.iter_rows(values_only=True)] == [
        ["op", "cosine", "verdict"], ["a?b", None, "pass"]]
