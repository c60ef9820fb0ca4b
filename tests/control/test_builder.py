"""The tree builder: live (incremental) build == offline rebuild, markers,
info files, and what happens with odd records."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import threading

import pytest
from cp_helpers import derived
from testkit import REPO

from msprobe_atb.config import compile_config, validate
from msprobe_atb.control.block import HEAD_IDLE
from msprobe_atb.tree.builder import TreeBuilder
from msprobe_atb.tree.drain import BlockOracle, RecordDrain, rebuild
from msprobe_atb.tree.rounddir import MARKER

GRAPH = {"inTensorNum": 1, "opName": "Layer_2", "opType": "Layer", "outTensorNum": 1,
         "internalTensorNum": 0, "param": "",
         "nodes": [{"inTensorIds": [0], "opName": "LinearOperation_2_0",
                    "opType": "LinearOperation", "outTensorIds": [1], "param": {}}]}
TOPO = {"modelName": "DecoderModel", "inTensors": ["m_input_0"], "outTensors": ["m_output_0"],
        "nodes": [{"opName": "Embed", "inTensors": ["m_input_0"], "outTensors": ["m_int_0"]},
                  {"opName": "Layer", "inTensors": ["m_int_0"], "outTensors": ["m_output_0"]}]}


def scenario_steps(a, b):
    """Record batches of two processes, with flushes between batches."""
    stats = {"count": 4, "max": 1.0, "min": "-inf", "mean": "nan", "norm": 1e-300,
             "nan": 1, "pinf": 0, "ninf": 1, "zero": 0}

    def step1():
        a.graph("Layer_2", GRAPH)  # dev -1: the info dir moves once tensors show the device
        a.graph("Bad_3", "{not json")
        a.tensor(0, "2_Layer", "before/intensor0.bin", task="all", stats=stats)
        a.tensor(0, "2_Layer/0_LinearOperation", "before/intensor0_x.bin")
        b.tensor(0, "2_Layer", "before/intensor0.bin", task="statistics", stats=stats)
        a.record({"k": "tensor", "seq": 99, "path": "bad"})  # unusable path: logged, skipped
        a.tensor(0, "2_Layer", "after/outtensor0.bin", dtype=16, task="all",
                 stats={"count": 1, "max": [1.0, 2.0], "min": [0.0, 0.5], "mean": [0.5, 1.0],
                        "norm": 2.5})
        a.tensor(0, "2_Layer", "after/outtensor1.bin", partial=True)

    def step2():
        a.finish_partial()
        # writer threads finish out of order: seq 7 lands before seq 6
        a.seq = 7
        a.tensor(1, "2_Layer", "before/intensor0.bin")
        a.seq = 6
        a.tensor(1, "2_Layer", "after/outtensor0.bin", file="lost", note="disk full")
        a.record({"k": "topo", "model": "DecoderModel", "dev": -1, "json": json.dumps(TOPO)})
        a.record({"k": "overflow", "seq": 0, "kernel": "2_0_1:MatMulKernel", "dev": 0})
        with open(a.log, "a") as f:
            f.write("garbage line\n")

    def step3():
        a.exit()
        b.exit()

    return [step1, step2, step3]


def test_live_build_equals_rebuild(out_dir, shims):
    a = shims(out_dir, dev=0)
    b = shims(out_dir, dev=1)
    dump_root = out_dir / "atb_dump_data"
    oracle = BlockOracle(a.block)
    live = TreeBuilder(dump_root, oracle)
    drain = RecordDrain(dump_root, live)
    for step in scenario_steps(a, b):
        step()
        drain.poll()
        oracle.refresh()
        live.flush()
    files = derived(dump_root)
    # the info dir moved from {pid} to {dev}_{pid} once the device was known
    assert f"info/layer/0_{a.pid}/Layer_2.json" in files
    assert not (dump_root / "info" / "layer" / str(a.pid)).exists() or not any(
        (dump_root / "info" / "layer" / str(a.pid)).iterdir())
    assert f"info/model/0_{a.pid}/DecoderModel.json" in files
    assert f"info/overflow/0_{a.pid}.csv" in files
    assert not any("Bad_3" in k for k in files)

    for rel in files:
        (dump_root / rel).unlink()
    rebuild(dump_root, a.block)
    assert derived(dump_root) == files

    for rel in files:
        (dump_root / rel).unlink()
    r = subprocess.run([sys.executable, "-c", "import sys; from msprobe_atb.tree.cli import "
                        "register, run; import argparse; p = argparse.ArgumentParser(); "
                        "register(p.add_subparsers()); a = p.parse_args(sys.argv[1:]); "
                        "sys.exit(a.func(a))", "rebuild", str(out_dir)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert derived(dump_root) == files


def test_rebuild_sweeps_temporaries_of_dead_writers(out_dir, shims):
    a = shims(out_dir, dev=0)
    a.tensor(0, "2_Layer", "before/intensor0.bin")
    dump_root = out_dir / "atb_dump_data"
    rnd = dump_root / "data" / f"0_{a.pid}" / "0"
    rnd.mkdir(parents=True, exist_ok=True)
    dead = 2**22 + 7  # above pid_max's default: never a live process
    stale = [rnd / f".intensor1.bin.{dead}.{dead}.tmp", rnd / f".statistic.csv.{dead}.tmp"]
    live = rnd / f".intensor2.bin.{os.getpid()}.1.tmp"  # a writer that is still running
    for f in (*stale, live):
        f.write_bytes(b"partial")
    a.exit()
    r = subprocess.run([sys.executable, "-m", "msprobe_atb", "rebuild", str(out_dir)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "removed 2 temporary files" in r.stdout
    assert not any(f.exists() for f in stale) and live.exists()


def test_round_contents(out_dir, shims):
    a = shims(out_dir, dev=0)
    b = shims(out_dir, dev=1)
    dump_root = out_dir / "atb_dump_data"
    for step in scenario_steps(a, b):
        step()
    rebuild(dump_root, a.block)
    r0 = dump_root / "data" / f"0_{a.pid}" / "0"
    rows = list(csv.reader(open(r0 / "statistic.csv", newline="")))
    assert ",".join(rows[0]).startswith("Device and PID,Execution Count")
    assert [len(r) for r in rows] == [15] * 5  # header + 4 rows, the partial one included
    assert [r[5] + r[6] for r in rows[1:4]] == ["input0", "input0_x", "output0"]
    assert rows[1][10:14] == ["1.0", "-inf", "nan", "0." + "0" * 299 + "1"]
    assert rows[3][10] == "(1.0,2.0)"
    extra = list(csv.reader(open(r0 / "statistic_extra.csv", newline="")))
    assert len(extra) == len(rows)
    assert extra[1][5:11] == ["4", "1", "0", "1", "0", "bin"]
    r1 = dump_root / "data" / f"0_{a.pid}" / "1"
    rows1 = list(csv.reader(open(r1 / "statistic.csv", newline="")))
    assert [r[5] for r in rows1[1:]] == ["output", "input"]  # sorted by seq, not arrival
    marker = json.loads((r1 / "ROUND_COMPLETE.json").read_text())
    assert marker["rows"] == 2 and marker["lost"] == 1 and marker["complete_at"].endswith("Z")
    b0 = dump_root / "data" / f"1_{b.pid}" / "0" / "statistic.csv"
    assert list(csv.reader(open(b0, newline="")))[1][14] == "N/A"


def live_build(out_dir, shims, wait: bool = True):
    """One awake process's shim, and the tree built live from its records: (shim,
    dump root, builder, drain, step), step() reading what came and flushing."""
    a = shims(out_dir, dev=0)
    dump_root = out_dir / "atb_dump_data"
    a.block.publish(compile_config(validate({"dump_enable": True, "exec_range": "all"})))
    oracle = BlockOracle(a.block)
    live = TreeBuilder(dump_root, oracle)
    drain = RecordDrain(dump_root, live)

    def step():
        drain.poll()
        oracle.refresh()
        live.flush(wait=wait)

    return a, dump_root, live, drain, step


def test_markers_follow_the_process(out_dir, shims):
    a, dump_root, live, _, step = live_build(out_dir, shims)
    marker0 = dump_root / "data" / f"0_{a.pid}" / "0" / "ROUND_COMPLETE.json"
    marker1 = marker0.parent.parent / "1" / "ROUND_COMPLETE.json"
    a.tensor(0, "2_Layer", "before/intensor0.bin")
    step()
    assert not marker0.exists()  # the process is still in round 0
    a.tensor(1, "2_Layer", "before/intensor0.bin")
    a.block.set_proc_counter(a.slot, "queue_depth", 3)
    step()
    assert not marker0.exists()  # moved on, but its queue may still hold round-0 tensors
    a.record({"k": "round", "round": f"0_{a.pid}/0"})
    step()
    # the shim says round 0 has all its records: complete while the queue is
    # busy (a busy service completed no round before, and kept every row in memory)
    assert json.loads(marker0.read_text())["rows"] == 1 and not marker1.exists()
    a.block.set_proc_counter(a.slot, "queue_depth", 0)
    a.tensor(0, "2_Layer", "after/outtensor0.bin")  # a later request reuses round 0
    step()
    assert not marker0.exists() and json.loads(marker1.read_text())["rows"] == 1
    a.die()
    step()
    assert json.loads(marker0.read_text())["rows"] == 2
    # round 0 was evicted from memory when complete and read back when reopened
    rows = list(csv.reader(open(marker0.parent / "statistic.csv", newline="")))
    assert [r[5] for r in rows[1:]] == ["input", "output"]
    assert (f"0_{a.pid}", "0") not in live.rounds


def test_nothing_is_written_outside_the_dump_root(out_dir, shims, tmp_path):
    a = shims(out_dir, dev=0)
    dump_root = out_dir / "atb_dump_data"
    outside = tmp_path / "outside"
    outside.mkdir()
    (dump_root / "data").mkdir(exist_ok=True)
    (dump_root / "data" / f"0_{a.pid}").symlink_to(outside)
    a.record({"k": "tensor", "seq": 0, "path": f"0_{a.pid}/0/2_L/before/intensor0.bin",
              "task": "tensor", "file": "bin", "dtype": 1, "format": 2, "dims": "1"})
    a.record({"k": "tensor", "seq": 1, "path": "../0/2_L/before/intensor0.bin",
              "task": "tensor", "file": "bin", "dtype": 1, "format": 2, "dims": "1"})
    a.graph("../../evil", {"opName": "x"})
    a.record({"k": "topo", "model": "a/b", "dev": 0, "json": "{}"})
    rebuild(dump_root, a.block)
    assert list(outside.iterdir()) == []
    assert not (out_dir / "0").exists() and not (dump_root / "0").exists()
    assert not (out_dir / "evil.json").exists()


def test_a_record_path_climbing_out_of_data_gets_no_row(out_dir, shims):
    """A record whose path climbs with `..` put a row naming a file of another
    dump into statistic.csv and the manifest once; it is refused as an
    unusable path, and an alias leaving data/ is not written to the manifest."""
    from testkit import manifest_rows

    a = shims(out_dir, dev=0)
    dump_root = out_dir / "atb_dump_data"
    a.tensor(0, "2_L", "before/intensor0.bin")
    evil = f"0_{a.pid}/0/../../../../other/atb_dump_data/data/0_1/0/2_L/before/intensor0.bin"
    a.record({"k": "tensor", "seq": 9, "path": evil, "task": "tensor", "file": "bin",
              "dtype": 1, "format": 2, "dims": "1"})
    a.tensor(0, "2_L", "after/outtensor0.bin", file="linked", alias="../../../../../x.bin")
    a.exit()
    rebuild(dump_root, a.block)
    csv_text = (dump_root / "data" / f"0_{a.pid}" / "0" / "statistic.csv").read_text()
    assert "other" not in csv_text and len(csv_text.splitlines()) == 3
    rows = manifest_rows(dump_root)
    assert rows.height == 2 and rows.get_column("alias").null_count() == 2
    assert all(p.startswith(f"data/0_{a.pid}/0/2_L/") for p in rows.get_column("path"))


def test_restart_removes_info_left_under_the_bare_pid(out_dir, shims):
    a = shims(out_dir, dev=3)
    dump_root = out_dir / "atb_dump_data"
    a.graph("Layer_2", GRAPH)
    stale = dump_root / "info" / "layer" / str(a.pid) / "Layer_2.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")  # what a daemon killed before the first tensor left behind
    a.tensor(0, "2_Layer", "before/intensor0.bin")
    rebuild(dump_root, a.block)
    assert not stale.exists()
    assert (dump_root / "info" / "layer" / f"3_{a.pid}" / "Layer_2.json").exists()


def test_drain_budget(out_dir, shims, monkeypatch):
    import msprobe_atb.tree.records as records

    monkeypatch.setattr(records, "CHUNK", 64)  # one record per read
    a = shims(out_dir, dev=0)
    dump_root = out_dir / "atb_dump_data"
    for i in range(5):
        a.tensor(0, "2_Layer", f"before/intensor{i}.bin")
    builder = TreeBuilder(dump_root, BlockOracle(a.block))
    drain = RecordDrain(dump_root, builder)
    lines = a.log.read_bytes().splitlines(keepends=True)  # attach + 5 tensors
    # the budget is in bytes; a read takes whole lines, at least one
    assert drain.poll(budget=len(lines[0]) + 1) == len(lines[0]) + len(lines[1])
    assert not drain.drained()
    assert drain.poll(budget=1) == len(lines[2]) and not drain.drained()
    assert drain.poll() == sum(map(len, lines[3:])) and drain.drained()
    assert drain.poll() == 0


def test_a_failed_write_replaces_neither_file_of_a_pair(tmp_path):
    from msprobe_atb.tree import fsio

    fsio.write_files(tmp_path, [(("r", "statistic.csv"), b"old\n"),
                                (("r", "statistic_extra.csv"), b"old\n")])
    with pytest.raises(fsio.UnsafePath):
        fsio.write_files(tmp_path, [(("r", "statistic.csv"), b"new\n"),
                                    (("r", "../escape.csv"), b"new\n")])
    assert (tmp_path / "r" / "statistic.csv").read_bytes() == b"old\n"
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == [
        "statistic.csv", "statistic_extra.csv"]  # no temporary left behind


def test_overflow_rows_are_bounded(out_dir, shims, monkeypatch, caplog):
    """overflow_nums -1 lets a long service report overflows without end: the
    builder held every row and rewrote the whole CSV at each flush. Past
    MAX_ROWS it lists no more, and says so once."""
    from msprobe_atb.tree import overflow_csv

    monkeypatch.setattr(overflow_csv, "MAX_ROWS", 3)
    a = shims(out_dir, dev=0)
    for seq in range(7):
        a.record({"k": "overflow", "seq": seq, "kernel": f"2_{seq}:MatMulKernel", "dev": 0})
    dump_root = out_dir / "atb_dump_data"
    oracle = BlockOracle(a.block)
    live = TreeBuilder(dump_root, oracle)
    RecordDrain(dump_root, live).poll()
    live.flush()
    rows = list(csv.reader(open(dump_root / "info" / "overflow" / f"0_{a.pid}.csv")))
    assert [r[0] for r in rows[1:]] == ["0", "1", "2"]
    assert len(live.procs[next(iter(live.procs))].info.overflow.events) == 3
    said = [r.message for r in caplog.records if "overflow events" in r.message]
    assert len(said) == 1 and "lists the first 3" in said[0]


def test_a_row_arriving_after_a_higher_seq_is_merged_into_place(out_dir, shims):
    """Rows are appended once released; one that comes later with a lower seq (a
    writer far behind) is put in sequence order: the pair is rewritten, the
    manifest and a rebuild agree."""
    a = shims(out_dir, dev=0)
    dump_root = out_dir / "atb_dump_data"
    oracle = BlockOracle(a.block)
    live = TreeBuilder(dump_root, oracle)
    drain = RecordDrain(dump_root, live)
    a.seq = 5
    for name in ("before/intensor0.bin", "after/outtensor0.bin"):
        a.tensor(0, "2_Layer", name)  # seq 5, 6
    for step in (lambda: None, lambda: (setattr(a, "seq", 3), a.tensor(0, "1_Op", "x.bin")),
                 a.exit):
        step()
        oracle.refresh()  # the fake slot has nothing pending: what was read may go
        drain.poll()
        live.flush()
    rows = list(csv.reader(open(dump_root / "data" / f"0_{a.pid}" / "0" / "statistic_extra.csv",
                                newline="")))
    assert [r[0] for r in rows[1:]] == ["3", "5", "6"], rows
    assert live.late_rows == 1
    files = derived(dump_root)
    for rel in files:
        (dump_root / rel).unlink()
    rebuild(dump_root, a.block)
    assert derived(dump_root) == files


def test_rows_below_the_writer_head_watermark_go_before_their_round_ends(out_dir, shims):
    """With tensors in flight (a queue, no round record), rows go once their seq is
    below min(smallest writer head, highest seq read before the heads + 1) and
    the log is read to the size seen after the heads (docs/contracts.md §3); the
    rest wait. A record read in the same turn as the heads waits one turn."""
    a = shims(out_dir, dev=0)
    dump_root = out_dir / "atb_dump_data"
    oracle = BlockOracle(a.block)
    live = TreeBuilder(dump_root, oracle)
    drain = RecordDrain(dump_root, live)
    a.block.set_proc_counter(a.slot, "queue_depth", 3)  # never quiet
    a.block.set_proc_counter(a.slot, "n_writers", 2)
    heads = a.block._ctl.procs[a.slot].writer_head
    extra = dump_root / "data" / f"0_{a.pid}" / "0" / "statistic_extra.csv"

    def turn(head0: int) -> list[int]:
        heads[0], heads[1] = head0, HEAD_IDLE
        oracle.refresh(live.last_seqs())
        drain.poll()
        live.flush()
        rows = list(csv.reader(open(extra, newline=""))) if extra.exists() else [[]]
        return [int(r[0]) for r in rows[1:]]

    for i in range(6):
        a.tensor(0, "2_Layer", f"after/outtensor{i}.bin")  # seq 0..5
    assert turn(HEAD_IDLE) == []  # nothing read before the heads: no watermark yet
    assert turn(3) == [0, 1, 2]
    assert turn(HEAD_IDLE) == [0, 1, 2, 3, 4, 5]
    a.tensor(0, "2_Layer", "after/outtensor6.bin")
    assert turn(HEAD_IDLE) == [0, 1, 2, 3, 4, 5]  # seq 6 read after the heads: not yet
    assert turn(HEAD_IDLE) == list(range(7))
    assert not (extra.parent / "ROUND_COMPLETE.json").exists()  # the round goes on


def test_released_rows_do_not_count_against_the_waiting_bound(out_dir, shims, monkeypatch):
    """HELD_BYTES bounds the rows waiting for their order to be known. Rows a round
    record released go in the same flush: counting them forced the next round's
    rows out before a lower seq came (a backlog of 8 processes' logs hit the
    bound at every flush and merged thousands of rows into place)."""
    import msprobe_atb.tree.heldrounds as heldrounds

    monkeypatch.setattr(heldrounds, "HELD_BYTES", 8192)  # a round of 1 row, not one of 40
    a = shims(out_dir, dev=0)
    dump_root = out_dir / "atb_dump_data"
    a.block.set_proc_counter(a.slot, "queue_depth", 3)  # tensors in flight: never quiet
    oracle = BlockOracle(a.block)
    live = TreeBuilder(dump_root, oracle)
    drain = RecordDrain(dump_root, live)
    for i in range(40):
        a.tensor(0, "2_Layer", f"after/outtensor{i}.bin")  # seq 0..39
    a.record({"k": "round", "round": f"0_{a.pid}/0"})
    a.seq = 41
    a.tensor(1, "2_Layer", "after/outtensor0.bin")  # a writer ahead: seq 41 before 40
    oracle.refresh()
    drain.poll()
    live.flush()
    a.seq = 40
    a.tensor(1, "2_Layer", "before/intensor0.bin")
    a.record({"k": "round", "round": f"0_{a.pid}/1"})
    oracle.refresh()
    drain.poll()
    live.flush()
    assert live.late_rows == 0
    rows = list(csv.reader(open(dump_root / "data" / f"0_{a.pid}" / "1" / "statistic_extra.csv",
                                newline="")))
    assert [r[0] for r in rows[1:]] == ["40", "41"]


def test_a_slow_disk_holds_back_the_markers_not_the_rows(out_dir, shims, monkeypatch):
    """The daemon's flushes do not wait for the syncs (the kernel's writeback can
    make one take seconds): rows go on being appended while a round's commit
    waits for the disk, a round reopened meanwhile waits for it, and the process
    is not said finished (`wait` goes on) until its markers are written."""
    a, dump_root, live, drain, step = live_build(out_dir, shims, wait=False)
    disk = threading.Event()
    syncing = threading.Event()
    real_fdatasync = os.fdatasync

    def slow_fdatasync(fd):
        syncing.set()
        assert disk.wait(30), "the test never let the disk go on"
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    round0 = dump_root / "data" / f"0_{a.pid}" / "0"
    round1 = round0.parent / "1"
    a.tensor(0, "2_Layer", "before/intensor0.bin")
    a.record({"k": "round", "round": f"0_{a.pid}/0"})
    step()
    assert syncing.wait(30)  # round 0's commit waits for the disk
    a.tensor(1, "2_Layer", "before/intensor0.bin")
    a.tensor(0, "2_Layer", "after/outtensor0.bin")  # a later request reuses round 0
    step()
    assert csv_rows(round1 / "statistic.csv") == 1  # appended while round 0 syncs
    assert csv_rows(round0 / "statistic.csv") == 1  # round 0's new row waits for its commit
    assert not (round0 / MARKER).exists()
    a.exit()
    step()
    assert not drain.progress().finished  # `wait` goes on: markers are still to come
    disk.set()
    live.flush()
    assert csv_rows(round0 / "statistic.csv") == 2
    assert json.loads((round0 / MARKER).read_text())["rows"] == 2
    assert json.loads((round1 / MARKER).read_text())["rows"] == 1
    assert drain.progress().finished == [a.log.name]


def csv_rows(path) -> int:
    return len(list(csv.reader(open(path, newline="")))) - 1


def test_a_manifest_part_waits_for_the_disk_as_its_file_bytes(out_dir, shims, monkeypatch):
    """What waits behind a slow disk is each manifest part's encoded file (~15
    bytes a row), not its frame (~200): the committer holds exactly the bytes
    that then land in the part files."""
    a, dump_root, live, drain, step = live_build(out_dir, shims, wait=False)
    disk = threading.Event()
    real_fdatasync = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (disk.wait(30), real_fdatasync(fd)))
    for seq in range(200):
        a.tensor(0, "2_Layer", f"before/intensor{seq}.bin")
    a.record({"k": "round", "round": f"0_{a.pid}/0"})
    step()  # round 0's commit waits for the disk
    live.flush(idle=True, wait=False)  # the manifest's rows handed over, behind it
    held = live.committer._bytes
    disk.set()
    live.flush(idle=True, wait=True)
    parts = list((dump_root / "manifest").rglob("part-*.parquet"))
    assert parts and held == sum(p.stat().st_size for p in parts)


def test_the_first_manifest_rows_start_the_polars_import_beside_the_build(out_dir, shims,
                                                                          monkeypatch):
    """The manifest's first part is PART_AGE_S away when its first rows come: polars
    is imported on a thread of its own meanwhile, not by the build at that part."""
    from msprobe_atb.tree import manifest

    imported = []
    monkeypatch.setattr(manifest, "_preloading", None)
    monkeypatch.setattr(manifest, "_import_polars",
                        lambda: imported.append(threading.current_thread().name))
    a, _, live, _, step = live_build(out_dir, shims)
    step()
    assert manifest._preloading is None  # nothing to build yet: nothing imported
    a.tensor(0, "2_Layer", "before/intensor0.bin")
    step()
    manifest._preloading.join(10)
    assert imported == ["polars-import"]
