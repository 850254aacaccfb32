"""Issue 37, finding 7: one reader's idle subscriptions must not slow every publish.

``reader`` sees only desk A rows (a role ``filter``). Its subscriptions were offered every
change, each evaluating the entitlement and then its filter: 256 idle ones (its quota) took an
admin's publish from 208 ms to 5.5 s. The hub now files them by their equality conjunct like
anyone's, grouped by topic and entitlement: per change the entitlement is evaluated once for
the group, first (finding 9: the caller's conjunct never sees a hidden row), then one look-up
finds the few subscriptions the change concerns. These tests check the filing and that it
delivers exactly what evaluating every filter on every change delivers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sowdb_client import AsyncClient
from tests.security.conftest import Secured
from tests.support import take


async def _subscribed(reader: AsyncClient, filters: list[str]) -> list[Any]:
    streams = [reader.subscribe("orders", filter=f) for f in filters]
    for stream in streams:
        assert [e.kind for e in await take(stream, 1)] == ["subscribed"]
    return streams


async def test_a_restricted_readers_subscriptions_are_indexed(secured: Secured) -> None:
    assert secured.server.engine is not None
    hub = secured.server.engine.hub
    async with secured.client("reader") as reader:
        await _subscribed(reader, [f"/orderId = {1000 + i}" for i in range(40)])
        assert hub.stats().placement == {"indexed": 40, "scanned": 0}
        # one group: the 40 literals share one entitlement and one conjunct expression
        assert len(hub._groups) == 1


async def test_indexed_restricted_subscriptions_deliver_what_scanned_ones_do(secured: Secured) -> None:
    """Each filter twice: filed by its conjunct, and as ``(...) OR 1 = 0``, which the hub
    cannot index and offers every change; both receive the same records, desk A rows only,
    and what the filter says (checked against the expected list)."""
    expected: dict[str, list[tuple[int, str]]] = {
        "/orderId = 1": [(1, "A")],
        "/orderId = 21": [(21, "A")],  # its desk B versions are hidden
        "/orderId IN (2, 22, 3)": [(2, "A"), (3, "A")],
        "/desk = 'A' AND /qty > 15": [(2, "A"), (3, "A"), (21, "A")],
    }
    filters = list(expected)
    async with secured.client("reader") as reader, secured.client("admin") as admin:
        indexed = await _subscribed(reader, filters)
        scanned = await _subscribed(reader, [f"({f}) OR 1 = 0" for f in filters])
        assert secured.server.engine is not None
        assert secured.server.engine.hub.stats().placement == {"indexed": len(filters), "scanned": len(filters)}
        for batch in (
            [{"orderId": 1, "desk": "A", "qty": 5}, {"orderId": 21, "desk": "B", "qty": 50}],
            [{"orderId": 22, "desk": "B", "qty": 1}, {"orderId": 2, "desk": "A", "qty": 20}],
            [{"orderId": 3, "desk": "A", "qty": 30}, {"orderId": 21, "desk": "A", "qty": 40}],  # 21 moves to A
        ):
            await admin.publish("orders", batch)
        # one last batch with a row each filter matches, marked: a stream is read up to its mark
        marks = [(1, 7), (21, 8), (3, 9), (50, 100)]
        await admin.publish("orders", [{"orderId": o, "desk": "A", "qty": q, "end": True} for o, q in marks])

        async def received(stream: Any) -> list[tuple[int, str]]:
            got: list[tuple[int, str]] = []
            async with asyncio.timeout(10):
                async for event in stream:
                    if event.kind != "publish":
                        continue
                    docs = [r.json() for r in event.records]
                    got += [(d["orderId"], d["desk"]) for d in docs if not d.get("end")]
                    if any(d.get("end") for d in docs):
                        return got
            raise AssertionError("the stream ended before its mark")

        for f, a, b in zip(filters, indexed, scanned, strict=True):
            assert await received(a) == expected[f], f
            assert await received(b) == expected[f], f
