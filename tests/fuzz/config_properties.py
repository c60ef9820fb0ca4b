"""What must hold for every config file, checked on the two paths a config takes:

* offline: `msprobe-atb check FILE` (load_config and the command's printing),
  exit 0 (valid) or 1 (rejected, with a message), never 3 (crashed);
* the daemon: its config check (watcher and Controller) on a real control block
  publishes a valid file, and otherwise records the rejection in the block while
  the last good config stays in force.

Each file is placed as drawn: private, group- or other-writable, or a symlink to
a private copy; the last three must be refused whatever they hold.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
from pathlib import Path

from msprobe_atb.config import cli as check_cli
from msprobe_atb.config.compile import compile_config
from msprobe_atb.config.loader import load_bytes
from msprobe_atb.config.schema import Config, ConfigError
from msprobe_atb.control.block import ControlBlock
from msprobe_atb.daemon.service import Daemon

UNSAFE = {"0664": "chmod go-w", "0606": "chmod go-w", "link": "is a symbolic link"}
PLACEMENTS = ["0600", "0644", *UNSAFE]


def place(path: Path, data: bytes, placement: str) -> None:
    """Writes the config at path as drawn (replacing whatever was there)."""
    real = path.with_name(f"real-{path.name}") if placement == "link" else path
    if path.is_symlink() or path.exists():
        path.unlink()
    real.write_bytes(data)
    real.chmod(0o600 if placement == "link" else int(placement, 8))
    if placement == "link":
        path.symlink_to(real.name)


def expect(data: bytes, name: str) -> Config | ConfigError:
    """The validation outcome; anything but a Config or a ConfigError is a finding."""
    try:
        return load_bytes(data, name)
    except ConfigError as exc:
        assert exc.problems and all(isinstance(p, str) and p for p in exc.problems), exc.problems
        for p in exc.problems:
            p.encode("utf-8")  # printable on a UTF-8 console and storable in the block
        return exc


def expect_placed(data: bytes, path: Path, placement: str) -> Config | ConfigError | str:
    """As expect(), or the text the refusal of an unsafe placement must contain."""
    outcome = expect(data, str(path))
    return UNSAFE.get(placement, outcome)


class OfflineCheck:
    """`msprobe-atb check FILE` on a real file, its output through a strict UTF-8 stream."""

    def __init__(self, workdir: Path):
        self.workdir = workdir

    def __call__(self, name: str, data: bytes, placement: str) -> None:
        path = self.workdir / name
        place(path, data, placement)
        outcome = expect_placed(data, path, placement)
        out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
        err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = check_cli.run(argparse.Namespace(config=str(path), json=False))
            out.flush()
            err.flush()
        want = check_cli.VALID if isinstance(outcome, Config) else check_cli.REJECTED
        said = err.buffer.getvalue().decode()
        assert rc == want, f"check exited {rc}, expected {want}: {said[-2000:]!r}"
        assert not isinstance(outcome, str) or outcome in said, said[-2000:]


class _Errors(logging.Handler):
    """Collects log records that carry a traceback: the daemon hit a bug."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.tracebacks: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.tracebacks.append(self.format(record))


class DaemonValidation:
    """The daemon's config check (Daemon.check_config: watcher, then Controller) on
    a real control block, one daemon per config file name (JSON or YAML by name)."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.daemons: dict[str, Daemon] = {}
        self.errors = _Errors()
        log = logging.getLogger("msprobe_atb")
        log.addHandler(self.errors)
        log.propagate = False  # rejections are logged as errors: expected, not printed

    def daemon(self, name: str) -> Daemon:
        if name not in self.daemons:
            d = self.workdir / name.replace(".", "_")
            d.mkdir()
            block = ControlBlock(d / "atb_dump_data", create=True)
            self.daemons[name] = Daemon(d / "atb_dump_data", block, d / name)
        return self.daemons[name]

    def __call__(self, name: str, data: bytes, placement: str) -> None:
        daemon = self.daemon(name)
        block, c = daemon.block, daemon.controller
        before = block.read_config()[1] if c.published is not None else None
        place(c.config_path, data, placement)
        outcome = expect_placed(data, c.config_path, placement)
        daemon.check_config(settle=False)
        assert not self.errors.tracebacks, self.errors.tracebacks.pop()
        _, now = block.read_config()
        if isinstance(outcome, Config):
            assert block.error == "", block.error
            assert now == compile_config(outcome)
            return
        assert block.error, "a rejected config left no error in the block"
        assert "internal error" not in block.error, block.error
        assert not isinstance(outcome, str) or outcome in block.error, block.error
        if before is not None:
            assert now == before, "a rejected config changed the published one"

    def close(self) -> None:
        logging.getLogger("msprobe_atb").removeHandler(self.errors)
        for d in self.daemons.values():
            d.block.close()


PROPERTIES = {"check": OfflineCheck, "daemon": DaemonValidation}
