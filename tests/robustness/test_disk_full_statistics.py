"""`task: statistics` on a full disk: a statistics-only tensor is its record, so a
record that finds no room is a lost tensor, never a written one. Every reader
(`status`, `wait`, `stats`, the round markers) agrees with the record log, also
when the disk fills and the control plane cannot write statistic.csv, and when
room comes back in the middle of the run."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest
from robust_helpers import (
    SMALL,
    atbsim_cmd,
    cli,
    csv_rows,
    fill,
    pretouch_block,
    probe_env,
    rebuild,
    records,
    run_atbsim,
    status,
    status_now,
    wait_daemon_gone,
)
from testkit import wait_until

from msprobe_atb.control.block import ControlError

STATS = {"dump_enable": True, "exec_range": "all", "task": "statistics", "save_child": True}
FS_KIB = 8192
FREE_KIB = 400  # an 8 MiB tmpfs with 400 KiB free
MORE = [*SMALL[:-1], "6", "--requests", "3"]  # long enough to fill the disk midway


def _setup(module_fs, name: str) -> tuple[Path, Path, Path]:
    fs = module_fs(FS_KIB, name)
    out = fs / "out"
    config = fs.parent / f"{name}.json"
    config.write_text(json.dumps(STATS))
    pretouch_block(out)
    return fs, out, fill(fs, FREE_KIB)


def log_truth(root: Path) -> dict[str, int]:
    """What the record log says: tensors with a record of their statistics, and
    the lost ones (lost records plus the exit record's unrecorded counts)."""
    recs = records(root)
    (ex,) = [x for x in recs if x["k"] == "exit"]
    tensors = [x for x in recs if x["k"] == "tensor"]
    return {"recorded": sum(x["file"] == "none" for x in tensors),
            "lost": sum(x["file"] == "lost" for x in tensors) + sum(ex["unrecorded"].values()),
            "selected": ex["tensors_selected"], "written": ex["tensors_written"]}


@pytest.fixture(scope="module")
def full(module_fs):
    """One statistics run into a disk that is nearly full from the start."""
    fs, out, _ = _setup(module_fs, "full")
    r = run_atbsim(out, out.parent.parent / "full.json", *MORE)
    assert r.returncode == 0, r.stderr[-3000:]
    wait_daemon_gone(out)
    return fs, out, r


def test_a_record_that_found_no_room_is_a_loss(full):
    _, out, r = full
    # the control plane could not write the process's files: it did not tell the
    # process they were written, and the process said so at exit
    assert "has not written this process's statistic.csv" in r.stderr, r.stderr[-2000:]
    truth = log_truth(out / "atb_dump_data")
    (proc,) = status(out)["processes"]
    assert truth["lost"] > 0, "the disk must fill in this test"
    # written means recorded: a statistics row exists for every written tensor
    assert proc["tensors_written"] == truth["written"] == truth["recorded"]
    assert proc["errors"] + proc["drops"] == truth["lost"]
    assert proc["tensors_selected"] == truth["recorded"] + truth["lost"] == truth["selected"]


def test_wait_reports_the_loss_without_a_traceback(full):
    """With no control plane left, `wait` builds the tree itself on the full disk."""
    _, out, _ = full
    r = cli("wait", str(out), "--timeout", "60")
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr[-2000:])
    truth = log_truth(out / "atb_dump_data")
    assert f"LOST {truth['lost']}" in r.stdout, r.stdout
    assert "No space left on device" in r.stdout, r.stdout


