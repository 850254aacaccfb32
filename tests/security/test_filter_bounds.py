"""Issue 37, finding 1: a filter must not make the server build gigabytes.

``reader`` sent ``/orderId = 1 AND LENGTH(REPLACE(REPLACE(... CONCAT(/symbol, '<20,000 a>') ...,
'a', 'aaaaaaaaaa') ...)) > 0``, each level ten times longer: five levels took the server from
401 to 2,310 MB and froze every other call for 3.3 s. What one evaluation may build is now
bounded (``MAX_BUILT_CHARS``), checked before building; past it the function is NULL, the
language's evaluation error, so the record does not match. The text and the nesting of a filter
are bounded when it is parsed (``INVALID_ARGUMENT``).
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest

from sowdb.expr import compile_filter
from sowdb.expr.functions import MAX_BUILT_CHARS
from sowdb.expr.parser import MAX_DEPTH, MAX_LENGTH, parse
from sowdb.expr.reference import evaluate
from sowdb_client import InvalidArgumentError
from tests.security.conftest import Secured
from tests.security.test_dos import STALL_LIMIT_S, watch_loop

TENFOLD = "'a', 'aaaaaaaaaa'"


def tenfold(inner: str, levels: int) -> str:
    """``inner`` inside ``levels`` REPLACEs that each make it ten times longer."""
    for _ in range(levels):
        inner = f"REPLACE({inner}, {TENFOLD})"
    return inner


def amplifier(levels: int) -> str:
    text = tenfold("CONCAT(/symbol, '" + "a" * 20_000 + "')", levels)
    return f"/orderId = 1 AND LENGTH({text}) > 0"


async def test_a_filter_that_multiplies_a_string_does_not_take_the_memory(secured: Secured) -> None:
    """The reported attack with four levels (200 MB of text before the fix; five took 2.3 GB):
    the query answers, without the record, and the server's allocations stay small."""
    async with secured.client("reader") as reader:
        await reader.sow("orders", filter="/orderId = 1").records()  # warm: connection, caches
        tracemalloc.start()
        try:
            async with watch_loop() as watch:
                rows = await reader.sow("orders", filter=amplifier(4)).records()
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert rows == []
        assert peak < 64 * 1024 * 1024, f"the filter made the server allocate {peak / 2**20:.0f} MiB"
        assert watch.longest_gap_s < STALL_LIMIT_S
        # an honest filter that builds text still works, on the same connection
        assert len(await reader.sow("orders", filter="CONCAT(/desk, 'x') = 'Ax' AND /orderId = 1").records()) == 1


HUGE = "a" * 100_000


@pytest.mark.parametrize(
    "expression",
    [
        tenfold("/s", 3),  # 100,000 -> 100 M
        # many arguments each inside the bound: one evaluation's total is bounded, not each result
        "CONCAT(" + ", ".join([tenfold("/s", 1)] * 50) + ")",
        "UPPER(REPLACE(/s, 'a', '" + "ß" * 20 + "'))",  # 'ß' is 'SS' in capitals: the growth counts
        "LOWER(CONCAT(" + ", ".join(["/s"] * 50) + "))",
        "ARRAY_TO_STRING(/list, " + tenfold("/s", 1) + ")",
        "REGEXP_REPLACE(SUBSTR(/s, 1, 1000), '', CONCAT(/s, /s))",  # a match at every position
        "REPLACE(SUBSTR(/s, 1, 1000), '', CONCAT(/s, /s))",  # '' occurs between every two characters
        "STRFTIME(REPLACE(/s, 'a', '%c%c%c%c'), 0)",  # each %c is 24 characters
    ],
)
def test_what_one_evaluation_builds_is_bounded(expression: str) -> None:
    """Each function that builds text is NULL where its result would pass the budget, before
    building it: the compiled form and the reference agree, and little is allocated."""
    message: dict[str, Any] = {"s": HUGE, "list": list(range(100))}
    compiled = compile_filter(f"LENGTH({expression}) > 0")
    tracemalloc.start()
    try:
        assert compiled.evaluate(message) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MAX_BUILT_CHARS
    assert evaluate(parse(f"LENGTH({expression}) > 0"), message) is None


def test_the_budget_is_per_evaluation() -> None:
    """Each record's evaluation starts with the whole budget, on every way a filter is run."""
    near = MAX_BUILT_CHARS // 2 - 10
    flt = compile_filter("LENGTH(CONCAT(/s, 'x')) > 0 AND LENGTH(UPPER(/s)) > 0")
    for _ in range(5):
        assert flt({"s": "a" * near})
        assert flt.evaluate({"s": "a" * near}) is True
        assert evaluate(flt.node, {"s": "a" * near}) is True
    conjunct, _ = compile_filter("CONCAT(/s, 'x') = 'ax' AND UPPER(/t) = 'B'").equality_conjuncts
    for _ in range(5):
        assert conjunct.holds(conjunct.value({"s": "a", "t": "b"}, None))
    assert not flt({"s": "a" * (near + 20)})  # the two results together pass the budget


async def test_a_filter_too_long_or_too_deep_is_refused_when_it_arrives(secured: Secured) -> None:
    too_long = "/qty = 1 OR " * (MAX_LENGTH // 12) + "/qty = 2"
    too_deep = "LENGTH(" * (MAX_DEPTH + 1) + "/s" + ")" * (MAX_DEPTH + 1) + " > 0"
    async with secured.client("reader") as reader:
        for flt, message in ((too_long, "longer than"), (too_deep, "nested deeper")):
            with pytest.raises(InvalidArgumentError, match=message) as err:
                await reader.sow("orders", filter=flt).records()
            assert err.value.field == "filter"
