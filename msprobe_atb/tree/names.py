"""Names and paths that are not UTF-8, as text (one form for every reader).

ATB hands names over as bytes. The record log carries an odd byte XY as the
surrogate escape \\udcXY, the CSVs and the file system hold the raw bytes. Text
that must be valid UTF-8 (Parquet strings, polars columns, what a reader prints
or writes) holds the *text form*: the bytes decoded as UTF-8, with each byte
that is not part of a UTF-8 character, and each backslash, written `\\xNN`. It
reads as the name does, and gives back exactly the bytes, so the file:

    text_of("1_Op\\udcff")  == "1_Op\\\\xff"       os_path("1_Op\\\\xff") == "1_Op\\udcff"
    text_of("a\\\\b")        == "a\\\\x5cb"         (a backslash, written \\x5c)

A name that is valid UTF-8 without a backslash is its own text form.
"""

from __future__ import annotations

import os
import re

_PLAIN = re.compile(r"[^\\\ud800-\udfff]*")
_RAW = re.compile(r"[\ud800-\udfff]")
_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})")
BACKSLASH = "\\x5c"


def raw_bytes(s: str) -> bytes:
    """A name or path as the record log holds it (odd bytes as surrogate escapes,
    see native/core/mechanisms/jsonw.h) as its raw bytes, which the CSVs hold, so
    that a Tensor Path names the file on disk."""
    return s.encode("utf-8", "surrogateescape")


def text_of_bytes(data: bytes) -> str:
    """Raw bytes (a name, a path, a whole CSV file) in the text form."""
    return BACKSLASH.join(p.decode("utf-8", "backslashreplace") for p in data.split(b"\\"))


def text_of(s: str) -> str:
    """A name or path as Python holds it (odd bytes as surrogate escapes) in the
    text form."""
    if _PLAIN.fullmatch(s):
        return s
    try:
        data = s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no byte made: kept as its bytes
        data = s.encode("utf-8", "surrogatepass")
    return text_of_bytes(data)


def os_path(text: str) -> str:
    """The text form back as the name or path the file system knows."""
    if "\\" not in text:
        return text
    parts = _ESCAPE.split(text)
    data = b"".join(bytes([int(p, 16)]) if i % 2 else p.encode("utf-8", "surrogateescape")
                    for i, p in enumerate(parts))
    return os.fsdecode(data)


def texts(obj, only_raw: bool = False):
    """Every string of a JSON document (keys too) in the text form; `only_raw`:
    only the strings that hold surrogate escapes (the others are text already)."""
    if isinstance(obj, str):
        return text_of(obj) if not only_raw or _RAW.search(obj) else obj
    if isinstance(obj, dict):
        return {texts(k, only_raw): texts(v, only_raw) for k, v in obj.items()}
    if isinstance(obj, list):
        return [texts(v, only_raw) for v in obj]
    return obj
