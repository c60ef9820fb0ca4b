"""Control plane under a 70B service's load: records/s built, lag, wait, daemon and host RSS.

The load generator (native/tests/loadgen, bench/loadgen_run.py) calls the real
shim through the real adapter hooks, in ATB's protocol, for a Llama-70B-shaped
prefill and decode model (80 layer graphs of 13 ops, ~50 tensors a layer), on 8
(--procs) forked "devices" into one output dir, `task: statistics`, `save_child:
true`, exec_range all. The control-plane daemon the shims start is pinned to a
core of its own, the producers to the others (machines with 2+ cores). Once a
second the bench reads the control block and .probe/built.json: records made
(the slots' `records`: lines appended to the record logs), records built (built.json
`records`: lines the daemon has read and written into statistic.csv,
statistic_extra.csv and info/; the manifest and the round markers take a round's
rows when it is complete), the lag (made - built) and the age of its oldest
record, daemon and host RSS, lost (drops + errors), the shims' own queues (and
the fullest copy queue's bytes against queue_budget_mb: an item is charged what
it takes in memory, so a queue of statistics items stays within its budget).

Runs, each in a fresh dir, with one-element tensors (--tiny) but in (d): the
producers must outrun the control plane, so they offer the shim's record path
alone (with real shapes the statistics of each tensor hold them back):
  (a) max rate: the producers unthrottled for --max-seconds; the built rate over
      the seconds after a warm-up in which the daemon had a backlog (built.json
      moves in steps, one per write of the tree, so not a median of per-second
      rates, which are 0 or bursts), and the time until everything is built
      (if within Settings.drain_seconds of the stop).
  (b) paced at 80% of max((a), the 200k/s target), or of what the producers made
      in (a) live if less (a producer short of its pace queues records, and the
      lag would be its queue's): the oldest record not built over the run, and
      when `msprobe-atb wait` returns against the last record.
  (c) the long run, paced at 80% of what this machine sustains (the least of (a)
      and the producers' (a) live; or --rate), read off the same figures as (b),
      and the daemon's RSS at 100k and at 10M
      records built (extrapolated, and said so, when 10M is not reached).
  task all: (a) with `.bin` files, shorter.
  (d) one producer with the real 70B shapes: its RSS before its burst, 3 s after
      its queue drained, and MSPROBE_ATB_RING_IDLE_S (4 s here) and a trim period
      after that, dumping a little (TRICKLE records/s) before and after: "before"
      is read once the probe is attached and has trickled through the model once,
      since an attached process carries ~5 MiB a process that never dumped does
      not (its writer and monitor threads, started at the first op, their malloc
      arenas, the record batches, the ring pages of the trickle's own tensors, the
      shim's code paged in, and its verdicts on the model's op paths, up to 1.5 MiB
      filled as each op is first seen: at 100 records/s the trickle had seen a few
      percent of a round), and the burst is measured against that.
Everything ends in bounded time: every wait has a timeout, and whatever a run
started (the daemon too) is stopped, then killed.

`python -m bench.stats_pace --help` sizes the runs (e.g. --long-seconds 1500
to reach 10M records at ~7k/s)."""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

from bench import dump_progress
from bench.common import rss_kib
from bench.dump_progress import Sample
from bench.loadgen_run import EXIT_S, LoadRun, Pinning, removed

TARGET_RATE = 200_000     # records/s built on one core, from 8 producers
TARGET_LAG_S = 1.0        # at 80% of that: lag <= 1 s of records; wait <= 1 s after the last
TARGET_RSS = 0.10         # daemon RSS after 10M records within 10% of after 100k
RSS_AT = (100_000, 10_000_000)
RSS_SAMPLES = 20          # (c): samples (one a second) of the RSS at a point
SETTLE_S = 3.0            # (d): after the producer's queue drained
RING_IDLE_S = 4.0         # (d): MSPROBE_ATB_RING_IDLE_S, short for the bench
AFTER_IDLE_S = RING_IDLE_S + 3.0  # (d): its idle time and a trim period (2 s) after the drain
# (d): records/s the producer makes before and after its burst: in the 3 s before,
# more than a round of the 70B shapes (~4,000 records), still ~7% of the burst's rate
TRICKLE = 2000.0


