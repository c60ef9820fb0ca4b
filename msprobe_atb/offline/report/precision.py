"""The report's precision section: the ranking and the set of a `bisect` result saved
beside the dump (`<output>/bisect.json`, the dir that holds atb_dump_data: `msprobe-atb
bisect DIR --json -o DIR/bisect.json`)."""

from __future__ import annotations

import json
from pathlib import Path

from msprobe_atb.tree.datafile import read_small

BISECT_FILE = "bisect.json"
RANKING_ROWS = 20


def bisect_result(root: Path | None) -> tuple[Path | None, dict | str | None]:
    """(the file, its document, or why it cannot be used; None: there is none)."""
    if root is None:
        return None, None
    f = root.parent / BISECT_FILE
    if not f.exists() and not f.is_symlink():
        return None, None
    try:
        doc = json.loads(read_small(f, "a bisect result"))
        if not isinstance(doc, dict) or not isinstance(doc.get("ranking"), list) or \
                not isinstance(doc.get("chosen"), list):
            raise ValueError("not the JSON object bisect --json prints")
        return f, doc
    except (OSError, ValueError, RecursionError) as e:
        return f, f"cannot be read: {getattr(e, 'strerror', None) or e}"


def _num(x) -> str:
    return f"{x:.3g}" if isinstance(x, (int, float)) else "?"


def _row(r: dict) -> list:
    share = r.get("share")
    return [str(r.get("path", "")), str(r.get("op_type", "")), r.get("removed"),
            "-" if not isinstance(share, (int, float)) else f"{100 * share:.0f}%"]


def precision_rows(doc: dict) -> tuple[str, list[str], list[list], list[list]]:
    """(the headline, the groups, the set's rows, the ranking's first rows)."""
    chosen = [r for r in doc["chosen"] if isinstance(r, dict)]
    head = (f"Error of {doc.get('model', '?')} round {doc.get('round', '?')} against "
            f"{doc.get('golden', '?')}: {_num(doc.get('before'))} before, target "
            f"{_num(doc.get('target'))}; ")
    head += (f"promoting {len(chosen)} op(s) brings it to {_num(doc.get('after'))}"
             if chosen else "no op needs promotion")
    groups = [str(g) for g in doc.get("groups") or [] if isinstance(g, str)]
    ranking = [r for r in doc["ranking"] if isinstance(r, dict)][:RANKING_ROWS]
    return head, groups, [_row(r) for r in chosen], [_row(r) for r in ranking]
