"""The config watcher asks the kernel for edits only: the daemon opens the
entries of the config's directory thousands of times a second when the config
sits beside its dump (`--config=$PWD/dump/config.json`, as the README does), and
each open or read reported would wake a watchdog thread that takes the GIL from
the daemon's work (a quarter of its CPU over a backlog)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from testkit import wait_until

from msprobe_atb.daemon.watcher import ConfigWatcher

IN_ACCESS, IN_CLOSE_NOWRITE, IN_OPEN = 0x1, 0x10, 0x20
IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x2, 0x8, 0x80, 0x100


def _inotify_masks() -> list[int]:
    """The masks of this process's inotify watches, as the kernel holds them."""
    masks = []
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            text = Path(f"/proc/self/fdinfo/{fd}").read_text()
        except OSError:
            continue
        masks += [int(line.split("mask:")[1].split()[0], 16)
                  for line in text.splitlines() if line.startswith("inotify wd:")]
    return masks


def test_the_watch_asks_for_edits_not_for_opens_and_reads(tmp_path):
    config = tmp_path / "config.json"
    config.write_text("{}")
    (tmp_path / "atb_dump_data").mkdir()
    before = _inotify_masks()
    watcher = ConfigWatcher(config, poll_s=60.0, use_events=True, wake=threading.Event())
    watcher.start_events()
    try:
        masks = _inotify_masks()[len(before):]
        assert len(masks) == 1, masks
        mask = masks[0]
        assert not mask & (IN_ACCESS | IN_OPEN | IN_CLOSE_NOWRITE), hex(mask)
        assert mask & IN_MODIFY and mask & IN_CLOSE_WRITE and mask & IN_MOVED_TO, hex(mask)
        assert mask & IN_CREATE, hex(mask)
        # and an edit by rename, as editors save, is still seen
        watcher._changed.clear()
        tmp = tmp_path / "config.json.tmp"
        tmp.write_text('{"dump_enable": true}')
        os.rename(tmp, config)
        wait_until(watcher._changed.is_set, timeout=10, what="the rename's event")
    finally:
        watcher.stop()
