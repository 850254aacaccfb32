"""The SDK's publish stops at its first refused request (issue 14, item 7): ``publish`` raises
``PublishError`` saying what was stored before it, ``publish_iter`` yields one ack per request
— for the asyncio and the sync client. What the server does with ``stop_on_error``:
``tests/api/test_publish_refusal.py``."""

from __future__ import annotations

import grpc
import pytest

from sowdb_client import Client, PublishAck, PublishError
from tests.support import BAD_MESSAGE, Process, Running, collect, orders_with_a_bad_message


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
