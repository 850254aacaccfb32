"""Evaluation never raises, whatever the data: deep nesting, huge numbers, odd strings.

A runtime problem yields NULL or NaN (FILTERS.md, "Errors"); an exception here would be an
INTERNAL error for a query and a failed update for a view.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sowdb.errors import ExpressionError
from sowdb.expr import compile_expression, compile_filter, parse_aggregation, parse_order_by, parse_select
from sowdb.expr.functions import FUNCTIONS

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
    assert rows[0]["n"] == 2
    assert rows[0]["k"] == 1
    picked = parse_select("[-/,+/o,+/d]").apply(DEEP)
    assert list(picked) == ["o", "d"]
    assert _equal_copies(picked["o"], DEEP["o"])
    assert _equal_copies(picked["d"], DEEP["d"])
    trimmed = parse_select("[-/d]").apply(DEEP)
    assert list(trimmed) == ["o"]
    assert _equal_copies(trimmed["o"], DEEP["o"])
    assert "d" in DEEP


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
    record: dict[str, Any] = {"a": {"b": 1, "c": [1, {"d": 2}]}, "e": 3}
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


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["9" * 5000, "-" + "1" * 400, "1e400", "0" * 5000 + "7", "18446744073709551616", "\u0661"]),
    st.sampled_from(["%m%m", "%Y-%m-%d", "(?i)A", "", "a,b"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abx"), inner, max_size=2)),
    max_leaves=8,
)
ARGUMENTS = ["/a", "/b", "/c", "/a[0]", "/b/x", "/c[1]", "NULL", "TRUE", "''", "'abc'", "'12'", "'%m%m'", "0", "-1"]
ARGUMENTS += ["2.5", "55296", "18446744073709551615", "-9223372036854775808", "1e308", "NAN_VALUE()", "'(?i)A'"]
CALLABLE = sorted(name for name in FUNCTIONS if name != "UNIX_TIMESTAMP")


def _call(draw_args: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def build(name: str, args: list[str]) -> str:
        fn = FUNCTIONS[name]
        high = fn.max_args if fn.max_args is not None else fn.min_args + 2
        return f"{name}({', '.join(args[: max(fn.min_args, min(len(args), high))])})"

    return st.builds(build, st.sampled_from(CALLABLE), st.lists(draw_args, min_size=4, max_size=4))


operands = st.recursive(
    st.sampled_from(ARGUMENTS),
    lambda inner: st.one_of(
        _call(inner),
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%"]), inner).map(lambda t: f"({' '.join(t)})"),
        st.tuples(inner, st.sampled_from(["=", "<", "LIKE '1'", "IN (1, '1')", "IS NAN"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})" if t[1] in "=<" else f"({t[0]} {t[1]})"
        ),
    ),
    max_leaves=6,
)


@settings(max_examples=3000)
@given(operands, st.fixed_dictionaries({"a": json_values, "b": json_values, "c": json_values}))
def test_fuzz_functions_on_any_json_never_raise_and_give_json(expression: str, data: dict[str, Any]) -> None:
    try:
        compiled = compile_expression(expression)
    except ExpressionError:
        return
    value = compiled.evaluate(data)
    orjson.dumps({"v": value})  # storable again: integers within 64 bits, no lone surrogates
    compile_filter(expression).matches(data, None)
