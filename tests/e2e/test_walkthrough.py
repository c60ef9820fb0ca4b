"""The seed-003 service walk-through, automated, against the stand-in ATB
service and the real shim: load, serve on 2 devices, wake up, dump layer 2,
go back to sleep, stop and unload. Plus a bad edit mid-run with events
disabled (the poll alone), and a daemon killed with SIGKILL mid-run."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import require_artifacts, unload
from testkit import (
    SHIM_CONTINUED,
    save_config,
    shim_message_lines,
    shim_messages,
    unwrapped_lines,
    wait_until,
)

from msprobe_atb.control.block import PROC_AWAKE_SEEN, ControlBlock
from msprobe_atb.control.liveness import pid_alive

pytestmark = pytest.mark.slow

HEADER = ["Device and PID", "Execution Count", "Op Name", "Op Type", "Op Id", "Input/Output",
          "Index", "Dtype", "Format", "Shape", "Max", "Min", "Mean", "Norm", "Tensor Path"]
READY = r"Ready to dump ATB data, the running speed of the model will be affected"


@pytest.fixture(autouse=True)
def _artifacts():
    require_artifacts()


def data_files(dump_root: Path) -> set[str]:
    data = dump_root / "data"
    return {str(p.relative_to(data)) for p in data.rglob("*") if p.is_file()} \
        if data.is_dir() else set()


def bins(dump_root: Path) -> set[str]:
    return {f for f in data_files(dump_root) if f.endswith(".bin")}


def block_of(out: Path) -> ControlBlock:
    path = out / "atb_dump_data" / ".probe" / "control.block"
    wait_until(path.exists, what="the control block")
    return ControlBlock(out / "atb_dump_data")


def published(block: ControlBlock, pred, what: str):
    """Waits until the daemon has published a config satisfying pred, and every
    process that has woken has applied it (its slot's config_generation; its
    monitor thread does so while idle). A process that never woke has no thread
    of ours: it applies the config at its next op's setup."""
    wait_until(lambda: pred(block.read_config()[1]), what=what)
    gen = block.generation
    wait_until(lambda: all(p.config_generation >= gen for p in block.procs()
                           if not p.exited and p.flags & PROC_AWAKE_SEEN),
               what=f"{what}: applied by every process")


def procs_by_pid(block: ControlBlock) -> dict:
    return {p.pid: p for p in block.procs()}


def rows_of(csv_path: Path) -> list[list[str]]:
    with open(csv_path, newline="") as f:
        return list(csv.reader(f))


def check_round_csvs(dump_root: Path, expect_op_id: str | None = None) -> int:
    """Every round's statistic.csv lists exactly its .bin files; returns the row count."""
    total = 0
    for csv_path in (dump_root / "data").glob("*/*/statistic.csv"):
        rows = rows_of(csv_path)
        assert rows[0] == HEADER
        rnd = csv_path.parent
        on_disk = {str(p) for p in rnd.rglob("*.bin")}
        listed = {r[14] for r in rows[1:]}
        assert listed == on_disk, csv_path
        dev_pid, exec_count = rnd.parent.name, rnd.name
        for r in rows[1:]:
            assert len(r) == 15 and r[0] == dev_pid and r[1] == exec_count
            assert r[5] in ("input", "output") and r[7] != "" and not r[7].startswith("undef")
            assert r[10:14] == ["N/A"] * 4  # task tensor
            if expect_op_id is not None:
                assert r[4] == expect_op_id
        total += len(rows) - 1
    return total


def wait_tree_built(block: ControlBlock, dump_root: Path) -> None:
    """Waits until every selected tensor is written and listed in a CSV."""
    def done():
        procs = [p for p in block.procs() if not p.exited]
        if not all(p.queue_depth == 0 and p.tensors_selected == p.tensors_written for p in procs):
            return False
        n_bins = len(bins(dump_root))
        try:
            return n_bins > 0 and sum(len(rows_of(c)) - 1 for c in
                                      (dump_root / "data").glob("*/*/statistic.csv")) == n_bins
        except FileNotFoundError:
            return False
    wait_until(done, what="the tree to list every written tensor")


