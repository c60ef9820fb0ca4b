"""The triggers the control plane evaluates, from the statistics the shims
publish while armed (recorder/channel.py): growth_over (a statistic past a
factor of its own envelope, learned per tensor key from the earlier rounds)
and golden (divergence from a good run's statistic.csv).

After each pass the daemon tells the shims up to when everything has been
evaluated (rec_eval_ns), so they keep the rounds a later trigger may still
need (native/core/mechanisms/recorder.c trim_scope)."""

from __future__ import annotations

import logging
import math
import time

from msprobe_atb.config.golden import STATS, Golden
from msprobe_atb.config.recorder import TRIG_BITS, Recorder
from msprobe_atb.recorder.channel import Channel, StatEntry
from msprobe_atb.tree.csvfmt import parse_tensor_path

log = logging.getLogger("msprobe_atb")

# An entry may be written a little after its time was taken: the watermark
# stays this far behind the start of the pass.
MARGIN_NS = 50_000_000


def _absmax(e: StatEntry) -> float:
    return max(abs(e.max), abs(e.min)) if e.has_minmax else math.nan


def divergence(target: tuple[float, ...], golden: tuple[float, ...]) -> tuple[float, str]:
    """The largest relative difference of max/min/mean/norm and which one. A value
    near zero is compared against 1/1000 of the golden tensor's range instead."""
    scale = max(abs(golden[0]), abs(golden[1])) * 1e-3
    worst, which = 0.0, STATS[0]
    for name, t, g in zip(STATS, target, golden):
        if math.isnan(t) or math.isinf(t):
            d = math.inf if t != g else 0.0
        else:
            d = abs(t - g) / max(abs(g), scale, 1e-30)
        if d > worst:
            worst, which = d, name
    return worst, which


class Evaluator:
    def __init__(self, block, book):
        self.block = block
        self.book = book
        self.channels: dict[tuple[int, int], Channel] = {}
        self.envelope: dict[tuple[str, str], tuple[float, float]] = {}
        self.rec: Recorder | None = None
        self.golden: Golden | None = None
        self.base = -1

    def _configure(self, rec: Recorder | None, golden: Golden | None, base: int) -> None:
        if (rec, golden, base) == (self.rec, self.golden, self.base):
            return
        self.rec, self.golden, self.base = rec, golden, base
        self.envelope.clear()  # a new arming learns again

    def poll(self, cfg, golden: Golden | None, armed_ns: int = 0) -> int:
        """Reads every live process's new statistics (those written before the
        arming in force, armed_ns, belong to an earlier one and are skipped);
        returns how many were evaluated."""
        _, compiled = self.block.read_config()
        rec = cfg.recorder if cfg is not None and compiled.rec_armed else None
        wanted = rec is not None and bool(compiled.rec_triggers
                                          & (TRIG_BITS["growth_over"] | TRIG_BITS["golden"]))
        self._configure(rec if wanted else None, golden if wanted else None,
                        compiled.rec_incident_base)
        if not wanted:
            return 0
        start = time.time_ns()
        live = [s for s in self.block.procs() if not s.exited]
        applied = min((s.rec_incident for s in live), default=self.block.rec_claimed)
        n = 0
        for s in live:
            ch = self.channels.get((s.pid, s.start_ns))
            if ch is None:
                ch = self.channels[(s.pid, s.start_ns)] = Channel(s.pid, s.start_ns)
            for e in ch.read():
                if e.t_ns >= armed_ns:
                    n += 1
                    self._check(s.pid, e, applied)
        for key in [k for k in self.channels if k not in {(s.pid, s.start_ns) for s in live}]:
            self.channels.pop(key).close()
        self.block.set_eval_ns(start - MARGIN_NS)
        return n

    def _check(self, pid: int, e: StatEntry, applied: int) -> None:
        parts = e.path.split("/")
        tp = parse_tensor_path(e.path)
        if tp is None or len(parts) < 3:
            return
        key = (parts[0].split("_")[0], "/".join(parts[2:]))
        rec = self.rec
        if rec.growth_over is not None:
            cur = (_absmax(e), abs(e.norm))
            env = self.envelope.get(key)
            if env is not None:
                for name, value, bound in (("abs max", cur[0], env[0]), ("norm", cur[1], env[1])):
                    if bound > 0 and not value <= rec.growth_over * bound:
                        self._fire("growth_over", pid, e, value, applied,
                                   f"{name} {value:.6g} is past {rec.growth_over:g} x its "
                                   f"envelope {bound:.6g} from the earlier rounds")
                        break
            self.envelope[key] = cur if env is None else (
                max(env[0], cur[0]) if math.isfinite(cur[0]) else env[0],
                max(env[1], cur[1]) if math.isfinite(cur[1]) else env[1])
        stage = parts[-2] if len(parts) >= 2 else ""
        primary = (stage, tp.io) in (("before", "input"), ("after", "output"))
        if self.golden is not None and primary:
            g = self.golden.lookup(e.exec, "_".join(tp.ids), tp.io, tp.index)
            if g is not None:
                d, which = divergence((e.max, e.min, e.mean, e.norm), g)
                if d > rec.rtol:
                    got = {"Max": e.max, "Min": e.min, "Mean": e.mean, "Norm": e.norm}[which]
                    gold = g[("Max", "Min", "Mean", "Norm").index(which)]
                    self._fire("golden", pid, e, d, applied,
                               f"{which.lower()} {got:.9g} vs golden {gold:.9g}: relative "
                               f"difference {d:.3g} > rtol {rec.rtol:g}")

    def _fire(self, kind: str, pid: int, e: StatEntry, value: float, applied: int,
              detail: str) -> None:
        dev = e.path.split("_", 1)[0]
        seq = self.block.claim_incident(TRIG_BITS[kind], e.t_ns, e.path, e.exec, value,
                                        int(dev) if dev.isdigit() else -1, after_seq=applied)
        if not seq:
            return
        log.warning("recorder: incident %d, %s trigger in %s (round %d): %s", seq, kind, e.path,
                    e.exec, detail)
        stats = {k: (v if math.isfinite(v) else str(v)) for k, v in e.stats().items()}
        self.book.add_trigger(seq, kind, value if math.isfinite(value) else str(value), e.t_ns,
                              e.exec, e.path, pid, stats, detail)
