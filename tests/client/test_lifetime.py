"""A result outlives the expression that made it: ``Client(target).sow(...).records()`` and a
subscription of a client nobody else holds read to their end. The blocking client reads a
stream on the caller's thread (grpc's ``SingleThreadedUnaryStream``, issue 29), so no grpc
thread holds the channel: the result must, or a garbage-collected channel ends the call with
CANCELLED ("Channel deallocated!")."""

from __future__ import annotations

import gc

from sowdb_client import Client
from tests.support import Process


def test_a_query_of_a_client_held_by_no_one_reads_to_its_end(sowd_process: Process) -> None:
    with Client(sowd_process.target) as c:
        c.publish("orders", [{"orderId": i} for i in range(300)])
    result = Client(sowd_process.target).sow("orders", batch_size=10)
    gc.collect()
    assert sorted(r.json()["orderId"] for r in result.records()) == list(range(300))


def test_a_subscription_of_a_client_held_by_no_one_goes_on(sowd_process: Process) -> None:
    stream = Client(sowd_process.target).subscribe("orders", bookmark="0")
    gc.collect()
    with Client(sowd_process.target) as c:
        c.publish("orders", [{"orderId": 1}])
    for event in stream:
        if event.kind == "publish":
            assert [r.json()["orderId"] for r in event.records] == [1]
            break
    stream.cancel()
