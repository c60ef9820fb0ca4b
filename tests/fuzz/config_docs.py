"""Hypothesis strategies for hostile config files, as bytes with a file name.

Documents are mostly objects with the real keys, so that most inputs reach the
validators, holding values chosen to break them: integers of thousands of
digits, NaN, digit strings, lone surrogates, deep and self-referencing
structures, and for YAML its own scalars (dates, timestamps, !!binary, !!set,
octal, sexagesimal, anchors, merge keys). Each document is written by a small
serializer of our own (the standard ones refuse huge integers and cannot write
YAML tags), then sometimes damaged at the byte level.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import strategies as st

from msprobe_atb.config.schema import DEFAULTS


@dataclass(frozen=True)
class Raw:
    """Text written into the document verbatim (a JSON or YAML literal)."""

    text: str


KEYS = [*DEFAULTS, "overflow_nums", "check_mode", "_comment", "dump_enabled", "Task", "", "1"]
GOOD = {
    "task": ["tensor", "statistics", "all", "overflow_check", ""],
    "dump_enable": [True, False],
    "exec_range": ["all", "none", "0,0", "0,2", "0,2,5,6", "3", " 1 , 4 ", ""],
    "ids": ["", "2", "2_1", "0,2_1", "1,2,3"],
    "op_name": ["", "word", "word,linear", "Linear"],
    "save_child": [True, False],
    "device": ["", "0", "0,1", "3,3"],
    "filter_level": [0, 1, 2],
    "overflow_check": [{"overflow_nums": 1, "check_mode": "all"}, {"overflow_nums": -1},
                       {"check_mode": "nan", "probe_scan": True}, {"probe_scan": True}],
    "queue_budget_mb": [1, 4, 1024, 1 << 20],
    "queue_full_policy": ["block", "drop"],
}

# Literals a serializer would never produce: each one has broken a validator somewhere.
JSON_LITERALS = ["NaN", "Infinity", "-Infinity", "1e400", "-0", "1.0", '"\\udcff"',
                 '"\\ud800x"', '"\\u0000"', "1" * 4301, "-" + "9" * 5000, "0." + "1" * 5000]
YAML_LITERALS = [
    "2020-01-01", "2001-12-14t21:59:43.10-05:00", "2020-13-45", "0000-01-01",
    "!!binary aGVsbG8=", "!!set {a, b}", "!!timestamp 2020-01-01", "!!float 1e400", "!!int 1",
    "!!str 1", "!!null ''", "!!bool 'x'", ".nan", ".inf", "-.inf", "~", "yes", "no", "on",
    "0o17", "0x1f", "017", "1_000", "1:20:30", "0b101", "'\\udcff'", '"\\ud800"', "&s [*s]",
    "&m {k: *m}", "&x [1, &y [*x, *y]]", "!!python/object:os.system 'id'", "!!omap [a: 1]",
    "!!pairs [a: 1]", "[" * 300 + "]" * 300, "1" * 5000, "-" + "1" * 4400, "? [a]\n: 1",
]


def _big_digits() -> st.SearchStrategy[str]:
    return st.integers(min_value=18, max_value=6000).map(lambda n: "1" + "0" * n)


def _numeric_text() -> st.SearchStrategy[str]:
    token = st.one_of(st.integers(0, 2**70).map(str), _big_digits(), st.sampled_from(
        ["", " ", "-1", "1.5", "x", "1e3", "٣", "²", "0x10", "9" * 19, "9" * 20]))
    sep = st.sampled_from([",", ", ", " ,", ",,", ";", "_"])
    return st.lists(st.tuples(token, sep), max_size=40).map(
        lambda parts: "".join(t + s for t, s in parts).rstrip(",; _"))


def _text() -> st.SearchStrategy[str]:
    return st.one_of(
        _numeric_text(), st.text(max_size=40), st.text(max_size=300),
        st.sampled_from(["all", "none", "ALL", " all", "true", "True", "tensors", "statistic"]),
        st.integers(1, 200).map(lambda n: "a" * n + ",b" * (n % 7)),
    )


def _scalar(yaml_format: bool) -> st.SearchStrategy:
    literals = YAML_LITERALS if yaml_format else JSON_LITERALS
    return st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70),
        _big_digits().map(Raw), st.floats(allow_nan=True, allow_infinity=True), _text(),
        st.sampled_from(literals).map(Raw),
    )


def _value(yaml_format: bool) -> st.SearchStrategy:
    return st.recursive(
        _scalar(yaml_format),
        lambda inner: st.one_of(
            st.lists(inner, max_size=5),
            st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), inner,
                            max_size=5)),
        max_leaves=12,
    )


def _field(yaml_format: bool) -> st.SearchStrategy[tuple[object, object]]:
    good = st.sampled_from([(k, v) for k in sorted(GOOD) for v in GOOD[k]])
    key = st.one_of(st.sampled_from(KEYS), st.text(max_size=10), st.integers().map(str))
    wild = st.tuples(key, _value(yaml_format))
    if yaml_format:  # YAML keys need not be strings
        wild = st.one_of(wild, st.tuples(st.sampled_from(YAML_LITERALS[:16]).map(Raw),
                                         _value(True)))
    return st.one_of(good, good, wild)


def _document(yaml_format: bool) -> st.SearchStrategy:
    obj = st.lists(_field(yaml_format), max_size=12)
    return st.one_of(obj, obj, obj, _value(yaml_format).map(lambda v: [("__top__", v)]))


# Built once: a strategy made inside a draw is validated again at every draw.
DOCUMENTS = {False: _document(False), True: _document(True)}


# ---- serializers: JSON text, and YAML flow values under a block mapping ----
def json_value(v: object) -> str:
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json_key(k)}: {json_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(json_value(x) for x in v) + "]"
    if isinstance(v, str):
        return json.dumps(v)  # ensure_ascii: lone surrogates become escapes
    if isinstance(v, float) and v != v:
        return "NaN"
    return json.dumps(v)


def json_key(k: object) -> str:
    return json.dumps(k if isinstance(k, str) else json_value(k))


def yaml_value(v: object) -> str:
    # JSON is (nearly) YAML's flow syntax; YAML adds the Raw literals above.
    if isinstance(v, dict):
        return "{" + ", ".join(f"{yaml_key(k)}: {yaml_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(yaml_value(x) for x in v) + "]"
    if isinstance(v, float) and v != v:
        return ".nan"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return ".inf" if v > 0 else "-.inf"
    return json_value(v)


def yaml_key(k: object) -> str:
    return k.text if isinstance(k, Raw) else json.dumps(k if isinstance(k, str) else str(k))


def render(fields: list[tuple[object, object]], yaml_format: bool) -> str:
    if fields and fields[0][0] == "__top__":
        return (yaml_value if yaml_format else json_value)(fields[0][1])
    if yaml_format:
        return "".join(f"{yaml_key(k)}: {yaml_value(v)}\n" for k, v in fields)
    return "{" + ", ".join(f"{json_key(k)}: {json_value(v)}" for k, v in fields) + "}"


@st.composite
def _damaged(draw, data: bytes) -> bytes:
    """Truncates, overwrites or inserts bytes: syntax errors and bad UTF-8."""
    if not data:
        return data
    at = draw(st.integers(0, len(data)))
    how = draw(st.sampled_from(["cut", "put", "insert"]))
    junk = draw(st.binary(min_size=1, max_size=4))
    if how == "cut":
        return data[:at]
    if how == "put":
        return data[:at] + junk + data[at + len(junk):]
    return data[:at] + junk + data[at:]


@st.composite
def config_files(draw) -> tuple[str, bytes]:
    """(file name, content): a JSON or YAML config, hostile in most fields."""
    yaml_format = draw(st.booleans())
    name = draw(st.sampled_from(["config.yaml", "config.yml"] if yaml_format
                                else ["config.json", "config"]))
    data = render(draw(DOCUMENTS[yaml_format]), yaml_format).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:
        data = draw(_damaged(data))
    return name, data


def placed_config_files(placements: list[str]) -> st.SearchStrategy[tuple[str, bytes, str]]:
    """(file name, content, placement): most files private, some placed unsafely."""
    return st.tuples(config_files(), st.sampled_from(placements)).map(
        lambda t: (*t[0], t[1]))
