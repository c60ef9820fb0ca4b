"""native/core's tiers, one folder each (native/core/README): no
file includes the header of a higher tier, in particular no mechanism a
lifecycle header; no file uses a function or variable defined in a higher tier;
and no two files use each other, directly or round a circle of others.

The uses are read from the built objects with `nm`: a symbol one object leaves
undefined (U) and another defines is an arrow from the first file to the second.
The objects are what runs, so this sees what a regex over the sources would miss
or invent: a call made inside a static inline function of a header counts in the
file that instantiates it, a global read through a macro counts, a name in a
comment or a string does not, and a function pointer handed over at init (the
way a lower file is told of a higher one) is no arrow from the lower file. The
objects are `make probe`'s release objects; the test fails if one is missing or
older than its source."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from testkit import find_circle

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "native" / "core"
OBJ = ROOT / "build" / "probe" / "obj"
TIERS = ("hooks", "lifecycle", "mechanisms")  # highest first


def core_files() -> list[Path]:
    return sorted(CORE.rglob("*.[ch]"))


def sources() -> list[Path]:
    return [p for p in core_files() if p.suffix == ".c"]


def tiers() -> dict[str, int]:
    """Each module name (foo of foo.c / foo.h) -> its tier, 0 the highest: the
    folder it is in."""
    return {p.stem: TIERS.index(p.parent.name) for p in core_files() if p.parent.name in TIERS}


def upward_includes() -> set[tuple[str, str]]:
    rank = tiers()
    found = set()
    for path in core_files():
        for header in re.findall(r'^\s*#\s*include\s+"([^"/]+)\.h"', path.read_text(), re.M):
            if header in rank and rank[header] < rank[path.stem]:
                found.add((path.name, f"{header}.h"))
    return found


def test_every_core_file_has_a_tier():
    loose = sorted(str(p.relative_to(CORE)) for p in core_files() if p.parent.name not in TIERS)
    assert not loose, f"native/core files in no tier's folder ({', '.join(TIERS)}): {loose}"
    stems = [p.stem + p.suffix for p in core_files()]
    assert len(stems) == len(set(stems)), "two native/core files of one name (objects and " \
        "includes go by name alone)"


def test_no_include_goes_up_a_tier():
    rank = tiers()
    up = sorted(upward_includes())
    assert not up, "native/core includes that go up a tier (README): " + ", ".join(
        f"{f} ({TIERS[rank[f.rsplit('.', 1)[0]]]}) includes {h} ({TIERS[rank[h[:-2]]]})"
        for f, h in up)


def uses() -> dict[tuple[str, str], set[str]]:
    """(file, file it uses) -> the symbols, over the core's .c files."""
    if not shutil.which("nm"):
        pytest.skip("nm (binutils) is not installed")
    defined: dict[str, str] = {}
    undefined: dict[str, set[str]] = {}
    for src in sources():
        obj = OBJ / f"{src.stem}.o"
        assert obj.exists() and obj.stat().st_mtime >= src.stat().st_mtime, \
            f"{obj} is missing or older than {src.name}: run `make probe` first"
        out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
        undefined[src.stem] = set()
        for line in out.splitlines():
            kind, name = line.split()[-2:]
            if kind == "U":
                undefined[src.stem].add(name)
            elif kind.isupper():  # lowercase: local to its object
                defined[name] = src.stem
    arrows: dict[tuple[str, str], set[str]] = {}
    for user, names in undefined.items():
        for name in names:
            owner = defined.get(name)
            if owner and owner != user:
                arrows.setdefault((user, owner), set()).add(name)
    return arrows


def test_no_file_uses_a_higher_tier():
    rank = tiers()
    up = sorted((a, b, sorted(names)) for (a, b), names in uses().items()
                if rank.get(b, len(TIERS)) < rank.get(a, len(TIERS)))
    assert not up, "native/core files that use a higher tier (README): " + "; ".join(
        f"{a}.c ({TIERS[rank[a]]}) uses {b}.c ({TIERS[rank[b]]}): {', '.join(names)}"
        for a, b, names in up)


def test_no_circle_of_uses():
    arrows = uses()
    graph = {src.stem: set() for src in sources()}
    for a, b in arrows:
        graph[a].add(b)
    circle = find_circle(graph)
    assert not circle, "native/core files that use each other in a circle: " + " -> ".join(
        f"{a}.c ({', '.join(sorted(arrows[a, b]))})" for a, b in zip(circle, circle[1:])
    ) + f" -> {circle[-1]}.c"



def test_every_core_file_opens_with_its_duty():
    """Its first comment comes before any include or code (after the include guard)."""
    guard = re.compile(r"#\s*(ifndef|define)\s+(MSP_\w+_H|_GNU_SOURCE)\b")
    bare = []
    for path in core_files():
        lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
        first = next((ln for ln in lines if not guard.match(ln)), "")
        if not first.startswith("/*"):
            bare.append(path.name)
    assert not bare, f"native/core files that do not open with a comment of their duty: {bare}"
