"""Issue 37, finding 9: no part of a caller's filter runs on a row it may not see.

The request's filter ran before the row entitlement, so ``/orderId = 4000 AND /pin > X AND
<costly term>`` took longer when the hidden desk B row's ``pin`` passed ``X``: a timing oracle
(20.6 vs 4.4 ms) that recovered a hidden field. Rather than time anything, these tests spy on
one function of the language (``REVERSE``, replaced for the test in the server's table): the
reader's filter calls it on ``/desk``, and the spy records every desk it was evaluated on. On
each read path it must have seen desk A rows (so it ran) and never a desk B row.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sowdb.expr import functions
from sowdb.expr.functions import Function
from tests.security.conftest import DESK_B_ROWS, Secured
from tests.security.test_leaks import open_snapshot
from tests.support import take


class Spy:
    """What the spied-on function was evaluated on."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def filter(self, tail: str = "") -> str:
        """A filter calling the spy on every row it is evaluated on (a new text each time: the
        server caches compilations by text)."""
        return f"REVERSE(/desk) != '{uuid.uuid4()}'" + tail

    def check(self) -> None:
        assert "A" in self.seen, "the spy never ran: the test would prove nothing"
        assert "B" not in self.seen, "the caller's filter was evaluated on a row it may not see"
        self.seen.clear()


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    s = Spy()
    original = functions.FUNCTIONS["REVERSE"]

    def reverse(text: Any) -> Any:
        s.seen.append(text)
        return original.impl(text)

    monkeypatch.setitem(functions.FUNCTIONS, "REVERSE", Function("REVERSE", reverse, 1, 1))
    return s


B_UPDATE = {**DESK_B_ROWS[0], "qty": 999}


async def test_queries_check_the_entitlement_before_the_callers_filter(secured: Secured, spy: Spy) -> None:
    async with secured.client("reader") as reader:
        queries: list[tuple[str, dict[str, Any]]] = [
            ("", {}),
            (" AND /orderId > 0", {}),  # the planner's columns choose the candidates
            (" AND /orderId IN (1, 20, 21)", {}),  # a hash lookup of hidden keys
            ("", {"top_n": 2, "order_by": "/qty DESC"}),
            ("", {"grouping": ["/desk"], "projection": ["/desk", "COUNT(/qty) AS /n"]}),
            ("", {"bookmark": "1"}),  # historical: the version chains
            ("", {"bookmark": "now"}),
        ]
        for tail, query in queries:
            rows = await reader.sow("orders", filter=spy.filter(tail), **query).records()
            assert rows, query
            spy.check()


async def test_snapshots_check_the_entitlement_first(secured: Secured, spy: Spy) -> None:
    for bookmark in ("", "1"):
        _, rows = await open_snapshot(secured, "reader", topic="orders", filter=spy.filter(), bookmark=bookmark)
        assert rows
        spy.check()


async def test_sow_delete_checks_the_entitlement_first(secured: Secured, spy: Spy) -> None:
    async with secured.client("trader") as trader:
        assert await trader.sow_delete("orders", filter=spy.filter(" AND /qty < 0")) == 0
        spy.check()


async def test_subscriptions_check_the_entitlement_first(secured: Secured, spy: Spy) -> None:
    """Plain, sow-and-subscribe, oof, paged and aggregated subscriptions, and a replaced
    filter: a desk B update then a desk A update are published; the A one arrives, and the
    spy never saw a B row (the hub of shared conjuncts included: ``REVERSE(/desk) = 'A'``)."""
    async with secured.client("reader") as reader, secured.client("admin") as admin:
        kinds = ("plain", "equality", "oof", "sow_and_subscribe", "page", "aggregated", "replaced")
        for tag, kind in enumerate(kinds):
            if kind == "equality":
                stream = reader.subscribe("orders", filter=f"REVERSE(/desk) = 'A' AND /qty != -{uuid.uuid4().int}")
            elif kind == "oof":
                stream = reader.subscribe("orders", filter=spy.filter(), oof=True, delta=True)
            elif kind == "sow_and_subscribe":
                stream = reader.sow_and_subscribe("orders", filter=spy.filter())
            elif kind == "page":
                stream = reader.sow_and_subscribe("orders", filter=spy.filter(), top_n=3, order_by="/qty DESC")
            elif kind == "aggregated":
                stream = reader.sow_and_subscribe(
                    "orders", filter=spy.filter(), grouping=["/desk"], projection=["/desk", "SUM(/qty) AS /q"]
                )
            else:
                stream = reader.subscribe("orders", filter=spy.filter(), sub_id=f"s-{kind}")
            ready = "group_end" if kind in ("sow_and_subscribe", "page", "aggregated") else "subscribed"
            while (await take(stream, 1))[0].kind != ready:  # the query's results
                pass
            if kind == "replaced":
                await reader.replace_subscription(f"s-{kind}", filter=spy.filter())
            await admin.publish("orders", [{**B_UPDATE, "qty": 1000 + tag}])
            await admin.publish("orders", [{"orderId": 1, "desk": "A", "qty": 2000 + tag}])
            events = await take(stream, 1)
            assert events, kind
            assert events[0].kind in ("publish", "oof"), (kind, events)
            stream.cancel()
            spy.check()
