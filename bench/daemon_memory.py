"""Control-plane memory on a long statistics dump: daemon RSS after 100 and 2,000 rounds.

One process runs `atbsim run --requests 1010 --layers 2 --hidden 32 --vocab 64
--decode-steps 2` (about two rounds a request) under `task: statistics,
save_child: true` (about 500 rows a round) and never idles. The daemon's VmRSS
is read from /proc the moment round 100's and round 2,000's ROUND_COMPLETE.json
appear (the daemon has then built those rounds). Target: within 10%."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import ATBSIM, probe_env, stop_daemon, write_config
from msprobe_atb.control.block import ControlBlock, dump_root_of

ARGS = ["run", "--requests", "1010", "--layers", "2", "--hidden", "32", "--vocab", "64",
        "--decode-steps", "2"]
AT = (100, 2000)
POLL_S = 0.02


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def run():
    tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_mem."))
    try:
        out = tmp / "out"
        out.mkdir()
        config = out / "config.json"
        write_config(config, task="statistics", dump_enable=True, save_child=True)
        start = time.monotonic()
        proc = subprocess.Popen([str(ATBSIM), *ARGS], env=probe_env(out, config),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        root = dump_root_of(out)
        rss: dict[int, int] = {}
        data = root / "data"
        while len(rss) < len(AT):
            want = AT[len(rss)]
            markers = list(data.glob(f"*/{want - 1}/ROUND_COMPLETE.json")) if data.is_dir() else []
            if markers:
                with ControlBlock(root) as block:
                    rss[want] = _rss_kib(block.daemon_pid)
                rows = markers[0].read_text()
            elif proc.poll() is not None and time.monotonic() - start > 600:
                raise RuntimeError(f"round {want} was never completed")
            time.sleep(POLL_S)
        proc.wait()
        stop_daemon(out)
        a, b = (rss[n] for n in AT)
        yield f"{rows.strip()} (round {AT[1] - 1}'s marker)"
        for n in AT:
            yield f"daemon RSS after {n:5d} rounds: {rss[n] / 1024:7.1f} MiB"
        yield (f"ratio {b / a:.3f} ({(b - a) / 1024:+.1f} MiB over {AT[1] - AT[0]} rounds; "
               f"target within 10%: {'met' if abs(b / a - 1) <= 0.10 else 'NOT met'})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
