"""The diagnosis of a dump: per process, its anomalies (anomalies.py), the walk
from the earliest one up to its root cause (walk.py), and the consequence a user
sees first (the first NaN/Inf, else the first divergence). One function,
`diagnose`, for every command that names a cause: diagnose, stats, compare, the
report and incidents."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import polars as pl

from ..read.overflow_log import overflow_log_events
from ..read.table import Dump
from ..replay.dumpops import DumpedOp
from ..replay.runner import OpResult
from .anomalies import Anomaly, find_anomalies, jumps, outlier_inputs
from .walk import CacheHop, Cause, Key, Walk, Walker, index_of


@dataclass
class Chain:
    """One process's finding: the cause, the anomaly the walk started from, and the
    consequence (the op a user sees go wrong first), with the KV caches between."""

    dev_pid: str
    cause: Cause
    start: Anomaly
    consequence: tuple[DumpedOp, OpResult, Anomaly] | None
    caches: list[CacheHop] = field(default_factory=list)


@dataclass
class Diagnosis:
    chains: list[Chain]  # earliest first
    # NaN/Inf or divergences no cause was found for, each with why not
    unexplained: list[tuple[Anomaly, str]]
    models: dict[tuple[str, str], str]  # (dev_pid, layer) -> model, for round labels
    several: bool  # the dump has several processes: the device is said
    # ATB's reports of a finite bf16 output: no finding, said as false reports
    false_reports: list[Anomaly] = field(default_factory=list)
    # (dev_pid, round, op_id) of each tensor diagnose was asked to judge -> the replay
    # verdict on its op
    verdicts: dict[Key, OpResult] = field(default_factory=dict)


def _key(row: dict) -> tuple:
    return (row["dev_pid"], row["round"], row["op_id"], row["io"], index_of(row["index"]))


def _bad_tensors(df: pl.DataFrame, jumped: pl.DataFrame, failures: pl.DataFrame | None
                 ) -> tuple[set[tuple], set[tuple], dict[tuple, str]]:
    """The tensors that look bad (holding NaN/Inf, jumping, failing compare), those
    of them that are bad for sure (all but the jumps), and the inputs that jumped
    against their layers (outlier_inputs, with what jumped): Walker's three."""
    cols = ["dev_pid", "round", "op_id", "io", "index"]
    parts = [df.filter(pl.col("primary") & pl.col("nonfinite")).select(cols)]
    if failures is not None:
        parts.append(failures.select(cols))
    confirmed = {_key(r) for p in parts for r in p.iter_rows(named=True)}
    outliers = {_key(r): what for r, what in outlier_inputs(jumped)}
    return (confirmed | {_key(r) for r in jumped.select(cols).iter_rows(named=True)},
            confirmed, outliers)


def failing_rows(df: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """The rows of the target's table `df` whose pair failed in compare's result
    `rows` (inputs before and outputs after each op), in execution order."""
    bad = rows.filter((pl.col("verdict") == "fail") & pl.col("primary")).select(
        pl.col("target_process").alias("dev_pid"), "round", "op_id", "io", "index").unique()
    keys = ["dev_pid", "round", "op_id", "io", "index"]
    return df.filter(pl.col("primary")).join(bad, on=keys, how="semi", nulls_equal=True)


def _consequence(walker: Walker, anomalies: list[Anomaly], cause: Cause
                 ) -> tuple[DumpedOp, OpResult, Anomaly] | None:
    seen = next((a for kind in ("nonfinite", "divergence") for a in anomalies
                 if a.kind == kind), None)
    op = walker.op_at(seen.tensor) if seen is not None else None
    if op is None or op.op_id == cause.op.op_id and op.round == cause.op.round:
        return None
    return op, walker.replay(op), seen


def diagnose(dump: Dump, df: pl.DataFrame | None = None,
             failures: pl.DataFrame | None = None, judge: Iterable[Key] = ()) -> Diagnosis:
    """The root cause per process of the tensors `df` (default: the whole dump);
    `failures`: the rows compare found diverging from a golden (failing_rows);
    `judge`: the tensors (dev_pid, round, op_id) whose op's replay verdict the
    caller shows beside the diagnosis (stats' first NaN/Inf, compare's first
    divergence, an incident's first offending tensor), in `verdicts`: taken from
    the walks' replays, so that a command replays no op twice."""
    from ..read.models import model_map

    # the device is said wherever the dump has several processes, whatever `df` holds
    several = dump.tensors.get_column("dev_pid").n_unique() > 1 if dump.tensors.height \
        else False
    df = dump.tensors if df is None else df
    jumped = jumps(df)
    found = find_anomalies(df, jumped, failures, overflow_log_events(dump) or [])
    out = Diagnosis([], [], model_map(df), several)
    judge = list(judge)
    if not found and not judge:
        return out
    walker = Walker(dump, df.filter(pl.col("dev_pid").is_in([*found, *(k[0] for k in judge)])),
                    *_bad_tensors(df, jumped, failures))
    for dev_pid, anomalies in sorted(found.items(), key=lambda kv: (kv[1][0].tensor["round"],
                                                                      kv[1][0].seq)):
        out.false_reports += [a for a in anomalies if a.kind == "false report"]
        anomalies = [a for a in anomalies if a.kind != "false report"]
        why = {}
        for a in anomalies:  # a jump may be innocent: then the next anomaly
            start = walker.op_at(a.tensor)
            if start is None:
                why[id(a)] = "its op is not among the dump's ops"
                continue
            w = walker.walk(start, a.tensor["io"], index_of(a.tensor["index"]))
            cause = w.cause or _reported(a, start, w)
            if cause is not None:
                out.chains.append(Chain(dev_pid, cause, a,
                                        _consequence(walker, anomalies, cause), w.caches))
                break
            why[id(a)] = _why_none(w)
        else:
            out.unexplained += [(a, why.get(id(a), "")) for a in anomalies
                                if a.kind != "jump"][:1]
    for key in judge:  # after the walks: their replays are reused
        verdict = walker.verdict(key)
        if verdict is not None:
            out.verdicts[key] = verdict
    return out


def _reported(a: Anomaly, start: DumpedOp, w: Walk) -> Cause | None:
    """An overflow reported (ATB's or the probe's) in an op whose inputs were not
    dumped (an overflow_check dump): nothing behind it can be replayed, so the op
    and who found it are what the dump can name."""
    if a.kind != "reported" or any(t.path for t in start.inputs):
        return None
    return Cause("reported", start, w.replayed[0] if w.replayed else None, finding=a.what)


def _why_none(w: Walk) -> str:
    """Why a walk found no cause: replay could not judge the ops it met, or it
    judged them and none is at fault."""
    if w.replayed and all(r.verdict == "not-replayable" for r in w.replayed):
        first = w.replayed[0]
        return f"replay cannot judge {first.op.rel}: {first.why}"
    more = f" among the first {len(w.replayed)} replayed" if w.exhausted else ""
    return f"no op or input behind it replays at fault{more}"
