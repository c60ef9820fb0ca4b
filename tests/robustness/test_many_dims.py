"""A tensor with more dimensions than numpy allows (511, within the shim's
1,024-character dims limit) is dumped, and every offline command reports it as
an unreadable tensor, never with a traceback."""

from __future__ import annotations

import csv
import json

from robust_helpers import DUMP_ALL, cli, probe_host, wait_daemon_gone

DIMS = ",".join(["1"] * 511)
MANY = "0_7/0/2_Layer/after/outtensor0.bin"
SCRIPT = (f"save\t2\t1\t{DIMS}\thex:003c\t{MANY}\n"
          "save\t2\t1\t2\thex:003c003c\t0_7/0/2_Layer/before/intensor0.bin\n").encode()
PROBLEM = "its 511 dimensions cannot be held by a numpy array"


def test_every_offline_command_reports_a_511_dim_tensor(tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    r = probe_host(out, config, SCRIPT)
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    many = out / "atb_dump_data" / "data" / MANY
    assert many.is_file()

    runs = {
        "stats": cli("stats", str(out)),
        "convert": cli("convert", str(out), "-o", str(tmp_path / "npy")),
        "compare": cli("compare", "-gp", str(out), "-tp", str(out), "-o",
                       str(tmp_path / "compare.csv")),
        "report": cli("report", str(out), "--golden", str(out), "-o",
                      str(tmp_path / "report.html")),
    }
    for name, r in runs.items():
        assert "Traceback" not in r.stderr and r.returncode in (0, 1), (name, r.stderr[-3000:])
    # stats computes a tensor's statistics from its bytes, a chunk at a time: no
    # array of its 511 dimensions is made, so it has no problem to report
    assert PROBLEM not in runs["stats"].stdout + runs["stats"].stderr
    assert "2 tensors" in runs["stats"].stdout
    assert "converted 1" in runs["convert"].stdout + runs["convert"].stderr
    assert f"{many}: {PROBLEM}" in runs["convert"].stdout + runs["convert"].stderr
    with open(tmp_path / "compare.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2  # both tensors have their row
    assert (tmp_path / "report.html").stat().st_size > 0