@dataclass
class Settings:
    procs: int = 8
    backlog_seconds: float = 30.0  # (a): producing time with the daemon stopped
    max_seconds: float = 25.0     # (a) live: producing time
    paced_seconds: float = 10.0   # (b): producing time
    long_seconds: float = 300.0   # (c): producing time at most (10M at 34k/s) ...
    records: int = RSS_AT[1]      # ... or until this many records are built
    rate: float = 0.0             # (c): records/s offered, all producers; 0: 80% of (a)
    all_seconds: float = 10.0     # task all
    burst_seconds: float = 6.0    # (d)
    drain_seconds: float = 6.0    # (a): after the producers stop, for the files to catch up
    wait_timeout: float = 10.0    # msprobe-atb wait --timeout
    warmup: float = 5.0
    queue_mb: int = 1             # tiny tensors: the smallest copy queue (see _config)
    every: int = 5                # a progress line every N samples


def _config(task: str, settings: Settings, tiny: bool = True) -> dict:
    """Tiny tensors cost the copy queue's byte budget next to nothing, so with
    the default 1 GiB the hooks would run far ahead of the writer threads and
    a stopped producer would drain for minutes: a small budget makes the hooks
    wait for their writers (policy block), as large tensors do."""
    cfg = {"task": task, "dump_enable": True, "save_child": True, "exec_range": "all"}
    if tiny:
        cfg["queue_budget_mb"] = settings.queue_mb
    return cfg


@dataclass
class Trace:
    """A run's samples, one a second, and when its producers were stopped."""
    label: str
    samples: list[Sample] = field(default_factory=list)
    stopped: float | None = None  # time.monotonic() of the stop
    stopped_wall: float = 0.0     # time.time() of the stop

    @property
    def t0(self) -> float:
        return self.samples[0].t if self.samples else 0.0

    def mark_stopped(self) -> None:
        self.stopped, self.stopped_wall = time.monotonic(), time.time()

    def intervals(self) -> Iterator[tuple[Sample, Sample]]:
        return zip(self.samples, self.samples[1:])


def _rate(a: Sample, b: Sample, attr: str) -> float:
    return (getattr(b, attr) - getattr(a, attr)) / max(b.t - a.t, 1e-9)


def _line(trace: Trace, a: Sample, b: Sample) -> str:
    dt = max(b.t - a.t, 1e-9)
    per = [(b.produced[k] - a.produced.get(k, 0)) / dt for k in b.produced]
    hosts = max(b.host_rss_kib.values(), default=0)
    return (f"{trace.label} {b.t - trace.t0:4.0f} s: made {_rate(a, b, 'total_produced'):9,.0f}/s"
            f" ({min(per, default=0):,.0f}..{max(per, default=0):,.0f} a process),"
            f" built {_rate(a, b, 'total_built'):8,.0f}/s, lag {b.lag:,} records"
            f" ({b.age_s:.1f} s old), shims' queues {b.queued:,}, daemon"
            f" {b.daemon_rss_kib / 1024:.0f} MiB, host {hosts / 1024:.0f} MiB max, lost {b.lost}")


def _drive(run: LoadRun, trace: Trace, seconds: float, every: int,
           done: Callable[[Sample], bool] = lambda s: False) -> Iterator[str]:
    """Samples once a second for `seconds` or until done(sample), printing the
    rates over the last `every` seconds every `every` seconds."""
    every = max(1, every)
    end = time.monotonic() + seconds
    tick = time.monotonic()
    while time.monotonic() < end:
        s = run.sample()
        if s:
            trace.samples.append(s)
            n = len(trace.samples)
            if n > 1 and (n - 1) % every == 0:
                yield _line(trace, trace.samples[max(0, n - 1 - every)], s)
            if done(s):
                return
        tick += 1.0
        time.sleep(max(0.0, tick - time.monotonic()))


def _drained(run: LoadRun) -> Callable[[Sample], bool]:
    return lambda s: not run.running() and s.lag == 0


def _slope(pairs: list[tuple[Sample, Sample]], attr: str) -> float:
    """The rate over those intervals together (built.json moves in steps, one
    per write of the tree: a second's rate is often 0 or a burst)."""
    dt = sum(b.t - a.t for a, b in pairs)
    return sum(getattr(b, attr) - getattr(a, attr) for a, b in pairs) / dt if dt else 0.0


