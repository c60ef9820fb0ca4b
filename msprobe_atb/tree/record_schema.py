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
