"""The tree's commit points under failing I/O, SQLite's way: for every k, the k-th
write, rename or fsync that a round's files or the manifest make fails, as an
error (the builder goes on) or as a crash (nothing runs after it). After each,
the tree reads back consistent: every round with a marker has its whole CSV pair
(the rows the marker counts, as a clean build writes them), every visible
manifest file reads; and a restart (`rebuild`) makes it whole."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from offline_helpers import make_real_dump, need_real
from testkit import DERIVED, csv_row_count, derived_files, manifest_rows

from msprobe_atb.tree.drain import rebuild
from msprobe_atb.tree.fsio import sweep_stale_temps
from msprobe_atb.tree.manifest import ManifestWriter
from msprobe_atb.tree.rounddir import MARKER, RoundDir, commit_markers

# The files that make the calls counted: a round's CSV pair and marker, the manifest.
COMMITTERS = {"rounddir.py", "manifest.py"}
CALLS = ("write", "rename", "fsync", "fdatasync")
MODEL = ["--layers", "1", "--hidden", "32", "--heads", "2", "--vocab", "64", "--prompt-len", "4",
         "--decode-steps", "2", "--requests", "2"]


class Crash(BaseException):
    """The process dies here: no handler of the builder's runs."""


class FailingCalls:
    """Fails the k-th of the os calls CALLS made (through any depth) by COMMITTERS."""

    def __init__(self, k: int, crash: bool):
        self.k, self.crash, self.count = k, crash, 0

    def wrap(self, real):
        def call(*args, **kwargs):
            if self._counted():
                self.count += 1
                if self.count == self.k:
                    if self.crash:
                        raise Crash
                    raise OSError(errno.EIO, os.strerror(errno.EIO))
            return real(*args, **kwargs)

        return call

    @staticmethod
    def _counted() -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            if Path(frame.f_code.co_filename).name in COMMITTERS:
                return True
            frame = frame.f_back
        return False


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    need_real()
    return make_real_dump(tmp_path_factory.mktemp("commit") / "ref", "fp16", task="statistics",
                          model=MODEL) / "atb_dump_data"


def strip_derived(root: Path) -> None:
    """Removes what a build derives (CSVs, markers, info/, manifest/, built.json)."""
    for path in [*root.glob("data/*/*/*"), *(root / d for d in ("info", "manifest"))]:
        if path.name in DERIVED:
            path.unlink()
        elif path.name in ("info", "manifest"):
            shutil.rmtree(path, ignore_errors=True)
    (root / ".probe" / "built.json").unlink(missing_ok=True)


def assert_consistent(root: Path, ref: Path) -> None:
    for marker in root.glob("data/*/*/ROUND_COMPLETE.json"):
        rows = json.loads(marker.read_text())["rows"]
        rnd = marker.parent
        for name in ("statistic.csv", "statistic_extra.csv"):
            assert csv_row_count(rnd / name) == rows, f"{rnd / name}: not the marker's {rows} rows"
            relative = rnd.relative_to(root) / name
            assert (rnd / name).read_bytes() == (ref / relative).read_bytes(), relative
    parts = root.glob("manifest/host=*/device=*/pid=*/*")
    if [p for p in parts if not p.name.startswith(".")]:
        manifest_rows(root)  # every visible part reads


@pytest.mark.parametrize("crash", [False, True], ids=["error", "crash"])
def test_every_failing_call_leaves_a_consistent_tree(reference, tmp_path, monkeypatch, crash):
    ref_files, ref_rows = derived_files(reference), manifest_rows(reference)
    # What the calls do on disk is not in question here, only their order: no waits
    monkeypatch.setattr(os, "fsync", lambda _fd: None)
    monkeypatch.setattr(os, "fdatasync", lambda _fd: None)
    root = tmp_path / "dump"
    shutil.copytree(reference, root)
    k = 0
    while True:
        k += 1
        strip_derived(root)
        failing = FailingCalls(k, crash)
        with monkeypatch.context() as m:
            for name in CALLS:
                m.setattr(os, name, failing.wrap(getattr(os, name)))
            try:
                rebuild(root)
            except Crash:
                pass
        assert_consistent(root, reference)
        sweep_stale_temps(root, lambda _pid: False)  # what a restarted daemon does
        rebuild(root)
        assert derived_files(root) == ref_files, f"k={k}"
        assert manifest_rows(root).equals(ref_rows), f"k={k}"
        if failing.count < k:  # the build made fewer calls: every one has failed once
            break
    assert k > 20  # the rounds' and the manifest's calls were counted


def synced_and_renamed(monkeypatch) -> list[tuple[str, ...]]:
    """A log of the fsyncs (by the path of their fd) and renames made from now on."""
    log: list[tuple[str, ...]] = []
    fsync, rename = os.fsync, os.rename

    def traced_fsync(fd):
        log.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return fsync(fd)

    def traced_rename(src, dst, **kwargs):
        log.append(("rename", src, dst))
        return rename(src, dst, **kwargs)

    monkeypatch.setattr(os, "fsync", traced_fsync)
    monkeypatch.setattr(os, "rename", traced_rename)
    return log


def test_a_marker_is_on_disk_before_its_rename_and_its_entries_after(tmp_path, monkeypatch):
    root = tmp_path / "atb_dump_data"
    root.mkdir()
    rnd = RoundDir(root, ("0_4711", "3"))
    log = synced_and_renamed(monkeypatch)
    assert commit_markers([(rnd, b"{}")]) == [None]
    tmp = f".{MARKER}.{os.getpid()}.tmp"
    here = root / "data" / "0_4711" / "3"
    assert log[:2] == [("fsync", f"{here}/{tmp}"), ("rename", tmp, MARKER)]
    # the directories side by side: the marker's entry, and the new round dir's own
    assert sorted(log[2:]) == sorted(("fsync", str(d)) for d in (here, *here.parents[:3]))
    log.clear()
    assert commit_markers([(rnd, b"{}")]) == [None]
    assert log[1:] == [("rename", tmp, MARKER), ("fsync", str(here))]  # the rest is on disk
    rnd.close()


def test_a_manifest_part_is_on_disk_before_its_rename_and_its_entries_after(tmp_path,
                                                                          monkeypatch):
    import polars as pl

    from msprobe_atb.tree.manifest import COLUMN_NAMES, polars_schema

    root = tmp_path / "atb_dump_data"
    root.mkdir()
    writer = ManifestWriter(root, "test")
    log = synced_and_renamed(monkeypatch)
    frame = pl.DataFrame({n: [None] for n in COLUMN_NAMES}, schema=polars_schema())
    writer.write(writer.encode(frame.with_columns(pl.lit("0_4711").alias("_part"))))
    assert writer.failed == 0
    part = [i for i, entry in enumerate(log) if entry[0] == "rename" and
            entry[2].startswith("part-")]
    (i,) = part
    pdir = f"{root}/manifest/host={writer.host}/device=0/pid=4711"
    assert log[i - 1] == ("fsync", f"{pdir}/{log[i][1]}")
    assert log[i + 1:i + 6] == [("fsync", pdir), ("fsync", str(Path(pdir).parent)),
                                ("fsync", str(Path(pdir).parents[1])),
                                ("fsync", f"{root}/manifest"), ("fsync", str(root))]
