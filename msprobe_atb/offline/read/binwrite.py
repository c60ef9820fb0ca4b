"""Writing `.bin` tensor files (docs/msprobe_format.md §7, docs/contracts.md §6): the
header the shim writes, for the Python writers (the torch dumper, test and bench dumps).

The header is `key=value` lines ending with `$End=1`, then the raw payload. A stub
has no payload, `$Object.Count=0`, `$Object.Length=0` and `data=<alias>`
(offline/read/binfile.py reads both)."""

from __future__ import annotations

from collections.abc import Sequence

ND = 2  # aclFormat ND: the format of every tensor a Python writer has


def bin_header(length: int, dtype: int, dims: Sequence[int], fmt: int = ND,
               alias: str | None = None) -> bytes:
    """The header of a file with `length` payload bytes (ignored for a stub:
    `alias` set)."""
    head = [
        "$Version=1.0",
        f"$Object.Count={0 if alias is not None else 1}",
        f"$Object.Length={0 if alias is not None else length}",
        f"format={fmt}", f"dtype={dtype}", f"dims={','.join(map(str, dims))}",
    ]
    if alias is not None:
        head.append(f"data={alias}")
    else:
        head.append(f"$Object.data=0,{length}")
    head.append("$End=1")
    return ("\n".join(head) + "\n").encode()


def bin_bytes(payload: bytes, dtype: int, dims: Sequence[int], fmt: int = ND,
              alias: str | None = None) -> bytes:
    """A whole file: the header, then `payload` (nothing for a stub)."""
    if alias is not None:
        return bin_header(0, dtype, dims, fmt, alias)
    return bin_header(len(payload), dtype, dims, fmt) + payload
