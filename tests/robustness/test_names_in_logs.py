"""Newlines and other control characters in names never split or forge a log
line: the host's stderr and the daemon's log write them as \\xNN."""

from __future__ import annotations

import json

from robust_helpers import DUMP_ALL, probe_host, wait_daemon_gone

FORGED = "[msprobe-atb] FORGED line"


def test_newline_in_a_tensor_name_stays_on_its_log_line(tmp_path):
    out = tmp_path / "out"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    bad = f"0_7/0/2_Layer\n{FORGED}\r\x1b[2J/before/intensor0.bin"
    r = probe_host(out, config, f"save\t2\t1\t1\thex:003c\thex:{bad.encode().hex()}\n".encode())
    assert r.returncode == 0
    wait_daemon_gone(out)
    err = r.stderr.decode()
    lines = err.splitlines()
    assert not any(line.startswith(FORGED) for line in lines), err
    [line] = [x for x in lines if "not written" in x]
    assert line.startswith("[msprobe-atb] tensor 0_7/0/2_Layer\\x0a[msprobe-atb] FORGED")
    assert "\\x0d\\x1b[2J" in line and "control character" in line


def test_newline_in_the_config_path_stays_on_its_daemon_log_line(tmp_path):
    out = tmp_path / "out"
    cfg_dir = tmp_path / f"cfg\n{FORGED}"
    cfg_dir.mkdir()
    config = cfg_dir / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    r = probe_host(out, config, b"save\t2\t1\t1\thex:003c\t0_7/0/2_L/before/intensor0.bin\n")
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    log = (out / "atb_dump_data" / ".probe" / "daemon.log").read_text()
    assert not any(line.startswith(FORGED) for line in log.splitlines()), log
    assert f"cfg\\x0a{FORGED}/config.json" in log
