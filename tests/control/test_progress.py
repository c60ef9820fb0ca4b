"""`.probe/built.json` (tree/progress.py): a version overwritten in place on a full
disk is never read half done, and one that finds no room for a new file still
replaces the old one."""

from __future__ import annotations

import errno

import pytest

from msprobe_atb.tree import fsio, progress
from msprobe_atb.tree.progress import Progress


def _root(tmp_path):
    (tmp_path / ".probe").mkdir()
    return tmp_path


def test_a_half_overwritten_file_is_not_read(tmp_path):
    root = _root(tmp_path)
    progress.write(root, Progress(1, "abc", {"1-2.jsonl": 12399}, []))
    path = progress.path_of(root)
    assert progress.read(root).offsets == {"1-2.jsonl": 12399}
    # the first bytes of the next version (12400) over the rest of this one: valid
    # JSON that claims more than was ever built
    path.write_bytes(path.read_bytes().replace(b"12399", b"12499"))
    assert progress.read(root) is None


def test_no_room_for_a_new_file_overwrites_in_place(tmp_path, monkeypatch):
    root = _root(tmp_path)
    progress.write(root, Progress(1, "abc", {"1-2.jsonl": 10}, []))

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fsio, "write_files", full)
    unwritten = {"files": 2, "csv_rows": 7, "names": ["data/0_1/0/statistic.csv"],
                 "reason": "No space left on device"}
    progress.write(root, Progress(1, "abc", {"1-2.jsonl": 99}, ["1-2.jsonl"], unwritten))
    got = progress.read(root)
    assert got.offsets == {"1-2.jsonl": 99} and got.unwritten == unwritten
    assert "7 rows are missing from statistic.csv" in progress.unwritten_text(got.unwritten)


def test_other_errors_are_not_hidden(tmp_path, monkeypatch):
    root = _root(tmp_path)

    def denied(*_a, **_k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(fsio, "write_files", denied)
    with pytest.raises(PermissionError):
        progress.write(root, Progress(1))
