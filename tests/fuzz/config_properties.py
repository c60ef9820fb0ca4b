"""What must hold for every config file, checked on the two paths a config takes:

* offline: `msprobe-atb check FILE` (load_config and the command's printing),
  exit 0 (valid) or 1 (rejected, with a message), never 3 (crashed);
* the daemon: the Controller on a real control block, fed the file's bytes as
  the watcher does, publishes it if valid, and otherwise records the rejection
  in the block while the last good config stays in force.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
from pathlib import Path

from msprobe_atb.config import cli as check_cli
from msprobe_atb.config.loader import load_bytes
from msprobe_atb.config.schema import Config, ConfigError, compile_config
from msprobe_atb.control.block import ControlBlock
from msprobe_atb.daemon.controller import Controller


def expect(data: bytes, name: str) -> Config | ConfigError:
    """The validation outcome; anything but a Config or a ConfigError is a finding."""
    try:
        return load_bytes(data, name)
    except ConfigError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems), exc.problems
        for p in exc.problems:
            p.encode("utf-8")  # printable on a UTF-8 console and storable in the block
        return exc


class OfflineCheck:
    """`msprobe-atb check FILE` on a real file, its output through a strict UTF-8 stream."""

    def __init__(self, workdir: Path):
        self.workdir = workdir

    def __call__(self, name: str, data: bytes) -> None:
        path = self.workdir / name
        path.write_bytes(data)
        path.chmod(0o600)
        outcome = expect(data, str(path))
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
        err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = check_cli.run(argparse.Namespace(config=str(path), json=False))
            out.flush()
            err.flush()
        want = check_cli.VALID if isinstance(outcome, Config) else check_cli.REJECTED
        assert rc == want, f"check exited {rc}, expected {want}: {err.buffer.getvalue()[-2000:]!r}"


class _Errors(logging.Handler):
    """Collects log records that carry a traceback: the daemon hit a bug."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.tracebacks: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.tracebacks.append(self.format(record))


class DaemonValidation:
    """The daemon's Controller publishing into a real control block."""

    def __init__(self, workdir: Path):
        self.block = ControlBlock(workdir / "atb_dump_data", create=True)
        self.errors = _Errors()
        log = logging.getLogger("msprobe_atb")
        log.addHandler(self.errors)
        log.propagate = False  # rejections are logged as errors: expected, not printed
        self.controller = Controller(self.block, Path(workdir / "config.json"))

    def __call__(self, name: str, data: bytes) -> None:
        c = self.controller
        c.config_path = c.config_path.with_name(name)
        before = self.block.read_config()[1] if c.published is not None else None
        outcome = expect(data, str(c.config_path))
        c.apply(data)
        assert not self.errors.tracebacks, self.errors.tracebacks.pop()
        _, now = self.block.read_config()
        if isinstance(outcome, Config):
            assert self.block.error == "", self.block.error
            assert now == compile_config(outcome)
        else:
            assert self.block.error, "a rejected config left no error in the block"
            assert "internal error" not in self.block.error, self.block.error
            if before is not None:
                assert now == before, "a rejected config changed the published one"

    def close(self) -> None:
        logging.getLogger("msprobe_atb").removeHandler(self.errors)
        self.block.close()


PROPERTIES = {"check": OfflineCheck, "daemon": DaemonValidation}
