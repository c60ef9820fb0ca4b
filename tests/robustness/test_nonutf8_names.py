"""An op name that is not UTF-8 (ATB passes bytes): the record log carries it as
surrogate escapes (\\udcXX), the CSV holds the raw bytes, so the Tensor Path
opens the real .bin and every .bin has its row."""

from __future__ import annotations

import csv
import io
import json
import os

from robust_helpers import DUMP_ALL, probe_host, records, wait_daemon_gone

OP = b"1_Op\xff\xfe"


def test_op_name_that_is_not_utf8_keeps_its_row(tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    script = b"".join(b"save\t2\t1\t1\thex:003c\t0_7/0/" + op + b"/before/intensor0.bin\n"
                      for op in (OP, b"2_Plain", OP + b"/0_Child\xc3("))
    r = probe_host(out, config, script)
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    root = out / "atb_dump_data"
    recs = [x for x in records(root) if x["k"] == "tensor"]
    assert sorted(x["file"] for x in recs) == ["bin"] * 3
    # the first saved, its record where its writer put it (writers finish out of order)
    (first,) = [x for x in recs if x["seq"] == 0]
    assert os.fsencode(first["path"]) == b"0_7/0/" + OP + b"/before/intensor0.bin"

    round_dir = root / "data" / "0_7" / "0"
    text = (round_dir / "statistic.csv").read_bytes().decode("utf-8", "surrogateescape")
    paths = {row["Tensor Path"] for row in csv.DictReader(io.StringIO(text))}
    on_disk = {str(p) for p in (root / "data").rglob("*.bin")}
    assert paths == on_disk and len(paths) == 3
    for p in paths:
        assert os.path.isfile(p)
    assert (round_dir / os.fsdecode(OP) / "before" / "intensor0.bin").is_file()
    # statistic_extra.csv stays row-aligned and readable the same way
    extra = (round_dir / "statistic_extra.csv").read_bytes().decode("utf-8", "surrogateescape")
    assert [row["Data Status"] for row in csv.DictReader(io.StringIO(extra))] == ["bin"] * 3
    # the daemon wrote everything it derives (manifest included) and never failed
    log = (root / ".probe" / "daemon.log").read_text(errors="replace")
    assert "Traceback" not in log and "daemon failed" not in log, log
