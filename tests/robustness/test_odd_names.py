"""Names that are not plain ASCII: a config path with a non-UTF-8 byte and a space,
a config whose JSON escapes make no character. The control plane refuses what it
cannot use with a message naming the file, and never dies of it."""

from __future__ import annotations

import json
import os

from robust_helpers import SMALL, cli, records, run_atbsim, status_now, wait_daemon_gone

CONFIG = {"task": "statistics", "dump_enable": True, "exec_range": "0", "ids": "1",
          "save_child": True}


# "Billion laughs": YAML aliases make 9**9 strings of nine short lines.
LAUGHS = "dump_enable: true\na: &a [" + ",".join(['"lol"'] * 9) + "]\n" + "".join(
    f"{b}: &{b} [" + ",".join([f"*{a}"] * 9) + "]\n" for a, b in zip("abcdefgh", "bcdefghi"))


def _odd_config(tmp_path):
    # \udcff is how Python spells the byte 0xff of a file name that is not UTF-8.
    return tmp_path / "cfg dir" / "conf\udcff ig.json"


def test_config_path_that_is_not_utf8(tmp_path):
    config = _odd_config(tmp_path)
    config.parent.mkdir()
    config.write_text(json.dumps(CONFIG))
    out = tmp_path / "out"
    r = run_atbsim(out, config, *SMALL)
    assert r.returncode == 0, r.stderr[-2000:]
    wait_daemon_gone(out)
    tensors = [x for x in records(out / "atb_dump_data") if x["k"] == "tensor"]
    assert tensors and all(x["file"] == "none" for x in tensors)
    assert list((out / "atb_dump_data" / "data").glob("*/0/statistic.csv"))
    assert os.fsencode(str(config)) in (out / "atb_dump_data" / ".probe" /
                                        "daemon.log").read_bytes().replace(b"\\udcff", b"\xff")


def test_bad_config_at_a_path_that_is_not_utf8(tmp_path):
    config = _odd_config(tmp_path)
    config.parent.mkdir()
    config.write_text('{"dump_enable": tru')
    out = tmp_path / "out"
    r = run_atbsim(out, config, *SMALL, MSPROBE_ATB_ATTACH_WAIT_MS="5000")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "has not published" not in r.stderr, "the daemon did not come up"
    wait_daemon_gone(out)
    st = status_now(out)
    assert "not valid JSON at line 1" in st["rejected_edit"]
    log = (out / "atb_dump_data" / ".probe" / "daemon.log").read_text(errors="replace")
    assert "config rejected" in log
    assert "Traceback" not in log and "daemon failed" not in log


def test_check_refuses_what_no_parser_can_hold(tmp_path):
    deep = "[" * 100000 + "]" * 100000
    for name, text, why in (
            ("c.json", '{"dump_enable": true, "op_name": "\\udcff"}', "surrogate"),
            ("c.yaml", 'dump_enable: true\nids: "\\ud800"\n', "surrogate"),
            ("d.json", '{"dump_enable": true, "x": ' + deep + "}", "nested too deeply"),
            ("d.yaml", "dump_enable: true\nx: " + deep + "\n", "nested too deeply"),
            ("lol.yaml", LAUGHS + "ids: *i\n", '"ids": [[[[[[[[["lol"'),
            ("self.yaml", "dump_enable: true\nids: &r [1, *r]\n", "contains itself")):
        (tmp_path / name).write_text(text)
        r = cli("check", str(tmp_path / name), timeout=60)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert why in r.stdout + r.stderr and name in r.stdout + r.stderr