@pytest.mark.parametrize("abi", [0, 1], ids=["abi0", "abi1"])
def test_seed_003_walkthrough(tmp_path, services, service_env, abi):
    require_artifacts(abi)
    out = tmp_path / "work"
    out.mkdir()
    dump_root = out / "atb_dump_data"
    # 1-2. load the probe and start the service (no config file yet: asleep)
    svc = services(out, service_env, abi=abi)
    first = svc.request()
    pids = sorted(first["worker_pids"])
    assert len(pids) == 2
    assert svc.count(READY) == 0 and not bins(dump_root)
    with block_of(out) as block:
        assert {p.pid for p in block.procs()} >= set(pids)
        daemon_pid = block.daemon_pid
        assert daemon_pid and pid_alive(daemon_pid)
        # 3. wake-up edit: dump_enable true, exec_range "none"
        save_config(svc.config, task="tensor", dump_enable=True, exec_range="none", ids="",
                     op_name="", save_child=False, device="", filter_level=1)
        published(block, lambda c: c.state == 1 and c.exec_mode == 0, what="the wake-up config")
        # 4. a request, then the Ready line, once per worker process, and no data
        svc.request()
        svc.wait_line(READY, count=2)
        assert not bins(dump_root)
        # each line names its process and device, known from attach
        said = {(int(m.group(1)), int(m.group(2))) for m in
                (re.search(READY + r" \(pid (\d+), device (\d+)\)", line) for line in svc.lines)
                if m}
        assert {pid for pid, _ in said} == set(pids) and {d for _, d in said} == {0, 1}
        # 5. dump layer 2
        save_config(svc.config, task="tensor", dump_enable=True, exec_range="all", ids="2",
                     op_name="", save_child=False, device="", filter_level=1)
        published(block, lambda c: c.ids == ("2",) and c.exec_mode == 1, what="ids 2")
        # 6. a request, then exactly layer 2's tensors on both devices, with correct CSVs
        svc.request()
        wait_tree_built(block, dump_root)
        devices = {procs_by_pid(block)[pid].device for pid in pids}
        assert devices == {0, 1}
        for pid in pids:
            dev = procs_by_pid(block)[pid].device
            rounds = list((dump_root / "data" / f"{dev}_{pid}").iterdir())
            assert rounds, f"nothing dumped for device {dev} (pid {pid})"
            for rnd in rounds:
                ops = [d.name for d in rnd.iterdir() if d.is_dir()]
                assert ops and all(op.startswith("2_") for op in ops), ops
        n_rows = check_round_csvs(dump_root, expect_op_id="2")
        assert n_rows == len(bins(dump_root)) > 0
        assert svc.count(READY) == 2  # printed once per process, not again
        # 7. dump_enable false, a request, nothing new written
        save_config(svc.config, task="tensor", dump_enable=False, exec_range="all", ids="2")
        published(block, lambda c: c.state == 0, what="asleep")
        before = data_files(dump_root)
        selected = {p.pid: p.tensors_selected for p in block.procs()}
        ops = {p.pid: p.ops_seen for p in block.procs()}
        svc.request()
        wait_until(lambda: all(procs_by_pid(block)[pid].ops_seen > ops[pid] for pid in pids),
                   what="the request's ops to be counted")
        assert {p.pid: p.tensors_selected for p in block.procs()} == selected
        svc.wait_line(r"Back asleep: dumping stopped .*\(pid \d+, device \d+\)", count=2)
        assert bins(dump_root) == {f for f in before if f.endswith(".bin")}
        # asleep with empty queues: every round is marked complete while the service runs
        rounds = [c.parent for c in (dump_root / "data").glob("*/*/statistic.csv")]
        wait_until(lambda: all((r / "ROUND_COMPLETE.json").exists() for r in rounds),
                   what="the rounds to be marked complete")
        # 8. stop the service, unload, and the daemon has exited
        assert svc.stop() == 0
        r = unload(out, service_env, abi)
        assert r.returncode == 0, r.stderr
        assert "libatb_probe" not in next((line for line in r.stdout.splitlines()
                                           if line.startswith("LD_PRELOAD=")), "")
        wait_until(lambda: not pid_alive(daemon_pid), what="the daemon to exit")
        assert block.daemon_pid == 0 and not block.stop_requested
    assert "exiting: " in (dump_root / ".probe" / "daemon.log").read_text()
    assert data_files(dump_root) >= before
    # every round is marked complete once the processes are gone
    for csv_path in (dump_root / "data").glob("*/*/statistic.csv"):
        marker = json.loads((csv_path.parent / "ROUND_COMPLETE.json").read_text())
        assert marker["rows"] == len(rows_of(csv_path)) - 1 and marker["lost"] == 0
    for pid in pids:
        layer_dir = next((dump_root / "info" / "layer").glob(f"*_{pid}"))
        assert any(layer_dir.glob("*.json"))


def dumping_layer_2(tmp_path: Path, services, service_env):
    """A service dumping layer 2 from the start, after one request's tree is built:
    (service, output dir, dump root, control block)."""
    out = tmp_path / "work"
    out.mkdir()
    save_config(out / "config.json", dump_enable=True, exec_range="all", ids="2")
    svc = services(out, service_env)
    block = block_of(out)
    published(block, lambda c: c.ids == ("2",), what="ids 2")
    svc.request()
    wait_tree_built(block, out / "atb_dump_data")
    return svc, out, out / "atb_dump_data", block


