"""The front door (issue 32): README.md stays one screen of orientation, its own blocks run as
written, every relative link of README.md and docs/ leads somewhere, and every rule id the
repository cites (K-3, Q-7, A-2, HA-3, ...) is stated in docs/rules.md.

The manual's pages run in their own tests: the tour, "Securing sowdb" and "Operations" in
``test_readme_tour.py``, the tour's Python mirror and the Spark page's write in
``test_first_hour.py``, docs/connect.md and docs/spark-cluster.md in theirs, docs/cluster.md and
README's "Running a cluster" in ``test_cluster_docs.py``, docs/node.md's
example in the Node SDK's ``example.test.ts``, and the blocks that ran nowhere before (the tour's
Python SDK, the sample config, the filter engine's example) in ``test_docs_pages.py``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.doc_pages import DOCS, ROOT, anchors, blocks, page_path, relative_links, run_block
from tests.support import Process

README_MAX_LINES = 300
SPEC = ROOT.parent / "shared" / "SPEC.md"
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


@pytest.mark.parametrize("page", pages())
def test_every_relative_link_of_a_page_resolves(page: str) -> None:
    source = page_path(page)
    broken = []
    for link in relative_links(source.read_text()):
        path, _, anchor = link.partition("#")
        target = (source.parent / unquote(path)).resolve() if path else source
        if not target.exists():
            broken.append(f"{link}: no file {target}")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target.read_text()):
            broken.append(f"{link}: no heading #{anchor} in {target.name}")
    assert not broken, f"{page}: " + "; ".join(broken)


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


def test_the_link_check_finds_a_broken_link(tmp_path: Path) -> None:
    """The check above can fail: a missing file and a missing heading are both seen."""
    text = "# Title\n\nSee [a](missing.md), [b](#nowhere), [c](#title), `[d](in-code.md)`.\n"
    assert relative_links(text) == ["missing.md", "#nowhere", "#title"]
    assert anchors(text) == {"title"}


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
    if not SPEC.exists():
        pytest.skip(f"the spec is not beside this checkout ({SPEC})")
    in_spec = set(re.findall(r"^- \*\*([A-Z]+-[0-9]+)\b", SPEC.read_text(), flags=re.MULTILINE))
    assert len(in_spec) >= 40
    missing = in_spec - listed_rule_ids()
    assert not missing, f"run tools/docs/rules_index.py: docs/rules.md lacks {sorted(missing)}"


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
