"""One list of the record log's fields: records.h's (msprobe_atb/tree/record_schema.py
reads it). Every field a writer emits (the shim's C, the torch dumper, the control
plane's exit record for a killed process) must be declared there for its kind and
writer, every field a reader uses must be declared, and every declared field must be
emitted by each writer the header names and read by some reader, unless its line says
why not. The writers and readers are read from their sources, so a field added on one
side fails here until the header (and the other side) has it."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from testkit import REPO, c_program

from msprobe_atb.tree import record_schema as rs

CORE = REPO / "native" / "core"
PKG = REPO / "msprobe_atb"
INGEST = REPO / "native" / "ingest" / "jsonline.c"
# the modules that read records: the tree builder's, the offline loss tally, the
# torch dumper's summary, and the native ingest kernel
READERS = [*(PKG / "tree" / f"{m}.py" for m in ("builder", "csvfmt", "records", "incidents",
                                               "procinfo", "overflow_csv", "manifest", "lag")),
           PKG / "offline" / "read" / "losses.py", PKG / "torch" / "summary.py",
           INGEST]

# `fn(&b, "key"` in C: a key written by a jb_k* call or a helper given the key
_C_KEY = re.compile(r'\b(\w+)\(\s*&?[\w.>-]+,\s*"(\w+)"')
_C_BEGIN = re.compile(r'msp_rec_begin\(&[\w.>-]+,\s*(\w+|"\w+")\)')
_C_DEF = re.compile(r"^\w[^;{]*?\b(\w+)\(", re.M)
_C_FUNC_END = re.compile(r"^}$", re.M)
_PY_READ = re.compile(r"""\brec(?:\.get\(|\[)["'](\w+)["']""")


def _part(name: str) -> set[str]:
    return {f.name for f in rs.parts()[name]}


def _c_functions(src: Path) -> list[str]:
    return _C_FUNC_END.split(src.read_text())


def _c_writes() -> dict[str, set[str]]:
    """Each kind the shim writes (msp_rec_begin) and the keys written in the functions
    that begin its records; a function given the kind (report_json) is followed to its
    callers, whose other string arguments are keys too."""
    out: dict[str, set[str]] = {}
    for src in sorted(CORE.rglob("*.c")):
        text = src.read_text()
        for body in _c_functions(src):
            if (begin := _C_BEGIN.search(body)) is None:
                continue
            keys = {key for fn, key in _C_KEY.findall(body) if fn != "msp_rec_begin"}
            kind = begin.group(1)
            if kind.startswith('"'):
                out.setdefault(kind.strip('"'), set()).update(keys)
                continue
            fn = _C_DEF.findall(body)[-1]
            calls = list(re.finditer(rf'\b{fn}\(((?:\s*"\w+",?)+)', text))
            assert calls, f"{src.name}: {fn} begins records of a kind it is given, but no " \
                "call of it names the kind"
            for call in calls:
                kind, *more = re.findall(r'"(\w+)"', call.group(1))
                out.setdefault(kind, set()).update(keys | set(more))
    return out


def _c_function_keys(src: Path, name: str) -> set[str]:
    body = next(b for b in _c_functions(src) if re.search(rf"^\w[^;{{]*\b{name}\(", b, re.M))
    return {key for _, key in _C_KEY.findall(body)}


def _module_strings(tree: ast.Module) -> dict[str, tuple[str, ...]]:
    """Module-level names bound to tuples of strings."""
    return {t.id: tuple(e.value for e in node.value.elts)
            for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Tuple)
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                    for e in node.value.elts)
            for t in node.targets if isinstance(t, ast.Name)}


def _dict_keys(node: ast.AST, names: dict[str, tuple[str, ...]]) -> set[str]:
    """The string keys of the dict literals in node, those of a comprehension over a
    module-level tuple too."""
    keys: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Dict):
            keys |= {k.value for k in sub.keys if isinstance(k, ast.Constant)}
        elif isinstance(sub, ast.DictComp) and isinstance(sub.generators[0].iter, ast.Name):
            keys |= set(names.get(sub.generators[0].iter.id, ()))
    return keys


