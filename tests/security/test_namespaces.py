"""Issue 26, shared namespaces: what one user names (a J-4 producer, a stage, a subscription id, an
aggregated subscription's private view) is that user's, and another user can neither use it, nor
block it, nor learn about it. Each test performs the attack; the roles are the ``secured``
fixture's (``tests/security/conftest.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage
from sowdb.engine.access import Access
from sowdb.storage import Store
from sowdb.storage.verify import verify
from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc, sow_pb2_grpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import InvalidArgumentError, NotFoundError, PublishError
from sowdb_client.errors import from_rpc_error
from tests.console.wire import Stream, connect_error, unary
from tests.security.conftest import Secured, StartSecured
from tests.support import TOKENS, take

SUBSCRIBE = "/sowdb.v1.SowService/Subscribe"
REPLACE = "/sowdb.v1.SowService/ReplaceSubscription"


def as_user(user: str) -> tuple[tuple[str, str], ...]:
    """The call metadata of ``user``: what the console's gateway sends for each browser call, all
    of them over its one connection."""
    return (("authorization", f"Bearer {TOKENS[user]}"),)


async def call(coro: Any) -> Any:
    """Await a unary call, raising the SDK's typed error for a refusal."""
    try:
        return await coro
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from None


async def stage(stub: Any, user: str, stage_id: str, topic: str, docs: list[bytes]) -> Any:
    async def requests() -> AsyncIterator[dpb.StageWriteRequest]:
        msgs = [pb.PublishMessage(data=d) for d in docs]
        yield dpb.StageWriteRequest(stage_id=stage_id, topic=topic, messages=msgs, complete=True)

    return await call(stub.StageWrite(requests(), metadata=as_user(user)))


async def commit(stub: Any, user: str, stage_ids: list[str], **producer: Any) -> Any:
    request = dpb.CommitStagesRequest(topic="orders", stage_ids=stage_ids, **producer)
    return await call(stub.CommitStages(request, metadata=as_user(user)))


async def orders(s: Secured) -> dict[str, bytes]:
    async with s.client("admin") as admin:
        return {r.sow_key: r.data for r in await admin.sow("orders").records()}


# --- 9. J-4 producer ids ------------------------------------------------------------------------


async def test_one_users_producer_cannot_swallow_another_users_publishes(secured: Secured) -> None:
    """``writer`` takes the producer id ``etl`` first, at the highest sequence it may; the admin's
    ``etl`` — on the same topic or another — is its own producer and is applied."""
    async with secured.client("writer") as writer, secured.client("admin") as admin:
        taken = await writer.publish(
            "orders", [{"orderId": 900, "desk": "C"}], producer_id="etl", producer_seq=2**63 - 1
        )
        assert (taken.count, taken.duplicates) == (1, 0)
        mine = await admin.publish("audit", [{"id": 2, "what": "nightly"}], producer_id="etl", producer_seq=1)
        assert (mine.count, mine.duplicates) == (1, 0)
        same_topic = await admin.publish("orders", [{"orderId": 901, "desk": "C"}], producer_id="etl", producer_seq=1)
        assert (same_topic.count, same_topic.duplicates) == (1, 0)
        # each producer is still exactly-once for its own user and topic
        again = await admin.publish("audit", [{"id": 2, "what": "nightly"}], producer_id="etl", producer_seq=1)
        assert again.duplicates == 1
        assert (await admin.sow("audit", filter="/id = 2").records())[0].json() == {"id": 2, "what": "nightly"}


@pytest.mark.parametrize("seq", [2**64 - 1, 2**63])
async def test_a_sequence_that_leaves_a_producer_no_next_one_is_refused(secured: Secured, seq: int) -> None:
    before = await secured.state()
    async with secured.client("writer") as writer:
        with pytest.raises(PublishError, match=r"producer_seq must be between 0 and 2\^63 - 1") as refused:
            await writer.publish("orders", [{"orderId": 902}], producer_id="etl", producer_seq=seq)
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert await secured.state() == before


async def test_a_spark_producer_of_one_user_does_not_block_another_users_commits(secured: Secured) -> None:
    async with grpc.aio.insecure_channel(secured.target) as channel:
        data: Any = data_pb2_grpc.DataServiceStub(channel)
        await stage(data, "writer", "w-1", "orders", [b'{"orderId": 910, "desk": "C"}'])
        assert not (await commit(data, "writer", ["w-1"], producer_id="spark:q1", producer_seq=10**9)).duplicate
        await stage(data, "admin", "a-1", "orders", [b'{"orderId": 911, "desk": "C"}'])
        done = await commit(data, "admin", ["a-1"], producer_id="spark:q1", producer_seq=0)
        assert (done.duplicate, done.message_count) == (False, 1)
    assert {"910", "911"} <= set(await orders(secured))


