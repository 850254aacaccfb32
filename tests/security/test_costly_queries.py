"""Issue 37, finding 7: a costly query must not slow everyone else's calls.

200 ``LIKE`` patterns in one 5.7 KB reader query scanned for 12 s and raised an admin's point
query from 3 to 562 ms: the scan looked at the clock every 128 records, and at about a
millisecond a record it held the loop for over 100 ms at a time. The scan now sizes its chunks
to the time they take, and a query's slices added up are bounded
(:data:`sowdb.engine.read.execution.QUERY_BUDGET_S`).

The first test runs the scan itself with a filter that spins 5 ms a record (no timing of the
machine's speed is asserted, only how long the loop was held at once: before, 128 records at a
time, 640 ms; now about one slice and one record); the others run real queries against the
secured server.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest

from sowdb.engine.read import execution
from sowdb.engine.read.execution import Slicer, batches, scan, stream_batches
from sowdb.engine.records import StoredRecord
from sowdb_client import ResourceExhaustedError
from tests.security.conftest import Secured


class Spinning:
    """A filter that costs ``cost_s`` a record and matches every record."""

    def __init__(self, cost_s: float) -> None:
        self.cost_s = cost_s

    def matches(self, doc: Any, record: Any) -> bool:
        end = time.thread_time() + self.cost_s  # the loop's own time: other processes' never counts
        while time.thread_time() < end:
            pass
        return True


def records(n: int) -> list[StoredRecord]:
    return [StoredRecord("t", str(i), None, orjson.dumps({"i": i}), i + 1, 0) for i in range(n)]


async def test_a_costly_filter_holds_the_loop_one_record_at_a_time() -> None:
    held: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:  # how long the loop went without running it, in its own CPU time
        last = time.thread_time()  # (on a busy machine, wall time adds whatever else ran meanwhile)
        while not stop.is_set():
            await asyncio.sleep(0)
            now = time.thread_time()
            held.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    matched, scanned = await scan([records(300)], Spinning(0.005), Slicer())  # type: ignore[arg-type]
    stop.set()
    await ticking
    assert (len(matched), scanned) == (300, 300)
    # before: 128 records a chunk, 640 ms at once; now the first chunk (8 records, measured to
    # size the next ones), then a slice (1 ms) and a record (5 ms) at a time
    assert max(held) < 0.1, sorted(held)[-5:]


async def test_the_time_a_consumer_takes_is_not_the_querys() -> None:
    """A query's results sent to a slow client (TLS, flow control: the generator waits at each
    batch) are not its work: 2,000 records in 20 batches read with 20 ms between batches stay
    within a 50 ms budget. Before, that wait counted, and the failover soak's final read of
    300,000 records ended RESOURCE_EXHAUSTED past 30 s."""
    slicer = Slicer(budget_s=0.05)
    sent = 0
    async for batch in stream_batches(batches(records(2000), 100, 1 << 20), slicer):
        sent += len(batch)
        await asyncio.sleep(0.02)  # the transport, busy
    assert sent == 2000


async def test_a_query_past_its_budget_ends_resource_exhausted(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``reader``'s 200 ``LIKE`` patterns over 3,000 rows, with the budget lowered to 50 ms so
    that the test stays short: RESOURCE_EXHAUSTED naming what to do, and the admin's calls go on."""
    monkeypatch.setattr("sowdb.engine.read.prepared.QUERY_BUDGET_S", 0.05)
    async with secured.client("admin") as admin, secured.client("reader") as reader:
        await admin.publish("orders", [{"orderId": 10_000 + i, "desk": "A", "note": f"n{i}"} for i in range(3000)])
        likes = " OR ".join(f"/note LIKE '%{i}x%'" for i in range(200))
        with pytest.raises(ResourceExhaustedError, match="of the server's time") as caught:
            await reader.sow("orders", filter=f"/desk = 'A' AND ({likes})").records()
        assert caught.value.field == "filter"
        assert len(await admin.sow("orders", filter="/orderId = 10001").records()) == 1
    assert execution.QUERY_BUDGET_S == 30.0  # the default is untouched: only the query's copy


async def test_the_budget_does_not_cut_an_ordinary_scan(secured: Secured) -> None:
    async with secured.client("admin") as admin, secured.client("reader") as reader:
        await admin.publish("orders", [{"orderId": 10_000 + i, "desk": "A", "note": f"n{i}"} for i in range(500)])
        likes = " OR ".join(f"/note LIKE '%{i}x%'" for i in range(200))
        assert await reader.sow("orders", filter=f"/desk = 'A' AND ({likes})").records() == []
