"""The documentation as the tests read it: README.md and the pages of docs/, their code blocks
under a heading, their relative links and the rule ids they cite.

The manual lives in ``docs/`` and README.md is the front door (issue 32); every command block of
either runs in a test, so the tests find blocks by page and heading rather than by position in
one long README, and a section that moves to another page moves its test with it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
DOC_ADDRESS = "127.0.0.1:9007"  # the server the pages' blocks talk to: `make run`'s

_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$")
_FENCE = re.compile(r"^```(\S*)\s*$")


def page_path(page: str) -> Path:
    """``"README.md"`` or a page of docs/ (``"tour.md"``), as a path in the checkout."""
    return ROOT / "README.md" if page == "README.md" else DOCS / page


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks (headings and links live there)."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def section(page: str, heading: str | None = None) -> str:
    """The text of ``page`` under ``heading`` (its title, any level), up to the next heading of the
    same or a higher level; the whole page without one. A missing heading is a KeyError naming
    it, so a renamed section fails its test with the reason rather than with no blocks."""
    text = page_path(page).read_text()
    if heading is None:
        return text
    lines, fenced, start, level = text.splitlines(keepends=True), False, -1, 0
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match is None:
            continue
        if start < 0 and match.group(2) == heading:
            start, level = i, len(match.group(1))
        elif start >= 0 and len(match.group(1)) <= level:
            return "".join(lines[start:i])
    if start < 0:
        raise KeyError(f"{page} has no heading {heading!r}")
    return "".join(lines[start:])


def blocks(page: str, heading: str | None = None, lang: str = "sh") -> list[str]:
    """The ``lang`` code blocks of ``page`` (under ``heading``), in order, as their text."""
    found: list[str] = []
    current: list[str] | None = None  # the lines of the block being read, when it is a `lang` one
    fenced = False
    for line in section(page, heading).splitlines(keepends=True):
        fence = _FENCE.match(line)
        if fence and not fenced:
            fenced, current = True, [] if fence.group(1) == lang else None
        elif line.startswith("```") and fenced:
            if current is not None:
                found.append("".join(current))
            fenced, current = False, None
        elif current is not None:
            current.append(line)
    return found


def anchors(text: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown text: lower case, punctuation dropped,
    spaces to hyphens; a repeated heading gets ``-1``, ``-2``, …"""
    seen: dict[str, int] = {}
    out = set()
    for line in prose_lines(text):
        match = _HEADING.match(line)
        if match is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(2).replace("`", "").lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def relative_links(text: str) -> list[str]:
    """The targets of the Markdown links and images of a text that point inside the repository
    (not ``http:``, ``https:``, ``mailto:``), outside code blocks and code spans."""
    targets = []
    for line in prose_lines(text):
        line = re.sub(r"`[^`]*`", "", line)
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if not re.match(r"^[a-z]+:", target):
                targets.append(target)
    return targets


def run_block(
    block: str, target: str, cwd: Path = ROOT, address: str = DOC_ADDRESS, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a page's ``sh`` block with bash (``set -e -o pipefail``) from ``cwd``, the virtual
    environment's ``bin`` first on the PATH and ``SOW_SERVER`` at ``target``, the page's
    ``address`` replaced by ``target``: the only change made to the text."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "SOW_SERVER": target}
    if home is not None:  # where the block's ~ is
        env["HOME"] = str(home)
    env.pop("SOW_TOKEN", None)
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.replace(address, target)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
