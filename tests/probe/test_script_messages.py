"""What the load and unload scripts say when they are used wrongly: each message
names the problem and what to do, and nothing is exported."""

from __future__ import annotations

import subprocess

from test_probe_scripts import LOAD, UNLOAD, bash, home


def test_help_prints_usage_and_loads_nothing(tmp_path):
    for flag in ("-h", "--help"):
        p, v = bash(f'source "{LOAD}" {flag}', tmp_path, ATB_HOME_PATH=home(1))
        assert "usage: source load_atb_probe.sh" in p.stdout
        assert "unknown argument" not in p.stderr
        assert "rc=0" in p.stdout and v["LD_PRELOAD"] == "<unset>"


def test_running_instead_of_sourcing_says_source_first(tmp_path):
    p = subprocess.run(["bash", str(LOAD)], capture_output=True, text=True, cwd=tmp_path,
                       env={"PATH": "/usr/bin:/bin"}, timeout=30)
    assert p.returncode == 1
    first = p.stderr.splitlines()[0]
    assert "source this script" in first and "ATB_HOME_PATH" not in p.stderr


def test_nonexistent_atb_home_is_named(tmp_path):
    p, v = bash(f'source "{LOAD}"', tmp_path, ATB_HOME_PATH=str(tmp_path / "no_such_atb"))
    assert "no_such_atb does not exist" in p.stderr
    assert v["LD_PRELOAD"] == "<unset>"


def test_output_dir_is_created_at_load_or_refused(tmp_path):
    p, v = bash(f'source "{LOAD}" --output=/proc/nope', tmp_path, ATB_HOME_PATH=home(1))
    assert "/proc/nope cannot be created" in p.stderr and v["ATB_OUTPUT_DIR"] == "<unset>"
    p, v = bash(f'source "{LOAD}" --output=new/out', tmp_path, ATB_HOME_PATH=home(1))
    assert (tmp_path / "new" / "out").is_dir() and v["ATB_OUTPUT_DIR"] == str(tmp_path / "new/out")


def test_a_mistyped_config_name_is_caught(tmp_path):
    (tmp_path / "config.json").write_text('{"dump_enable": false}')
    p, v = bash(f'source "{LOAD}" --config=conifg.json', tmp_path, ATB_HOME_PATH=home(1))
    assert "did you mean --config=" in p.stderr and "config.json" in p.stderr
    assert v["LD_PRELOAD"] == "<unset>"
    p, v = bash(f'source "{LOAD}" --config=later.json', tmp_path, ATB_HOME_PATH=home(1))
    assert "does not exist yet; that is fine" in p.stdout and v["LD_PRELOAD"] != "<unset>"


def test_unload_without_load_says_nothing_to_undo(tmp_path):
    p, _ = bash(f'source "{UNLOAD}"', tmp_path)
    assert "not loaded in this shell; nothing to undo" in p.stdout
    assert "variables cleared" not in p.stdout
