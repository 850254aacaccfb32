"""The front door (issue 32): README.md stays one screen of orientation, its own blocks run as
written, every page of docs/ is reached from it, and every rule id the repository cites (K-3,
Q-7, A-2, HA-3, ...) is stated in docs/rules.md with a link to the page that explains it. That
links lead somewhere, and never out of the repository, is ``test_docs_links.py``'s (issue 36).

The manual's pages run in their own tests: the tour, "Securing sowdb" and "Operations" in
``test_readme_tour.py``, the tour's Python mirror and the Spark page's write in
``test_first_hour.py``, docs/connect.md and docs/spark-cluster.md in theirs, docs/cluster.md and
README's "Running a cluster" in ``test_cluster_docs.py``, docs/node.md's
example in the Node SDK's ``example.test.ts``, and the blocks that ran nowhere before (the tour's
Python SDK, the sample config, the filter engine's example) in ``test_docs_pages.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.doc_pages import DOCS, ROOT, blocks, page_path, relative_links, run_block
from tests.support import Process

README_MAX_LINES = 300
SPEC = Path(os.environ.get("SOWDB_SPEC", ROOT.parent / "shared" / "SPEC.md"))
"""The product specification, kept beside a development checkout and not in the repository: where
it is there (or named by ``SOWDB_SPEC``), docs/rules.md must state every rule id it has."""
NOT_BUILT = "Not built yet"  # the heading of docs/rules.md for the spec's rules not kept yet
RULE_ID = re.compile(r"\b[A-Z]{1,2}-[0-9]{1,2}\b")  # K-3, SL-1, HA-3; not UTF-8, SHA-256, ISO-8601
CITING = ("server", "clients", "tests", "tools", "docs")
SUFFIXES = {".py", ".ts", ".md", ".toml", ".html", ".css"}
GENERATED = {"sowdb_api", "gen", "node_modules", "dist", "static", "__pycache__"}  # not written by hand

pytestmark = pytest.mark.readme


def pages() -> list[str]:
    return ["README.md", *sorted(p.name for p in DOCS.glob("*.md"))]


def test_the_readme_is_one_short_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the manual goes in docs/"


def test_the_readme_keeps_the_two_commands_ci_runs() -> None:
    (block,) = blocks("README.md", "Two commands")
    assert block.startswith("make run ")
    assert "\nmake test " in block


def test_every_page_of_docs_is_reached_from_the_readme() -> None:
    """A page no link leads to is a page nobody reads: each docs/*.md is linked from README.md or
    from a page the README links to."""
    reached, todo = set(), ["README.md"]
    while todo:
        source = page_path(todo.pop())
        for link in relative_links(source.read_text()):
            target = (source.parent / unquote(link.partition("#")[0])).resolve()
            if target.parent == DOCS and target.suffix == ".md" and target.name not in reached:
                reached.add(target.name)
                todo.append(target.name)
    assert {p.name for p in DOCS.glob("*.md")} <= reached


def cited_rule_ids() -> dict[str, set[str]]:
    """Rule id -> the files (relative to the checkout) that cite it, over hand-written files."""
    files = [ROOT / "README.md"]
    for top in CITING:
        files += [
            f
            for f in (ROOT / top).rglob("*")
            if f.suffix in SUFFIXES and f.is_file() and not GENERATED & set(f.relative_to(ROOT).parts)
        ]
    cited: dict[str, set[str]] = {}
    for f in files:
        if f == DOCS / "rules.md":
            continue
        for rule in RULE_ID.findall(f.read_text(errors="replace")):
            cited.setdefault(rule, set()).add(str(f.relative_to(ROOT)))
    return cited


def listed_rule_ids() -> set[str]:
    return set(re.findall(r"^- \*\*([A-Z]+-[0-9]+)\b", (DOCS / "rules.md").read_text(), flags=re.MULTILINE))


def test_every_rule_id_the_repository_cites_is_in_the_rule_index() -> None:
    cited, listed = cited_rule_ids(), listed_rule_ids()
    assert {"K-3", "Q-7", "A-2", "SL-1", "J-4"} <= set(cited)  # the scan does find citations
    missing = {rule: sorted(where)[:3] for rule, where in cited.items() if rule not in listed}
    assert not missing, f"rule ids cited but not in docs/rules.md: {missing}"


def test_the_rule_index_lists_every_rule_of_the_spec() -> None:
    """docs/rules.md is written by hand (it links each rule to its page); where the spec is at
    hand, this says which of its rules the page lacks: state them there, or list them under
    "Not built yet"."""
    if not SPEC.exists():
        pytest.skip(f"the spec is not beside this checkout ({SPEC}; SOWDB_SPEC names another place)")
    in_spec = set(re.findall(r"^- \*\*([A-Z]+-[0-9]+)\b", SPEC.read_text(), flags=re.MULTILINE))
    assert len(in_spec) >= 40
    missing = in_spec - listed_rule_ids()
    assert not missing, f"docs/rules.md lacks {sorted(missing)}"


def rule_bullets(text: str) -> dict[str, str]:
    """Rule id -> its bullet (the line and its indented continuation) in a rules page's text."""
    bullets: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = re.match(r"^- \*\*([A-Z]+-[0-9]+)\b", line)
        if match:
            current = bullets[match.group(1)] = [line]
        elif current is not None and line.startswith("  ") and line.strip():
            current.append(line)
        else:
            current = None
    return {rule: "\n".join(lines) for rule, lines in bullets.items()}


def test_each_rule_kept_links_to_the_page_that_explains_it() -> None:
    text = (DOCS / "rules.md").read_text()
    kept, _, planned = text.partition(f"## {NOT_BUILT}")
    bullets = rule_bullets(kept)
    assert len(bullets) >= 45, sorted(bullets)
    bare = sorted(rule for rule, bullet in bullets.items() if not relative_links(bullet))
    assert not bare, f"rules in docs/rules.md with no link to a page: {bare}"
    assert not set(bullets) & set(rule_bullets(planned)), "a rule both kept and not built"
    assert rule_bullets("- **Q-1** one\n  two ([x](x.md))\n\n- **Q-2** three\n") == {
        "Q-1": "- **Q-1** one\n  two ([x](x.md))",
        "Q-2": "- **Q-2** three",
    }


def test_the_readmes_short_tour_runs_as_written(sowd_process: Process) -> None:
    (block,) = blocks("README.md", "A short tour")
    run = run_block(block, sowd_process.target)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    assert "Traceback" not in run.stderr, run.stderr
    assert "published 1000 messages to orders (bookmarks 1..1000)" in run.stdout + run.stderr
    assert '"command":"group_end"' in run.stdout
    assert '"orderId":1001' in run.stdout  # live, or in the query if the subscription came late


def test_the_readmes_python_example_runs_as_written(sowd_process: Process) -> None:
    (block,) = blocks("README.md", "A short tour", lang="python")
    run = subprocess.run(
        [sys.executable, "-c", block.replace('Client("127.0.0.1:9007")', f"Client({sowd_process.target!r})")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "1 {'orderId': 1, 'symbol': 'SYM1', 'price': 120}\n", run.stdout
