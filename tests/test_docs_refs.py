"""Every reference in the repository resolves inside a clone.

A comment, docstring or page may point at a section of a document under docs/
(`docs/atb_hooks.md §3.1`, `contracts §4`, or a bare `§4` inside that document
itself): the file must exist and hold a heading of that number. It may not point
at what a clone does not have: a reference document kept elsewhere, our issue
tracker, a path on one machine. The facts those held live in docs/ now
(atb_hooks.md, msprobe_format.md); say the point instead of the ticket.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SECTION = "§"

# What a clone does not have. Case-insensitive; lines are joined first, so a
# reference split over two comment lines is found too.
FORBIDDEN = {
    "a section of an outside document": r"\b(?:spec|callsites|design|peers|seeds?)\s*" + SECTION,
    "an issue of the tracker": r"\bissues?\s+#?\d|\b(?:the|this) issue(?:'s)?\b",
    "the ATB call-site notes": r"\bcallsites\b|atb_probe_callsites",
    "msProbe's dump spec": r"dump_spec",
    "the design notes": r"\bdesign\.md\b",
    "the compare notes": r"compare_and_peers",
    "a path on one machine": r"/work/",
    "a numbered seed document": r"\bseeds?\s+0\d\d\b",
}

# `docs/X.md §N`, `X.md §N` or `contracts §N`, possibly followed by more
# sections (`§3, §4`, `§5.1-§5.2`, `§3/§4`, `§3 pending[], §4`) of the same document.
_CHAIN = SECTION + r"\s?[\d.]+(?: [\w\[\]]{1,12})?\s*(?:[,/\u2013-]|\band\b|\bor\b)?\s*"
_OWNER = re.compile(r"(?:(?:docs/)?(?P<doc>[\w-]+)\.md|\b(?P<short>contracts))\s*"
                    r"(?:" + _CHAIN + r")*$")
_REF = re.compile(SECTION + r"\s?(\d+(?:\.\d+)*)")
_HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s", re.M)
# A line break with the next line's comment leader: joined to one space.
_BREAK = re.compile(r"\s*\n\s*(?:#+|//+|\*+|--|;+)?[ \t]*")


def _tracked_text_files() -> dict[str, str]:
    """Tracked files that are text (no NUL byte, valid UTF-8): path -> content. Without
    git (an exported tree), every file but build output and the venv."""
    try:
        listing = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], check=True,
                                 capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build"}
        listing = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*")
                   if not skip & set(p.relative_to(ROOT).parts)]
    out = {}
    for name in listing:
        path = ROOT / name
        # this file spells out the patterns it forbids
        if not name or not path.is_file() or path == Path(__file__).resolve():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            out[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return out


def _joined(text: str) -> str:
    return _BREAK.sub(" ", text)


def _excerpt(text: str, start: int, end: int) -> str:
    return text[max(0, start - 40):end + 40].replace("\n", " ")


def forbidden_references(name: str, text: str) -> list[str]:
    """Each reference in `text` to what a clone does not have."""
    joined = _joined(text)
    return [f"{name}: {what}: ...{_excerpt(joined, m.start(), m.end())}..."
            for what, pattern in FORBIDDEN.items() for m in re.finditer(pattern, joined, re.I)]


def _sections(doc: str, cache: dict[str, set[str] | None]) -> set[str] | None:
    """The section numbers of docs/<doc>'s headings; None if there is no such page."""
    if doc not in cache:
        path = DOCS / doc
        cache[doc] = (set(_HEADING.findall(path.read_text(encoding="utf-8")))
                      if path.is_file() else None)
    return cache[doc]


def unresolved_sections(name: str, text: str, cache: dict[str, set[str] | None]) -> list[str]:
    """Each section reference in `text` (of file `name`) that names no page of docs/,
    or a section its page does not have. Inside docs/X.md a bare one is X.md's."""
    joined = _joined(text)
    own = name[len("docs/"):] if name.startswith("docs/") and name.endswith(".md") else None
    bad = []
    for m in _REF.finditer(joined):
        owner = _OWNER.search(joined, max(0, m.start() - 300), m.start())
        doc = ("contracts.md" if owner["short"] else owner["doc"] + ".md") if owner else own
        where = f"...{_excerpt(joined, m.start(), m.end())}..."
        if doc is None:
            bad.append(f"{name}: {SECTION}{m[1]} names no document: {where}")
        elif (have := _sections(doc, cache)) is None:
            bad.append(f"{name}: docs/{doc} does not exist: {where}")
        elif m[1] not in have:
            bad.append(f"{name}: docs/{doc} has no section {m[1]}: {where}")
    return bad


def test_no_reference_outside_the_repository():
    found = [f for name, text in _tracked_text_files().items()
             for f in forbidden_references(name, text)]
    assert not found, "references a clone cannot follow:\n" + "\n".join(found)


def test_section_references_resolve():
    cache: dict[str, set[str] | None] = {}
    bad = [b for name, text in _tracked_text_files().items()
           for b in unresolved_sections(name, text, cache)]
    assert not bad, "section references that do not resolve:\n" + "\n".join(bad)


def test_the_checks_catch_what_they_should():
    cache: dict[str, set[str] | None] = {}
    ok = ("x.c", "/* docs/atb_hooks.md §4, §5.2 and §10 item 7; contracts §3 pending[], §4\n"
                 " * (docs/msprobe_format.md\n * §5.1-§5.2) */")
    assert not unresolved_sections(*ok, cache) and not forbidden_references(*ok)
    assert not unresolved_sections("docs/contracts.md", "as §6 says", cache)
    for text in ("see §4", "docs/atb_hooks.md §42", "docs/nothing.md §1",
                 "docs/atb_hooks.md §4, as the notes' §5 say"):
        assert unresolved_sections("x.py", text, cache), text
    for text in ("(Issue 30 §6)", "# see issue\n# 28", "the issue's bound", "spec §7",
                 "the seed 003 tree",
                 "/work/shared/x", "design.md"):
        assert forbidden_references("x.py", text), text


def test_map_lists_every_document():
    listed = (DOCS / "map.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted(DOCS.glob("*.md"))
               if p.name != "map.md" and f"({p.name})" not in listed]
    assert not missing, f"docs/map.md does not link {missing}"
