"""One list of the record log's fields: records.h's (msprobe_atb/tree/record_schema.py
reads it). Every field a writer emits (the shim's C, the torch dumper, the control
plane's exit record for a killed process) must be declared there for its kind and
writer, every field a reader uses must be declared, and every declared field must be
emitted by each writer the header names and read by some reader, unless its line says
why not. The writers and readers are read from their sources (record_sources.py), so
a field added on one side fails here until the header (and the other side) has it."""

from __future__ import annotations

import re
import subprocess

from record_sources import (
    CORE,
    INGEST,
    PKG,
    PY_READ,
    READERS,
    c_function_keys,
    c_functions,
    reader_text,
    writes,
)
from testkit import REPO, c_program

from msprobe_atb.tree import record_schema as rs


def _part(name: str) -> set[str]:
    return {f.name for f in rs.parts()[name]}


def test_every_line_of_the_header_is_read():
    lines = [x for x in rs.HEADER.read_text().splitlines() if x.lstrip().startswith("X(")]
    assert len(lines) == sum(len(v) for v in rs.lists().values()), \
        "a line of records.h that record_schema.py does not parse"


def test_the_header_is_c_and_c_reads_the_same_list(tmp_path):
    exe = c_program(
        tmp_path, '#include <stdio.h>\n#include "msprobe_atb/records.h"\n'
        "#define ALWAYS 0\n#define OPTIONAL 1\n"
        '#define ROW(k, f, type, by, presence) printf("%s %s %s %d %d\\n", #k, #f, #type, '
        "by, presence);\n"
        "int main(void) { MSP_RECORD_COMMON(ROW) MSP_RECORD_FIELDS(ROW) "
        "MSP_RECORD_PARTS(ROW) return 0; }\n")
    bits = {"shim": 1, "torch": 2, "control plane": 4}
    expect = [f"{f.kind} {f.name} {f.type} {sum(bits[w] for w in f.writers)} {int(f.optional)}"
              for v in rs.lists().values() for f in v]
    assert subprocess.run([str(exe)], capture_output=True, text=True,
                          check=True).stdout.splitlines() == expect


def test_the_shim_begins_every_record_with_the_common_fields():
    keys = c_function_keys(CORE / "mechanisms" / "record.c", "msp_rec_begin")
    assert keys == {f.name for f in rs.common()}


def test_every_field_written_is_declared_for_its_writer():
    parts_of = {"flush": _part("flush_round")}  # written in the function that begins it
    for writer, kinds in writes().items():
        assert not set(kinds) - set(rs.kinds()), f"{writer} writes kinds records.h lacks"
        for kind, keys in kinds.items():
            mine = {f.name for f in rs.kinds()[kind] if writer in f.writers}
            extra = keys - mine - parts_of.get(kind, set())
            assert not extra, f"{writer}: `{kind}` fields not declared for it in records.h: " \
                f"{sorted(extra)}"


def test_every_declared_field_is_written_by_its_writers():
    written = writes()
    for f in rs.lists()[rs.RECORDS]:
        for writer in f.writers:
            assert f.name in written[writer].get(f.kind, ()), \
                f"records.h: {writer} writes `{f.kind}.{f.name}`, but its source does not"


def test_the_stats_object_is_the_declared_part():
    keys = c_function_keys(CORE / "mechanisms" / "stats.c", "msp_stats_json")
    assert keys == _part("stats")


def test_every_field_a_reader_uses_is_declared():
    declared = {f.name for v in rs.lists().values() for f in v}
    used = {key for p in READERS if p.suffix == ".py" for key in PY_READ.findall(p.read_text())}
    assert not used - declared, f"records read but not in records.h: {sorted(used - declared)}"


def test_the_ingest_kernel_reads_declared_fields():
    text = INGEST.read_text()
    keys = re.search(r"#define KEY_LIST\(X\)(.*?)\n#define", text, re.S).group(1)
    assert set(re.findall(r"X\((\w+)\)", keys)) <= {
        f.name for f in (*rs.common(), *rs.kinds()["tensor"], *rs.kinds()["param"],
                         *rs.kinds()["round"])}
    stat_keys = re.search(r"STAT_KEYS\[ST_N\] = \{(.*?)\}", text, re.S).group(1)
    assert re.findall(r'"(\w+)"', stat_keys) == [f.name for f in rs.parts()["stats"]]


def _shim_order(kind: str) -> list[str]:
    return [f.name for f in (*rs.common(), *rs.kinds()[kind]) if "shim" in f.writers]


def test_the_ingest_fast_path_reads_the_declared_order():
    """jsonline.c's shim_layout reads a tensor or param record by its keys' order: the
    head both share, the param's rest, then the tensor's rest, its stats object's
    keys where the object is."""
    body = next(b for b in c_functions(INGEST) if "static int shim_layout(" in b)
    tensor, param = _shim_order("tensor"), _shim_order("param")
    head, stats = 4, tensor.index("stats") + 1  # k, t, seq, path
    assert tensor[:head] == param[:head]
    assert re.findall(r'\\"(\w+)\\":', body) == (
        tensor[:head] + param[head:] + tensor[head:stats] + [f.name for f in rs.parts()["stats"]]
        + tensor[stats:])


def test_the_loss_tally_scans_the_declared_order():
    """offline/read/losses.py finds tensor records by their head and lost ones by `task`
    and `file` side by side."""
    text = (PKG / "offline" / "read" / "losses.py").read_text()
    tensor = _shim_order("tensor")
    assert tensor[:4] == ["k", "t", "seq", "path"] and '"seq":\\d+,"path":' in text
    assert tensor[tensor.index("task") + 1] == "file" and '"task":"%s","file":"lost"' in text


def test_every_declared_field_is_read_or_says_why_not():
    said = set(re.findall(r"""["'](\w+)["']""", reader_text()))
    for f in (x for v in rs.lists().values() for x in v):
        if f.unread_why:
            assert f.name not in said or f.kind == "any", \
                f"records.h says `{f.kind}.{f.name}` is unread, but a reader names it"
        else:
            assert f.name in said, f"records.h: no reader uses `{f.kind}.{f.name}`; read " \
                "it or say why not on its line"


def test_the_contracts_explain_only_declared_fields():
    """docs/contracts.md §4 says what fields mean, records.h which there are: a field
    that section explains (`name`: ...) is one of its kind's."""
    text = (REPO / "docs" / "contracts.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| .*? \| (.*) \|$", text, re.M)
    explained = {(kind, name) for kind, says in rows if kind in rs.kinds()
                 for name in re.findall(r"(?:^|; )`(\w+)`(?: \([^)]*\))?:", says)}
    assert len({kind for kind, _ in explained}) > 10
    parts = {f.name for v in rs.parts().values() for f in v}
    assert [(k, n) for k, n in explained if n not in
            {f.name for f in rs.kinds()[k]} | parts] == []
