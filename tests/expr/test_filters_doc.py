"""docs/filters.md, the filter language's page, checked against the real compiler (issue 36).

Every example of the page sits in a fenced block whose info string names what it exercises --
``filter``, ``aggregate``, ``order_by`` or ``select`` -- and reads, one line each:

- ``record: {JSON}``: in ``filter`` and ``select`` blocks, the record the next lines run against
  (``{}`` until one is given); in ``aggregate`` and ``order_by`` blocks, one more input record;
- ``metadata: {JSON}``: the record's metadata (``sow_key``, ``topic``, ``bookmark``,
  ``timestamp``) for SOW_KEY(), TOPIC_NAME(), BOOKMARK() and LAST_UPDATED();
- ``grouping: TEXT``: the grouping of the ``aggregate`` lines after it;
- ``TEXT → RESULT``: TEXT (an expression, a projection, an order_by, a select) and what it gives:
  ``TRUE``, ``FALSE``, ``NULL``, ``NaN``, a JSON value, or ``error: WORDS`` for a refusal whose
  message contains WORDS;
- blank lines and ``# comments``.

A line of another shape fails the test rather than being skipped, and a result is compared
strictly: ``2`` is not ``2.0``, ``1`` is not ``TRUE``. The page must also mention and exemplify
every function of the implementation's table, and its "Bounds" table must state the bounds the
code enforces: each row is checked by an entry of :data:`BOUNDS` (add one with a new row).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from sowdb.engine.read import execution, prepared
from sowdb.errors import ExpressionError, SowdbError
from sowdb.expr import (
    budget,
    compile_expression,
    compile_filter,
    matching,
    parse_aggregation,
    parse_order_by,
    parse_select,
)
from sowdb.expr import parser as expr_parser
from sowdb.expr import reference as ref
from sowdb.expr import values as expr_values
from sowdb.expr.functions import AGGREGATES, FUNCTIONS
from sowdb.expr.numeric import INT64_MIN, UINT64_MAX
from sowdb.expr.parser import parse
from sowdb.expr.values import truthy
from tests.doc_pages import DOCS, section

PAGE = DOCS / "filters.md"
KINDS = ("filter", "aggregate", "order_by", "select")
ARROW = " → "
SETTINGS = ("record", "metadata", "grouping")
_FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Example:
    """One ``TEXT → RESULT`` line of the page, with what the lines above it in its block set."""

    kind: str
    line: int  # 1-based, in the page
    text: str
    expected: str
    records: tuple[dict[str, Any], ...] = ()
    metadata: dict[str, Any] | None = None
    grouping: str = ""

    @property
    def record(self) -> dict[str, Any]:
        return self.records[-1] if self.records else {}


@dataclass
class _Block:
    kind: str
    records: list[dict[str, Any]] = field(default_factory=list)
    metadata: dict[str, Any] | None = None
    grouping: str = ""


def examples(markdown: str, where: str = "docs/filters.md") -> list[Example]:
    """The examples of a page's ``filter``/``aggregate``/``order_by``/``select`` blocks.

    Raises:
        ValueError: a line of such a block that is neither a setting, a comment nor an example.
    """
    out: list[Example] = []
    block: _Block | None = None
    fenced = False
    for number, raw in enumerate(markdown.splitlines(), start=1):
        fence = _FENCE.match(raw)
        if not fenced and fence:
            fenced = True
            block = _Block(fence.group(1)) if fence.group(1) in KINDS else None
            continue
        if fenced and raw.startswith("```"):
            fenced, block = False, None
            continue
        if block is None:
            continue
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, colon, rest = line.partition(":")
        if colon and key in SETTINGS:
            if key == "grouping":
                block.grouping = rest.strip()
                continue
            try:
                value = json.loads(rest)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}:{number}: {key} is not JSON ({exc})") from None
            if key == "metadata":
                block.metadata = value
            elif block.kind in ("filter", "select"):
                block.records = [value]
            else:
                block.records.append(value)
            continue
        if ARROW not in line:
            raise ValueError(f"{where}:{number}: expected 'TEXT → RESULT', a setting or a # comment: {line!r}")
        text, _, expected = line.rpartition(ARROW)
        out.append(
            Example(
                block.kind,
                number,
                text.strip(),
                expected.strip(),
                tuple(block.records),
                block.metadata,
                block.grouping,
            )
        )
    return out


def expected_value(written: str) -> Any:
    """What a RESULT denotes: TRUE, FALSE, NULL, NaN, or a JSON value."""
    words: dict[str, Any] = {"TRUE": True, "FALSE": False, "NULL": None, "NaN": math.nan}
    if written in words:
        return words[written]
    return json.loads(written)


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (NaN equals NaN; 2 is not 2.0 or TRUE)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def _run(example: Example) -> Any:
    """What the implementation gives for the example's text (raises what it raises)."""
    if example.kind == "filter":
        ctx = None if example.metadata is None else SimpleNamespace(**example.metadata)
        record = example.record
        compiled = compile_filter(example.text)
        value = compiled.evaluate(record, ctx)
        # the same value whichever way it is computed, and the match follows from it
        assert same(compile_expression(example.text).evaluate(record, ctx), value), "compile_expression differs"
        assert same(ref.evaluate(parse(example.text), record, ctx), value), "the reference evaluator differs"
        assert bool(compiled.matches(record, ctx)) == truthy(value), "the match does not follow the value"
        return value
    if example.kind == "aggregate":
        aggregation = parse_aggregation(example.grouping, example.text)
        return aggregation.run((r, None) for r in example.records)
    if example.kind == "order_by":
        order = parse_order_by(example.text)
        result = sorted(example.records, key=order.key)
        assert sorted(example.records, key=order.byte_key) == result, "the byte key orders differently"
        return result
    return parse_select(example.text).apply(example.record)


