"""The join syntax of joined views (V-2) in the filter language: ``[topic]./field`` paths and the
join entries (``sowdb.expr.joins``); the views themselves: ``tests/engine/state/test_joins.py``."""

from __future__ import annotations

import pytest

from sowdb.errors import ExpressionError
from sowdb.expr import compile_expression, compile_filter
from sowdb.expr.joins import join_plan, parse_join, value_getter
from sowdb.expr.lexer import tokenize

ROW = {"[orders]": {"qty": 3, "book": {"ask": 2}, "legs": [{"px": 1}, {"px": 4}]}, "[prices]": {"px": 5}}


def test_a_topic_path_reads_that_topics_record_of_a_joined_row() -> None:
    assert tokenize("[orders]./book/ask")[0].value == ("[orders]", "book", "ask")
    assert compile_expression("[orders]./qty * [prices]./px").evaluate(ROW) == 15
    assert compile_expression("[orders]./book/ask").evaluate(ROW) == 2
    assert compile_expression("[orders]./legs/px").evaluate(ROW) == [1, 4]  # through an array, as any path
    assert compile_expression("[orders]./legs[1]/px").evaluate(ROW) == 4
    assert compile_filter("[prices]./px > 4 AND [orders]./qty = 3").matches(ROW, None)
    assert compile_expression("[orders]./qty").evaluate({"qty": 3}) is None  # not a joined row: NULL
    assert compile_expression("/a/b").evaluate({"a": [{"b": 1}, {"b": 2}]}) == [1, 2]  # two steps, any path
    assert compile_expression("/a/b").evaluate({"a": 7}) is None


@pytest.mark.parametrize("text", ["[orders] ./qty", "[orders]qty", "[or ders]./qty", "/x [orders]./qty"])
def test_a_topic_path_is_written_in_one_piece(text: str) -> None:
    with pytest.raises(ExpressionError):
        compile_expression(text)


def test_join_entries_parse_either_way_round_and_form_a_tree() -> None:
    e = parse_join("LEFT JOIN [orders]./cid = [customers]./id")
    assert (e.parent, e.parent_steps, e.child, e.child_steps, e.outer) == (
        "orders",
        ("cid",),
        "customers",
        ("id",),
        True,
    )
    edges = join_plan("orders", ["[customers]./id = [orders]./cid", "[customers]./region == [regions]./code"])
    assert [(e.parent, e.child) for e in edges] == [("orders", "customers"), ("customers", "regions")]
    with pytest.raises(ExpressionError, match="LEFT join names the topic already in the view first"):
        join_plan("orders", ["LEFT [customers]./id = [orders]./cid"])


def test_join_values_are_group_key_values() -> None:
    top, nested = value_getter(("id",)), value_getter(("a", "b"))
    assert [top({"id": v}) for v in (1, 1.0, "x", "", None, [1, 2], True)] == [1, 1.0, "x", None, None, (1, 2), True]
    assert top({}) is None
    assert top(None) is None
    assert nested({"a": {"b": "k"}}) == "k"
    assert nested({"a": 3}) is None
