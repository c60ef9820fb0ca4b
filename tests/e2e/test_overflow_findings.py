"""The overflow task on the stand-in with real ATB's scan (docs/atbsim_model.md):
ATB reads fp16 and bf16 as fp16 and reports Inf only, so the probe scans every
kernel's outputs in their real dtype and each event says who found it, in
info/overflow, `msprobe-atb overflow` and `stats` (README, "Overflow detection").
One fault per dump, put by `--inject` into layer 1's SwiGLU output (op 2_11) of
round 0; overflow_nums 1, so the first event is the only one."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import require_artifacts, run_atbsim
from testkit import REPO

ABI = 1
MODEL = ["--layers", "2", "--hidden", "32", "--vocab", "64", "--prompt-len", "4",
         "--decode-steps", "1"]
KERNEL = ("ActivationOperation_2_11", "SwiGluKernel")
OUTPUT = "0/2_Prefill_layer/11_ActivationOperation/0_SwiGluKernel/after/outtensor0.bin"


@pytest.fixture(autouse=True)
def _artifacts():
    require_artifacts(ABI)


def run_dump(tmp_path: Path, env: dict, config: dict, dtype: str, inject: str) -> Path:
    return run_atbsim(tmp_path, env, config, ABI, [*MODEL, "--dtype", dtype, "--inject",
                                                    f"{inject}:layer=1,op=SwiGLU"])


def overflow_dump(tmp_path: Path, env: dict, dtype: str, inject: str, **overflow) -> Path:
    return run_dump(tmp_path, env, {"task": "overflow_check", "dump_enable": True,
                                    "overflow_check": {"overflow_nums": 1, **overflow}},
                    dtype, inject)


def events(out: Path) -> list[dict]:
    [log] = (out / "atb_dump_data" / "info" / "overflow").glob("*.csv")
    return list(csv.DictReader(open(log)))


def cli(*args: str) -> str:
    p = subprocess.run([sys.executable, "-m", "msprobe_atb", *args], capture_output=True,
                       text=True, timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("dtype,inject,report,finding", [
    # what ATB misses: found by the probe alone, ATB reported nothing
    ("bf16", "inf", "", "the probe found bf16 +Inf (ATB reads bf16 as fp16)"),
    ("fp16", "nan", "", "the probe found NaN (ATB does not report NaN)"),
    # a finite bf16 2^121 is bits 0x7C00: an fp16 Inf to ATB, explained by the probe
    ("bf16", "value=0x1p121", ":".join(KERNEL),
     "ATB reported an overflow, but as bf16 the output holds no Inf or NaN"),
    # an fp16 Inf: ATB reports it and the probe's scan agrees (one event, ATB's)
    ("fp16", "inf", ":".join(KERNEL), "ATB reported an overflow"),
])
def test_each_event_says_who_found_it(tmp_path, clean_env, dtype, inject, report, finding):
    out = overflow_dump(tmp_path, clean_env, dtype, inject, probe_scan=True)
    [ev] = events(out)
    assert (ev["Op Id"], ev["Kernel Name"], ev["Report"], ev["Finding"]) == (*KERNEL, report,
                                                                            finding)
    # the kernel's output is written, with its statistics in its real dtype
    [rec] = [json.loads(line) for f in (out / "atb_dump_data" / ".probe" / "records").iterdir()
             for line in f.read_text().splitlines() if '"k":"tensor"' in line]
    assert rec["path"].endswith(OUTPUT)
    nonfinite = {k: rec["stats"][k] for k in ("nan", "pinf", "ninf")}
    assert nonfinite == {"nan": int(inject == "nan"), "pinf": int(inject == "inf"), "ninf": 0}
    text = cli("overflow", str(out))
    assert f"kernel {ev['Op Id']}:{ev['Kernel Name']}: {finding}" in text, text
    summary = cli("stats", str(out))
    assert "OVERFLOW EVENTS: 1" in summary and finding in summary, summary


@pytest.mark.parametrize("dtype,inject,mode,kept", [
    ("fp16", "nan", "inf", False),  # the probe's NaN finding
    ("fp16", "nan", "nan", True),
    ("bf16", "inf", "inf", True),   # the probe's bf16 +Inf finding
    ("bf16", "inf", "nan", False),
    ("fp16", "inf", "nan", False),  # ATB's own report (Inf)
])
def test_check_mode_keeps_only_its_kind(tmp_path, clean_env, dtype, inject, mode, kept):
    out = overflow_dump(tmp_path, clean_env, dtype, inject, probe_scan=True, check_mode=mode)
    has = (out / "atb_dump_data" / "info" / "overflow").exists()
    assert has == kept, cli("overflow", str(out))


def test_by_default_atb_reports_alone_and_each_is_explained(tmp_path, clean_env):
    """probe_scan is off by default (ATB then copies only the kernel it reports:
    README): a bf16 Inf goes unseen, and ATB's false report is still explained
    from the reported kernel's output."""
    missed = overflow_dump(tmp_path / "missed", clean_env, "bf16", "inf")
    assert not (missed / "atb_dump_data" / "info" / "overflow").exists()
    assert "No overflow" in cli("overflow", str(missed))
    [ev] = events(overflow_dump(tmp_path / "false", clean_env, "bf16", "value=-0x1p121"))
    assert (ev["Report"], ev["Finding"]) == (
        ":".join(KERNEL), "ATB reported an overflow, but as bf16 the output holds no Inf or NaN")


@pytest.mark.parametrize("dtype,inject,finding,page", [
    ("fp16", "nan", "the probe found NaN (ATB does not report NaN)", True),
    ("bf16", "value=0x1p121",
     "ATB reported an overflow, but as bf16 the output holds no Inf or NaN", False),
])
def test_recorder_overflow_trigger_says_who_found_it(tmp_path, clean_env, dtype, inject,
                                                     finding, page):
    """The flight recorder's `overflow` trigger fires on what ATB misses too, in the
    selected outputs it already scans; the incident says who found it."""
    out = run_dump(tmp_path, clean_env, {
        "task": "tensor", "dump_enable": True, "exec_range": "all", "save_child": True,
        "recorder": {"keep_rounds": 0, "after_rounds": 0, "triggers": ["overflow"]}},
        dtype, inject)
    [inc] = json.loads(cli("incidents", str(out), "--json"))
    assert (inc["trigger"], inc["finding"]) == ("overflow", finding), inc
    if inject.startswith("value="):  # a false report: the value ATB misread, not an Inf
        assert inc["value"] == float.fromhex(inject[len("value="):]), inc
        assert "overflow (2.65846e+36)" in cli("incidents", str(out))
    ft = inc["first_tensor"]
    assert ft["path"].endswith(OUTPUT) and ft["op_id"] == "2_11_0", ft
    assert finding in cli("incidents", str(out)) and finding in cli("stats", str(out))
    if page:  # the HTML report's incidents table too (once: it takes a while)
        cli("report", str(out), "-o", str(tmp_path / "report.html"))
        assert finding in (tmp_path / "report.html").read_text()
