"""Reading `.bin` tensor files (docs/msprobe_format.md §7, docs/contracts.md §6):
header, payload, alias stubs.

A `.bin` is a text header of `key=value` lines ending with `$End=1`, then the raw
payload. A dedup stub has `$Object.Count=0` and `data=<relative path of the real
file>`; msProbe's own stubs name the first occurrence by op id instead,
`data=<ids>_<intensor|outtensor><i>.bin` (docs/msprobe_format.md §5.4), which is
resolved in the stub's round dir: that op's `before/intensor<i>` or
`after/outtensor<i>`. A filter_level-2 kernel stub names itself in `data=`, meaning
the tensor was intentionally not saved. Every error names the file and what is
wrong.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from msprobe_atb.tree.datafile import open_data
from msprobe_atb.tree.names import text_of

from .confine import Confinement
from .dtypes import SPECS, DtypeSpec, dtype_name, format_name

MAX_HEADER = 64 * 1024  # a real header is ~120 bytes; anything longer is not a .bin
MAX_ALIAS_HOPS = 32
# msProbe's alias key: the op id path, then the tensor's file name without its
# `_{irName}` suffix, e.g. `5_0_outtensor0.bin`.
MSPROBE_KEY = re.compile(r"^(\d+(?:_\d+)*)_(intensor|outtensor)(\d+)\.bin$")
_OP_DIR = re.compile(r"^\d+_")


class BinFileError(ValueError):
    """A `.bin` file that cannot be read; the message names the file (in the text
    form of tree/names.py: it is printed, and goes into tables) and the problem."""

    def __init__(self, path: os.PathLike | str, problem: str):
        self.path = str(path)
        self.problem = text_of(problem)
        super().__init__(f"{text_of(self.path)}: {self.problem}")


class TensorNotSaved(BinFileError):
    """A filter_level-2 kernel stub: the probe chose not to save this tensor."""


@dataclass
class BinHeader:
    path: Path
    version: str
    object_count: int
    length: int  # payload bytes promised by $Object.Length
    dtype: int
    format: int
    dims: tuple[int, ...]
    data_offset: int  # absolute offset of the payload in the file
    alias: str | None = None  # the `data=` attribute of a stub
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def dtype_name(self) -> str:
        return dtype_name(self.dtype)

    @property
    def format_name(self) -> str:
        return format_name(self.format)

    @property
    def numel(self) -> int:
        return math.prod(self.dims)

    @property
    def is_stub(self) -> bool:
        return self.alias is not None

    @property
    def not_saved(self) -> bool:
        """A filter_level-2 stub that names itself: intentionally not saved."""
        return self.alias is not None and self.alias == self.path.name


def _int(path: Path, key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise BinFileError(path, f"header field {key}={value!r} is not an integer") from None


def read_header(path: os.PathLike | str) -> BinHeader:
    """Parse the header of one `.bin`; checks the payload size against the file size."""
    path = Path(path)
    try:
        with open_data(path) as f:
            head = f.read(MAX_HEADER)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise BinFileError(path, f"cannot open: {e.strerror}") from None
    if not head:
        raise BinFileError(path, "file is empty (0 bytes): the write never completed")
    if not head.startswith(b"$Version="):
        raise BinFileError(path, "does not start with '$Version=': not an ATB .bin tensor file")
    end = head.find(b"\n$End=")
    eol = head.find(b"\n", end + 1) if end >= 0 else -1
    if end < 0 or eol < 0:
        problem = ("header has no '$End=' line: the file is truncated inside its header"
                   if size < MAX_HEADER else "no '$End=' line in the first 64 KiB: not a .bin")
        raise BinFileError(path, problem)
    fields: dict[str, str] = {}
    objects: list[tuple[int, int]] = []
    for n, raw in enumerate(head[:end].split(b"\n"), start=1):
        line = raw.decode("utf-8", "replace")
        key, sep, value = line.partition("=")
        if not sep or not key:
            raise BinFileError(path, f"header line {n} {line!r} is not key=value")
        if key.startswith("$Object.") and key not in ("$Object.Count", "$Object.Length"):
            off, _, ln = value.partition(",")
            objects.append((_int(path, key, off), _int(path, key, ln)))
        else:
            fields[key] = value
    for key in ("$Object.Count", "$Object.Length", "dtype", "dims"):
        if key not in fields:
            raise BinFileError(path, f"header lacks the {key} field")
    dims_text = fields["dims"].strip()
    dims = tuple(_int(path, "dims", d) for d in dims_text.split(",")) if dims_text else ()
    if any(d < 0 for d in dims):
        raise BinFileError(path, f"negative dimension in dims={dims_text}")
    hdr = BinHeader(
        path=path, version=fields.get("$Version", ""),
        object_count=_int(path, "$Object.Count", fields["$Object.Count"]),
        length=_int(path, "$Object.Length", fields["$Object.Length"]),
        dtype=_int(path, "dtype", fields["dtype"]), format=_int(path, "format",
                                                                 fields.get("format", "-1")),
        dims=dims, data_offset=eol + 1, alias=fields.get("data"),
        attrs={k: v for k, v in fields.items() if not k.startswith("$")},
    )
    if hdr.alias is not None:
        if hdr.object_count != 0 or hdr.length != 0:
            raise BinFileError(path, f"stub (data={hdr.alias}) also claims "
                                     f"{hdr.object_count} object(s) of {hdr.length} bytes")
        return hdr
    if hdr.object_count != 1:
        raise BinFileError(path, f"$Object.Count={hdr.object_count} without a data= alias; "
                                 "only single-object files are written by the probe")
    if objects:
        hdr.data_offset += objects[0][0]
    have = size - hdr.data_offset
    if have < hdr.length:
        raise BinFileError(path, f"file is truncated: the header promises {hdr.length} payload "
                                 f"bytes, the file holds {have}")
    if have > hdr.length:
        raise BinFileError(path, f"{have - hdr.length} unexpected bytes after the "
                                 f"{hdr.length}-byte payload (two records appended to one file?)")
    return hdr


def _round_dir(stub: BinHeader) -> Path:
    """The first ancestor above `before/`/`after/` that is not an op dir (`{id}_{Name}`)."""
    rnd = stub.path.parent.parent
    while _OP_DIR.match(rnd.name) and rnd.parent != rnd:
        rnd = rnd.parent
    return rnd


def _by_op_id(stub: BinHeader) -> Path | None:
    """The file an msProbe alias key names, or None if `stub.alias` is no such key.
    The key's ids are followed down from the round dir, one op dir each."""
    m = MSPROBE_KEY.match(stub.alias or "")
    if not m:
        return None
    ids, kind, idx = m.groups()
    d = _round_dir(stub)
    for i in ids.split("_"):
        sub = sorted(p for p in d.iterdir() if p.is_dir() and p.name.startswith(i + "_"))
        if not sub:
            raise BinFileError(stub.path, f"alias stub data={stub.alias} names op {ids}, "
                                          f"but {d} has no op dir {i}_<Name>")
        d = sub[0]
    stages = ("before", "after") if kind == "intensor" else ("after", "before")
    for st in stages:
        for name in (f"{kind}{idx}.bin", *sorted(p.name for p in (d / st).glob(
                f"{kind}{idx}_*.bin"))):
            if (d / st / name).is_file():
                return (d / st / name).resolve()
    raise BinFileError(stub.path, f"alias stub data={stub.alias} names {kind}{idx} of op {ids}, "
                                  f"but {d} has no {stages[0]}/{kind}{idx}.bin")


