"""What callers of the engine rely on: the cache, paths, conjuncts, flags, and the parsers for
order_by, select and grouping/projection."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sowdb.expr import (
    FILTER_CACHE_SIZE,
    compile_filter,
    parse_aggregation,
    parse_order_by,
    parse_select,
)
from sowdb.expr.compiled import Conjunct


def test_compiled_filters_are_cached_by_text_and_bounded() -> None:
    a = compile_filter("/cache_probe = 1")
    assert compile_filter("/cache_probe = 1") is a
    assert compile_filter.cache_info().maxsize == FILTER_CACHE_SIZE


def test_paths_and_index_conjuncts() -> None:
    f = compile_filter("/symbol = 'SYM42' AND /venue IN ('V1', 'V2', NULL) AND /price > 5 AND /a/b[0] = 1")
    assert set(f.paths) == {"/symbol", "/venue", "/price", "/a/b[0]"}
    assert f.conjuncts == (
        Conjunct(("symbol",), "/symbol", ("SYM42",)),
        Conjunct(("venue",), "/venue", ("V1", "V2")),
        Conjunct(("a", "b", 0), "/a/b[0]", (1,)),
    )
    assert compile_filter("'x' = /k").conjuncts == (Conjunct(("k",), "/k", ("x",)),)
    # an OR or a NOT IN at the top cannot be served by an index
    assert compile_filter("/a = 1 OR /b = 2").conjuncts == ()
    assert compile_filter("/a NOT IN (1, 2)").conjuncts == ()


def test_nondeterministic_functions_are_flagged() -> None:
    assert compile_filter("UNIX_TIMESTAMP() - /ts > 60").nondeterministic
    assert not compile_filter("/ts > 60").nondeterministic


def test_order_by_sorts_nulls_first_numbers_before_strings_and_desc() -> None:
    rows: list[dict[str, Any]] = [{"p": "b"}, {"p": 2}, {}, {"p": 10}, {"p": "a"}, {"p": 2.5}]
    asc = parse_order_by("/p")
    assert [r.get("p") for r in sorted(rows, key=asc.key)] == [None, 2, 2.5, 10, "a", "b"]
    desc = parse_order_by("/p DESC")
    assert [r.get("p") for r in sorted(rows, key=desc.key)] == ["b", "a", 10, 2.5, 2, None]
    two = parse_order_by("/g ASC, /p DESC")
    data: list[dict[str, Any]] = [{"g": 1, "p": 1}, {"g": 0, "p": 1}, {"g": 1, "p": 3}]
    assert sorted(data, key=two.key) == [{"g": 0, "p": 1}, {"g": 1, "p": 3}, {"g": 1, "p": 1}]


@given(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "a": st.one_of(
                    st.none(),
                    st.booleans(),
                    st.integers(-(2**53), 2**53),
                    st.floats(allow_nan=True),
                    st.text(max_size=4),
                    st.lists(st.integers(), max_size=2),
                ),
                "b": st.one_of(st.integers(-5, 5), st.text(alphabet="ab\x00é", max_size=3)),
            },
        ),
        max_size=12,
    ),
    st.sampled_from(["/a", "/a DESC", "/b, /a DESC", "/b DESC, /a", "/a DESC, /b DESC"]),
)
def test_byte_keys_order_like_the_tuple_keys(rows: list[dict[str, Any]], text: str) -> None:
    """Pages keep their sorted results by byte key; it must order exactly like ``key``."""
    order = parse_order_by(text)
    for x, y in pairwise(rows):
        kx, ky = order.key(x), order.key(y)
        bx, by = order.byte_key(x), order.byte_key(y)
        assert (kx < ky) == (bx < by), (x, y)
        assert (kx == ky) == (bx == by), (x, y)


def test_select_includes_and_excludes_without_touching_the_record() -> None:
    record = {"a": 1, "b": {"c": 2, "d": 3}, "e": 4}
    assert parse_select("[-/,+/a,+/b/c]").apply(record) == {"a": 1, "b": {"c": 2}}
    assert parse_select("[-/e, -/b/d]").apply(record) == {"a": 1, "b": {"c": 2}}
    assert parse_select("+/missing").apply(record) == record
    assert record == {"a": 1, "b": {"c": 2, "d": 3}, "e": 4}


def test_aggregation_matches_filters_md_and_retracts_correctly() -> None:
    agg = parse_aggregation(
        "[/oid]",
        "[/oid, SUM(/qty) AS /total, COUNT(/qty) AS /n, AVG(/qty) AS /avg, MIN(/qty) AS /lo, "
        "MAX(/qty) AS /hi, COUNT_DISTINCT(/qty) AS /kinds, STDDEV_POP(/qty) AS /sd, /note AS /last/note]",
    )
    rows: list[dict[str, Any]] = [
        {"oid": 1, "qty": 10, "note": "x"},
        {"oid": 1, "qty": 10},
        {"oid": 1, "qty": 25, "note": "z"},
    ]
    [result] = agg.run([(r, None) for r in rows])
    assert result["oid"] == 1
    assert result["total"] == 45
    assert result["n"] == 3
    assert (result["lo"], result["hi"], result["kinds"], result["avg"]) == (10, 25, 2, 15.0)
    assert abs(result["sd"] - 7.0710678) < 1e-6
    assert result["last"] == {"note": "z"}
    # views retract old contributions: MIN/MAX stay right under deletes
    group = agg.new_group()
    for r in rows:
        group.add(r)
    group.remove(rows[2])
    out = group.result()
    assert (out["total"], out["hi"], out["n"]) == (20, 10, 2)
    group.remove(rows[0])
    group.remove(rows[1])
    assert group.members == 0
    assert group.result()["n"] == 0
    assert "total" not in group.result()


def test_a_projection_of_aggregates_and_fields_reads_them_directly_with_the_same_result() -> None:
    """Group.result's direct path (every item an aggregate or a top-level field, put at a
    top-level field) gives what the compiled items give."""
    projection = ["/a", "SUM(/q) AS /s", "COUNT(/q) AS /n", "MIN(/q) AS /lo", "AVG(/q) AS /avg", "/b AS /c"]
    direct, compiled = parse_aggregation("/a", projection), parse_aggregation("/a", projection)
    assert direct.row is not None
    compiled.row = None
    rows: list[dict[str, Any]] = [
        {"a": "x", "q": 3, "b": "first"},
        {"a": "x", "q": None},
        {"a": "y"},
        {"a": "x", "q": 2.5, "b": None},
        {"a": "y", "q": "7", "b": [1]},
    ]
    for n in range(1, len(rows) + 1):
        assert direct.run([(r, None) for r in rows[:n]]) == compiled.run([(r, None) for r in rows[:n]])
    assert parse_aggregation("/a", ["/a", "SUM(/q) * 2 AS /s"]).row is None  # a computed item
    assert parse_aggregation("/a", ["/a", "SUM(/q) AS /t/s"]).row is None  # a nested output


def test_grouping_by_several_fields_and_null_groups() -> None:
    agg = parse_aggregation(["/a", "/b"], ["/a", "/b", "COUNT(/x) AS /n"])
    out = agg.run([({"a": 1, "b": "x", "x": 1}, None), ({"a": 1, "b": "x", "x": 2}, None), ({"x": 3}, None)])
    assert out == [{"a": 1, "b": "x", "n": 2}, {"n": 1}]


NULL_OR_VALUES = st.one_of(st.none(), st.integers(-3, 3), st.floats(-3, 3, allow_nan=False), st.text(max_size=1))


@given(st.lists(st.tuples(st.sampled_from(["add", "remove", "replace"]), st.integers(0, 5), NULL_OR_VALUES)))
def test_a_groups_contributions_do_what_its_members_do(ops: list[tuple[str, int, Any]]) -> None:
    """Group.add/remove/replace_contribution (a joined view keeps each row's contribution) leave
    a group as add/remove/replace of the members themselves do, NULLs and MIN/MAX included."""
    agg = parse_aggregation(
        "/g", ["SUM(/v) AS /s", "COUNT(/v) AS /n", "MIN(/v) AS /lo", "MAX(/v) AS /hi", "COUNT_DISTINCT(/v) AS /k"]
    )
    by_member, by_contribution = agg.new_group(), agg.new_group()
    held: dict[int, dict[str, Any]] = {}
    for op, member, value in ops:
        row = {"g": 1, "v": value}
        if op == "add" and member not in held:
            by_member.add(row)
            by_contribution.add_contribution(agg.contribution(row), row)
            held[member] = row
        elif op == "remove" and member in held:
            old = held.pop(member)
            by_member.remove(old)
            by_contribution.remove_contribution(agg.contribution(old))
        elif op == "replace" and member in held:
            old, held[member] = held[member], row
            by_member.replace(old, None, row, None)
            by_contribution.replace_contribution(agg.contribution(old), agg.contribution(row), row, None)
        assert by_contribution.members == by_member.members
        assert repr(by_contribution.result()) == repr(by_member.result())
