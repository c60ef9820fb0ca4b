"""`status` and `wait` on a dir that is not a dump say which mistake it is: a path that
does not exist (a typo) is not reported as "no process has attached"."""

from __future__ import annotations

import pytest

from msprobe_atb.cli import main


@pytest.mark.parametrize("command", ["status", "wait"])
def test_missing_dir_is_named_as_missing(command, tmp_path, capsys):
    missing = tmp_path / "dupm"
    assert main([command, str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"{missing}: no such directory" in err and "--output" in err
    assert "control block" not in err and not missing.exists()


@pytest.mark.parametrize("command", ["status", "wait"])
def test_existing_dir_without_a_probe_says_how_to_attach(command, tmp_path, capsys):
    assert main([command, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no process has attached" in err and "load_atb_probe.sh" in err