def check(example: Example) -> None:
    """Assert that the implementation gives what the example states."""
    where = f"docs/filters.md:{example.line}: {example.text}"
    if example.expected.startswith("error:"):
        words = example.expected.removeprefix("error:").strip()
        with pytest.raises(ExpressionError) as info:
            _run(example)
        assert words in str(info.value), f"{where}: the error is {str(info.value)!r}, the page says {words!r}"
        return
    expected = expected_value(example.expected)
    try:
        got = _run(example)
    except ExpressionError as exc:
        raise AssertionError(f"{where}: refused ({exc}), the page says {example.expected}") from None
    assert same(got, expected), f"{where}: gives {got!r}, the page says {example.expected}"


PAGE_EXAMPLES = examples(PAGE.read_text())


@pytest.mark.parametrize("example", PAGE_EXAMPLES, ids=[f"L{e.line}" for e in PAGE_EXAMPLES])
def test_each_example_of_the_page_holds(example: Example) -> None:
    check(example)


def test_the_page_has_many_examples_of_each_kind() -> None:
    counts = {kind: sum(e.kind == kind for e in PAGE_EXAMPLES) for kind in KINDS}
    assert counts["filter"] >= 150, counts
    assert min(counts.values()) >= 5, counts
    assert sum(e.expected.startswith("error:") for e in PAGE_EXAMPLES) >= 15


def test_a_wrong_example_fails_its_check() -> None:
    """The check can fail: a wrong value, a wrong type, a wrong error, a refusal not stated."""
    page = "\n".join(
        [
            "```filter",
            'record: {"a": 2}',
            "/a + 1 → 4",
            "/a + 1 → 3.0",
            "/a = 2 → 1",
            "/a = = 2 → error: unknown function",
            "/a = = 2 → FALSE",
            "```",
            "```aggregate",
            'record: {"g": 1, "q": 2}',
            "grouping: /g",
            '[/g, SUM(/q) AS /s] → [{"g": 1, "s": 3}]',
            "```",
            "```order_by",
            'record: {"p": 2}',
            'record: {"p": 1}',
            '/p DESC → [{"p": 1}, {"p": 2}]',
            "```",
            "```select",
            'record: {"a": 1, "b": 2}',
            '[-/b] → {"b": 2}',
            "```",
        ]
    )
    found = examples(page, "test")
    assert len(found) == 8
    for example in found:
        with pytest.raises(AssertionError):
            check(example)


