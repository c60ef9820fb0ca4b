"""One tensor row of the table as commands show it (stats, overflow, diagnose)."""

from __future__ import annotations

from msprobe_atb.tree.models import round_label

from .jsonsafe import jsonable
from .table import op_path


def tensor_ref(row: dict) -> dict:
    """The user-facing description of one tensor row."""
    return {
        "dev_pid": row["dev_pid"], "round": row["round"], "model": row.get("model"),
        "round_label": round_label(row["round"], row.get("model")), "seq": row["seq"],
        "op": op_path(row["op_id"], row["op_name"]), "op_id": row["op_id"],
        "stage": row["stage"], "io": row["io"], "index": row["index"], "dtype": row["dtype"],
        "shape": row["shape"],
        "nan": row["nan"], "pinf": row["pinf"], "ninf": row["ninf"], "zero": row["zero"],
        "max": jsonable(row["max"]), "min": jsonable(row["min"]), "norm": jsonable(row["norm"]),
        "path": row["path"], "status": row["status"],
    }
