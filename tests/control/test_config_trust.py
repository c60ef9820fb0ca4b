"""Configs another user could write are refused (as msProbe refuses them): a symlink,
a group- or other-writable file, a file owned by another uid. `check` says how
to fix it; the daemon refuses it like a bad edit, the last good config stays in
force, and fixing the file (chmod alone, content untouched) applies it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from test_daemon import block_of, config_of
from testkit import REPO, save_config, wait_until

from msprobe_atb.config import ConfigError, load_config

OTHER_UID = 4242


def _check(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "msprobe_atb", "check", str(path)], cwd=REPO,
                          capture_output=True, text=True)


def _chown_other(path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another uid needs root")
    os.chown(path, OTHER_UID, -1)


UNSAFE = {
    "group-writable": (lambda p: p.chmod(0o664), "can be written by its group (mode 0664)",
                       "chmod go-w"),
    "other-writable": (lambda p: p.chmod(0o606), "can be written by others (mode 0606)",
                       "chmod go-w"),
    "both": (lambda p: p.chmod(0o666), "its group and others", "chmod go-w"),
    "other-owner": (_chown_other, f"belongs to uid {OTHER_UID}", f"chown {os.geteuid()}"),
}


@pytest.mark.parametrize("case", sorted(UNSAFE))
def test_check_refuses_a_config_others_can_write(tmp_path, case):
    make, problem, fix = UNSAFE[case]
    cfg = tmp_path / "config.json"
    save_config(cfg, dump_enable=True)
    assert _check(cfg).returncode == 0
    make(cfg)
    r = _check(cfg)
    assert r.returncode == 1, r.stderr
    assert problem in r.stderr and fix in r.stderr and str(cfg) in r.stderr


def test_check_refuses_a_symlink_even_to_a_good_file(tmp_path):
    real = tmp_path / "real.json"
    save_config(real, dump_enable=True)
    link = tmp_path / "config.json"
    link.symlink_to(real)
    with pytest.raises(ConfigError) as info:
        load_config(link)
    assert "is a symbolic link (to" in str(info.value)
    assert f"cp --remove-destination {real} {link}" in str(info.value)
    r = _check(link)
    assert r.returncode == 1 and "symbolic link" in r.stderr


def test_daemon_refuses_unsafe_configs_and_keeps_the_last_good(out_dir, daemons, daemon_env):
    daemon_env["MSPROBE_ATB_POLL_S"] = "0.2"
    cfg = out_dir / "config.json"
    save_config(cfg, dump_enable=True, exec_range="all", ids="2")
    d = daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: config_of(block).ids == ("2",), what="the first config")
        cases = [(k, v) for k, v in sorted(UNSAFE.items())
                 if k != "other-owner" or os.geteuid() == 0]
        for n, (case, (make, problem, fix)) in enumerate(cases):
            ids = str(10 + n)
            save_config(cfg, dump_enable=True, exec_range="all", ids=ids)
            wait_until(lambda i=ids: config_of(block).ids == (i,), timeout=15, what=ids)
            make(cfg)
            wait_until(lambda: block.error, timeout=15, what=f"the {case} config refused")
            assert problem in block.error and fix in block.error, block.error
            assert config_of(block).ids == (ids,), "the last good config left force"
            # the fix touches only the mode or the owner, not the content
            cfg.chmod(0o644)
            os.chown(cfg, os.geteuid(), -1)
            wait_until(lambda: not block.error, timeout=15, what=f"the fixed {case} config")
        real = out_dir / "real.json"
        save_config(real, dump_enable=True, exec_range="all", ids="99")
        cfg.unlink()
        cfg.symlink_to(real)
        wait_until(lambda: block.error, timeout=15, what="the symlink refused")
        assert "is a symbolic link" in block.error
        assert config_of(block).ids == (str(10 + len(cases) - 1),)
    assert "config rejected, keeping the previous config" in d.log_text
