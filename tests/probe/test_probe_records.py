"""The record log under load: writers append their records in
batches, and what the control plane reads in the slot says what is in the log.

The host is `make bench`'s record_bench (tiny tensors under `task: statistics`,
ATB's hook order) with the real shim preloaded and several writer threads. While
it runs, the test samples the slot and the log as the control plane would; every
sample must agree with the contracts (docs/contracts.md §3 pending[], §4), and so
must the whole log afterwards."""

from __future__ import annotations

import json
import re
import struct
import subprocess
from pathlib import Path

from probe_helpers import Dump
from testkit import BUILD, shim_lib

from msprobe_atb.control.block import HEAD_IDLE, ControlBlock

STATS = {"dump_enable": True, "task": "statistics", "exec_range": "all"}
ROUNDS, OPS = 400, 20  # 4 tensors an op
PAUSE_US = 3000  # after each round: the writers catch up, the slot is quiet now and then


class LogReader:
    """The record log as it grows: complete lines only, parsed once."""

    def __init__(self, root: Path):
        self.dir = root / ".probe" / "records"
        self.offset = 0
        self.records: list[dict] = []

    def read(self) -> list[dict]:
        logs = list(self.dir.glob("*.jsonl")) if self.dir.is_dir() else []
        if logs:
            with open(logs[0], "rb") as f:
                f.seek(self.offset)
                data = f.read()
            whole = data[: data.rfind(b"\n") + 1]
            self.offset += len(whole)
            self.records += [json.loads(line) for line in whole.splitlines()]
        return self.records


def tensor_seqs(records: list[dict]) -> set[int]:
    return {r["seq"] for r in records if r["k"] == "tensor"}


def test_batched_records_agree_with_the_slot(dump: Dump):
    """4 writers, 1500 rounds. Sampled while the host runs: a tensor counted
    written has its line in the log; once every pending count reads 0, every
    tensor that took its seq before has its line (so a reader may order rows by
    seq); the writers' heads (one host thread): every seq below the lowest head
    read and below the highest seq in the log before that read has its line
    (docs/contracts.md §3); an empty queue with every selected tensor accounted
    for means every line is in. Then the log: whole lines, each seq once, every
    round's record after all of its tensors' records, one write(2) for many
    records; the heads idle."""
    dump.publish(STATS)
    log = LogReader(dump.root)
    proc = subprocess.Popen([str(BUILD / "probe" / "bin" / "record_bench"), str(ROUNDS), str(OPS),
                             str(PAUSE_US)],
                            env=dump.env(LD_PRELOAD=str(shim_lib(1)), MSPROBE_ATB_WRITERS="4"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    samples = {"pending 0": 0, "queue empty": 0, "heads": 0}
    with ControlBlock(dump.root) as block:
        while proc.poll() is None:
            before = tensor_seqs(log.read())
            procs = block.procs()
            if not procs:
                continue
            (slot,) = procs
            pending = block.pending(slot.slot)
            after = tensor_seqs(log.read())
            assert len(after) >= slot.tensors_written
            if before and slot.n_writers:
                assert slot.n_writers == 4 and len(slot.writer_head) == 4
                mark = min(*slot.writer_head, max(before) + 1)
                samples["heads"] += mark > 0
                assert set(range(mark)) <= after, "a seq below the heads came later"
            if not any(pending.values()) and before:
                samples["pending 0"] += 1
                assert set(range(max(before) + 1)) <= after, "a lower seq came later"
            if slot.queue_depth == 0 and slot.tensors_selected == (
                    slot.tensors_written + slot.drops + slot.errors):
                samples["queue empty"] += 1
                assert len(after) >= slot.tensors_selected
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    n = int(dict(re.findall(r"(\w+)=(\d+)", out))["tensors"])
    assert n == ROUNDS * OPS * 4
    records = log.read()
    assert log.offset == sum(f.stat().st_size for f in log.dir.glob("*.jsonl"))
    tensors = [r for r in records if r["k"] == "tensor"]
    assert sorted(r["seq"] for r in tensors) == list(range(n))
    assert all(r["file"] == "none" and r["stats"]["count"] == 1 for r in tensors)
    last = {}
    for i, r in enumerate(records):
        if r["k"] == "tensor":
            last["/".join(r["path"].split("/")[:2])] = i
    rounds = {r["round"]: i for i, r in enumerate(records) if r["k"] == "round"}
    # the host left every round but its last: each has its record, after its tensors
    assert len(rounds) >= ROUNDS - 1
    assert all(last[key] < i for key, i in rounds.items())
    (ex,) = [r for r in records if r["k"] == "exit"]
    assert ex["drained"] and ex["tensors_written"] == n and ex["unrecorded"] == {}
    assert samples["pending 0"] + samples["queue empty"] > 0 and samples["heads"] > 0, samples
    with ControlBlock(dump.root) as block:
        (slot,) = block.procs()
    assert slot.exited and slot.writer_head == (HEAD_IDLE,) * 4


def test_a_flushed_tensor_takes_its_seq_when_flushed(dump: Dump):
    """The flight recorder holds round 0 of op 2_Layer while a tensor of no
    top-level op's round is written at once; a NaN in round 0 flushes it. The
    held tensors are counted pending and take their seqs only at the flush:
    above the one already in the log (the control plane never sees a lower seq
    come after a higher one once nothing is pending), in the order they were
    saved."""
    dump.publish({**STATS, "recorder": {"keep_rounds": 1, "after_rounds": 0,
                                        "triggers": ["nan"], "max_incidents": 1}})
    one = struct.pack("<f", 1.0).hex()
    nan = struct.pack("<f", float("nan")).hex()
    held = ["0_7/0/2_Layer/before/intensor0.bin", "0_7/0/2_Layer/before/intensor1.bin"]
    direct = "0_7/x/2_Layer/before/intensor0.bin"  # no round number: nothing to hold it by
    trigger = "0_7/0/2_Layer/after/outtensor0.bin"
    dump.host(1, [["save", 2, 0, "1", f"hex:{one}", held[0]],
                  ["save", 2, 0, "1", f"hex:{one}", direct],
                  ["save", 2, 0, "1", f"hex:{one}", held[1]],
                  ["save", 2, 0, "1", f"hex:{nan}", trigger]])
    seq = {r["path"]: r["seq"] for r in dump.tensors()}
    assert set(seq) == {*held, direct, trigger}
    assert seq[direct] < seq[held[0]] < seq[held[1]] < seq[trigger]
