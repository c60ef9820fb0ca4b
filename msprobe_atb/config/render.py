"""Any value a config document can hold (YAML or JSON: dates, bytes, sets, huge
ints, self-references) as short text for a message: `show` a value, `key_text` a
mapping key, `type_name` what kind of value it is, in words."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

SHOW_MAX = 1000
SHOW_DEPTH = 20


def _digits(n: int) -> int:
    """Decimal digits of n, without converting it to a string."""
    n = abs(n)
    d = int((n.bit_length() - 1) * 0.30102999566398120) + 1 if n else 1
    return d + 1 if n >= 10 ** d else d


class _Shower:
    """Renders any value YAML or JSON can produce (dates, bytes, sets, huge ints,
    self-references) as JSON-like text, cut after SHOW_MAX characters, encoded
    lazily: YAML aliases can make a small file a huge value."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.size = 0
        self.path: set[int] = set()  # containers being rendered: a repeat is a cycle

    def emit(self, text: str) -> None:
        self.out.append(text)
        self.size += len(text)

    def full(self) -> bool:
        return self.size > SHOW_MAX

    def scalar(self, value: Any) -> str:
        if value is None or isinstance(value, bool):
            return json.dumps(value)
        if isinstance(value, int):
            if _digits(value) > 100:
                return f"(a number of {_digits(value)} digits)"
            return str(value)
        if isinstance(value, float):
            return repr(value)
        if isinstance(value, str):
            # backslashreplace: a lone surrogate must not break printing the message
            return json.dumps(value, ensure_ascii=False).encode(
                "utf-8", "backslashreplace").decode()
        if isinstance(value, (bytes, bytearray)):
            return f"(binary data of {len(value)} bytes)"
        if isinstance(value, (_dt.date, _dt.time)):
            return json.dumps(value.isoformat())
        return f"(a value of type {type(value).__name__})"

    def show(self, value: Any, depth: int = 0) -> None:
        if self.full():
            return
        if not isinstance(value, (dict, list, tuple, set, frozenset)):
            self.emit(self.scalar(value))
            return
        if id(value) in self.path:
            self.emit("(a value that contains itself)")
            return
        if depth >= SHOW_DEPTH:
            self.emit("[...]" if not isinstance(value, dict) else "{...}")
            return
        self.path.add(id(value))
        is_dict = isinstance(value, dict)
        self.emit("{" if is_dict else "[")
        for i, item in enumerate(value.items() if is_dict else value):
            if self.full():
                break
            if i:
                self.emit(", ")
            if is_dict:
                key, item = item
                self.emit(key_text(key, quoted=True) + ": ")
            self.show(item, depth + 1)
        self.emit("}" if is_dict else "]")
        self.path.discard(id(value))

    def text(self) -> str:
        joined = "".join(self.out)
        return joined[:SHOW_MAX] + "..." if len(joined) > SHOW_MAX else joined


def show(value: Any) -> str:
    """The value as JSON-like text for a message; never raises."""
    shower = _Shower()
    shower.show(value)
    return shower.text()


def key_text(key: Any, quoted: bool = False) -> str:
    """A mapping key for a message: YAML keys may be numbers, dates, null, ..."""
    if isinstance(key, str):
        text = key.encode("utf-8", "backslashreplace").decode()
        return f'"{text}"' if quoted else text
    return _Shower().scalar(key)


def type_name(value: Any) -> str:
    """What kind of value it is, in words ("a boolean", "a list", ...)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    if isinstance(value, _dt.datetime):
        return "a timestamp"
    if isinstance(value, _dt.date):
        return "a date"
    if isinstance(value, (bytes, bytearray)):
        return "binary data"
    if isinstance(value, (set, frozenset)):
        return "a set"
    return type(value).__name__
