"""The SDK's publish stops at its first refused request (issue 14, item 7): ``publish`` raises
``PublishError`` saying what was stored before it, ``publish_iter`` yields one ack per request
— for the asyncio and the sync client. What the server does with ``stop_on_error``:
``tests/api/test_publish_refusal.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sowdb_client import Client, PublishAck, PublishError
from tests.support import BAD_MESSAGE, Process, Running, collect, make_config, orders_with_a_bad_message, running


async def test_async_publish_stops_at_the_first_refusal_and_says_what_was_stored(sowd: Running) -> None:
    c = sowd.client
    with pytest.raises(PublishError) as err:
        await c.publish("orders", orders_with_a_bad_message())
    e = err.value
    assert (e.message_index, e.stored, e.first_bookmark, e.last_bookmark) == (BAD_MESSAGE, 100, 1, 100)
    assert e.code == grpc.StatusCode.INVALID_ARGUMENT
    stored = sorted(r.json()["orderId"] for r in await c.sow("orders", batch_size=1000).records())
    assert stored == list(range(100))
    assert (await c.publish("orders", [{"orderId": 999}])).first_bookmark == 101  # nothing else used one


async def test_async_publish_iter_yields_one_ack_per_request(sowd: Running) -> None:
    acks = [a async for a in sowd.client.publish_iter("orders", orders_with_a_bad_message(250, bad=-1), batch_size=100)]
    assert acks == [PublishAck(100, 1, 100), PublishAck(100, 101, 200), PublishAck(50, 201, 250)]


def test_sync_publish_stops_at_the_first_refusal_and_says_what_was_stored(sowd_process: Process) -> None:
    with Client(sowd_process.target) as c:
        with pytest.raises(PublishError) as err:
            c.publish("orders", orders_with_a_bad_message())
        e = err.value
        assert (e.message_index, e.stored, e.first_bookmark, e.last_bookmark) == (BAD_MESSAGE, 100, 1, 100)
        assert sorted(r.json()["orderId"] for r in c.sow("orders", batch_size=1000)) == list(range(100))
        seen: list[PublishAck] = []
        with pytest.raises(PublishError) as err:
            collect(c.publish_iter("orders", orders_with_a_bad_message(250, bad=220), batch_size=100), seen)
        assert seen == [PublishAck(100, 101, 200), PublishAck(100, 201, 300)]
        assert (err.value.message_index, err.value.stored) == (220, 200)
        assert (err.value.first_bookmark, err.value.last_bookmark) == (101, 300)


BIG = 900_000
"""Bytes of a large document: under the server's max_document_bytes (1 MiB), while 30 of them
(27 MB) are over the gRPC message limit (16 MiB) of one request of the default batch (100)."""


def big_orders(n: int) -> list[dict[str, object]]:
    return [{"orderId": i, "pad": "x" * BIG} for i in range(n)]


async def test_async_publish_splits_a_batch_that_would_pass_the_message_limit(tmp_path: Path) -> None:
    async with running(make_config(tmp_path / "data")) as sowd:  # the default limits, as the client's
        ack = await sowd.client.publish("orders", big_orders(30))
        assert (ack.count, ack.first_bookmark, ack.last_bookmark) == (30, 1, 30)
        got = await sowd.client.sow("orders", select="[-/,+/orderId]", batch_size=100).records()
        assert sorted(r.json()["orderId"] for r in got) == list(range(30))


def test_sync_publish_splits_its_batches_under_its_own_message_limit(sowd_process: Process) -> None:
    with Client(sowd_process.target, max_message_bytes=2 * 1024 * 1024) as c:
        acks = list(c.publish_iter("orders", big_orders(5)))
        assert [a.count for a in acks] == [2, 2, 1]  # two 900 KB documents a request under 2 MiB
        assert sorted(r.json()["orderId"] for r in c.sow("orders", select="[-/,+/orderId]")) == list(range(5))


async def test_async_publish_whose_messages_raise_raises_that_error(sowd: Running) -> None:
    def messages() -> Iterator[dict[str, int]]:
        yield {"orderId": 1}
        raise LookupError("the source of the messages failed")

    with pytest.raises(LookupError, match="the source of the messages failed"):
        await sowd.client.publish("orders", messages(), batch_size=1)
    assert [r.json() for r in await sowd.client.sow("orders").records()] == [{"orderId": 1}]
