"""What the sources of the record log's writers and readers say about its fields,
read from the sources themselves: the keys each writer emits per kind (the shim's C,
the torch dumper's and the control plane's Python) and the text of the readers.
tests/test_record_schema.py holds them to records.h."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from testkit import REPO

from msprobe_atb.tree import record_schema as rs

CORE = REPO / "native" / "core"
PKG = REPO / "msprobe_atb"
INGEST = REPO / "native" / "ingest" / "jsonline.c"
# the modules that read records: the tree builder's, the offline loss tally, the
# torch dumper's summary, and the native ingest kernel
READERS = [*(PKG / "tree" / f"{m}.py" for m in ("recordfeed", "csvfmt", "records", "incidents",
                                               "procinfo", "overflow_csv", "manifest", "lag")),
           PKG / "offline" / "read" / "losses.py", PKG / "torch" / "summary.py",
           INGEST]

# `fn(&b, "key"` in C: a key written by a jb_k* call or a helper given the key
_C_KEY = re.compile(r'\b(\w+)\(\s*&?[\w.>-]+,\s*"(\w+)"')
_C_BEGIN = re.compile(r'msp_rec_begin\(&[\w.>-]+,\s*(\w+|"\w+")\)')
_C_DEF = re.compile(r"^\w[^;{]*?\b(\w+)\(", re.M)
_C_FUNC_END = re.compile(r"^}$", re.M)
PY_READ = re.compile(r"""\brec(?:\.get\(|\[)["'](\w+)["']""")


def c_functions(src: Path) -> list[str]:
    return _C_FUNC_END.split(src.read_text())


def cwrites() -> dict[str, set[str]]:
    """Each kind the shim writes (msp_rec_begin) and the keys written in the functions
    that begin its records; a function given the kind (report_json) is followed to its
    callers, whose other string arguments are keys too."""
    out: dict[str, set[str]] = {}
    for src in sorted(CORE.rglob("*.c")):
        text = src.read_text()
        for body in c_functions(src):
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


def c_function_keys(src: Path, name: str) -> set[str]:
    body = next(b for b in c_functions(src) if re.search(rf"^\w[^;{{]*\b{name}\(", b, re.M))
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


def _torchwrites() -> dict[str, set[str]]:
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


def writes() -> dict[str, dict[str, set[str]]]:
    return {"shim": cwrites(), "torch": _torchwrites(),
            "control plane": {"exit": _killed_exit_keys()}}


def reader_text() -> str:
    return "\n".join(p.read_text() for p in READERS)