def _function_dict_keys(func: ast.AST, var: str) -> set[str]:
    """The keys function func gives dict `var`: its literal, `var["x"] = ...`,
    `var.update(x=...)`."""
    keys: set[str] = set()
    for sub in ast.walk(func):
        if isinstance(sub, ast.Assign | ast.AnnAssign):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id == var and isinstance(sub.value, ast.Dict):
                    keys |= {k.value for k in sub.value.keys if isinstance(k, ast.Constant)}
                elif (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                      and t.value.id == var and isinstance(t.slice, ast.Constant)):
                    keys.add(t.slice.value)
        elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
              and sub.func.attr == "update" and isinstance(sub.func.value, ast.Name)
              and sub.func.value.id == var):
            keys |= {k.arg for k in sub.keywords if k.arg}
    return keys


def _torch_writes() -> dict[str, set[str]]:
    """Each kind the torch dumper writes (`self._log.write(kind, **fields)`) and its keys."""
    out: dict[str, set[str]] = {}
    for src in sorted((PKG / "torch").glob("*.py")):
        tree = ast.parse(src.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef):
                continue
            for call in ast.walk(func):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr == "write"
                        and isinstance(call.func.value, ast.Attribute)
                        and call.func.value.attr == "_log"):
                    continue
                keys = out.setdefault(call.args[0].value, set())
                for kw in call.keywords:
                    if kw.arg:
                        keys.add(kw.arg)
                    elif isinstance(kw.value, ast.Name):
                        keys |= _function_dict_keys(func, kw.value.id)
    return out


def _killed_exit_keys() -> set[str]:
    """The keys of the exit record the control plane writes for a killed process."""
    tree = ast.parse((PKG / "tree" / "killed.py").read_text())
    names = _module_strings(tree)
    records = [d for d in ast.walk(tree) if isinstance(d, ast.Dict)
               and any(isinstance(k, ast.Constant) and k.value == "k" for k in d.keys)]
    assert len(records) == 1, "killed.py: one exit record literal expected"
    return _dict_keys(records[0], names) - {f.name for f in rs.common()}


def _writes() -> dict[str, dict[str, set[str]]]:
    return {"shim": _c_writes(), "torch": _torch_writes(),
            "control plane": {"exit": _killed_exit_keys()}}


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
    keys = _c_function_keys(CORE / "mechanisms" / "record.c", "msp_rec_begin")
    assert keys == {f.name for f in rs.common()}


def test_every_field_written_is_declared_for_its_writer():
    parts_of = {"flush": _part("flush_round")}  # written in the function that begins it
    for writer, kinds in _writes().items():
        assert not set(kinds) - set(rs.kinds()), f"{writer} writes kinds records.h lacks"
        for kind, keys in kinds.items():
            mine = {f.name for f in rs.kinds()[kind] if writer in f.writers}
            extra = keys - mine - parts_of.get(kind, set())
            assert not extra, f"{writer}: `{kind}` fields not declared for it in records.h: " \
                f"{sorted(extra)}"


def test_every_declared_field_is_written_by_its_writers():
    writes = _writes()
    for f in rs.lists()[rs.RECORDS]:
        for writer in f.writers:
            assert f.name in writes[writer].get(f.kind, ()), \
                f"records.h: {writer} writes `{f.kind}.{f.name}`, but its source does not"


def test_the_stats_object_is_the_declared_part():
    keys = _c_function_keys(CORE / "mechanisms" / "stats.c", "msp_stats_json")
    assert keys == _part("stats")


def _reader_text() -> str:
    return "\n".join(p.read_text() for p in READERS)


def test_every_field_a_reader_uses_is_declared():
    declared = {f.name for v in rs.lists().values() for f in v}
    used = {key for p in READERS if p.suffix == ".py" for key in _PY_READ.findall(p.read_text())}
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
    body = next(b for b in _c_functions(INGEST) if "static int shim_layout(" in b)
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
    said = set(re.findall(r"""["'](\w+)["']""", _reader_text()))
    for f in (x for v in rs.lists().values() for x in v):
        if f.unread_why:
            assert f.name not in said or f.kind == "any", \
                f"records.h says `{f.kind}.{f.name}` is unread, but a reader names it"
        else:
            assert f.name in said, f"records.h: no reader uses `{f.kind}.{f.name}`; read " \
                "it or say why not on its line"
