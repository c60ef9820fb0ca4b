"""The HTML report, rendered by headless Chromium: sections and inlined plots."""

from __future__ import annotations

import base64
import re
import shutil
import struct
import subprocess

import pytest
from offline_helpers import run_cli

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]
SECTIONS = ("summary", "first-nan", "layers", "nan-map", "error-growth")


def _chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("chromium is not installed: run scripts/install_deps.sh")
    profile = tmp_path / "chromium-profile"
    return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def _check_report(tmp_path, dump, golden, injected_op: str) -> None:
    out = tmp_path / "report.html"
    rc, text = run_cli("report", str(dump), "--golden", str(golden), "-o", str(out))
    assert rc == 0 and out.exists()
    r = _chromium(tmp_path, "--dump-dom", out.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    for s in SECTIONS:
        assert f'<section id="{s}">' in dom, f"section {s} missing"
    assert "msprobe-atb dump report" in dom
    assert injected_op in dom.split('id="first-nan"')[1].split("</section>")[0]
    assert "First divergent" in dom and injected_op in dom.split('id="error-growth"')[1]
    imgs = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)"', dom)
    assert {a for a, _ in imgs} == {"norm and abs-max per layer", "NaN/Inf map",
                                    "error growth along the layers"}
    for _alt, b64 in imgs:
        png = base64.b64decode(b64)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        w, h = struct.unpack(">II", png[16:24])
        assert w > 200 and h > 100
    assert "http://" not in dom and "https://" not in dom  # self-contained
    shot = tmp_path / "shot.png"
    r = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,3000", out.as_uri())
    assert r.returncode == 0 and shot.stat().st_size > 20_000


def test_report_in_chromium_synthetic(tmp_path, synth_pair):
    _check_report(tmp_path, synth_pair[1], synth_pair[0], "2_Layer/1_Linear")


def test_report_in_chromium_real(tmp_path, real_dumps):
    from msprobe_atb.offline import open_dump
    from msprobe_atb.offline.summary import first_nonfinite

    first = first_nonfinite(open_dump(real_dumps["injected"]).tensors)[0]
    _check_report(tmp_path, real_dumps["injected"], real_dumps["golden"], first["op"])