def test_bad_edit_mid_run_with_polling_only(tmp_path, services, service_env):
    service_env["MSPROBE_ATB_NO_EVENTS"] = "1"
    service_env["MSPROBE_ATB_POLL_S"] = "0.5"
    # a config path longer than a console line wherever the tests run: the rejection
    # names it, and must wrap around it
    base = tmp_path / ("a-directory-whose-name-alone-is-wider-than-a-console-line-" * 2)
    base.mkdir()
    svc, out, dump_root, block = dumping_layer_2(base, services, service_env)
    with block:
        n_before = len(bins(dump_root))
        gen = block.generation
        save_config(svc.config, raw='{"dump_enable": "true", "exec_range": "all", "ids": "3"}')
        svc.wait_line(r"\[msprobe-atb\] config rejected \(pid \d+, device \d\), keeping the "
                      "previous one:")
        said = wait_until(lambda: [m for m in shim_messages(svc.lines, "config rejected (")
                                   if '"dump_enable": "true" is a string' in m],
                          what="the whole rejection on the console")[0]
        assert said.endswith('"dump_enable": "true" is a string; write true without quotes '
                             "(a JSON boolean: true or false)"), said
        assert block.generation == gen
        status = subprocess.run([sys.executable, "-m", "msprobe_atb", "status", str(out)],
                                capture_output=True, text=True, env=service_env)
        assert status.returncode == 0, status.stderr
        assert "REJECTED EDIT" in status.stdout and '"ids": "2"' in status.stdout
        # the previous config stays in force: the next request dumps layer 2 again
        svc.request()
        wait_tree_built(block, dump_root)
        assert len(bins(dump_root)) > n_before
        check_round_csvs(dump_root, expect_op_id="2")
        # a fixed edit is picked up by the poll and clears the error
        save_config(svc.config, dump_enable=True, exec_range="all", ids="3")
        published(block, lambda c: c.ids == ("3",), what="ids 3 (by the poll)")
        assert block.error == ""
    # once per worker process, saying which, wrapped (it was ~600 characters on one line)
    said = shim_messages(svc.lines, "config rejected (")
    workers = {re.search(r"\(pid (\d+), device (\d)\)", m).groups() for m in said}
    assert len(said) == 2 and {d for _, d in workers} == {"0", "1"} and len(workers) == 2
    for lines in shim_message_lines(svc.lines, "config rejected ("):
        assert not unwrapped_lines(lines), lines
        assert f"{SHIM_CONTINUED}{svc.config}:" in lines  # whole, on a line of its own


def test_daemon_killed_mid_run_is_restarted_and_nothing_is_lost(tmp_path, services,
                                                                service_env):
    svc, out, dump_root, block = dumping_layer_2(tmp_path, services, service_env)
    with block:
        old = block.daemon_pid
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: not pid_alive(old), what="the daemon to die")
        svc.request()  # recorded while the daemon is down or restarting
        new = wait_until(lambda: block.daemon_pid not in (0, old) and block.daemon_pid,
                         what="the shim to restart the daemon")
        assert pid_alive(new)
        wait_tree_built(block, dump_root)
        check_round_csvs(dump_root, expect_op_id="2")
        assert svc.stop() == 0
        wait_until(lambda: not pid_alive(new), what="the restarted daemon to exit")
    records = 0
    for log in (dump_root / ".probe" / "records").glob("*.jsonl"):
        records += sum(1 for line in log.read_text().splitlines()
                       if json.loads(line).get("k") == "tensor")
    assert records == len(bins(dump_root)) == check_round_csvs(dump_root, expect_op_id="2")


def test_statistics_columns_from_the_real_shim(tmp_path, services, service_env):
    out = tmp_path / "work"
    out.mkdir()
    dump_root = out / "atb_dump_data"
    save_config(out / "config.json", task="all", dump_enable=True, exec_range="all", ids="2")
    svc = services(out, service_env, devices=1)
    with block_of(out) as block:
        published(block, lambda c: c.task == 3, what="task all")
        svc.request()
        wait_tree_built(block, dump_root)
        save_config(svc.config, task="statistics", dump_enable=True, exec_range="all", ids="3")
        published(block, lambda c: c.task == 2, what="task statistics")
        n_bins = len(bins(dump_root))
        svc.request()
        wait_until(lambda: any(r[4] == "3" for c in (dump_root / "data").glob("*/*/statistic.csv")
                               for r in rows_of(c)[1:]), what="statistics rows of op 3")
        wait_until(lambda: all(p.queue_depth == 0 and p.tensors_selected == p.tensors_written
                               for p in block.procs()), what="the writers to finish")
        assert len(bins(dump_root)) == n_bins  # statistics only: no new .bin files
    svc.stop()
    wait_until(lambda: all((c.parent / "ROUND_COMPLETE.json").exists()
                           for c in (dump_root / "data").glob("*/*/statistic.csv")),
               what="the final markers")
    seen = set()
    for csv_path in (dump_root / "data").glob("*/*/statistic.csv"):
        extra = rows_of(csv_path.parent / "statistic_extra.csv")
        rows = rows_of(csv_path)
        assert len(extra) == len(rows)
        for r, e in zip(rows[1:], extra[1:]):
            assert len(r) == 15 and (e[1], e[4]) == (r[4], r[6])
            seen.add(r[4])
            for cell in r[10:14]:
                float(cell)  # full-precision numbers (nan/inf parse too)
            if r[4] == "2":
                assert Path(r[14]).is_file() and e[10] == "bin"
            else:
                assert r[14] == "N/A" and e[10] == "none"
            assert int(e[5]) > 0  # element count
    assert seen == {"2", "3"}
