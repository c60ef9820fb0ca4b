"""The record log reader: complete lines only, partial last line re-read later."""

from __future__ import annotations

from msprobe_atb.tree.records import LogTailer, ProcKey, list_logs


def test_partial_last_line_is_left_for_later(tmp_path):
    log = tmp_path / "1-2.jsonl"
    log.write_bytes(b'{"k":"a","n":1}\n{"k":"b",')
    t = LogTailer(log)
    assert t.read_new() == [{"k": "a", "n": 1}]
    assert t.at_end()  # a partial line (maybe a crash mid-write) is not waited for
    assert t.read_new() == []
    with open(log, "ab") as f:
        f.write(b'"n":2}\n')
    assert t.read_new() == [{"k": "b", "n": 2}]
    assert t.at_end()


def test_bad_lines_are_counted_not_fatal(tmp_path):
    log = tmp_path / "1-2.jsonl"
    log.write_bytes(b'not json\n[1,2]\n\n{"k":"ok"}\n')
    t = LogTailer(log)
    assert t.read_new() == [{"k": "ok"}]
    assert t.bad_lines == 2 and "1-2.jsonl" in t.last_bad


def test_list_logs(tmp_path):
    d = tmp_path / ".probe" / "records"
    d.mkdir(parents=True)
    for name in ("10-5.jsonl", "9-7.jsonl", "junk.txt", ".10-5.jsonl.tmp"):
        (d / name).write_text("")
    assert [k for k, _ in list_logs(tmp_path)] == [ProcKey(9, 7), ProcKey(10, 5)]


def test_a_record_longer_than_a_chunk_is_read_whole(tmp_path, monkeypatch):
    import msprobe_atb.tree.records as records

    monkeypatch.setattr(records, "CHUNK", 16)
    log = tmp_path / "1-2.jsonl"
    big = {"k": "graph", "json": "x" * 100}
    log.write_text(f'{{"k":"a"}}\n{__import__("json").dumps(big)}\n{{"k":"b"}}\n')
    t = LogTailer(log)
    got = []
    for _ in range(10):
        got += t.read_new()
    assert got == [{"k": "a"}, big, {"k": "b"}]


def test_at_end_reads_up_to_the_first_newline(tmp_path, monkeypatch):
    """Behind a backlog the unread rest of a log is tens of MB, and the daemon
    asks whether it is read to its end every half second: a piece is enough."""
    import builtins

    import msprobe_atb.tree.records as records

    log = tmp_path / "1-2.jsonl"
    log.write_bytes(b'{"k":"a"}\n' * 400_000)  # 4 MB unread
    read = []

    class Counted:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def seek(self, *a):
            return self.f.seek(*a)

        def read(self, n=-1):
            data = self.f.read(n)
            read.append(len(data))
            return data

    monkeypatch.setattr(records, "open", lambda *a, **k: Counted(builtins.open(*a, **k)),
                        raising=False)
    t = LogTailer(log)
    assert not t.at_end()
    assert sum(read) <= records.AT_END_PIECE

