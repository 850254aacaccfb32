#!/usr/bin/env python3
"""Write docs/rules.md, the index of the spec's rule ids, from ``../shared/SPEC.md``.

Code, tests and docs cite rules by id (K-3, Q-7, A-2, HA-3, ...); the spec that states them sits
beside the checkout, not in it, so this page copies each rule's statement under its section, and
``tests/process/test_docs_blocks.py`` checks that every id cited in the repository is listed here.
Run it again when the spec gains or changes a rule:

    .venv/bin/python tools/docs/rules_index.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT.parent / "shared" / "SPEC.md"
RULE = re.compile(r"^- \*\*([A-Z]+-[0-9]+)\b")


def rules_page(spec: str) -> str:
    """The Markdown of docs/rules.md: each rule bullet of the spec, whole, under its headings."""
    out = [
        "# Rule index",
        "",
        "Every rule id of the product specification (`../shared/SPEC.md`), with its statement as the",
        "spec words it, under the spec's sections. Code, tests and the other pages cite these ids;",
        "`tests/process/test_docs_blocks.py` checks that each one they cite is here. Made by",
        "`tools/docs/rules_index.py` from the spec: edit the spec, then run it again.",
    ]
    headings: list[str] = []  # the spec's headings above the next rule, not yet written
    in_rule = False
    for line in spec.splitlines():
        if line.startswith("##"):  # the spec's sections (its title, #, is this page's)
            level = len(line) - len(line.lstrip("#"))
            headings = [h for h in headings if len(h) - len(h.lstrip("#")) < level] + [line]
            in_rule = False
        elif RULE.match(line):
            if headings:
                for heading in headings:
                    out += ["", heading]
                out.append("")
                headings = []
            out.append(line)
            in_rule = True
        elif in_rule and line.startswith("  ") and line.strip():
            out.append(line)
        else:
            in_rule = False
    return "\n".join(out) + "\n"


def main() -> int:
    if not SPEC.exists():
        print(f"rules_index: no spec at {SPEC}", file=sys.stderr)
        return 1
    (ROOT / "docs" / "rules.md").write_text(rules_page(SPEC.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
