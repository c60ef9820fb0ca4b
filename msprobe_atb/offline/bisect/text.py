"""A bisect document (summary.py) as text."""

from __future__ import annotations

RANKING_SHOWN = 10


def _pct(share) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def _e(x) -> str:
    return "-" if x is None else f"{x:.3g}"


def _table(rows: list[dict]) -> list[str]:
    width = max([len(r["path"]) for r in rows] + [4])
    lines = [f"  {'op':<{width}}  {'type':<26} {'removes alone':>13} {'share':>6}"]
    lines += [f"  {r['path']:<{width}}  {r['op_type']:<26} {_e(r['removed']):>13} "
              f"{_pct(r['share']):>6}" for r in rows]
    return lines


def format_text(doc: dict) -> str:
    m = doc["metric"]
    lines = [f"bisect: {doc['model']} round {doc['round']} of process {doc['process']}: "
             f"{doc['ops']} ops, {doc['searchable']} searchable",
             f"error: ‖output − golden‖ / ‖golden‖ of {m['kind']} ({m['path']}), golden: "
             f"{doc['golden']}",
             "the all-deployed chained run gives the dumped output back " + (
                 "exactly" if not doc["deployed_drift"] else
                 f"within {_e(doc['deployed_drift'])} (largest |difference|)"),
             f"error before {_e(doc['before'])}, target {_e(doc['target'])} "
             f"({doc['target_from']})"]
    if not doc["chosen"] and doc["reached"]:
        lines.append("no op needs promotion: the error is already under the target")
    else:
        how = "brings it to" if doc["reached"] else \
            "spends the budget; the best set found brings it to" if doc["budget_spent"] else \
            "is all promotion can do, and leaves it above the target, at"
        lines.append(f"promoting these {len(doc['chosen'])} op(s) {how} {_e(doc['after'])}:")
        lines += _table(doc["chosen"])
        lines.append("by op type and layer: " + "; ".join(doc["groups"]))
    if doc["ranking"]:
        shown = doc["ranking"][:RANKING_SHOWN]
        lines.append(f"ranking: the {len(shown)} of {len(doc['ranking'])} ops that remove the "
                     "most error, each promoted alone:")
        lines += _table(shown)
    if doc["excluded"]:
        lines.append(f"kept out of the search ({len(doc['excluded'])}):")
        lines += [f"  {x['path']}: {x['why']}" for x in doc["excluded"]]
    lines.append(f"chained evaluations: {doc['evaluations']} (bound 2·k·log2(n) + n = "
                 f"{doc['bound']:.1f} for n = {doc['searchable']}, k = {len(doc['chosen'])})")
    return "\n".join(lines)
