"""No circle of imports in msprobe_atb, and no import of a higher package by a lower one.

The graph is read from the sources with `ast`: one node a module, one arrow an
import of another msprobe_atb module, absolute or relative. Imports inside
functions count too: they only defer the circle to the first call (the circle
dask_run <-> pair_engine was one), and what this guards is the layering, in
which a lower module does not know a higher one. Two things are not arrows:
`from pkg import mod` where `mod` is a module of pkg is an arrow to that
module, not to pkg as well; and importing pkg.mod is not an arrow to pkg's
__init__, whose re-exports would otherwise close a circle in every package.

The order of the packages is the one docs/map.md gives ("The order of the rooms"),
lowest first.
"""

from __future__ import annotations

import ast
import re
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


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module) of each import of another msprobe_atb module by module `name` (at `path`)."""
    if path.suffix != ".py":
        return []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] \
                if node.level else []
            source = ".".join(base + ([node.module] if node.module else []))
            subs = {f"{source}.{a.name}" for a in node.names} & modules.keys()
            targets = subs if len(subs) == len(node.names) else subs | {source}
        else:
            continue
        found += [(node.lineno, t) for t in sorted(targets & modules.keys() - {name})]
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _module_names()
    return {name: {t for _, t in _imports(name, path, modules)}
            for name, path in modules.items()}


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


# docs/map.md's order of the packages, lowest first: a module imports modules of
# its own package or of the packages before it, never of one after it.
ORDER = (
    ("shared helpers", ("msprobe_atb", "msprobe_atb.access", "msprobe_atb.argtypes",
                        "msprobe_atb.cffi_build", "msprobe_atb.units")),
    ("config", ("msprobe_atb.config",)),
    ("control", ("msprobe_atb.control",)),
    ("tree", ("msprobe_atb.tree",)),
    ("recorder", ("msprobe_atb.recorder",)),
    ("offline", ("msprobe_atb.offline",)),
    ("torch", ("msprobe_atb.torch",)),
    ("status and wait", ("msprobe_atb.status", "msprobe_atb.wait")),
    ("daemon", ("msprobe_atb.daemon",)),
    ("run and cli", ("msprobe_atb.run", "msprobe_atb.cli", "msprobe_atb.__main__")),
)
RANK = {root: (rank, label) for rank, (label, roots) in enumerate(ORDER) for root in roots}


def package_of(module: str) -> tuple[int, str]:
    """(rank, name) of the package a module belongs to: msprobe_atb.X for msprobe_atb.X.*."""
    return RANK[".".join(module.split(".")[:2])]


def back_edges(imports: dict[str, list[tuple[int, str]]], paths: dict[str, Path]) -> list[str]:
    """Each import of a higher package by a lower one, as 'file:line: module (package)
    imports module (higher package)'."""
    out = []
    for name, found in sorted(imports.items()):
        (low, low_name) = package_of(name)
        for line, target in found:
            (high, high_name) = package_of(target)
            if high > low:
                out.append(f"{paths[name].relative_to(PACKAGE.parent)}:{line}: {name} "
                           f"({low_name}) imports {target} ({high_name}, higher)")
    return out


def test_every_module_has_a_place_in_the_order():
    unplaced = [n for n in _module_names() if ".".join(n.split(".")[:2]) not in RANK]
    assert not unplaced, f"modules in no package of ORDER (and of docs/map.md): {unplaced}"


def test_the_map_gives_the_same_order():
    """docs/map.md's table of the order names, row by row, the packages of ORDER."""
    text = (PACKAGE.parent / "docs" / "map.md").read_text()
    section = text.split("\n## The order of the rooms\n")[1].split("\n## ")[0]
    rows = [line.split("|")[2] for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    named = [{n if n == "msprobe_atb" else f"msprobe_atb.{n}" for n in re.findall(r"`(\w+)`", row)}
             for row in rows]
    assert named == [set(roots) for _, roots in ORDER]


def test_back_edges_are_named():
    paths = {"msprobe_atb.tree.x": PACKAGE / "tree" / "x.py",
             "msprobe_atb.offline.y": PACKAGE / "offline" / "y.py"}
    found = back_edges({"msprobe_atb.tree.x": [(7, "msprobe_atb.offline.y")],
                        "msprobe_atb.offline.y": [(3, "msprobe_atb.tree.x")]}, paths)
    assert found == ["msprobe_atb/tree/x.py:7: msprobe_atb.tree.x (tree) imports "
                     "msprobe_atb.offline.y (offline, higher)"]


def test_no_import_of_a_higher_package():
    modules = _module_names()
    found = back_edges({n: _imports(n, p, modules) for n, p in modules.items()}, modules)
    assert not found, "imports against docs/map.md's order of the packages:\n" + "\n".join(found)
