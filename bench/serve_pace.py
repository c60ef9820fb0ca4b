"""A service's statistics at its pace: 2 devices, 300 s, every round built within 5 s of its stop.

`atbsim serve --devices 2` (the stand-in's default small model) dumps under
`task: statistics, save_child: true` while one client (--clients for more at
once) sends chat requests for --seconds (300) at --rate requests a second
(8.3: the run the target was set on sent 2,490 in its 300 s, back to back; this
stand-in now serves ~4x as fast, and back to back, --rate 0, it made ~100k
records/s here, more than this 2-core machine could also build beside it).
Every --every seconds (30): the records the
service's processes made and the daemon built a second, the lag, the shims'
queues, the daemon's and the service processes' RSS, and what was lost. Then
the service is stopped as an operator stops it (SIGTERM: its workers' exit
drains run) and `msprobe-atb wait` is timed from that stop. Target: every
round built (its ROUND_COMPLETE.json written) within 5 s of the stop, and
`wait` succeeds. Before the control plane kept pace, 13% of the rounds of such
a run were built when it stopped and `wait` timed out after 300 s."""

from __future__ import annotations

import argparse
import itertools
import shutil
import tempfile
import threading
import time
from pathlib import Path

from bench import dump_progress, loadgen_run
from bench.common import met, write_config
from bench.dump_progress import Sample
from bench.stand_in_service import StandInService
from msprobe_atb.control.block import dump_root_of
from msprobe_atb.tree.rounddir import MARKER

ARGS = ["--devices", "2"]
RATE = 2490 / 300  # requests a second: the run the target was set on
TARGET_S = 5.0    # every round built within this long after the stop
# The clients stop early below this much free disk: a 300 s run here made
# ~100k records/s and filled the last 35 GB (an op dir and op_param.json per op
# and round), and a full disk loses records and stalls the run.
MIN_FREE = 8 << 30
WAIT_TIMEOUT_S = 120.0


def _rounds(root: Path) -> tuple[int, int]:
    """(round dirs, those with their marker) of the dump."""
    data = root / "data"
    rounds = [r for d in data.iterdir() if d.is_dir() for r in d.iterdir() if r.is_dir()] \
        if data.is_dir() else []
    return len(rounds), sum((r / MARKER).exists() for r in rounds)


def _line(t: float, requests: int, a: Sample, b: Sample) -> str:
    dt = max(b.t - a.t, 1e-9)
    hosts = max(b.host_rss_kib.values(), default=0)
    made = (b.total_produced - a.total_produced) / dt
    built = (b.total_built - a.total_built) / dt
    return (f"{t:4.0f} s: {requests:,} requests, made {made:,.0f} records/s, built"
            f" {built:,.0f}/s, lag {b.lag:,}"
            f" records ({b.age_s:.1f} s old), shims' queues {b.queued:,}, daemon"
            f" {b.daemon_rss_kib / 1024:.0f} MiB, service processes {hosts / 1024:.0f} MiB max,"
            f" lost {b.lost}")


def run(seconds: float = 300.0, every: float = 30.0, settle: bool = True, clients: int = 1,
        rate: float = RATE):
    """rate: requests a second from all the clients together; 0: back to back."""
    tmp = Path(tempfile.mkdtemp(prefix="msprobe_atb_bench_serve."))
    out = tmp / "out"
    out.mkdir()
    config = out / "config.json"
    write_config(config, task="statistics", dump_enable=True, save_child=True)
    root = dump_root_of(out)
    if settle:  # an earlier bench's dirty pages (and load runs' dirs) are not this run's
        settled_s, removed_first = loadgen_run.settle()
        yield (f"started after {settled_s:.1f} s settling (sync"
               f"{', earlier load runs removed for room' if removed_first else ''})")
    try:
        with StandInService(out, config, ARGS) as service:
            requests = [0] * clients
            deadline = time.monotonic() + seconds
            failed: list[BaseException] = []
            short = threading.Event()  # the disk ran short: the clients stop early
            slots = itertools.count()  # the requests' places in time, at `rate`

            def client(i: int) -> None:
                try:
                    while time.monotonic() < deadline and not short.is_set():
                        if rate > 0:
                            time.sleep(max(0.0, start + next(slots) / rate - time.monotonic()))
                        service.request()
                        requests[i] += 1
                except Exception as exc:  # said after the run, not lost in a thread
                    failed.append(exc)

            threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
            start = time.monotonic()
            for c in threads:
                c.start()
            last = dump_progress.sample(root) or Sample(start)
            while any(c.is_alive() for c in threads):
                time.sleep(1.0)
                free = shutil.disk_usage(out).free
                if free < MIN_FREE and not short.is_set():
                    short.set()
                    yield (f"{time.monotonic() - start:4.0f} s: {free / 2**30:.1f} GiB free on the"
                           f" dump's disk (under {MIN_FREE >> 30} GiB): the clients stop here")
                s = dump_progress.sample(root)
                if s and s.t - last.t >= every - 0.5:
                    yield _line(s.t - start, sum(requests), last, s)
                    last = s
            for c in threads:
                c.join()
            if failed:
                raise RuntimeError(f"a client's request failed: {failed[0]!r}")
            rc = service.stop()
            stopped_ns = time.time_ns()
            final = dump_progress.sample(root)
            waiter = loadgen_run.Waiter(out, WAIT_TIMEOUT_S)
            try:
                wait_rc = waiter.join()
            finally:
                waiter.close()
            rounds, built = _rounds(root)
        after = (waiter.returned_ns - stopped_ns) / 1e9
        ok = wait_rc == 0 and built == rounds and after <= TARGET_S
        ran = ("a run stopped early for the disk (see above)" if short.is_set()
               else f"{seconds:g} s")
        offered = f"{rate:.1f} a second" if rate > 0 else "back to back"
        yield (f"{sum(requests):,} requests ({offered}) from {clients}"
               f" client{'s' if clients > 1 else ''} in {ran}; the service exited {rc} on SIGTERM;"
               f" at its exit {final.lag if final else 0:,} records not yet built,"
               f" lost {final.lost if final else 0}")
        yield (f"msprobe-atb wait returned {after:.2f} s after the stop (exit"
               f" {wait_rc}); rounds built {built:,} of {rounds:,}"
               f" (target: every round within {TARGET_S:g} s of the stop and `wait`"
               f" succeeds: {met(ok)})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.serve_pace",
                                description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=300.0, help="requesting time (300)")
    p.add_argument("--every", type=float, default=30.0, help="a progress line every N s (30)")
    p.add_argument("--clients", type=int, default=1, help="clients requesting at once (1)")
    p.add_argument("--rate", type=float, default=RATE,
                   help=f"requests a second, all clients together ({RATE:.1f}; 0: back to back)")
    a = p.parse_args(argv)
    for line in run(a.seconds, a.every, clients=max(1, a.clients), rate=max(0.0, a.rate)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
