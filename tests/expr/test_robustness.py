"""Evaluation never raises, whatever the data: deep nesting, huge numbers, odd strings.

A runtime problem yields NULL or NaN (FILTERS.md, "Errors"); an exception here would be an
INTERNAL error for a query and a failed update for a view.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from sowdb.expr import compile_expression, parse_aggregation, parse_order_by, parse_select

ORJSON_DEPTH = 1023  # the deepest array orjson decodes inside an object


def _deep_document() -> dict[str, Any]:
    n = ORJSON_DEPTH - 1
    raw = b'{"d":' + b"[" * n + b'"x"' + b"]" * n + b',"o":' + b'{"a":' * n + b"1" + b"}" * n + b"}"
    doc: dict[str, Any] = orjson.loads(raw)
    return doc


DEEP = _deep_document()
DEEP_EXPRESSIONS = [
    "UPPER(/d)",
    "CONCAT(/d, 'y')",
    "LENGTH(/d)",
    "/d + 1",
    "ABS(/d)",
    "/d IS NAN",
    "/d = 'x'",
    "/d LIKE 'x'",
    "/d IN ('x')",
    "ARRAY_TO_STRING(/d, ',')",
    "ARRAY_MAX(/d)",
    "GREATEST(/d, 1)",
    "COALESCE(/d)",
    "/o = 1",
    "UPPER(/o)",
]


@pytest.mark.parametrize("expression", DEEP_EXPRESSIONS)
def test_deeply_nested_data_is_evaluated_without_recursion(expression: str) -> None:
    compile_expression(expression).evaluate(DEEP)


def test_deeply_nested_data_is_sorted_grouped_and_selected() -> None:
    order = parse_order_by("/d DESC, /o")
    order.key(DEEP)
    order.byte_key(DEEP)
    agg = parse_aggregation(
        "[/d]", "[/d AS /first, COUNT(/d) AS /n, COUNT_DISTINCT(/d) AS /k, MIN(/d) AS /lo, MAX(/o) AS /hi]"
    )
    rows = agg.run([(DEEP, None), (DEEP, None)])
    assert rows[0]["n"] == 2 and rows[0]["k"] == 1
    picked = parse_select("[-/,+/o,+/d]").apply(DEEP)
    assert (
        list(picked) == ["o", "d"] and _equal_copies(picked["o"], DEEP["o"]) and _equal_copies(picked["d"], DEEP["d"])
    )
    trimmed = parse_select("[-/d]").apply(DEEP)
    assert list(trimmed) == ["o"] and _equal_copies(trimmed["o"], DEEP["o"]) and "d" in DEEP


def _equal_copies(a: Any, b: Any) -> bool:
    """Equal JSON values whose objects and arrays are distinct (== recurses in C: no use here)."""
    pending = [(a, b)]
    while pending:
        x, y = pending.pop()
        if type(x) is not type(y):
            return False
        if type(x) is dict or type(x) is list:
            if x is y or len(x) != len(y):
                return False
            if type(x) is dict:
                if list(x) != list(y):
                    return False
                pending.extend((x[k], y[k]) for k in x)
            else:
                pending.extend(zip(x, y, strict=True))
        elif x != y:
            return False
    return True


def test_select_copies_so_the_record_is_untouched() -> None:
    record = {"a": {"b": 1, "c": [1, {"d": 2}]}, "e": 3}
    out = parse_select("[-/a/b]").apply(record)
    assert out == {"a": {"c": [1, {"d": 2}]}, "e": 3}
    assert record == {"a": {"b": 1, "c": [1, {"d": 2}]}, "e": 3}
    out["a"]["c"][1]["d"] = 9
    assert record["a"]["c"][1]["d"] == 2


def test_integers_beyond_the_conversion_limit_in_data_do_not_raise() -> None:
    # not from JSON (orjson stops at 64 bits), but from any caller holding Python ints
    data = {"a": 10**5000, "b": [10**5000, 1.5]}
    for text in ["CONCAT(/a)", "LENGTH(/a)", "/a LIKE '1'", "/a + 1.5", "ARRAY_SUM(/b)", "UPPER(/a)"]:
        compile_expression(text).evaluate(data)
    assert compile_expression("CONCAT(/a)").evaluate(data) == "Infinity"


def test_strptime_with_a_repeated_directive_is_null() -> None:
    # time.strptime raises re.error (not a ValueError) for '%m%m'
    assert compile_expression("STRPTIME('0101', '%m%m')").evaluate({}) is None
    assert compile_expression("STRPTIME(/s, /f)").evaluate({"s": "Jan Jan", "f": "%b %b"}) is None


def test_char_value_of_a_surrogate_is_null() -> None:
    # a lone surrogate is no text: orjson refuses to write it into a view's record
    assert compile_expression("CHAR_VALUE(55296)").evaluate({}) is None
    assert compile_expression("CHAR_VALUE(57343)").evaluate({}) is None
    assert compile_expression("CHAR_VALUE(57344)").evaluate({}) == "\ue000"


def test_group_keys_follow_nested_arrays() -> None:
    agg = parse_aggregation("[/t]", "[/t, COUNT(/t) AS /n]")
    rows = agg.run([({"t": [[1], 2]}, None), ({"t": [[2], 2]}, None), ({"t": [[1.0], 2]}, None), ({"t": []}, None)])
    assert [(r.get("t"), r["n"]) for r in rows] == [([[1.0], 2], 2), ([[2], 2], 1), ([], 0)]