def resolve(path: os.PathLike | str) -> BinHeader:
    """The header of the file holding the data: alias stubs are followed."""
    hdr = read_header(path)
    # Loops are found on normalised paths (no realpath: it costs more than the
    # header read); a loop through symlinks still ends at MAX_ALIAS_HOPS.
    seen = {os.path.normpath(os.path.abspath(path))}
    while hdr.is_stub:
        if hdr.not_saved:
            raise TensorNotSaved(hdr.path, "filter_level-2 stub: this kernel tensor was "
                                           "intentionally not saved (data= names the stub itself)")
        target = Path(os.path.normpath(os.path.join(os.path.abspath(hdr.path.parent),
                                                    hdr.alias)))
        if not target.is_file():
            target = _by_op_id(hdr) or target
        if str(target) in seen:
            raise BinFileError(path, f"alias loop through {target}")
        if len(seen) > MAX_ALIAS_HOPS:
            raise BinFileError(path, f"more than {MAX_ALIAS_HOPS} alias hops")
        if not target.is_file():
            raise BinFileError(hdr.path, f"alias stub points to {hdr.alias} ({target}), "
                                         "which does not exist")
        # a stub shares the data of a tensor of its own round (confine.py)
        rnd = _round_dir(hdr)
        inside = Confinement(rnd).allows(target)
        if inside is None:
            raise BinFileError(hdr.path, f"alias stub data={hdr.alias} leads to {target}, "
                                         f"outside its round dir {rnd}; refused")
        target = Path(inside)
        seen.add(str(target))
        stub = hdr.path
        try:
            hdr = read_header(target)
        except BinFileError as e:
            raise BinFileError(stub, f"alias target {e.path}: {e.problem}") from None
    return hdr


