"""The last good config, kept beside the control block in
`.probe/last_good_config.json`, so that it stays in force across restarts of the
control plane: a daemon that starts (after a crash, a kill -9, a new session) and
finds the config file rejected publishes this one, not "asleep".

It holds the accepted file's text and path; it is re-validated when read, and
written like the derived files (fsio: a temporary created with O_EXCL and
O_NOFOLLOW in directories opened without following links, then renamed).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from msprobe_atb.config.filecheck import FileRefused, open_config
from msprobe_atb.config.loader import MAX_CONFIG_BYTES, load_bytes
from msprobe_atb.config.schema import Config, ConfigError
from msprobe_atb.tree import fsio

log = logging.getLogger("msprobe_atb")
NAME = "last_good_config.json"


def save(dump_root: Path, config_path: Path, data: bytes) -> None:
    """Keeps `data`, just accepted from `config_path`; a failure is logged only."""
    body = json.dumps({"config": os.fsdecode(config_path), "text": data.decode()}).encode()
    try:
        fsio.write_files(dump_root, [((".probe", NAME), body)])
    except (OSError, fsio.UnsafePath) as exc:
        log.warning("cannot keep the last good config in .probe/%s (%s); a restarted "
                    "control plane will not know it", NAME, exc)


def remove(dump_root: Path) -> None:
    """The config file is gone (asleep): a restarted daemon must not revive it."""
    try:
        fsio.remove_file(dump_root, (".probe", NAME))
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
