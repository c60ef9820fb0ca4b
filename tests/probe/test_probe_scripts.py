"""scripts/load_atb_probe.sh and unload_atb_probe.sh, sourced in real bash."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from probe_helpers import base_env
from testkit import REPO, atbsim_bin, shim_lib

LOAD = REPO / "scripts" / "load_atb_probe.sh"
UNLOAD = REPO / "scripts" / "unload_atb_probe.sh"
VARS = ("LD_PRELOAD", "ATB_OUTPUT_DIR", "ATB_DUMP_CONFIG", "MSPROBE_ATB_PYTHON")


def bash(script: str, cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Runs `script` in bash (`set -u` like a strict user shell), then dumps our variables."""
    full = ("set -u\n" + script + "\necho \"rc=$?\"\necho ALIVE\n" +
            "".join(f'echo "{v}=${{{v}-<unset>}}"\n' for v in VARS))
    e = base_env()
    e.pop("MSPROBE_ATB_PYTHON")
    e.update(env)
    p = subprocess.run(["bash", "-c", full], cwd=cwd, capture_output=True, text=True, env=e,
                       timeout=60)
    assert "ALIVE" in p.stdout, p.stdout + p.stderr  # never exits the user's shell
    vals = dict(line.split("=", 1) for line in p.stdout.splitlines()
                if line.split("=", 1)[0] in VARS)
    return p, vals


def home(abi: int) -> str:
    return str(REPO / "build" / "atbsim" / f"cxx_abi_{abi}")


def test_load_exports_and_is_idempotent(tmp_path):
    out, cfg = tmp_path / "my out", tmp_path / "cfg dir" / "c.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps({"dump_enable": True}))
    p, v = bash(f'source "{LOAD}" "--output={out}" "--config={cfg}"\n'
                f'source "{LOAD}" "--output={out}" "--config={cfg}"',
                tmp_path, ATB_HOME_PATH=home(1), LD_PRELOAD="/x/libother.so")
    assert v["LD_PRELOAD"] == f"{shim_lib(1)}:/x/libother.so"
    assert v["ATB_OUTPUT_DIR"] == str(out) and v["ATB_DUMP_CONFIG"] == str(cfg)
    assert v["MSPROBE_ATB_PYTHON"] == str(REPO / ".venv" / "bin" / "python")
    assert "awake" in p.stdout and str(out) in p.stdout


def test_defaults_relative_paths_and_abi_switch(tmp_path):
    p, v = bash(f'source "{LOAD}" --output=rel\nexport ATB_HOME_PATH={home(0)}/\n'
                f'source "{LOAD}" --output=rel', tmp_path, ATB_HOME_PATH=home(1))
    assert v["LD_PRELOAD"] == str(shim_lib(0))  # switching ABI replaces
    assert v["ATB_OUTPUT_DIR"] == str(tmp_path / "rel")
    assert v["ATB_DUMP_CONFIG"] == str(REPO / "scripts" / "config.json")
    p, v = bash(f'source "{LOAD}"', tmp_path, ATB_HOME_PATH=home(1))
    assert v["ATB_OUTPUT_DIR"] == str(tmp_path)


def test_abi_from_libatb_symbols(tmp_path, abi):
    if not (Path(home(abi)) / "lib" / "libatb.so").exists():
        pytest.skip("atbsim is not built")
    h = tmp_path / "atb"
    (h / "lib").mkdir(parents=True)
    (h / "lib" / "libatb.so").symlink_to(Path(home(abi)) / "lib" / "libatb.so")
    p, v = bash(f'source "{LOAD}"', tmp_path, ATB_HOME_PATH=str(h))
    assert v["LD_PRELOAD"] == str(shim_lib(abi))


@pytest.mark.parametrize("case", ["no-atb", "no-abi", "bad-arg", "too-many", "unwritable",
                                  "unreadable-config"])
def test_refusals_leave_no_state(tmp_path, case):
    env = {"ATB_HOME_PATH": home(1)}
    args = ""
    if case == "no-atb":
        env = {}
    elif case == "no-abi":
        env = {"ATB_HOME_PATH": str(tmp_path)}
    elif case == "bad-arg":
        args = "--output /tmp"
    elif case == "too-many":
        args = "--output=a --config=b --x=c"
    elif case == "unwritable":
        args = "--output=/proc/1/nope"
    elif case == "unreadable-config":
        if os.geteuid() == 0:
            pytest.skip("root reads everything")
        c = tmp_path / "c.json"
        c.write_text("{}")
        c.chmod(0)
        args = f"--config={c}"
    p, v = bash(f'source "{LOAD}" {args}', tmp_path, **env)
    assert "rc=1" in p.stdout
    assert "WARNING" in p.stderr and "not loaded" in p.stderr
    assert all(v[k] == "<unset>" for k in VARS), v


def test_unbuilt_shim_says_run_make(tmp_path):
    fake = tmp_path / "repo"
    (fake / "scripts").mkdir(parents=True)
    shutil.copy(LOAD, fake / "scripts")
    p, v = bash(f'source "{fake}/scripts/load_atb_probe.sh"', tmp_path, ATB_HOME_PATH=home(0))
    assert "Run 'make'" in p.stderr and v["LD_PRELOAD"] == "<unset>"


