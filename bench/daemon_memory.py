"""Control-plane memory on a long statistics dump: daemon RSS after 100 and 2,000 rounds.

A service (`atbsim serve --layers 2 --hidden 32 --vocab 64 --decode-steps 2`)
dumps under `task: statistics, save_child: true` (about 500 rows a round) while
requests come in batches of 10; after each batch, once the daemon has built
every record (.probe/built.json), its VmRSS is read from /proc. Printed: the
RSS once 100 and once 2,000 rounds are built, and their ratio. Target: within 10%."""

from __future__ import annotations

import shutil
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
            rss: dict[int, tuple[int, int]] = {}
            start = time.monotonic()
            while len(rss) < len(AT):
                for _ in range(BATCH):
                    service.request()
                while not _built(root):
                    time.sleep(0.05)
                rounds = sum(len(list(d.iterdir())) for d in (root / "data").iterdir())
                if rounds >= AT[len(rss)]:
                    with ControlBlock(root) as block:
                        rss[AT[len(rss)]] = (rounds, rss_kib(block.daemon_pid))
        (n0, a), (n1, b) = (rss[n] for n in AT)
        yield f"{time.monotonic() - start:.0f} s for {n1} rounds (about 500 rows each)"
        for n, (got, kib) in rss.items():
            yield f"daemon RSS after {n:5d} rounds ({got} built): {kib / 1024:7.1f} MiB"
        yield (f"ratio {b / a:.3f} ({(b - a) / 1024:+.1f} MiB over {n1 - n0} rounds; "
               f"target within 10%: {'met' if abs(b / a - 1) <= 0.10 else 'NOT met'})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
