"""The torch dumper's record log: `.probe/records/<pid>-<start_ns>.jsonl`, one JSON
record per line as the shim writes it (contracts §4), so that one builder
(tree/builder.py) derives the CSVs, info/, markers and manifest of both dumps.

Each record is appended with a single write(2) after what it describes is on disk.
The log is created with O_EXCL below a `.probe` opened without following links."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from msprobe_atb.control.probefiles import probe_dir_fd

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class RecordLog:
    def __init__(self, dump_root: Path, pid: int, start_ns: int):
        self.name = f"{pid}-{start_ns}.jsonl"
        pfd = probe_dir_fd(dump_root)
        try:
            try:
                os.mkdir("records", 0o750, dir_fd=pfd)
            except FileExistsError:
                pass
            rfd = os.open("records", _DIR_FLAGS, dir_fd=pfd)
        finally:
            os.close(pfd)
        try:
            self.fd = os.open(self.name, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL
                              | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640, dir_fd=rfd)
        finally:
            os.close(rfd)
        self.path = Path(dump_root) / ".probe" / "records" / self.name

    def write(self, kind: str, **fields) -> None:
        rec = {"k": kind, "t": time.time_ns(), **fields}
        line = json.dumps(rec, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8", "surrogateescape") + b"\n"
        view = memoryview(line)
        while view:  # a regular file takes it in one write; a short one is continued
            view = view[os.write(self.fd, view):]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
