"""The manual stands on its own (issue 36): README.md, docs/*.md and the clients' READMEs link only
to files of the repository (and their headings) or to public ``https://`` pages, and no text
sends a reader to a file beside the checkout (``../shared/SPEC.md``, ``FILTERS.md``) or to the
sections of a specification the repository does not hold (``SPEC §13``): a user who clones the
repository has every page a link or a mention leads to.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.doc_pages import DOCS, ROOT, anchors, prose_lines, relative_links

OUTSIDE = re.compile(r"\.\./shared|shared/SPEC\.md|\bFILTERS\.md|\bSPEC\.md|\bSPEC §|\bSPEC's\b")
"""Mentions of what is not in the repository: the product spec and filter page beside it."""
PATH_MENTION = re.compile(r"(?<![\w./])((?:\.\./)+[\w./-]*)")
"""A relative path written in the text (a code span, a block), such as ``../../README.md``."""


def pages() -> list[str]:
    """README.md, docs/*.md and the clients' READMEs, relative to the checkout."""
    found = [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted(ROOT.glob("clients/*/README*"))]
    return [str(p.relative_to(ROOT)) for p in found]


def broken_links(source: Path, text: str) -> list[str]:
    """The relative links of ``text`` (a page at ``source``) that lead outside the checkout, to no
    file, or to no heading of the Markdown file they name."""
    broken = []
    for link in relative_links(text):
        path, _, anchor = link.partition("#")
        if not path:
            if anchor not in anchors(text):
                broken.append(f"{link}: no heading #{anchor} in {source.name}")
            continue
        target = (source.parent / unquote(path)).resolve()
        if not target.is_relative_to(ROOT):
            broken.append(f"{link}: outside the repository")
        elif not target.exists():
            broken.append(f"{link}: no file {target.relative_to(ROOT)}")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target.read_text()):
            broken.append(f"{link}: no heading #{anchor} in {target.name}")
    return broken


def outside_mentions(page: str, text: str) -> list[str]:
    """The lines of ``text`` that mention a file or spec beside the checkout, or a relative path
    that climbs out of it."""
    source = ROOT / page
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        hits = [m.group() for m in OUTSIDE.finditer(line)]
        for m in PATH_MENTION.finditer(line):
            if not (source.parent / m.group(1)).resolve().is_relative_to(ROOT):
                hits.append(m.group(1))
        if hits:
            found.append(f"{page}:{number}: {', '.join(hits)}: {line.strip()[:100]}")
    return found


@pytest.mark.parametrize("page", pages())
def test_every_relative_link_leads_to_a_file_of_the_repository(page: str) -> None:
    source = ROOT / page
    broken = broken_links(source, source.read_text())
    assert not broken, f"{page}: " + "; ".join(broken)


@pytest.mark.parametrize("page", pages())
def test_no_page_sends_the_reader_outside_the_repository(page: str) -> None:
    found = outside_mentions(page, (ROOT / page).read_text())
    assert not found, "\n".join(found)


def test_the_checks_find_what_they_look_for() -> None:
    """Both checks can fail: a missing file, a missing heading, a link out of the checkout, and
    the mentions of the spec beside it are all seen."""
    source = DOCS / "example.md"
    text = (
        "# Title\n\nSee [a](missing.md), [b](#nowhere), [c](#title), [d](../../x.md), [e](semantics.md#nope), "
        "[f](https://example.org/x.md), `[g](in-code.md)`.\n"
    )
    assert [b.partition(":")[0] for b in broken_links(source, text)] == [
        "missing.md",
        "#nowhere",
        "../../x.md",
        "semantics.md#nope",
    ]
    lines = [
        "the spec is `../shared/SPEC.md`",
        "see FILTERS.md",
        "as SPEC §13 says",
        "run `../../tools/x.py`",
        "[docs/filters.md](filters.md) and `../README.md`",
    ]
    found = outside_mentions("docs/example.md", "\n".join(lines))
    assert [f.split(":")[1] for f in found] == ["1", "2", "3", "4"], found
    assert outside_mentions("docs/performance.md", "made by `../shared/bench/make_orders.py`")


def test_prose_lines_skip_code_blocks() -> None:
    assert prose_lines("a\n```sh\n[x](y.md)\n```\nb\n") == ["a", "b"]
