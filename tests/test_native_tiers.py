"""native/core's tiers (issue 22 §1): no file includes the header of a higher tier,
in particular no mechanism a lifecycle header. The tiers are defined once, in
native/core/README; this reads them there."""

from __future__ import annotations

import re
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "native" / "core"
TIERS = ("hooks", "lifecycle", "mechanisms")  # highest first

# Includes that go up today, as (file, header). The native layering step of
# issue 22 removes them (pass the mechanism what it needs, or let the lifecycle
# poll); remove a line here once its include is gone.
KNOWN = {
    ("models.c", "state.h"),
    ("models.h", "hot.h"),
    ("opcount.c", "hot.h"),
    ("opcount.c", "monitor.h"),  # msp_monitor_hook_tick
    ("pending.h", "state.h"),
    ("record.c", "snapshot.h"),
    ("record.c", "state.h"),
    ("recorder.c", "snapshot.h"),
    ("recorder.h", "state.h"),
    ("recstats.c", "state.h"),
    ("writer.c", "state.h"),
}


def tiers() -> dict[str, int]:
    """Each module name (foo of foo.c / foo.h) -> its tier, 0 the highest."""
    text = (CORE / "README").read_text()
    out = {}
    for rank, tier in enumerate(TIERS):
        line = re.search(rf"^\s*{tier}:(.*)$", text, re.M)
        assert line, f"native/core/README has no `{tier}:` line"
        out.update(dict.fromkeys(line.group(1).split(), rank))
    return out


def upward_includes() -> set[tuple[str, str]]:
    rank = tiers()
    found = set()
    for path in sorted(CORE.glob("*.[ch]")):
        for header in re.findall(r'^\s*#\s*include\s+"([^"/]+)\.h"', path.read_text(), re.M):
            if header in rank and rank[header] < rank[path.stem]:
                found.add((path.name, f"{header}.h"))
    return found


def test_every_core_file_has_a_tier():
    rank = tiers()
    loose = sorted({p.name for p in CORE.glob("*.[ch]") if p.stem not in rank})
    assert not loose, f"native/core files in no tier (add them to native/core/README): {loose}"


def test_no_include_goes_up_a_tier():
    rank = tiers()
    new = sorted(upward_includes() - KNOWN)
    assert not new, "native/core includes that go up a tier (README): " + ", ".join(
        f"{f} ({TIERS[rank[f.rsplit('.', 1)[0]]]}) includes {h} ({TIERS[rank[h[:-2]]]})"
        for f, h in new)


def test_known_exceptions_are_still_there():
    gone = sorted(KNOWN - upward_includes())
    assert not gone, f"these includes went: remove them from KNOWN in {Path(__file__).name}: {gone}"


def test_every_core_file_opens_with_its_duty():
    """Its first comment comes before any include or code (after the include guard)."""
    guard = re.compile(r"#\s*(ifndef|define)\s+(MSP_\w+_H|_GNU_SOURCE)\b")
    bare = []
    for path in sorted(CORE.glob("*.[ch]")):
        lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
        first = next((ln for ln in lines if not guard.match(ln)), "")
        if not first.startswith("/*"):
            bare.append(path.name)
    assert not bare, f"native/core files that do not open with a comment of their duty: {bare}"