def test_stats_agrees_with_the_record_log(full):
    _, out, _ = full
    truth = log_truth(out / "atb_dump_data")
    r = cli("stats", str(out), "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert s["lost"] == truth["lost"]
    assert s["derived_behind"], "stats must say that statistic.csv lacks records"
    assert s["record_logs"]["tensors"] == truth["recorded"]
    text = cli("stats", str(out)).stdout
    assert "No NaN/Inf in any tensor" not in text, text
    assert f"{truth['lost']} selected tensors were lost" in text, text


def test_status_names_what_the_disk_kept_out(full):
    _, out, _ = full
    r = cli("status", str(out))
    assert r.returncode == 0, r.stderr
    assert "LOST" in r.stdout, r.stdout
    assert "NOT WRITTEN" in r.stdout or "derived files:" in r.stdout, r.stdout


def test_rebuild_on_the_full_disk_says_what_it_could_not_write(full):
    _, out, _ = full
    r = cli("rebuild", str(out))
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 1 and "NOT complete" in r.stderr, (r.returncode, r.stdout, r.stderr)
    assert "No space left on device" in r.stderr and "statistic.csv" in r.stderr, r.stderr


def test_once_there_is_room_the_markers_count_every_loss(full):
    fs, out, _ = full
    (fs / "filler").unlink()
    rebuild(out)
    root = out / "atb_dump_data"
    truth = log_truth(root)
    markers = [json.loads(m.read_text()) for m in (root / "data").glob("*/*/ROUND_COMPLETE.json")]
    assert sum(m["lost"] for m in markers) == truth["lost"]
    assert sum(m["rows"] for m in markers) == len(csv_rows(root)) == truth["recorded"]
    r = cli("wait", str(out), "--timeout", "60")
    assert r.returncode == 1 and "NOT IN THE DERIVED" not in r.stdout, r.stdout
    s = json.loads(cli("stats", str(out), "--json").stdout)
    assert s["tensors"] == truth["recorded"] and s["lost"] == truth["lost"]
    assert not s["derived_behind"]


def test_room_coming_back_mid_run(module_fs):
    """The disk fills during the run and is freed while the host still runs: the
    records that found no room meanwhile are counted in their rounds, the later
    ones are written, and the readers agree with the record log."""
    fs, out, filler = _setup(module_fs, "back")
    env = probe_env(out, out.parent.parent / "back.json")
    host = subprocess.Popen(atbsim_cmd(*MORE[:-1], "6"), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(host.stderr), daemon=True)
    reader.start()
    # Room comes back once a tensor was lost, as the process's slot counts it (a round's
    # or an op_param.json's record held back first loses no tensor; and the shim's
    # stderr stops naming each failure after a few, so its lines cannot tell).
    def lost_one() -> bool:
        if host.poll() is not None:
            return True
        try:
            return any(p["errors"] + p["drops"] for p in status_now(out)["processes"])
        except (ControlError, OSError):  # the host has not made the control block yet
            return False

    wait_until(lost_one, timeout=120, step=0.01, what="a tensor lost to the full disk")
    filler.unlink()  # room comes back, for good
    subprocess.run(["mount", "-o", f"remount,size={FS_KIB * 8}k", str(fs)], check=True)
    assert host.wait(timeout=120) == 0, "".join(lines)[-3000:]
    reader.join(timeout=60)
    said = "".join(lines)
    wait_daemon_gone(out)
    root = out / "atb_dump_data"
    truth = log_truth(root)
    (proc,) = status(out)["processes"]
    assert truth["lost"] > 0 and truth["recorded"] > 0, f"the disk never filled: {said[-2000:]}"
    assert proc["tensors_written"] == truth["recorded"]
    assert proc["errors"] + proc["drops"] == truth["lost"]
    r = cli("wait", str(out), "--timeout", "60")
    assert r.returncode == 1 and "Traceback" not in r.stderr, (r.stdout, r.stderr[-2000:])
    assert f"LOST {truth['lost']}" in r.stdout
    markers = [json.loads(m.read_text()) for m in (root / "data").glob("*/*/ROUND_COMPLETE.json")]
    assert sum(m["lost"] for m in markers) == truth["lost"]
    assert len(csv_rows(root)) == truth["recorded"]
    s = json.loads(cli("stats", str(out), "--json").stdout)
    assert s["tensors"] == truth["recorded"] and s["lost"] == truth["lost"]


def test_wait_on_a_live_service_with_a_full_disk(small_fs, services):
    """The control plane keeps running on a disk the dump filled: `wait` neither
    says complete nor waits forever; it says what was lost and which derived
    files could not be written (built.json is kept current in place)."""
    fs = small_fs(FS_KIB)
    out = fs / "out"
    pretouch_block(out)
    (out / "config.json").write_text(json.dumps(STATS))
    (out / "config.json").chmod(0o600)
    svc = services(out, devices=1)
    fill(fs, FREE_KIB)
    for _ in range(4):
        svc.request(max_tokens=2)
    r = cli("wait", str(out), "--timeout", "60")
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "LOST" in r.stdout and "No space left on device" in r.stdout, r.stdout
    (proc,) = status(out)["processes"]
    assert proc["alive"] and proc["errors"] > 0
