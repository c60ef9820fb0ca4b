"""A long service must not grow (a busy service's daemon once kept every row): the
daemon's memory over many rounds of a statistics dump from a process that is never idle,
read from /proc while a real daemon builds the tree."""

from __future__ import annotations

import json
import os

from testkit import wait_until

from msprobe_atb.tree import progress

ROWS = 30  # tensors per round
STATS = {"count": 4096, "max": 3.25, "min": -2.5, "mean": 0.0123456789, "norm": 41.5,
         "nan": 0, "pinf": 0, "ninf": 0, "zero": 7}


def write_rounds(shim, first: int, last: int) -> None:
    """Rounds first..last-1 as the shim records them: every tensor, then the
    round record once the host has moved on and the round has all its records."""
    lines = []
    for r in range(first, last):
        for i in range(ROWS):
            rel = f"{shim.dev}_{shim.pid}/{r}/{i}_Layer/{i % 7}_Linear/after/outtensor0.bin"
            lines.append({"k": "tensor", "t": shim.t + shim.seq, "seq": shim.seq, "path": rel,
                          "format": 2, "dtype": 1, "dims": "64,64", "size": 8192,
                          "task": "statistics", "file": "none", "stats": STATS})
            shim.seq += 1
        lines.append({"k": "round", "round": f"{shim.dev}_{shim.pid}/{r}"})
    with open(shim.log, "a") as f:
        f.write("".join(json.dumps(rec) + "\n" for rec in lines))


def built(dump_root, log) -> bool:
    """Every record of the log is in the derived files (what `wait` checks)."""
    offsets = (progress.read(dump_root) or progress.Progress()).offsets
    return offsets.get(log.name, -1) >= os.path.getsize(log)


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def test_daemon_memory_does_not_grow_with_rounds(out_dir, shims, daemons, daemon_env):
    shim = shims(out_dir, dev=0)
    shim.block.set_proc_counter(shim.slot, "queue_depth", 5)  # busy: never idle
    d = daemons(out_dir, None, daemon_env)
    dump_root = out_dir / "atb_dump_data"
    done = 0

    def batch() -> None:  # 20 rounds, built before the next batch is written
        nonlocal done
        write_rounds(shim, done, done + 20)
        done += 20
        wait_until(lambda: built(dump_root, shim.log), timeout=120,
                   what="the daemon to build every record")

    # start-up first, up to the manifest's first file: polars (~30 MiB at once) is
    # imported on a thread, which a busy disk held up for 15 batches in one run
    batch()
    wait_until(lambda: any((dump_root / "manifest").rglob("part-*.parquet")), timeout=60,
               what="the manifest's first file")
    # then batches of 20 rounds: one manifest part each, so its merges happen too
    # (8 parts into 1, 8 of those into 1, ...)
    xs, samples = [], []
    for _ in range(40):
        batch()
        xs.append(done)
        samples.append(rss_kib(d.proc.pid))
    # least-squares slope over the last two thirds (the first holds start-up,
    # imports and the allocators' first growth)
    xs, ys = xs[len(xs) // 3:], samples[len(samples) // 3:]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    # before the fix each round kept its rows (~1.7 KiB each, 50 KiB per round);
    # without a leak the daemon's RSS moves in steps of its 1 MiB mmap threshold
    # (a clean clone's run read 5.1 KiB a round from such steps on a flat line)
    assert slope < 12, f"daemon RSS grows {slope:.1f} KiB per round: {samples} KiB"
    for r in (0, done - 1):  # complete while the process is busy
        marker = dump_root / "data" / f"0_{shim.pid}" / str(r) / "ROUND_COMPLETE.json"
        # a marker follows its rows once the disk has them (tree/committer.py)
        wait_until(marker.exists, timeout=30, what=f"round {r}'s marker")
        assert json.loads(marker.read_text())["rows"] == ROWS