def _sustained(trace: Trace, warmup: float) -> tuple[float, bool]:
    """The built rate over the intervals after the warm-up in which the daemon
    had a backlog (records over 1 s old), and whether that was most of them;
    if not, the producers were the limit and the rate over all is theirs."""
    late = [(a, b) for a, b in trace.intervals() if a.t - trace.t0 >= warmup]
    busy = [(a, b) for a, b in late if a.age_s > TARGET_LAG_S]
    behind = len(busy) * 2 >= len(late) > 0
    return _slope(busy if behind else late, "total_built"), behind


def _made(trace: Trace, warmup: float) -> float:
    """The made rate while the producers ran, after the warm-up."""
    end = trace.stopped or float("inf")
    return _slope([(a, b) for a, b in trace.intervals()
                   if a.t - trace.t0 >= warmup and b.t <= end], "total_produced")


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _pinned(run: LoadRun) -> str:
    """The daemon, where it ran, and how long the run waited for the machine to settle."""
    where = (f"daemon pid {run.daemon_pid}, {run.daemon_threads} threads pinned" if run.pinning
             else f"daemon pid {run.daemon_pid}")
    removed = ("; earlier runs' dirs removed first, the disk being short: ext4 slows the"
               " producers' creates for minutes after" if run.removed_first else "")
    return f"{where}; started after {run.settled_s:.1f} s settling{removed}"


def _max_rate(settings: Settings, pin: Pinning | None, task: str, seconds: float,
              label: str, out: list[str]) -> Generator[str, None, tuple[float, bool, float]]:
    """(a) and task all: unthrottled producers for `seconds`; appends the
    figures to `out` and returns the sustained built rate, whether the daemon
    was the limit (_sustained) and the records/s the producers made."""
    trace = Trace(label)
    args = ["--procs", str(settings.procs), "--seconds", "0", "--tiny"]
    with LoadRun(_config(task, settings), args, pin) as run:
        yield from _drive(run, trace, seconds, settings.every)
        run.stop()
        trace.mark_stopped()
        yield from _drive(run, trace, settings.drain_seconds, settings.every, _drained(run))
        drained = _drained(run)(trace.samples[-1])
    last = trace.samples[-1]
    warmup = min(settings.warmup, seconds / 3)
    rate, busy = _sustained(trace, warmup)
    made = _made(trace, warmup)
    out.append(f"{label}: built {rate:,.0f} records/s (after {warmup:.0f} s"
               f"{', while the daemon had a backlog' if busy else ''}); the producers made"
               f" {made:,.0f}/s ({made / settings.procs:,.0f} a process); {_pinned(run)}")
    ran = trace.stopped - trace.t0
    if drained:
        out.append(f"  fully built: {last.total_produced:,} records in {last.t - trace.t0:.1f} s"
                   f" = {last.total_produced / (last.t - trace.t0):,.0f}/s (producing"
                   f" {ran:.0f} s)")
    else:
        more = f"; at {rate:,.0f}/s about {last.lag / rate:,.0f} s more" if rate else ""
        out.append(f"  not fully built {last.t - trace.stopped:.0f} s after the producers"
                   f" stopped (producing {ran:.0f} s): {last.lag:,} of {last.total_produced:,}"
                   f" records behind{more}")
    if not busy:
        out.append("  the derived files mostly kept up (records under 1 s old): the producers"
                   " were the limit, the control plane can do at least that")
    out.append(f"  lost {last.lost}")
    out.append(_queue_figure(trace, settings))
    return rate, busy, made


