"""The record log's kinds and fields (docs/contracts.md §4) as
native/include/msprobe_atb/records.h declares them, the one list of them: read from
the header's X-macro lines, as cffi reads control.h, so C and Python cannot drift."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import NamedTuple

HEADER = Path(__file__).resolve().parents[2] / "native" / "include" / "msprobe_atb" / "records.h"
WRITERS = {"MSP_BY_SHIM": "shim", "MSP_BY_TORCH": "torch", "MSP_BY_CTL": "control plane"}
_BY = re.compile(r"^#define (MSP_BY_\w+) \(?([\w |]+?)\)?$", re.M)
_LINE = re.compile(r"^\s*X\((\w+), (\w+), (\w+), ([\w |]+), (ALWAYS|OPTIONAL)\)"
                   r"\s*(?:/\*(.*?)\*/)?\s*\\?$")
_LIST = re.compile(r"^#define (MSP_RECORD_\w+)\(X\)")


class Field(NamedTuple):
    kind: str  # the record's `k`; "any": every record's; a part's name in PARTS
    name: str
    type: str  # INT, STR, BOOL, F64, VALUE, STATS, ROUNDS, COUNTS, JSON (records.h)
    writers: frozenset[str]  # names of WRITERS' values
    optional: bool
    unread_why: str  # "" unless the header says why no reader uses it


def _writers(expr: str, groups: dict[str, str]) -> frozenset[str]:
    """The writers an | of MSP_BY_* names (one the header defines as an | of others
    stands for them)."""
    names = [n.strip() for n in expr.split("|")]
    return frozenset(w for n in names
                     for w in ((WRITERS[n],) if n in WRITERS else _writers(groups[n], groups)))


@functools.cache
def lists() -> dict[str, tuple[Field, ...]]:
    """Each X-macro list of the header (MSP_RECORD_COMMON, MSP_RECORD_FIELDS,
    MSP_RECORD_PARTS) with its fields in order."""
    out: dict[str, list[Field]] = {}
    current = None
    text = HEADER.read_text()
    groups = dict(_BY.findall(text))
    for line in text.splitlines():
        if (start := _LIST.match(line)) is not None:
            current = out.setdefault(start.group(1), [])
        elif current is not None and (m := _LINE.match(line)) is not None:
            note = (m.group(6) or "").strip()
            current.append(Field(m.group(1), m.group(2), m.group(3), _writers(m.group(4), groups),
                                 m.group(5) == "OPTIONAL",
                                 note if note.endswith("unread") else ""))
        else:
            current = None
    return {name: tuple(fields) for name, fields in out.items()}


COMMON = "MSP_RECORD_COMMON"
RECORDS = "MSP_RECORD_FIELDS"
PARTS = "MSP_RECORD_PARTS"


def _by_kind(list_name: str) -> dict[str, tuple[Field, ...]]:
    out: dict[str, list[Field]] = {}
    for f in lists()[list_name]:
        out.setdefault(f.kind, []).append(f)
    return {k: tuple(v) for k, v in out.items()}


def kinds() -> dict[str, tuple[Field, ...]]:
    """Each record kind with its own fields (the common ones not repeated)."""
    return _by_kind(RECORDS)


def parts() -> dict[str, tuple[Field, ...]]:
    """Each object nested in records (`stats`, a flush's `rounds` entry) with its fields."""
    return _by_kind(PARTS)


def common() -> tuple[Field, ...]:
    return lists()[COMMON]


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_f64(v: object) -> bool:
    """A double as docs/contracts.md §4 writes it (a string), or a JSON number (the
    torch dumper's)."""
    return isinstance(v, str | float) or _is_int(v)


def _is_value(v: object) -> bool:
    return _is_f64(v) or (isinstance(v, list) and len(v) == 2 and all(map(_is_f64, v)))


def _part_problems(obj: object, part: str, writer: str) -> list[str]:
    if not isinstance(obj, dict):
        return [f"a {part} that is not an object"]
    return _fields_problems(obj, parts()[part], writer, part)


_TYPES = {
    "INT": _is_int, "STR": lambda v: isinstance(v, str), "BOOL": lambda v: isinstance(v, bool),
    "F64": _is_f64, "VALUE": _is_value, "JSON": lambda v: isinstance(v, str),
    "COUNTS": lambda v: isinstance(v, dict) and all(map(_is_int, v.values())),
}


def _value_problems(v: object, f: Field, writer: str) -> list[str]:
    if f.type == "STATS":
        return [] if v is None else _part_problems(v, "stats", writer)
    if f.type == "ROUNDS":
        if not isinstance(v, list):
            return [f"{f.name}: not a list"]
        return [p for x in v for p in _part_problems(x, "flush_round", writer)]
    return [] if _TYPES[f.type](v) else [f"{f.name}: {v!r} is not {f.type}"]


def _fields_problems(rec: dict, fields: tuple[Field, ...], writer: str, what: str) -> list[str]:
    mine = {f.name: f for f in fields if writer in f.writers}
    out = [f"{what}: {k} is not declared for the {writer}" for k in rec if k not in mine]
    for f in mine.values():
        if f.name in rec:
            out += _value_problems(rec[f.name], f, writer)
        elif not f.optional:
            out.append(f"{what}: {f.name} is missing")
    # the header's order: the ingest kernel's fast path and the loss tally's scans
    # read the shim's records by it
    order = [k for k in mine if k in rec]
    if not out and list(rec) != order:
        out.append(f"{what}: fields {list(rec)} not in the order {order}")
    return out


def problems(rec: dict, writer: str) -> list[str]:
    """What in record `rec`, written by `writer` (a value of WRITERS), the header does
    not allow: a kind or field it does not declare for that writer, a missing field,
    a value of another type, fields in another order. Empty for a record as declared."""
    kind = rec.get("k")
    if kind not in kinds():
        return [f"kind {kind!r} is not declared"]
    return _fields_problems(rec, common() + kinds()[kind], writer, kind)
