"""Issue 37, finding 1: a filter must not make the server build gigabytes.

``reader`` sent ``/orderId = 1 AND LENGTH(REPLACE(REPLACE(... CONCAT(/symbol, '<20,000 a>') ...,
'a', 'aaaaaaaaaa') ...)) > 0``, each level ten times longer: five levels took the server from
401 to 2,310 MB and froze every other call for 3.3 s. What one evaluation may build is now
bounded (``MAX_BUILT_CHARS``), checked before building; past it the function is NULL, the
language's evaluation error, so the record does not match. The text and the nesting of a filter
are bounded when it is parsed (``INVALID_ARGUMENT``).
"""

from __future__ import annotations

import asyncio
import contextlib
import tracemalloc
from typing import Any

import grpc
import pytest

from sowdb.engine.live import subscription
from sowdb.expr import compile_filter
from sowdb.expr.functions import MAX_BUILT_CHARS
from sowdb.expr.parser import MAX_DEPTH, MAX_LENGTH, parse
from sowdb.expr.reference import evaluate
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import InvalidArgumentError
from tests.security.conftest import Secured
from tests.security.test_dos import STALL_LIMIT_S, watch_loop
from tests.support import TOKENS, take

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


# --- finding 2: what one evaluation may read through -------------------------------------------

SCANNERS = " OR ".join(["INSTR_I(/big, 'x') > 0"] * 3000)


async def test_a_filter_that_reads_a_big_field_again_and_again_does_not_hold_the_loop(secured: Secured) -> None:
    """3,000 case-insensitive searches of a 900 KB field took seconds of the event loop for one
    record; the scanning budget (``MAX_SCANNED_CHARS``) makes the rest NULL once it is spent."""
    async with secured.client("admin") as admin:
        await admin.publish("orders", [{"orderId": 7, "desk": "A", "big": "a" * 900_000}])
    async with secured.client("reader") as reader:
        flt = f"/orderId = 7 AND ({SCANNERS})"
        assert await reader.sow("orders", filter=flt).records() == []  # compiled (and cached) here
        async with watch_loop() as watch:
            rows = await reader.sow("orders", filter=flt).records()  # evaluated only
        assert rows == []
        assert watch.longest_gap_s < STALL_LIMIT_S
        found = await reader.sow("orders", filter="/orderId = 7 AND INSTR_I(/big, 'A') = 1").records()
        assert len(found) == 1  # one search of the field is well inside the budget


def test_scanning_functions_are_null_past_the_budget() -> None:
    big = {"s": "a" * 1_000_000 + "z", "chars": "".join(chr(0x4E00 + i) for i in range(5000)) + "a"}
    for expression in (
        "TRIM(/s, /chars)",  # each character stripped looked for among 5,001
        " OR ".join(["STREQUAL_I(/s, /s) = 0"] * 40),
        " OR ".join(["/s LIKE 'zz'"] * 40),
        " OR ".join(["LENGTH(SUBSTR(/s, 2)) = 0"] * 40),
    ):
        assert compile_filter(expression).evaluate(big) is None, expression
        assert evaluate(parse(expression), big) is None, expression


async def test_a_subscription_whose_filter_keeps_passing_the_budget_is_ended(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each change costs such a filter the budget's worth of work for nothing: after
    ``MAX_OVERRUNS`` of them the subscription ends with RESOURCE_EXHAUSTED naming its filter
    (seen on the wire: the SDK would resubscribe); an honest subscription beside it goes on."""
    monkeypatch.setattr(subscription, "MAX_OVERRUNS", 5)
    meta = (("authorization", f"Bearer {TOKENS['reader']}"),)
    async with (
        grpc.aio.insecure_channel(secured.target) as channel,
        secured.client("reader") as reader,
        secured.client("admin") as admin,
    ):
        stub = sow_pb2_grpc.SowServiceStub(channel)
        costly = stub.Subscribe(
            pb.SubscribeRequest(topic="orders", filter=f"LENGTH({tenfold('/s', 3)}) > 0"), metadata=meta
        )
        honest = reader.subscribe("orders", filter="/qty >= 0")
        first: Any = await costly.read()
        assert first.HasField("subscribed")
        assert [e.kind for e in await take(honest, 1)] == ["subscribed"]
        rows = [{"orderId": 100 + i, "desk": "A", "qty": i, "s": "a" * 10_000} for i in range(8)]
        await admin.publish("orders", rows)
        async with asyncio.timeout(10):
            with contextlib.suppress(grpc.aio.AioRpcError):
                while await costly.read() is not grpc.aio.EOF:  # up to the end of the call
                    pass
            assert await costly.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "evaluation budget" in (await costly.details() or "")
        assert [e.kind for e in await take(honest, 1)] == ["publish"]  # the honest one goes on
        honest.cancel()
