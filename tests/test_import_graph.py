"""No circle of imports in msprobe_atb.

The graph is read from the sources with `ast`: one node a module, one arrow an
import of another msprobe_atb module, absolute or relative. Imports inside
functions count too: they only defer the circle to the first call (the circle
dask_run <-> pair_engine was one), and what this guards is the layering, in
which a lower module does not know a higher one. Two things are not arrows:
`from pkg import mod` where `mod` is a module of pkg is an arrow to that
module, not to pkg as well; and importing pkg.mod is not an arrow to pkg's
__init__, whose re-exports would otherwise close a circle in every package.
"""

from __future__ import annotations

import ast
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from testkit import find_circle

PACKAGE = Path(__file__).resolve().parents[1] / "msprobe_atb"


def _module_names() -> dict[str, Path]:
    """Each module's dotted name and file; the built cffi extensions are modules
    too (`from msprobe_atb.control import _ctl`), with no imports of ours."""
    out = {}
    for path in PACKAGE.rglob("*"):
        suffix = next((s for s in (".py", *EXTENSION_SUFFIXES) if path.name.endswith(s)), None)
        if suffix:
            parts = path.relative_to(PACKAGE.parent).parts
            parts = (*parts[:-1], path.name[: -len(suffix)])
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The msprobe_atb modules that module `name` (at `path`) imports."""
    if path.suffix != ".py":
        return set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] \
                if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            subs = {f"{source}.{a.name}" for a in node.names} & modules.keys()
            found.update(subs if len(subs) == len(node.names) else subs | {source})
    return (found & modules.keys()) - {name}


def import_graph() -> dict[str, set[str]]:
    modules = _module_names()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "msprobe_atb.control.ext" in graph["msprobe_atb.control.block"]  # absolute
    compare = "msprobe_atb.offline.compare"
    assert f"{compare}.pair_work" in graph[f"{compare}.dask_run"]  # relative
    assert f"{compare}.dask_run" in graph[f"{compare}.pair_engine"]  # in a def


def test_find_circle_names_it():
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle():
    circle = find_circle(import_graph())
    assert circle is None, "import circle in msprobe_atb: " + " -> ".join(circle)
