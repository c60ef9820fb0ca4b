"""The golden trigger's file: `check` and the daemon judge it the same way (one
validation), and neither ever blocks on what it opens. A FIFO named
statistic.csv used to hang the daemon's config handling (a later good edit was
never applied, `status` said "awake" with no error) while `check` called the
config valid; `check` also took /nonexistent and /dev/zero, which the daemon
rejects."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_daemon import block_of, config_of
from testkit import save_config, wait_until

from msprobe_atb.cli import main

GOOD_CSV = "Op Id,Input/Output,Index,Max,Min,Mean,Norm\n0,output,0,1.5,-1,0.25,3\n"


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# name -> (make the golden under base, what the refusal says; None: accepted)
GOLDENS = {
    "good-csv": (lambda b: _file(b / "good" / "statistic.csv", GOOD_CSV), None),
    "good-dump-dir": (lambda b: _file(b / "gd" / "atb_dump_data" / "data" / "0_1" / "0" /
                                      "statistic.csv", GOOD_CSV).parents[4], None),
    "fifo-in-dump-dir": (lambda b: _fifo(b / "fd" / "atb_dump_data" / "data" / "0_1" / "0" /
                                         "statistic.csv").parents[4],
                         "statistic.csv: is a FIFO, not a regular file"),
    "fifo": (lambda b: _fifo(b / "f" / "statistic.csv"),
             "statistic.csv: is a FIFO, not a statistic.csv or a dump dir"),
    "dev-zero": (lambda b: Path("/dev/zero"),
                 "/dev/zero: is a character device, not a statistic.csv or a dump dir"),
    "nonexistent": (lambda b: b / "nonexistent",
                    "nonexistent: No such file or directory"),
    "empty-dir": (lambda b: (b / "empty").mkdir() or b / "empty", "empty: no statistic.csv there"),
}


def _config(path: Path, golden: Path, ids: str) -> None:
    save_config(path, dump_enable=True, exec_range="all", task="statistics", ids=ids,
                recorder={"triggers": [{"golden": str(golden), "rtol": 0.05}]})


@pytest.fixture
def goldens(tmp_path) -> dict[str, Path]:
    return {name: make(tmp_path) for name, (make, _) in GOLDENS.items()}


def _check(cfg: Path, capsys) -> tuple[int, str]:
    rc = main(["check", str(cfg)])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_check_judges_the_golden_file(name, goldens, tmp_path, capsys):
    cfg = tmp_path / "config.json"
    _config(cfg, goldens[name], "1")
    rc, err = _check(cfg, capsys)
    says = GOLDENS[name][1]
    if says is None:
        assert rc == 0, err
    else:
        assert rc == 1 and '"recorder.triggers": golden: ' in err and says in err, err


def test_the_daemon_judges_as_check_and_never_blocks(out_dir, daemons, daemon_env, goldens,
                                                     capsys):
    """Each golden in turn, a good edit between two: the daemon refuses what
    `check` refuses with the same words, accepts what it accepts, and applies
    the next edit (it used to hang in open() on the FIFO)."""
    daemon_env["MSPROBE_ATB_POLL_S"] = "0.2"
    cfg = out_dir / "config.json"
    good = goldens["good-csv"]
    _config(cfg, good, "1")
    daemons(out_dir, cfg, daemon_env)
    with block_of(out_dir) as block:
        wait_until(lambda: config_of(block).ids == ("1",), timeout=30, what="the first config")
        last = "1"
        for n, name in enumerate(sorted(GOLDENS), start=2):
            _config(cfg, goldens[name], str(n))
            says = GOLDENS[name][1]
            if says is None:
                last = _applied(block, str(n), f"the {name} golden accepted")
                assert _check(cfg, capsys)[0] == 0
                continue
            wait_until(lambda s=says: s in block.error, timeout=30,
                       what=f"the daemon to refuse the {name} golden")
            assert config_of(block).ids == (last,)  # the last good config stays
            rc, err = _check(cfg, capsys)
            problem = next(x for x in err.splitlines() if "golden:" in x).strip()[2:]
            assert rc == 1 and problem in block.error  # the same words
            _config(cfg, good, f"{n}0")  # and a good edit after it is applied
            last = _applied(block, f"{n}0", f"the good edit after the {name} golden")


def _applied(block, ids: str, what: str) -> str:
    wait_until(lambda: config_of(block).ids == (ids,) and not block.error, timeout=30,
               what=what)
    return ids