def test_producers_stored_before_they_were_scoped_are_the_security_off_users(tmp_path: Path) -> None:
    """A store written before producers were scoped holds one entry per id (``producer\\0etl``):
    it keeps de-duplicating the calls of a server without security (whose user is ""), on every
    topic, as it did; a named user's ``etl`` starts afresh. Both survive a restart."""
    raw = {"topic": [{"name": "orders", "key": ["/id"]}], "server": {"data_dir": str(tmp_path)}}
    cfg = config_from_dict(raw, source="<tests>")
    store = Store(tmp_path)
    store.write_producer_seqs({"etl": 7})  # the old, global form
    store.close()
    engine = Engine.open(cfg, Store(tmp_path))
    alice = Access("alice", everything=True)
    assert engine.publish("orders", [InMessage(b'{"id": 1}')], producer=("etl", 7)) == (0, 0)
    assert engine.publish("other", [InMessage(b'{"id": 1}')], producer=("etl", 5)) == (0, 0)
    assert engine.publish("orders", [InMessage(b'{"id": 1}')], producer=("etl", 8)) == (1, 1)
    assert engine.publish("orders", [InMessage(b'{"id": 2}')], producer=("etl", 1), access=alice) == (2, 2)
    engine.close()
    again = Engine.open(cfg, Store(tmp_path))
    assert again.publish("orders", [InMessage(b'{"id": 1}')], producer=("etl", 8)) == (0, 0)
    assert again.publish("other", [InMessage(b'{"id": 1}')], producer=("etl", 7)) == (0, 0)
    assert again.publish("orders", [InMessage(b'{"id": 2}')], producer=("etl", 1), access=alice) == (0, 0)
    assert again.publish("orders", [InMessage(b'{"id": 3}')], producer=("etl", 2), access=alice) == (3, 3)
    assert verify(again.store, ["orders"]).ok  # both forms of producer key side by side: `sowd verify` passes
    again.close()


# --- 10. stages ---------------------------------------------------------------------------------


async def test_a_users_stages_cannot_be_written_committed_or_aborted_by_another(secured: Secured) -> None:
    """``trader`` may write ``orders`` too, but ``writer``'s stages are not its: restaging the same
    id, committing it, aborting by the ``spark-`` prefix all leave them alone, and committing
    the admin's stage of ``audit`` does not reveal that topic."""
    async with grpc.aio.insecure_channel(secured.target) as channel:
        data: Any = data_pb2_grpc.DataServiceStub(channel)
        await stage(data, "writer", "spark-q-1-0", "orders", [b'{"orderId": 920, "desk": "C"}'])
        await stage(data, "admin", "spark-q-2-0", "audit", [b'{"id": 3, "what": "admin stage"}'])
        # the trader's own stage of that id is another stage: the writer's is not replaced
        await stage(data, "trader", "spark-q-1-0", "orders", [b'{"orderId": 921, "desk": "A"}'])
        aborted = await call(
            data.AbortStages(dpb.AbortStagesRequest(stage_id_prefix="spark-"), metadata=as_user("trader"))
        )
        assert aborted.aborted == 1  # its own only
        with pytest.raises(NotFoundError) as theirs:
            await commit(data, "trader", ["spark-q-2-0"])
        assert "audit" not in theirs.value.message
        with pytest.raises(NotFoundError):
            await commit(data, "trader", ["spark-q-1-0"])
        assert (await commit(data, "writer", ["spark-q-1-0"])).message_count == 1
    state = await orders(secured)
    assert "920" in state
    assert "921" not in state


# --- 11. subscription ids -----------------------------------------------------------------------