def payload_spec(hdr: BinHeader) -> DtypeSpec:
    """The dtype spec of a resolved (non-stub) header, after checking that the
    payload size fits its dims; raises BinFileError naming the problem."""
    spec = SPECS.get(hdr.dtype)
    if spec is None:
        raise BinFileError(hdr.path, f"unknown dtype code {hdr.dtype}; use raw bytes "
                                     "(numpy.fromfile with the header's offset)")
    n = hdr.numel
    if hdr.dtype != 13 and hdr.length not in spec.nbytes(n):  # string: raw bytes, no shape
        raise BinFileError(hdr.path, f"payload of {hdr.length} bytes does not fit dims="
                                     f"{','.join(map(str, hdr.dims))} of dtype {spec.name} "
                                     f"(expected {' or '.join(map(str, spec.nbytes(n)))} bytes; "
                                     f"format {hdr.format_name})")
    return spec


def load_payload(hdr: BinHeader, raw: bool = False) -> np.ndarray:
    """Decode the payload of a resolved (non-stub) header into an array of `hdr.dims`."""
    spec = payload_spec(hdr)
    with open_data(hdr.path) as f:
        f.seek(hdr.data_offset)
        buf = np.frombuffer(f.read(hdr.length), dtype=np.uint8)
    if hdr.dtype == 13:  # string: raw bytes, no element shape
        return buf
    arr = spec.decode(buf, hdr.numel, raw)
    if raw and hdr.dtype in (29, 30):  # raw int4/uint1 stay packed bytes
        return arr
    try:
        return arr.reshape(hdr.dims)
    except ValueError as exc:  # numpy's limits, e.g. at most 64 dimensions
        raise BinFileError(hdr.path, f"its {len(hdr.dims)} dimensions cannot be held by a "
                                     f"numpy array ({exc}); the payload ({hdr.length} bytes at "
                                     f"offset {hdr.data_offset}) can be read flat with "
                                     "numpy.fromfile") from None


def load_bin(path: os.PathLike | str, raw: bool = False) -> np.ndarray:
    """Load one `.bin` as a numpy array, following alias stubs.

    bf16/fp8/fp6/fp4 decode to float32 unless `raw` (then the bit patterns);
    int4/uint1 are unpacked unless `raw` (then the packed bytes)."""
    return load_payload(resolve(path), raw=raw)
