"""The readers' check of an incident report (incidents/incident-NNNN.json): a
file is data, not instructions, so one of the wrong shape (not an object, a key
of the wrong type, a round dir that is not this dump's) is refused with the
reason, and the others are read. A report that passes comes back with every key
the readers use, of the type they expect; its round dirs are this dump's own
(`<dump root>/data/<dev>_<pid>/<round>`), wherever the dump was when written.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from msprobe_atb.tree.names import text_of, texts

NUM = (int, float)
OPT_STR = (str, type(None))
OPT_INT = (int, type(None))
SCALAR = (int, float, str, type(None))
DEV_PID = re.compile(r"\d+_\d+")

MUST = object()  # the default of a key that must be there

# key: (accepted types, value when missing)
TOP: dict[str, tuple[tuple, Any]] = {
    "incident": ((int,), MUST), "trigger": ((str,), MUST), "value": (SCALAR, None),
    "finding": (OPT_STR, None),
    "time": (OPT_STR, None), "t_ns": ((int,), 0), "round": (OPT_INT, None),
    "pid": (OPT_INT, None), "device": (OPT_INT, None), "dev_pid": (OPT_STR, None),
    "model": (OPT_STR, None),
    "first_tensor": ((dict, type(None)), None), "feeding_ops": ((list,), []),
    "detail": ((str,), ""), "flushed_rounds": ((list,), []), "flushed": ((list,), []),
}
FIRST_TENSOR: dict[str, tuple[tuple, Any]] = {
    "op_id": (OPT_STR, None), "op_name": (OPT_STR, None), "kernel": (OPT_STR, None),
    "io": (OPT_STR, None), "index": ((int, str, type(None)), None), "path": ((str,), ""),
    "stats": ((dict, type(None)), None),
}
FEEDER: dict[str, tuple[tuple, Any]] = {
    "op_id": (OPT_STR, None), "op_name": (OPT_STR, None), "tensor": (OPT_STR, None),
    "feeds": (OPT_STR, None), "hops": (OPT_INT, None),
}
FLUSHED: dict[str, tuple[tuple, Any]] = {
    "dev_pid": ((str,), MUST), "round": ((int, str), MUST), "dir": ((str,), MUST),
    "ops": ((dict,), {}), "models": ((list,), []),
}


class BadIncident(ValueError):
    """An incident report of the wrong shape; the message says what is wrong."""


def _typed(what: str, v: Any, types: tuple) -> Any:
    if isinstance(v, bool) or not isinstance(v, types):
        names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise BadIncident(f"{what} is {type(v).__name__}, not {names}")
    return v


def _fields(what: str, d: Any, spec: dict[str, tuple[tuple, Any]]) -> dict:
    _typed(what, d, (dict,))
    out = {}
    for key, (types, default) in spec.items():
        if key not in d:
            if default is MUST:
                raise BadIncident(f"{what} has no {key!r}")
            out[key] = copy.copy(default)
        else:
            out[key] = _typed(f"{what}[{key!r}]", d[key], types)
    return out


def _flushed(i: int, f: Any, data: Path) -> dict:
    what = f"flushed[{i}]"
    f = _fields(what, f, FLUSHED)
    dev_pid, rnd = f["dev_pid"], str(f["round"])
    if not DEV_PID.fullmatch(dev_pid):
        raise BadIncident(f"{what}: dev_pid {dev_pid!r} is not <device>_<pid>")
    if not rnd.isdigit():
        raise BadIncident(f"{what}: round {rnd!r} is not a round number")
    written = Path(f["dir"])
    if not written.is_absolute() or written.parts[-3:] != ("data", dev_pid, rnd):
        raise BadIncident(f"{what}: dir {f['dir']!r} is not a dump's data/{dev_pid}/{rnd}")
    for op, how in f["ops"].items():
        _typed(f"{what}['ops'][{op!r}]", how, (str,))
    for k, model in enumerate(f["models"]):
        _typed(f"{what}['models'][{k}]", model, (str,))
    return {**f, "round": int(rnd), "dir": text_of(str(data / dev_pid / rnd))}


def checked(doc: Any, dump_root: Path) -> dict:
    """The report with every key the readers use, or BadIncident saying why not."""
    d = _fields("the report", doc, TOP)
    if d["incident"] < 0:
        raise BadIncident(f"incident number {d['incident']} is negative")
    if d["first_tensor"] is not None:
        ft = _fields("first_tensor", d["first_tensor"], FIRST_TENSOR)
        for k, v in (ft["stats"] or {}).items():
            _typed(f"first_tensor['stats'][{k!r}]", v, SCALAR)
        d["first_tensor"] = ft
    d["feeding_ops"] = [_fields(f"feeding_ops[{i}]", f, FEEDER)
                        for i, f in enumerate(d["feeding_ops"])]
    for i, r in enumerate(d["flushed_rounds"]):
        _typed(f"flushed_rounds[{i}]", r, (int,))
    data = Path(dump_root).absolute() / "data"
    d["flushed"] = [_flushed(i, f, data) for i, f in enumerate(d["flushed"])]
    return texts(d, only_raw=True)  # names as text (names.py), also in older reports