async def test_over_one_connection_a_user_cannot_replace_another_users_subscription(secured: Secured) -> None:
    """The console's gateway sends every browser's calls over one connection: the connection is
    no proof of ownership. ``norights`` and ``reader`` hold the trader's sub_id (from /metrics,
    say) and try to widen its grid; the subscription is untouched."""
    async with grpc.aio.insecure_channel(secured.target) as channel:
        sow: Any = sow_pb2_grpc.SowServiceStub(channel)
        grid = sow.Subscribe(pb.SubscribeRequest(topic="orders", filter="/qty = 10"), metadata=as_user("trader"))
        first = await asyncio.wait_for(grid.read(), 10)
        sub_id = first.subscribed.sub_id
        assert sub_id
        replace = pb.ReplaceSubscriptionRequest(sub_id=sub_id, filter="/qty > 0")
        for thief in ("norights", "reader"):
            with pytest.raises(NotFoundError):
                await call(sow.ReplaceSubscription(replace, metadata=as_user(thief)))
        async with secured.client("admin") as admin:
            await admin.publish(
                "orders", [{"orderId": 3, "desk": "A", "qty": 31}, {"orderId": 1, "desk": "A", "qty": 10}]
            )
        while (resp := await asyncio.wait_for(grid.read(), 10)).WhichOneof("event") == "heartbeat":
            pass
        assert [r.sow_key for r in resp.publish.records] == ["1"]  # the filter is still /qty = 10
        assert (await call(sow.ReplaceSubscription(replace, metadata=as_user("trader")))).bookmark
        grid.cancel()


async def test_through_the_consoles_gateway_a_user_cannot_replace_another_users_subscription(
    start_secured: StartSecured,
) -> None:
    """The same attack through the real gateway (Connect over HTTP), whose one gRPC channel
    carries every browser's calls."""
    s = await start_secured(server={"http_listen": "127.0.0.1:0"})
    assert s.server.console is not None
    url = s.server.console.url
    subscribe = pb.SubscribeRequest(topic="orders", filter="/qty = 10")
    grid = await asyncio.to_thread(Stream, url, SUBSCRIBE, subscribe, token=TOKENS["trader"])
    first = await asyncio.to_thread(grid.next)
    assert isinstance(first, bytes)
    sub_id = pb.SubscribeResponse.FromString(first).subscribed.sub_id
    replace = pb.ReplaceSubscriptionRequest(sub_id=sub_id, filter="/qty > 0")
    status, body = await asyncio.to_thread(unary, url, REPLACE, replace, TOKENS["norights"])
    assert (status, connect_error(json.loads(body)).code) == (404, "not_found")
    status, _ = await asyncio.to_thread(unary, url, REPLACE, replace, TOKENS["trader"])
    assert status == 200
    grid.close()


async def test_a_client_chosen_sub_id_is_the_users_own(secured: Secured) -> None:
    """Two users may both name their subscription ``risk-dashboard``; each one's replacement
    changes its own only."""
    async with secured.client("reader") as reader, secured.client("trader") as trader:
        theirs = reader.subscribe("orders", sub_id="risk-dashboard")
        mine = trader.subscribe("orders", sub_id="risk-dashboard")
        assert [e.sub_id for e in await take(theirs, 1)] == ["risk-dashboard"]
        assert [e.sub_id for e in await take(mine, 1)] == ["risk-dashboard"]
        await trader.replace_subscription("risk-dashboard", filter="/qty = 20")
        with pytest.raises(InvalidArgumentError, match="already in use"):
            await take(trader.subscribe("orders", sub_id="risk-dashboard"), 1)
        async with secured.client("admin") as admin:
            await admin.publish(
                "orders", [{"orderId": 1, "desk": "A", "qty": 10}, {"orderId": 2, "desk": "A", "qty": 20}]
            )
        assert [r.sow_key for e in await take(theirs, 1) for r in e.records] == ["1", "2"]
        assert [r.sow_key for e in await take(mine, 1) for r in e.records] == ["2"]
        theirs.cancel()
        mine.cancel()


async def test_an_aggregated_subscriptions_private_view_reaches_no_other_subscription(secured: Secured) -> None:
    """The trader's aggregation (desk A only) is computed in a private view; the admin's ``.*``
    subscription must not receive that view's changes — they are the trader's."""
    async with secured.client("trader") as trader, secured.client("admin") as admin:
        groups = trader.sow_and_subscribe("orders", grouping=["/desk"], projection=["/desk", "SUM(/qty) AS /qty"])
        assert [e.kind for e in await take(groups, 4)] == ["subscribed", "group_begin", "sow", "group_end"]
        everything = admin.subscribe(".*")
        assert [e.kind for e in await take(everything, 1)] == ["subscribed"]
        await admin.publish("orders", [{"orderId": 1, "desk": "A", "qty": 1000}])
        assert [r.json() for e in await take(groups, 1) for r in e.records] == [{"desk": "A", "qty": 1140}]
        await admin.publish("audit", [{"id": 9, "what": "marker"}])
        seen = [r.topic for e in await take(everything, 2) for r in e.records]
        assert seen == ["orders", "audit"]
        groups.cancel()
        everything.cancel()
