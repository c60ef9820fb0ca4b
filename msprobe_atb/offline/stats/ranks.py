"""`msprobe-atb stats DIR DIR...`: several nodes' dumps side by side.

Ranks are the processes of every dump, named by host (the manifest's, else the
directory given) and `{dev}_{pid}`. Ranks of one model run the same ops in the
same order, so a tensor's position within its round (`round_seq`) is comparable
across ranks, unlike wall-clock times, which differ between nodes. Per round, the
rank whose first NaN/Inf comes earliest in that order is where it started; the
others are listed in the order they followed. A round is one of its model's
(prefill or decode): round 20 of one dump's prefill is not round 20 of another's
decode.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from msprobe_atb.tree.graph import kv_cache_of, load_layer_graphs, load_model_graphs
from msprobe_atb.tree.models import model_kind, round_label

from ..diagnose.engine import diagnose
from ..diagnose.text import diagnosis_json
from ..read.losses import format_losses, losses_summary
from ..read.manifest import meta
from ..read.table import Dump, filter_tensors, op_path
from .summary import _fmt, _num, peaks


def host_of(dump: Dump, given: str) -> str:
    """The host a manifest names, else the directory the user gave."""
    if dump.root is not None:
        host = meta(dump.root).get("host")
        if isinstance(host, str) and host:
            return host
    return Path(given).resolve().name


def ranks_table(dumps: list[tuple[str, Dump]]) -> pl.DataFrame:
    """Every dump's tensors with `host`, `kind` (the model's: prefill, decode, its name
    or "") and `round_seq` (position within the round)."""
    frames = [d.tensors.with_columns(pl.lit(h).alias("host")) for h, d in dumps]
    df = pl.concat(frames, how="diagonal_relaxed")
    models = df.get_column("model").unique().to_list() if "model" in df.columns else []
    kinds = {m: model_kind(m) for m in models if m is not None}
    kind = (pl.col("model").replace_strict(kinds, default="", return_dtype=pl.String)
            if kinds else pl.lit(""))
    return df.with_columns(
        kind.alias("kind"),
        (pl.col("seq").rank("ordinal").over("host", "dev_pid", "round") - 1)
        .cast(pl.Int64).alias("round_seq"))


def _first_bad(df: pl.DataFrame) -> pl.DataFrame:
    """Per rank and round, its first NaN/Inf tensor (inputs before, outputs after)."""
    return (df.filter(pl.col("nonfinite") & pl.col("primary"))
            .sort("host", "dev_pid", "kind", "round", "round_seq")
            .group_by("host", "dev_pid", "kind", "round", maintain_order=True).first())


def _where(r: dict) -> dict:
    return {"host": r["host"], "dev_pid": r["dev_pid"], "device": r["device"],
            "round_seq": r["round_seq"], "op": op_path(r["op_id"], r["op_name"]),
            "op_id": r["op_id"],
            "stage": r["stage"], "io": r["io"], "index": r["index"],
            "nan": r["nan"], "pinf": r["pinf"], "ninf": r["ninf"]}


def across_ranks(df: pl.DataFrame) -> dict:
    firsts = _first_bad(df)
    rounds = []
    for (kind, rnd), g in firsts.sort("round", "kind").group_by(["kind", "round"],
                                                                  maintain_order=True):
        order = [_where(r) for r in g.sort("round_seq", "host", "device").iter_rows(named=True)]
        ranks_in_round = df.filter((pl.col("round") == rnd) & (pl.col("kind") == kind)).select(
            "host", "dev_pid").unique()
        rounds.append({"round": rnd, "model": kind or None, "round_label": round_label(rnd, kind),
                       "first": order[0], "followed": order[1:],
                       "clean_ranks": ranks_in_round.height - len(order)})
    per_rank = []
    for (host, dp), g in df.group_by(["host", "dev_pid"], maintain_order=True):
        bad = firsts.filter((pl.col("host") == host) & (pl.col("dev_pid") == dp)).sort(
            "round", "kind", "round_seq")
        norm = peaks(g, ["dev_pid"], "norm")
        per_rank.append({
            "host": host, "dev_pid": dp, "device": g.get_column("device")[0],
            "rounds": g.get_column("round").n_unique(), "tensors": g.height,
            "nonfinite_tensors": int((g.get_column("nonfinite")
                                      & g.get_column("primary")).sum()),
            "first_nonfinite": ({"round": bad.get_column("round")[0],
                                 "round_label": round_label(bad.get_column("round")[0],
                                                            bad.get_column("kind")[0]),
                                 **_where(bad.row(0, named=True))} if bad.height else None),
            "max_norm": _num(norm.item(0, "peak")) if norm.height else None,
        })
    per_rank.sort(key=lambda r: (r["host"], r["device"] if r["device"] is not None else -1,
                                 r["dev_pid"]))
    return {"ranks": per_rank, "rounds": rounds}


def format_ranks(s: dict, dumps: list[str], limit: int = 20) -> str:
    lines = [f"{d['host']}: {line}" for d in s["diagnosis"] for line in d["lines"]]
    lines += [f"{len(s['ranks'])} ranks in {len(dumps)} dumps: {', '.join(dumps)}", "",
             f"{'host':<16} {'process':<14} {'device':>6} {'rounds':>6} {'tensors':>8} "
             f"{'NaN/Inf':>7} {'max norm':>12}  first NaN/Inf"]
    for r in s["ranks"]:
        f = r["first_nonfinite"]
        first = (f"{f['round_label']} #{f['round_seq']} {f['op']} {f['io']} {f['index']}"
                 if f else "-")
        lines.append(f"{r['host']:<16} {r['dev_pid']:<14} {_fmt(r['device']):>6} "
                     f"{r['rounds']:>6} {r['tensors']:>8} {r['nonfinite_tensors']:>7} "
                     f"{_fmt(r['max_norm']):>12}  {first}")
    short = [d for d in s["losses"] if d["lost"] or d["params_lost"] or d["derived_behind"]]
    for d in short:
        lines.append(f"{d['dump']}:")
        lines += format_losses(d, d["tensors"])
    lines.append("")
    if not s["rounds"]:
        lines.append("No NaN/Inf on any rank" + (
            "; the tensors these dumps lost, or their derived files lack, could not be checked."
            if short else "."))
    for rd in s["rounds"][:limit]:
        f = rd["first"]
        lines.append(f"{rd['round_label']}: NaN/Inf first on {f['host']} device "
                     f"{_fmt(f['device'])} ({f['dev_pid']}) at #{f['round_seq']} of the "
                     f"round: {f['op']} {f['stage']} {f['io']} {f['index']}{_cache_note(f)}")
        for o in rd["followed"]:
            same = " (same op)" if o["op"] == f["op"] else ""
            lines.append(f"  then {o['host']} device {_fmt(o['device'])} ({o['dev_pid']}) "
                         f"at #{o['round_seq']} (+{o['round_seq'] - f['round_seq']}): "
                         f"{o['op']} {o['io']} {o['index']}{same}{_cache_note(o)}")
        if rd["clean_ranks"]:
            lines.append(f"  {rd['clean_ranks']} other rank(s) stayed finite in this round")
    if len(s["rounds"]) > limit:
        lines.append(f"... and {len(s['rounds']) - limit} more rounds with NaN/Inf (--json)")
    lines.append("(#n: position of the tensor in its round's execution order, comparable "
                 "across ranks; wall clocks of different nodes are not)")
    return "\n".join(lines)


def _name_caches(rounds: list[dict], by_host: dict[str, Dump]) -> None:
    """Each round's first NaN/Inf per rank gets `kv_cache`: the KV cache it is, when it
    is one (a value an earlier round wrote, carried into this one), else None."""
    graphs: dict[tuple[str, str], tuple] = {}
    for rd in rounds:
        for w in [rd["first"], *rd["followed"]]:
            key = (w["host"], w["dev_pid"])
            if key not in graphs:
                info = by_host[w["host"]].layout.info if w["host"] in by_host else None
                graphs[key] = (load_layer_graphs(info, w["dev_pid"]),
                               load_model_graphs(info, w["dev_pid"]))
            index = int(w["index"]) if str(w["index"]).isdigit() else None
            w["kv_cache"] = kv_cache_of(*graphs[key], w["op_id"], w["io"], index)


def _cache_note(w: dict) -> str:
    return (f" (a KV cache, {w['kv_cache']}: it carries a value an earlier round wrote)"
            if w.get("kv_cache") else "")


def stats_ranks(dirs: list[str], opened: list[Dump], *, op=None, layer=None, round=None,
                device=None) -> dict:
    dumps = [(host_of(d, given), d) for given, d in zip(dirs, opened)]
    df = filter_tensors(ranks_table(dumps), op=op, layer=layer, round=round, device=device)
    out = across_ranks(df)
    _name_caches(out["rounds"], dict(dumps))
    # the root cause in each dump, as `diagnose DIR` names it there
    out["diagnosis"] = [
        {"host": host, "dump": str(d.root or d.layout.given),
         **diagnosis_json(diagnose(d, filter_tensors(d.tensors, op=op, layer=layer, round=round,
                                                     device=device)))}
        for host, d in dumps]
    out["dumps"] = [str(d.root or d.layout.given) for d in opened]
    out["problems"] = [p for d in opened for p in d.problems]
    # per dump: what it lost, or what its derived files do not hold yet
    out["losses"] = [{"dump": name, "tensors": d.tensors.height, **losses_summary(d.layout)}
                     for name, d in zip(out["dumps"], opened)]
    return out