def _cpu_s(pid: int) -> float:
    """A process's CPU time (user + system) so far, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rows(root) -> int:
    """Tensors written (statistic.csv rows) by every process of the dump."""
    from msprobe_atb.control.block import ControlBlock

    with ControlBlock(root) as block:
        return sum(p.tensors_written for p in block.procs())


def _capacity(settings: Settings, pin: Pinning | None, out: list[str]) -> Generator[
        str, None, float]:
    """(a) the control plane's capacity: the daemon builds the producers' first
    --warmup seconds live (what it does once: its imports, the graphs each
    process reports first), then it is stopped (SIGSTOP) while the producers fill
    the record logs for --backlog-seconds, then let go (SIGCONT) to build the
    backlog alone on its core. Figures: the rows (tensor records, what
    statistic.csv, statistic_extra.csv and the manifest get) and the record lines
    built per second of wall, and per second of the daemon's CPU, from the let-go
    to the end. Returns the rows/s."""
    trace = Trace("(a)")
    args = ["--procs", str(settings.procs), "--seconds", "0", "--tiny"]
    with LoadRun(_config("statistics", settings), args, pin) as run:
        while not run.daemon_pid:
            run.sample()
            time.sleep(0.05)
        yield from _drive(run, trace, settings.warmup, settings.every)
        os.kill(run.daemon_pid, signal.SIGSTOP)
        try:
            at_stop = run.sample()
            yield from _drive(run, trace, settings.backlog_seconds, settings.every)
            run.stop()
            run.finish(EXIT_S)
            backlog = run.sample()
            rows = _rows(run.root)
            cpu0 = _cpu_s(run.daemon_pid)
        finally:
            os.kill(run.daemon_pid, signal.SIGCONT)
        start = time.monotonic()
        built = backlog
        while time.monotonic() - start < settings.drain_seconds * 10:
            built = run.sample()
            if built.total_built >= backlog.total_produced:
                break
            time.sleep(0.1)
        wall = time.monotonic() - start
        cpu = _cpu_s(run.daemon_pid) - cpu0
    done = built.total_built >= backlog.total_produced
    lines = built.total_built - at_stop.total_built
    todo = backlog.total_produced - at_stop.total_built
    rows_built = rows * lines / max(1, backlog.total_produced)  # rows per line alike
    rate, line_rate = rows_built / wall, lines / wall
    per_cpu = rows_built / max(cpu, 1e-9)
    todo_rows = rows * todo / max(1, backlog.total_produced)
    out.append(f"(a): a backlog of {todo:,} record lines (~{todo_rows:,.0f} tensor rows) from"
               f" {settings.procs} producers, after {settings.warmup:g} s built live;"
               f" {_pinned(run)}")
    share = "built" if done else f"NOT fully built: {lines / max(1, todo):.0%} of"
    out.append(f"  {share} it"
               f" in {wall:.1f} s: {rate:,.0f} rows/s into statistic.csv + statistic_extra.csv +"
               f" manifest + markers ({line_rate:,.0f} lines/s), the daemon's CPU {cpu:.1f} s"
               f" ({per_cpu:,.0f} rows per CPU-second)"
               # One core's rate is rows per CPU-second of it: on a shared machine the
               # wall rate also counts the time other processes took from that core.
               f" (target >= {TARGET_RATE:,}/s on one core, per CPU-second:"
               f" {_met(per_cpu >= TARGET_RATE)})")
    return rate


def _queue_figure(trace: Trace, settings: Settings) -> str:
    """The fullest copy queue seen (once a second) against its budget."""
    full = max(trace.samples, key=lambda s: s.queue_bytes)
    budget = settings.queue_mb << 20
    per = f", {full.queue_bytes / full.queue_items:,.0f} B an item" if full.queue_items else ""
    return (f"  copy queue: at most {full.queue_bytes / 1024:,.0f} KiB in one process"
            f" ({full.queue_items:,} items{per}) of its {settings.queue_mb} MiB budget"
            f" (queue_budget_mb): {'within' if full.queue_bytes <= budget else 'ABOVE'} it")


def _paced(settings: Settings, pin: Pinning | None, offered: float, seconds: float,
           label: str, why: str, out: list[str],
           done: Callable[[Sample], bool] = lambda s: False) -> Generator[str, None, Trace]:
    """(b) and (c): producers paced to `offered` records/s in all for `seconds`
    or until done(sample); the lag over the run and when `msprobe-atb wait`
    returns once they stopped. Returns the trace."""
    trace = Trace(label)
    per = offered / settings.procs
    args = ["--procs", str(settings.procs), "--seconds", "0", "--tiny", "--rate", f"{per:.1f}"]
    with LoadRun(_config("statistics", settings), args, pin) as run:
        yield from _drive(run, trace, seconds, settings.every, done)
        run.stop()
        trace.mark_stopped()
        waiter = run.start_wait(settings.wait_timeout)
        try:
            yield from _drive(run, trace, settings.wait_timeout + 2, settings.every,
                              lambda s: waiter.done())
        finally:
            waiter.close()
        run.finish(EXIT_S)
        last_ns = dump_progress.last_record_ns(run.root)
    made = _made(trace, min(settings.warmup, seconds / 3))
    out.append(f"{label}: offered {offered:,.0f} records/s ({why}); the producers made"
               f" {made:,.0f}/s ({made / settings.procs:,.0f} a process)"
               f"{'' if made >= 0.95 * offered else ': they could not offer more'};"
               f" {_pinned(run)}")
    out.extend(_lag_figure(trace, made))
    rc = waiter.proc.returncode
    if not waiter.returned_ns or rc == 3:
        out.append(f"  msprobe-atb wait: did not return within {settings.wait_timeout:g} s"
                   f" (timed out); {trace.samples[-1].lag:,} records still behind"
                   f" (target <= {TARGET_LAG_S:g} s after the last record: NOT met)")
    else:
        after = (waiter.returned_ns - last_ns) / 1e9
        out.append(f"  msprobe-atb wait returned (exit {rc}) {after:.2f} s after the last record"
                   f" (target <= {TARGET_LAG_S:g} s: {_met(after <= TARGET_LAG_S)}),"
                   f" {waiter.returned_ns / 1e9 - trace.stopped_wall:.1f} s after the producers"
                   f" were stopped; lost {trace.samples[-1].lost}")
    return trace


def _lag_figure(trace: Trace, made: float) -> list[str]:
    """The largest lag as the target counts it: records not in the derived
    files (in the record logs, and still in the shims' queues), in seconds of
    what the producers made; beside it, the age of the oldest record in the logs
    not yet built (from when its writer thread made it: latency, not the
    target's measure)."""
    worst = max(trace.samples, key=lambda s: s.lag + s.queued)
    oldest = max(trace.samples, key=lambda s: s.age_s)
    behind = worst.lag + worst.queued
    of_records = behind / max(made, 1.0)
    return [f"  largest lag: {behind:,} records not in the derived files ({worst.lag:,} in"
            f" the record logs, {worst.queued:,} in the shims' queues) = {of_records:.2f} s"
            f" of what the producers made (target <= {TARGET_LAG_S:g} s of records:"
            f" {_met(of_records <= TARGET_LAG_S)})",
            f"    the oldest record in the logs not yet built: {oldest.age_s:.1f} s old at"
            f" most ({oldest.lag:,} records behind then)"]


RssWindow = tuple[float, float, float, float]  # (floor, median, least, peak), KiB


def _rss_window(samples: list[Sample]) -> RssWindow:
    """The daemon's RSS over samples: its floor (the lower quartile), median,
    least and peak, KiB."""
    rss = [s.daemon_rss_kib for s in samples]
    floor = statistics.quantiles(rss, n=4)[0] if len(rss) > 1 else rss[0]
    return floor, statistics.median(rss), min(rss), max(rss)


def _rss_text(w: RssWindow) -> str:
    return (f"median {w[1] / 1024:.1f} MiB (floor {w[0] / 1024:.1f}, least {w[2] / 1024:.1f},"
            f" peak {w[3] / 1024:.1f})")


def _rss_change(a: RssWindow, b: RssWindow) -> str:
    """b against a, by median and by floor, each beside the target."""
    return "; ".join(f"{name} {b[i] / a[i] - 1:+.1%} (target within {TARGET_RSS:.0%}:"
                     f" {_met(b[i] / a[i] - 1 <= TARGET_RSS)})"
                     for i, name in ((1, "median"), (0, "floor")))


def _rss_figures(trace: Trace) -> list[str]:
    """(c): daemon RSS after RSS_AT[0] and after RSS_AT[1] records built, each
    over RSS_SAMPLES samples (one a second): the first ones from RSS_AT[0] on,
    the last ones up to RSS_AT[1] (or the end of the run, then extrapolated and
    said so). Short of RSS_AT[0], from half of what was built. The daemon's
    memory moves by tens of MB within seconds (rows held until their round may
    go, the manifest's columns, glibc's heap until its next trim: [heap] read 45 and
    92 MiB 30 s apart in one run), so one sample is noise and even a median of a
    few can catch the top of a swing: the floor is what stays between them, and
    growth (a leak, a backlog held in memory) raises it. The floor is the lower
    quartile, not the least sample: the first window starts as records start,
    while the daemon still loads what it works with (polars alone maps ~30 MiB)
    and grows its buffers to their working size, and one such sample once made a
    window's least. Both are compared, each said; the least sample and the peak
    are printed beside them."""
    lo, hi = RSS_AT
    seen = [s for s in trace.samples if s.daemon_rss_kib]
    if not seen:
        return ["  daemon RSS: no sample of the daemon"]
    start = lo if seen[-1].total_built >= lo else seen[-1].total_built // 2
    early = [s for s in seen if s.total_built >= start][:RSS_SAMPLES]
    late = [s for s in seen if s.total_built <= hi][-RSS_SAMPLES:]
    reached = seen[-1].total_built >= hi
    a, b = _rss_window(early), _rss_window(late)
    at_a = (early[0].total_built, early[-1].total_built)
    at_b = (late[0].total_built, late[-1].total_built)
    lines = [f"  daemon RSS after {lo:,} records built: {_rss_text(a)} of {len(early)} samples"
             f" ({at_a[0]:,}-{at_a[1]:,} built)"
             + ("" if start == lo else f"; {lo:,} not reached: from half of what was built")]
    if reached:
        lines.append(f"    at {hi:,}: {_rss_text(b)} of {len(late)} samples"
                     f" ({at_b[0]:,}-{at_b[1]:,} built): {_rss_change(a, b)}")
        return lines
    if at_b[0] <= at_a[1]:
        # a line through two windows that share samples draws noise out to hi
        lines.append(f"    {hi:,} not reached, and the run too short for a second window"
                     " after the first: no extrapolation")
        return lines
    # a fall between the two points is noise (or memory given back): no growth
    est: RssWindow = tuple(  # type: ignore[assignment]
        x + max(0.0, y - x) / (at_b[1] - at_a[1]) * (hi - at_a[1]) for x, y in zip(a, b))
    return lines + [
        f"    {hi:,} not reached in this run: at the end {_rss_text(b)} of {len(late)}"
        f" samples ({at_b[0]:,}-{at_b[1]:,} built)",
        f"    EXTRAPOLATED (linear through those two points, a fall taken as flat) to {hi:,}:"
        f" {_rss_change(a, est)}, extrapolated; a --long-seconds long enough for {hi:,}"
        " measures it"]


def _burst(settings: Settings, pin: Pinning | None, out: list[str]) -> Iterator[str]:
    """(d): one producer with the real 70B shapes making TRICKLE records a second
    but for its burst: its RSS before the burst (attached, trickling), SETTLE_S
    after its queue drained, and AFTER_IDLE_S after that (MSPROBE_ATB_RING_IDLE_S
    short for the bench: the copy ring gives back what the burst faulted in once it
    has not needed it for that long)."""
    trace = Trace("(d)")
    lead = 3.0  # trickling before the burst; "before" is read near its end
    args = ["--procs", "1", "--seconds", f"{settings.burst_seconds:g}", "--trickle-before",
            f"{lead:g}", "--trickle", f"{TRICKLE:g}"]
    with LoadRun(_config("statistics", settings, tiny=False), args, pin,
                 env={"MSPROBE_ATB_RING_IDLE_S": f"{RING_IDLE_S:g}"}) as run:
        time.sleep(lead * 0.8)
        pids = run.producer_pids()
        before = {p: rss_kib(p) for p in pids}
        lead_made = run.sample()

        def drained(s: Sample) -> bool:  # the burst over and its queue empty
            return s.t - trace.t0 >= lead + settings.burst_seconds and s.queued == 0

        yield from _drive(run, trace, lead + settings.burst_seconds + 60, settings.every, drained)
        made = trace.samples[-1].total_produced if trace.samples else 0
        made -= lead_made.total_produced if lead_made else 0
        time.sleep(SETTLE_S)
        after = {p: rss_kib(p) for p in pids}
        time.sleep(AFTER_IDLE_S - SETTLE_S)
        later = {p: rss_kib(p) for p in pids}
        run.stop()
    for p in pids:
        out.append(f"(d) host RSS, one producer with the real 70B shapes (~{made:,} records in"
                   f" its {settings.burst_seconds:g} s burst, {made / settings.burst_seconds:,.0f}"
                   f"/s): {before[p] / 1024:.0f} MiB before the burst (attached, making {TRICKLE:g}"
                   f" records/s), {after[p] / 1024:.0f} MiB"
                   f" {SETTLE_S:g} s after its queue drained ({(after[p] - before[p]) / 1024:+.0f}"
                   f" MiB), {later[p] / 1024:.0f} MiB {AFTER_IDLE_S:g} s after"
                   f" ({(later[p] - before[p]) / 1024:+.0f} MiB) making them again"
                   f" (MSPROBE_ATB_RING_IDLE_S={RING_IDLE_S:g}; the target: back to"
                   " its size before within that time)")


def _machine(pin: Pinning | None) -> list[str]:
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    usable = len(os.sched_getaffinity(0))
    return [f"machine: {os.cpu_count()} CPUs ({usable} usable here), load average {load} at the"
            " start; shared with other work, so every figure is noisy",
            f"pinning: {pin.describe()}" if pin else
            "pinning: none (one usable CPU: the daemon shares it with the producers)"]


def run(settings: Settings | None = None) -> Iterator[str]:
    settings = settings or Settings()
    pin = Pinning.for_machine()
    mine = os.sched_getaffinity(0)
    figures = _machine(pin)
    yield from figures
    try:
        if pin:
            pin.pin_producers()
        a = yield from _capacity(settings, pin, figures)
        _, _, producers = yield from _max_rate(settings, pin, "statistics",
                                               settings.max_seconds, "(a) live", figures)
        # Paced below what the control plane sustains, and below what the
        # producers can make here (they share the other cores, each op's
        # op_param.json a file): a producer that cannot keep its pace queues
        # records, and the lag then measures its queue, not the control plane.
        sustained = max(a, TARGET_RATE)
        why = "80% of (a)" if a >= TARGET_RATE else (
            f"80% of the {TARGET_RATE:,}/s target, as (a) is below it")
        if producers < sustained:
            sustained, why = producers, ("80% of what the producers made in (a) live: they"
                                         f" cannot offer {0.8 * max(a, TARGET_RATE):,.0f}/s here")
        yield from _paced(settings, pin, 0.8 * sustained, settings.paced_seconds, "(b)", why,
                          figures)
        offered = settings.rate or 0.8 * min(a, producers)
        if offered:
            trace = yield from _paced(
                settings, pin, offered, settings.long_seconds, "(c)",
                "--rate" if settings.rate else "80% of what this machine sustains: the least"
                " of (a) and what the producers made in (a) live",
                figures, lambda s: s.total_built >= settings.records)
            figures.extend(_rss_figures(trace))
        yield from _max_rate(settings, pin, "all", settings.all_seconds, "task all", figures)
        yield from _burst(settings, pin, figures)
    finally:
        os.sched_setaffinity(0, mine)
    yield "---- figures ----"
    yield from figures
    removed()  # minutes of deleting: after the figures (at exit, if this is not reached)


# The settings a user may size from the command line, with their help.
OPTIONS = (
    ("procs", "producer processes"),
    ("backlog_seconds", "(a): producing time with the daemon stopped"),
    ("max_seconds", "(a) live: producing time"),
    ("paced_seconds", "(b): producing time"),
    ("long_seconds", "(c): producing time at most"),
    ("records", "(c): stop once this many records are built"),
    ("rate", "(c): records/s to offer, all producers; 0: 80%% of (a)"),
    ("all_seconds", "task all: producing time"),
    ("every", "a progress line every N seconds"),
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.stats_pace",
                                description=__doc__.splitlines()[0])
    d = Settings()
    for name, what in OPTIONS:
        default = getattr(d, name)
        p.add_argument("--" + name.replace("_", "-"), type=type(default), default=default,
                       help=f"{what} ({default:,})")
    a = p.parse_args(argv)
    settings = Settings(**{name: getattr(a, name) for name, _ in OPTIONS})
    start = time.perf_counter()
    for line in run(settings):
        print(line, flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
