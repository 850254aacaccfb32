"""``EXPR AS /field`` rewrites (EN-1, EN-2) and ``/path OF PREVIOUS``: where the syntax is
admitted, what it reads, and the rule for an expression that fails on a message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sowdb.errors import ExpressionError
from sowdb.expr import compile_filter
from sowdb.expr.parser import parse
from sowdb.expr.reference import evaluate
from sowdb.expr.rewrite import Context, compile_rewrite


def ctx(previous: Any = None) -> Context:
    return Context("t", "k", 1, 2, previous)


def test_of_previous_reads_the_previous_version_and_divides_after_it() -> None:
    r = compile_rewrite(["/qty OF PREVIOUS / 2 AS /half", "/a/b OF PREVIOUS AS /c"], previous=True)
    assert r.apply({"qty": 1}, ctx({"qty": 10, "a": {"b": "x"}})) == {"qty": 1, "half": 5, "c": "x"}
    assert r.apply({"qty": 1}, ctx(None)) is None  # no previous version: NULL, nothing set


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("/a OF PREVIOUS = 1", "OF PREVIOUS reads a record's previous version"),
        ("/a OF = 1", "expected PREVIOUS after OF"),
        ("/a OF", "expected PREVIOUS after OF"),
    ],
)
def test_a_filter_refuses_of_previous(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        compile_filter(text)


def test_a_rewrite_never_modifies_the_message_it_reads() -> None:
    shared = {"n": 1}
    doc = {"a": shared, "x": 2}
    out = compile_rewrite(["/x * 10 AS /a/m"], previous=False).apply(doc, ctx())
    assert out == {"a": {"n": 1, "m": 20}, "x": 2}
    assert doc == {"a": {"n": 1}, "x": 2}
    assert shared == {"n": 1}


def test_items_apply_in_order_and_a_null_removes_the_field() -> None:
    r = compile_rewrite(["/a + 1 AS /b", "/b * 2 AS /c", "/nope AS /a"], previous=False)
    assert r.apply({"a": 1}, ctx()) == {"b": 2, "c": 4}


def test_a_value_json_cannot_hold_is_null_and_an_unchanged_message_is_none() -> None:
    r = compile_rewrite(["/a * 10 AS /b"], previous=False)
    assert r.apply({"a": 1e308, "b": 1}, ctx()) == {"a": 1e308}
    assert r.apply({"a": "x"}, ctx()) is None  # NaN: NULL, and no /b to remove
    assert r.apply({"a": 2, "b": 20}, ctx()) is None


values = st.one_of(st.none(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=3), st.booleans())
records = st.dictionaries(st.sampled_from(["a", "b"]), values, max_size=2)


@given(records, st.one_of(st.none(), records))
def test_the_compiled_form_agrees_with_the_reference_evaluator(message: dict[str, Any], previous: Any) -> None:
    for text in ("/a OF PREVIOUS", "IF(/a < 0, /a OF PREVIOUS, /a)", "COALESCE(/b OF PREVIOUS, /b, 0) + 1"):
        compiled = compile_rewrite([f"{text} AS /out"], previous=True).items[0].fn(message, ctx(previous))
        node = parse(f"{text}", previous=True)
        reference = evaluate(node, message, ctx(previous))
        assert repr(compiled) == repr(reference), text


@given(records, st.one_of(st.none(), records))
def test_the_writers_update_in_place_is_apply(message: dict[str, Any], previous: Any) -> None:
    """``update`` (the writer's EN-2 step) changes the message as ``apply`` rewrites it, and says
    whether it did; a nested output's objects are copied, never changed where they are shared."""
    r = compile_rewrite(
        ["IF(/a < 0, /a OF PREVIOUS, /a) AS /a", "/b * 2 AS /b", "/a AS /n/x", "/b OF PREVIOUS AS /c"], previous=True
    )
    shared = {"y": 1}
    doc = {**message, "n": shared}
    expected = r.apply(dict(doc), ctx(previous))
    assert r.update(doc, ctx(previous)) == (expected is not None)
    assert doc == (expected if expected is not None else {**message, "n": shared})
    assert shared == {"y": 1}