def test_config_problems_are_shown_but_do_not_block(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"dump_enable": "yes"}')
    p, v = bash(f'source "{LOAD}" --config={bad}', tmp_path, ATB_HOME_PATH=home(1))
    assert "rc=0" in p.stdout and "dump_enable" in p.stdout and "asleep" in p.stdout
    # a user shell with `set -e` survives a config the control plane rejects
    p, v = bash(f'set -e\nsource "{LOAD}" --config={bad}', tmp_path, ATB_HOME_PATH=home(1))
    assert v["ATB_DUMP_CONFIG"] == str(bad)
    p, v = bash(f'source "{LOAD}" --config={tmp_path}/later.json', tmp_path,
                ATB_HOME_PATH=home(1))
    assert "does not exist yet" in p.stdout and v["ATB_DUMP_CONFIG"] == f"{tmp_path}/later.json"


def test_load_says_a_recorder_config_is_armed_not_dumping(tmp_path):
    cfg = tmp_path / "rec.json"
    cfg.write_text(json.dumps({"dump_enable": True, "recorder": {"triggers": ["nan"]}}))
    p, v = bash(f'source "{LOAD}" --config={cfg}', tmp_path, ATB_HOME_PATH=home(1))
    assert "state:  armed: the flight recorder writes nothing until a trigger fires" in p.stdout
    assert "dumping starts" not in p.stdout


def test_unload_removes_exactly_our_entry(tmp_path):
    p, v = bash(f'source "{LOAD}" --output={tmp_path}/o\nsource "{UNLOAD}"', tmp_path,
                ATB_HOME_PATH=home(1), LD_PRELOAD="/a/liba.so:/b/libb.so")
    assert v["LD_PRELOAD"] == "/a/liba.so:/b/libb.so"
    assert all(v[k] == "<unset>" for k in VARS[1:])
    p, v = bash(f'source "{LOAD}" --output={tmp_path}/o\nsource "{UNLOAD}"', tmp_path,
                ATB_HOME_PATH=home(1))
    assert v["LD_PRELOAD"] == "<unset>" and "unloaded" in p.stdout


def test_load_then_run_dumps_and_unload_stops_the_control_plane(tmp_path):
    if not atbsim_bin(1).exists():
        pytest.skip("atbsim is not built")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"dump_enable": True, "task": "tensor", "exec_range": "0,0"}))
    p, v = bash(f'source "{LOAD}" --output={tmp_path}/o --config={cfg}\n'
                f'"{atbsim_bin(1)}" run --layers 1 --decode-steps 0 >/dev/null\n'
                f'source "{UNLOAD}"', tmp_path, ATB_HOME_PATH=home(1))
    assert "Ready to dump ATB data" in p.stdout
    bins = list((tmp_path / "o" / "atb_dump_data" / "data").rglob("*.bin"))
    assert bins
    # --stop returned: the daemon is not left behind waiting for us
    subprocess.run([sys.executable, "-m", "msprobe_atb", "daemon", "--stop", "--output",
                    str(tmp_path / "o")], cwd=REPO, check=True, capture_output=True, timeout=60)


def test_load_says_how_to_fix_a_config_others_can_write(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text('{"dump_enable": true}')
    cfg.chmod(0o666)
    p, v = bash(f'source "{LOAD}" --config={cfg}', tmp_path, ATB_HOME_PATH=home(1))
    assert "rc=0" in p.stdout and v["ATB_DUMP_CONFIG"] == str(cfg)
    assert f"chmod go-w {cfg}" in p.stdout and "asleep until the config is fixed" in p.stdout


def test_load_puts_msprobe_atb_on_path_once_and_unload_takes_it_off(tmp_path):
    bindir = str(REPO / "scripts" / "bin")
    show = 'echo "P=$PATH"; command -v msprobe-atb; msprobe-atb --version'
    p, _ = bash(f'source "{LOAD}" --output=o\nsource "{LOAD}" --output=o\n{show}\n'
                f'source "{UNLOAD}"\necho "P=$PATH"; command -v msprobe-atb || echo GONE',
                tmp_path, ATB_HOME_PATH=home(1), PATH="/usr/local/bin:/usr/bin:/bin")
    paths = [line[2:] for line in p.stdout.splitlines() if line.startswith("P=")]
    assert paths == [f"{bindir}:/usr/local/bin:/usr/bin:/bin", "/usr/local/bin:/usr/bin:/bin"]
    assert f"{bindir}/msprobe-atb" in p.stdout and "msprobe-atb 0." in p.stdout
    assert "GONE" in p.stdout
    # already on PATH before load (the user put it there): unload leaves it
    p, _ = bash(f'source "{LOAD}" --output=o\nsource "{UNLOAD}"\necho "P=$PATH"', tmp_path,
                ATB_HOME_PATH=home(1), PATH=f"/usr/bin:{bindir}:/bin")
    assert f"P=/usr/bin:{bindir}:/bin" in p.stdout
