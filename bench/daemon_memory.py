"""Control-plane memory on a long statistics dump: daemon RSS after 100 and 2,000 rounds.

A service (`atbsim serve --layers 2 --hidden 32 --vocab 64 --decode-steps 2`)
dumps under `task: statistics, save_child: true` (about 500 rows a round) while
requests come in batches of 10; after each batch, once the daemon has built
every record (.probe/built.json), its VmRSS is read from /proc. The daemon's RSS
swings by +-10% from one batch to the next (Python's and polars' allocations come
and go), so one reading says little: from 100 and from 2,000 rounds built on,
SAMPLES readings each (one a batch) are taken. Printed: their medians, least and
most, and the ratio of the medians. Target: within 10%."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import rss_kib, write_config
from bench.stand_in_service import StandInService
from msprobe_atb.control.block import ControlBlock, dump_root_of
from msprobe_atb.tree import progress
from msprobe_atb.tree.records import list_logs

ARGS = ["--devices", "1", "--layers", "2", "--hidden", "32", "--vocab", "64",
        "--decode-steps", "2"]
AT = (100, 2000)
BATCH = 10
SAMPLES = 10


def _built(root: Path) -> bool:
    offsets = (progress.read(root) or progress.Progress()).offsets
    return all(offsets.get(p.name, -1) >= p.stat().st_size for _, p in list_logs(root))


def run():
    tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_mem."))
    out = tmp / "out"
    out.mkdir()
    config = out / "config.json"
    write_config(config, task="statistics", dump_enable=True, save_child=True)
    try:
        with StandInService(out, config, ARGS) as service:
            root = dump_root_of(out)
            rss: dict[int, list[tuple[int, int]]] = {n: [] for n in AT}
            start = time.monotonic()
            while len(rss[AT[-1]]) < SAMPLES:
                for _ in range(BATCH):
                    service.request()
                while not _built(root):
                    time.sleep(0.05)
                rounds = sum(len(list(d.iterdir())) for d in (root / "data").iterdir())
                mark = next((n for n in AT if rounds >= n and len(rss[n]) < SAMPLES), None)
                if mark is not None:
                    with ControlBlock(root) as block:
                        rss[mark].append((rounds, rss_kib(block.daemon_pid)))
        yield f"{time.monotonic() - start:.0f} s for {rounds} rounds (about 500 rows each)"
        med = {}
        for n, got in rss.items():
            kib = [k for _, k in got]
            med[n] = statistics.median(kib)
            yield (f"daemon RSS from {n:5d} rounds built ({got[0][0]}-{got[-1][0]}): median"
                   f" {med[n] / 1024:6.1f} MiB (least {min(kib) / 1024:.1f}, most"
                   f" {max(kib) / 1024:.1f}) of {len(kib)} readings, one a batch")
        a, b = (med[n] for n in AT)
        yield (f"ratio of the medians {b / a:.3f} ({(b - a) / 1024:+.1f} MiB; "
               f"target within 10%: {'met' if abs(b / a - 1) <= 0.10 else 'NOT met'})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