def test_a_line_of_no_known_shape_is_refused_not_skipped() -> None:
    with pytest.raises(ValueError, match="expected 'TEXT → RESULT'"):
        examples("```filter\n/a = 1 -> TRUE\n```\n", "test")


# --- every function -------------------------------------------------------------------------


def _names_called(texts: list[str]) -> set[str]:
    return {m.upper() for t in texts for m in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", t)}


def test_every_function_of_the_implementation_is_documented_and_has_an_example() -> None:
    """Each name of the function table (and IF, and the aggregates) has its entry in the page's
    "Functions" or "Aggregation" section and appears in at least one checked example."""
    names = set(FUNCTIONS) | set(AGGREGATES) | {"IF"}
    reference = section("filters.md", "Functions") + section("filters.md", "Aggregation: grouping and projection")
    undocumented = sorted(n for n in names if not re.search(rf"`{n}\(", reference))
    assert not undocumented, f"no `NAME(` entry in docs/filters.md for {undocumented}"
    unexemplified = sorted(names - _names_called([e.text for e in PAGE_EXAMPLES]))
    assert not unexemplified, f"no checked example in docs/filters.md calls {unexemplified}"


def test_the_page_documents_no_function_the_implementation_lacks() -> None:
    names = set(FUNCTIONS) | set(AGGREGATES) | {"IF"}
    reference = section("filters.md", "Functions") + section("filters.md", "Aggregation: grouping and projection")
    documented = set(re.findall(r"^\| `([A-Z_0-9]+)\(", reference, flags=re.MULTILINE))
    assert documented, "no function table rows found"
    assert documented <= names, f"documented but not implemented: {sorted(documented - names)}"


# --- bounds ---------------------------------------------------------------------------------


def _refusal(run: Callable[[], object]) -> str:
    """The message of the error ``run`` raises (it must raise one of sowdb's refusals)."""
    try:
        run()
    except SowdbError as exc:
        return str(exc)
    raise AssertionError("not refused")


def _null(text: str) -> str:
    """For a bound past which a function is NULL: ``text`` (a filter over ``/s``, 4,096 a's),
    which would match but passes the bound, must not match (a NULL term), and the message says
    so for the table's cell."""
    matched = compile_filter(text).matches({"s": "a" * 4096}, None)
    assert not matched, f"{text[:80]}... matched past the bound"
    return "NULL"


def _query(**options: Any) -> Callable[[], object]:
    return lambda: prepared.PreparedQuery(prepared.QueryOptions(topic="t", **options))


@dataclass(frozen=True)
class Bound:
    """What a row of the Bounds table must state: ``value`` in its limit cell, and (when the
    bound refuses input) the message ``passed()`` gets, which must contain the row's error text."""

    value: str
    passed: Callable[[], str] | None = None


def _deep(levels: int) -> str:
    return "(" * levels + "1" + ")" * levels


BOUNDS: dict[str, Bound] = {
    "Expression length": Bound(
        f"{expr_parser.MAX_LENGTH:,} characters",
        lambda: _refusal(lambda: compile_filter("1 = 1" + " " * expr_parser.MAX_LENGTH)),
    ),
    "Nesting depth": Bound(
        f"{expr_parser.MAX_DEPTH} levels",
        lambda: _refusal(lambda: compile_filter(_deep(expr_parser.MAX_DEPTH + 1))),
    ),
    "Regular expression length": Bound(
        f"{matching.MAX_PATTERN_LENGTH:,} characters",
        lambda: _refusal(lambda: compile_filter("/a LIKE '" + "a" * (matching.MAX_PATTERN_LENGTH + 1) + "'")),
    ),
    "Repetition count in a regular expression": Bound(
        "1,000", lambda: _refusal(lambda: compile_filter("/a LIKE 'a{1001}'"))
    ),
    "Nested large repetition counts": Bound(
        "two counts of 3 digits", lambda: _refusal(lambda: compile_filter("/a LIKE '(a{100}){100}'"))
    ),
    "Time of one backtracking match": Bound(f"{round(matching.MATCH_TIMEOUT_S * 1000)} ms"),
    "Backtracking time per pattern": Bound(
        f"{round(matching.Budget(0.02, matching.MATCH_TIMEOUT_S).rate_s * 1000)} ms a second"
    ),
    "Backtracking time of the whole server": Bound(f"{round(matching.SHARED_BUDGET.rate_s * 1000)} ms a second"),
    "Text one evaluation may build": Bound(
        f"{budget.MAX_BUILT_CHARS:,} characters",
        lambda: _null(f"LENGTH(REPLACE(REPLACE(/s, 'a', '{'a' * 64}'), 'a', '{'a' * 64}')) > 0"),
    ),
    "Text one evaluation may read through": Bound(
        f"{budget.MAX_SCANNED_CHARS:,} characters",
        lambda: _null(" AND ".join(["INSTR(/s, 'b') = 0"] * (budget.MAX_SCANNED_CHARS // 4096 + 1))),
    ),
    "Time one query may take": Bound(f"{execution.QUERY_BUDGET_S:g} s"),  # tests/security/test_costly_queries.py
    "Integers": Bound(f"{INT64_MIN} to {UINT64_MAX}"),
    "Number literals": Bound("1.8e308", lambda: _refusal(lambda: compile_filter("1" * 310 + " > 0"))),
    "Group key depth": Bound(f"{expr_values.KEY_DEPTH} levels"),
    "order_by fields": Bound(
        str(prepared.MAX_ORDER_BY_FIELDS),
        lambda: _refusal(_query(order_by=", ".join(f"/f{i}" for i in range(prepared.MAX_ORDER_BY_FIELDS + 1)))),
    ),
    "grouping expressions": Bound(
        str(prepared.MAX_GROUPING),
        lambda: _refusal(
            _query(grouping=[f"/g{i}" for i in range(prepared.MAX_GROUPING + 1)], projection=["COUNT(/a) AS /n"])
        ),
    ),
    "projection items": Bound(
        str(prepared.MAX_PROJECTION),
        lambda: _refusal(_query(grouping=["/g"], projection=[f"/p{i}" for i in range(prepared.MAX_PROJECTION + 1)])),
    ),
    "select paths": Bound(
        str(prepared.MAX_SELECT_PATHS),
        lambda: _refusal(_query(select=",".join(f"+/s{i}" for i in range(prepared.MAX_SELECT_PATHS + 1)))),
    ),
}


def bounds_table() -> dict[str, tuple[str, str]]:
    """The rows of the page's "Bounds" table: bound -> (limit cell, what-happens cell)."""
    rows: dict[str, tuple[str, str]] = {}
    for line in section("filters.md", "Bounds").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or set(cells[0]) <= {"-", ":"} or cells[0] == "bound":
            continue
        rows[cells[0]] = (cells[1], cells[2])
    return rows


def test_the_bounds_table_has_a_check_for_each_row_and_a_row_for_each_check() -> None:
    rows = bounds_table()
    unchecked, missing = sorted(set(rows) - set(BOUNDS)), sorted(set(BOUNDS) - set(rows))
    assert not unchecked, f"rows without a check (add one to BOUNDS in tests/expr/test_filters_doc.py): {unchecked}"
    assert not missing, f"bounds the page's table lacks: {missing}"


@pytest.mark.parametrize("name", sorted(BOUNDS))
def test_each_bound_the_page_states_is_the_implementations(name: str) -> None:
    rows = bounds_table()
    if name not in rows:
        pytest.fail(f"the Bounds table has no row {name!r}")
    limit, happens = rows[name]
    bound = BOUNDS[name]
    assert bound.value in limit, f"{name}: the page says {limit!r}, the implementation {bound.value!r}"
    if bound.passed is not None:
        errors = re.findall(r"`([^`]+)`", happens)
        assert errors, f"{name}: the row names no error text in backticks"
        message = bound.passed()
        assert any(e in message for e in errors), f"{name}: the error is {message!r}, the page says {errors}"
