"""The last good config, kept beside the control block in
`.probe/last_good_config.json`, so that it stays in force across restarts of the
control plane: a daemon that starts (after a crash, a kill -9, a new session) and
finds the config file rejected publishes this one, not "asleep".

It holds the accepted file's text and path; it is re-validated when read, and
written like every file under .probe: a temporary name created with O_EXCL and
O_NOFOLLOW in the verified directory, then renamed.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from msprobe_atb.config.filecheck import FileRefused, open_config
from msprobe_atb.config.loader import MAX_CONFIG_BYTES, load_bytes
from msprobe_atb.config.schema import Config, ConfigError

log = logging.getLogger("msprobe_atb")
NAME = "last_good_config.json"


def _probe_dir(dump_root: Path) -> int:
    return os.open(Path(dump_root) / ".probe", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                   | os.O_CLOEXEC)


def save(dump_root: Path, config_path: Path, data: bytes) -> None:
    """Keeps `data`, just accepted from `config_path`; a failure is logged only."""
    body = json.dumps({"config": os.fsdecode(config_path), "text": data.decode()}).encode()
    tmp = f".{NAME}.{os.getpid()}.tmp"
    try:
        d = _probe_dir(dump_root)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=d)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(body)
                    f.flush()
                    os.fsync(f.fileno())
                os.rename(tmp, NAME, src_dir_fd=d, dst_dir_fd=d)
            except BaseException:
                os.unlink(tmp, dir_fd=d)
                raise
        finally:
            os.close(d)
    except OSError as exc:
        log.warning("cannot keep the last good config in .probe/%s (%s); a restarted "
                    "control plane will not know it", NAME, exc)


def remove(dump_root: Path) -> None:
    """The config file is gone (asleep): a restarted daemon must not revive it."""
    try:
        d = _probe_dir(dump_root)
        try:
            os.unlink(NAME, dir_fd=d)
        finally:
            os.close(d)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot remove .probe/%s: %s", NAME, exc)


def load(dump_root: Path, config_path: Path) -> Config | None:
    """The config kept by an earlier daemon for the same config file, or None."""
    path = Path(dump_root) / ".probe" / NAME
    try:
        fd = open_config(path)  # ours: not a link, nobody else can write it
        with os.fdopen(fd, "rb") as f:
            kept = json.loads(f.read(4 * MAX_CONFIG_BYTES + 1024))
        if kept.get("config") != os.fsdecode(config_path):
            return None
        return load_bytes(kept["text"].encode(), config_path)
    except FileNotFoundError:
        return None
    except FileRefused as exc:
        log.warning("ignoring %s: it %s", path, exc.problem)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ConfigError) as exc:
        log.warning("ignoring %s: %s", path, exc)
    return None
