"""tree/lag.py: how far the derived files are behind the record logs, from
built.json, the logs and the slots' `records`; counted where it can be, estimated
(and said so) where it cannot, with the age of the oldest record not built."""

from __future__ import annotations

import json

import pytest

from msprobe_atb.tree import lag, progress
from msprobe_atb.tree.progress import Progress

T0 = 1_700_000_000_000_000_000
NOW = T0 + 12_500_000_000  # 12.5 s after the first record


def _line(seq: int, t: int) -> bytes:
    return json.dumps({"k": "tensor", "t": t, "seq": seq, "path": f"0_7/0/0_L/in{seq}.bin",
                       "file": "bin"}, separators=(",", ":")).encode() + b"\n"


def _log(root, name: str, lines: list[bytes], tail: bytes = b"") -> bytes:
    logs = root / ".probe" / "records"
    logs.mkdir(parents=True, exist_ok=True)
    data = b"".join(lines) + tail
    (logs / name).write_bytes(data)
    return data


def _built(root, offsets: dict[str, int], records: dict[str, int] | None) -> Progress:
    built = Progress(0, None, offsets, [], None, records or {})
    progress.write(root, built)
    return progress.read(root)


LOG = "7-1.jsonl"


def test_a_small_backlog_is_counted_and_aged(tmp_path):
    """The first unbuilt record's `t` gives the age; a last line without its newline
    is no record yet."""
    lines = [_line(i, T0 + i * 1000) for i in range(5)]
    data = _log(tmp_path, LOG, lines, tail=b'{"k":"tensor","t":99')
    built = _built(tmp_path, {LOG: len(lines[0]) + len(lines[1])}, {LOG: 2})
    v = lag.measure(tmp_path, built, {}, now_ns=NOW + 2000).view()
    assert v["records"] == 3 and not v["estimated"] and v["uncounted_bytes"] == 0
    assert v["oldest_t_ns"] == T0 + 2000 and v["oldest_s_ago"] == 12.5
    assert v["logs"][0]["bytes"] == len(data) - len(lines[0]) - len(lines[1])
    assert lag.behind_text(v) == "statistic.csv 3 records behind, the oldest 12 s ago"


def test_a_line_without_its_newline_alone_is_not_behind(tmp_path):
    lines = [_line(0, T0)]
    _log(tmp_path, LOG, lines, tail=_line(1, T0)[:-1])
    built = _built(tmp_path, {LOG: len(lines[0])}, {LOG: 1})
    assert lag.measure(tmp_path, built, now_ns=NOW).view() is None


def test_nothing_built_yet_and_a_log_built_json_does_not_name(tmp_path):
    _log(tmp_path, LOG, [_line(i, T0 + i) for i in range(4)])
    other = _log(tmp_path, "8-1.jsonl", [_line(0, T0 + 5_000_000_000)])
    v = lag.measure(tmp_path, None, now_ns=NOW).view()  # no built.json
    assert [(x["pid"], x["records"]) for x in v["logs"]] == [(7, 4), (8, 1)]
    built = _built(tmp_path, {"8-1.jsonl": len(other)}, {"8-1.jsonl": 1})
    v = lag.measure(tmp_path, built, now_ns=NOW).view()
    assert [(x["pid"], x["records"]) for x in v["logs"]] == [(7, 4)]
    assert v["oldest_t_ns"] == T0


def test_a_long_backlog_counts_from_the_slot(tmp_path, monkeypatch):
    """Past one read's WINDOW the lines are not counted: the slot's `records`
    (lines the shim appended) minus built.json's `records` are."""
    monkeypatch.setattr(lag, "WINDOW", 1024)
    lines = [_line(i, T0 + i) for i in range(300)]
    _log(tmp_path, LOG, lines)
    built = _built(tmp_path, {LOG: sum(map(len, lines[:10]))}, {LOG: 10})
    v = lag.measure(tmp_path, built, {LOG: 300}, now_ns=NOW).view()
    assert v["records"] == 290 and not v["estimated"] and v["oldest_t_ns"] == T0 + 10
    # the slot of another process (a reused pid) says nothing of this log: estimated
    v = lag.measure(tmp_path, built, {"7-2.jsonl": 300}, now_ns=NOW).view()
    assert v["estimated"] and v["records"] == pytest.approx(290, rel=0.05)


def test_an_older_built_json_without_records_is_estimated(tmp_path, monkeypatch):
    """built.json of an older version counts bytes only: the records behind are the
    backlog's bytes over the mean size of those read, and the text says so."""
    monkeypatch.setattr(lag, "WINDOW", 1024)
    lines = [_line(i, T0 + i) for i in range(300)]
    _log(tmp_path, LOG, lines)
    built = _built(tmp_path, {LOG: sum(map(len, lines[:100]))}, None)
    assert built.records == {} and lag.records_built(built) is None
    v = lag.measure(tmp_path, built, {LOG: 300}, now_ns=NOW).view()
    assert v["estimated"] and v["records"] == pytest.approx(200, rel=0.05)
    assert lag.behind_text(v) == (f"statistic.csv about {v['records']:,} records behind "
                                  "(estimated from the record logs' sizes), the oldest 12 s ago")


def test_an_unreadable_first_line_has_no_age(tmp_path):
    lines = [_line(0, T0), b"not json at all\n", _line(2, T0 + 2)]
    _log(tmp_path, LOG, lines)
    built = _built(tmp_path, {LOG: len(lines[0])}, {LOG: 1})
    v = lag.measure(tmp_path, built, now_ns=NOW).view()
    assert v["records"] == 2 and v["oldest_t_ns"] is None and v["oldest_s_ago"] is None
    assert lag.behind_text(v).endswith("the oldest written at an unknown time (its line is "
                                       "unreadable)")


def test_a_first_record_too_long_to_read_leaves_bytes(tmp_path, monkeypatch):
    """No line ends within FIRST_LINE_MAX: neither count nor estimate, the bytes."""
    monkeypatch.setattr(lag, "WINDOW", 256)
    monkeypatch.setattr(lag, "FIRST_LINE_MAX", 1024)
    data = _log(tmp_path, LOG, [b'{"k":"graph","t":5,"json":"' + b"x" * 2000 + b'"}\n',
                                _line(1, T0)])
    v = lag.measure(tmp_path, None, now_ns=NOW).view()
    assert v["records"] == 0 and v["uncounted_bytes"] == len(data)
    assert v["logs"][0]["records"] is None
    assert lag.behind_text(v).startswith(f"statistic.csv {len(data):,} bytes of records behind")


def test_per_log_lines_where_several_are_behind(tmp_path):
    _log(tmp_path, LOG, [_line(i, T0) for i in range(3)])
    _log(tmp_path, "8-1.jsonl", [_line(0, T0 + 10_000_000_000)])
    v = lag.measure(tmp_path, None, now_ns=NOW).view()
    assert lag.behind_text(v) == ("statistic.csv 4 records behind in 2 record logs, the "
                                  "oldest 12 s ago")
    assert lag.per_log_lines(v) == ["pid 7: 3 records, the oldest 12 s ago",
                                    "pid 8: 1 record, the oldest 2.5 s ago"]


def test_records_built_and_durations():
    assert lag.records_built(None) is None
    assert lag.records_built(Progress()) == 0  # built.json with no log yet
    assert lag.records_built(Progress(offsets={"a": 9, "b": 3}, records={"a": 2, "b": 1})) == 3
    assert [lag.duration_text(s) for s in (2.46, 12.5, 300, 9000, 3 * 86400)] == [
        "2.5 s", "12 s", "5 min", "2.5 h", "3.0 days"]
