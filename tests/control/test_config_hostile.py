"""Hostile config content: every input is rejected with a
message, `check` tells "rejected" (1) from "crashed" (3), and a running daemon
survives each one with the last good config in force."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from test_daemon import block_of, config_of
from testkit import REPO, save_config, wait_until

from msprobe_atb.config import ConfigError, load_bytes, loader
from msprobe_atb.config import cli as check_cli

BIG = "1" * 5000
HOSTILE = [
    ("c.json", f'{{"exec_range": "0,{BIG}"}}', '"exec_range"'),
    ("c.json", f'{{"device": "{BIG}"}}', "invalid device ids"),
    ("c.json", f'{{"filter_level": {BIG}}}', "more than 4300 digits"),
    ("c.yaml", f"filter_level: {BIG}\n", "more than 4300 digits"),
    ("c.yaml", f"? {BIG}\n: 1\n", "more than 4300 digits"),
    ("c.yaml", "dump_enable: 2020-01-01\n", '"dump_enable": "2020-01-01" is a date'),
    ("c.yaml", "dump_enable: 2001-12-14 21:59:43\n", "is a timestamp"),
    ("c.yaml", "task: !!binary aGVsbG8=\n", "(binary data of 5 bytes)"),
    ("c.yaml", "ids: !!set {a, b}\n", "is a set"),
    ("c.yaml", "dump_enable: 2020-13-45\n", "month must be in 1..12"),
    ("c.yaml", "dump_enable: !!bool x\n", "not valid YAML"),
    ("c.yaml", "overflow_check: {1: 2, 2020-01-01: 3}\n", 'unknown key "2020-01-01"'),
    ("c.yaml", "? 2020-01-01\n: 1\n", 'unknown key "2020-01-01"'),
    ("c.yaml", "dump_enable: &a [*a]\n", "(a value that contains itself)"),
    ("c.yaml", "overflow_check: &a {overflow_nums: *a}\n", "contains itself"),
    ("c.yaml", "filter_level: !!float 1e400\n", "inf is not accepted"),
]


@pytest.mark.parametrize(("name", "text", "expect"), HOSTILE,
                         ids=[f"{i}-{t[:24]}" for i, (_, t, _) in enumerate(HOSTILE)])
def test_hostile_values_are_rejected_with_a_message(name, text, expect):
    with pytest.raises(ConfigError) as info:
        load_bytes(text.encode(), name)
    assert expect in str(info.value)
    str(info.value).encode("utf-8")  # printable as is


def test_huge_number_is_named_by_its_size_not_as_self_reference():
    with pytest.raises(ConfigError) as info:
        load_bytes(f"filter_level: !!int {'9' * 5000}\n".encode(), "c.yaml")
    assert "contains itself" not in str(info.value)
    with pytest.raises(ConfigError) as info:  # short enough to read, out of every range
        load_bytes(f"filter_level: {'9' * 200}\n".encode(), "c.yaml")
    assert '"filter_level": (a number of 200 digits) is not accepted' in str(info.value)


def test_check_command_rejects_a_yaml_date(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("dump_enable: 2020-01-01\n")
    r = subprocess.run([sys.executable, "-m", "msprobe_atb", "check", str(cfg)], cwd=REPO,
                       capture_output=True, text=True)
    assert r.returncode == check_cli.REJECTED, r.stderr
    assert '"dump_enable": "2020-01-01" is a date; accepted values: true or false' in r.stderr
    assert "Traceback" not in r.stderr


def test_check_command_says_crashed_distinctly(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "c.json"
    cfg.write_text("{}")

    def broken(_path):
        raise TypeError("a validator bug")

    monkeypatch.setattr(loader, "load_config", broken)  # check imports it when it runs
    rc = check_cli.run(argparse.Namespace(config=str(cfg), json=False))
    assert rc == check_cli.CRASHED != check_cli.REJECTED
    assert "internal error while checking the config" in capsys.readouterr().err


def test_daemon_survives_every_hostile_edit(out_dir, daemons, daemon_env):
    daemon_env["MSPROBE_ATB_POLL_S"] = "0.2"
    cfg = out_dir / "config.yaml"
    d = daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        for i, (_, text, expect) in enumerate(t for t in HOSTILE if t[0] == "c.yaml"):
            good = f"{i + 1}_0"
            save_config(cfg, raw=f"dump_enable: true\nexec_range: all\nids: '{good}'\n")
            wait_until(lambda g=good: config_of(block).ids == (g,), timeout=15,
                       what=f"good edit {good}")
            seq = block.error_seq
            save_config(cfg, raw=text)
            wait_until(lambda s=seq: block.error_seq > s, timeout=15,
                       what=f"edit {text[:40]!r} rejected")
            assert expect in block.error
            assert d.proc.poll() is None, d.log_text[-3000:]
            assert config_of(block).ids == (good,), "the last good config left force"
    assert "Traceback" not in d.log_text
