"""When the control plane cannot start at all, the shim notices at once and
says why, instead of every process waiting MSPROBE_ATB_ATTACH_WAIT_MS (10 s)
for a publish that never comes."""

from __future__ import annotations

import json

import pytest
from robust_helpers import DUMP_ALL, probe_host, records

SAVE = b"save\t2\t1\t1\thex:003c\t0_7/0/2_Layer/before/intensor0.bin\n"


def _broken_python(tmp_path):
    py = tmp_path / "python-without-msprobe"
    py.write_text("#!/bin/sh\necho \"$0: No module named msprobe_atb\" >&2\nexit 1\n")
    py.chmod(0o755)
    return str(py), f"{py} exited with status 1: {py}: No module named msprobe_atb"


def _missing_python(tmp_path):
    py = tmp_path / "no" / "python3"
    return str(py), f"cannot run {py}: No such file or directory"


@pytest.mark.parametrize("python", [_missing_python, _broken_python])
def test_failed_spawn_is_detected_at_once_and_explained(tmp_path, python):
    out = tmp_path / "out"
    config = tmp_path / "config.json"
    config.write_text(json.dumps(DUMP_ALL))
    exe, why = python(tmp_path)
    # the default attach wait (10 s) stays in force: the host must not need it
    r = probe_host(out, config, SAVE, MSPROBE_ATB_PYTHON=exe)
    assert r.returncode == 0
    err = r.stderr.decode()
    assert f"the control plane cannot start: {why}" in err, err
    assert "MSPROBE_ATB_PYTHON" in err
    assert "has not published" not in err, "it waited for a publish that could not come"
    assert err.count("cannot start") == 1, err
    # it stayed asleep, and says so in its record log
    kinds = [x["k"] for x in records(out / "atb_dump_data")]
    assert kinds == ["attach", "exit"]
