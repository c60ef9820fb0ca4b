"""The control plane never blocks on a file it opens: a FIFO planted where it
reads a statistic.csv back, or at a process's statistics channel in /dev/shm, is
not read (opening one without O_NONBLOCK waits for a writer that never comes).
The golden trigger's files: tests/control/test_golden_trigger_files.py."""

from __future__ import annotations

import os

from msprobe_atb.recorder.channel import Channel, channel_path
from msprobe_atb.tree import fsio


def test_a_fifo_in_place_of_a_statistic_csv_is_not_read(tmp_path):
    rnd = tmp_path / "data" / "0_1" / "0"
    rnd.mkdir(parents=True)
    os.mkfifo(rnd / "statistic.csv")
    (rnd / "statistic_extra.csv").write_text("Sequence\n")
    assert fsio.read_file(tmp_path, ("data", "0_1", "0", "statistic.csv")) is None
    assert fsio.read_file(tmp_path, ("data", "0_1", "0", "statistic_extra.csv")) == b"Sequence\n"


def test_a_fifo_at_a_statistics_channel_is_not_read():
    pid, start_ns = 2**22 + os.getpid(), 1  # no live process has this key
    path = channel_path(pid, start_ns)
    os.mkfifo(path)
    try:
        assert Channel(pid, start_ns).read() == []
    finally:
        os.unlink(path)
