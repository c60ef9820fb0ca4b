"""A bisect result as one JSON document: the set with what each op removes, its
grouping by op type and layer, the ranking, the ops kept out, the evaluations."""

from __future__ import annotations

from collections import defaultdict

from ..stats.summary import ranges_text
from .chain import Chain
from .search import Result, bound


def _layer_names(chain: Chain) -> dict[str, tuple[str, int | None]]:
    """Top-level op id -> (its name, its index among the top-level ops of that name,
    None when it is the only one): `2` -> ("Prefill_layer", 1)."""
    tops: dict[str, str] = {}
    for s in chain.steps:
        top = s.op.rel.split("/")[0]
        gid, _, name = top.partition("_")
        tops.setdefault(gid, name or top)
    count: dict[str, int] = defaultdict(int)
    out = {}
    for gid, name in tops.items():
        out[gid] = (name, count[name])
        count[name] += 1
    return {g: (n, i if count[n] > 1 else None) for g, (n, i) in out.items()}


def _short(op_type: str) -> str:
    return op_type[:-len("Operation")] if op_type.endswith("Operation") else op_type


def groups(chain: Chain, steps: list[int]) -> list[str]:
    """'RmsNorm (node 9) in layers 3-7': the steps by op type, node in its layer and
    layer name, in the order of their first step."""
    layers = _layer_names(chain)
    found: dict[tuple[str, str, str], list[int | None]] = {}
    for i in sorted(steps):
        op = chain.steps[i].op
        gid, _, node = op.op_id.partition("_")
        name, index = layers[gid]
        found.setdefault((_short(op.op_type), node, name), []).append(index)
    out = []
    for (kind, node, name), idx in found.items():
        where = f"node {node}" if node else "the op itself"
        nums = [i for i in idx if i is not None]
        place = name if not nums else f"{name}{'s' if len(nums) > 1 else ''} {ranges_text(nums)}"
        out.append(f"{kind} ({where}) in {place}")
    return out


def _op(chain: Chain, i: int) -> dict:
    op = chain.steps[i].op
    return {"op_id": op.op_id, "path": op.path, "op_type": op.op_type}


def document(chain: Chain, res: Result, *, metric: str, out_step: int, golden: str,
             target_from: str, evaluations: int, drift: float) -> dict:
    removed = dict(res.ranking)
    n, k = len(chain.searchable), len(res.chosen)
    share = (lambda r: r / res.before) if res.before and res.before != float("inf") \
        else (lambda r: None)
    return {
        "model": chain.model, "round": chain.round, "process": chain.dev_pid,
        "metric": {"kind": metric, **_op(chain, out_step)}, "golden": golden,
        "before": res.before, "after": res.after, "target": res.target,
        "target_from": target_from, "deployed_drift": drift, "reached": res.reached,
        "budget_spent": res.budget_spent,
        "ops": len(chain.steps), "searchable": n,
        "chosen": [{**_op(chain, i), "removed": removed.get(i),
                    "share": share(removed[i]) if i in removed else None}
                   for i in res.chosen],
        "groups": groups(chain, res.chosen),
        "ranking": [{**_op(chain, i), "removed": r, "share": share(r)} for i, r in res.ranking],
        "excluded": [{**_op(chain, i), "why": s.excluded} for i, s in enumerate(chain.steps)
                     if s.excluded],
        "evaluations": evaluations, "bound": bound(n, k),
    }
