"""Issue 26, revocation (A-4): rights taken away by a reload (SIGHUP) hold at once for what is
already open — a Publish or StageWrite stream is re-checked at every request, and a snapshot or a
stage of a user who lost the right to it ends. Each test performs the attack; the roles are the
``secured`` fixture's (``tests/security/conftest.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc, sow_pb2_grpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import NotFoundError, PermissionDeniedError
from sowdb_client.errors import from_rpc_error
from tests.security.conftest import ROLES, USERS, Secured, secured_config
from tests.security.test_namespaces import as_user, call, commit


def reload(s: Secured, *, drop: str = "", roles: dict[str, dict[str, Any]] | None = None) -> None:
    """What SIGHUP does with an edited users file / config: ``drop`` a user, change ``roles``."""
    home = Path(s.server.config.source).parent
    users = {name: r for name, r in USERS.items() if name != drop}
    new_roles = [{**r, **(roles or {}).get(r["name"], {})} for r in ROLES]
    s.server.reload(secured_config(home, users=users, roles=new_roles))


class Requests:
    """A client-streaming call's requests, sent one at a time."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    async def __aiter__(self) -> AsyncIterator[Any]:
        while (req := await self.queue.get()) is not None:
            yield req


def order(i: int) -> pb.PublishMessage:
    return pb.PublishMessage(data=b'{"orderId": %d, "desk": "C"}' % i)


async def keys(s: Secured) -> set[str]:
    async with s.client("admin") as admin:
        return {r.sow_key for r in await admin.sow("orders").records()}


@pytest.mark.parametrize("revoke", ["user removed", "write right removed"])
async def test_an_open_publish_stream_stores_nothing_once_its_user_lost_the_right(
    secured: Secured, revoke: str
) -> None:
    async with grpc.aio.insecure_channel(secured.target) as channel:
        sow: Any = sow_pb2_grpc.SowServiceStub(channel)
        requests = Requests()
        stream = sow.Publish(requests.__aiter__(), metadata=as_user("writer"))
        await requests.queue.put(pb.PublishRequest(topic="orders", messages=[order(500)], correlation_id="1"))
        assert (await asyncio.wait_for(stream.read(), 10)).last_bookmark
        if revoke == "user removed":
            reload(secured, drop="writer")
        else:
            reload(secured, roles={"writer": {"write": []}})
        await requests.queue.put(pb.PublishRequest(topic="orders", messages=[order(501)], correlation_id="2"))
        if revoke == "user removed":  # the stream ends
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await asyncio.wait_for(stream.read(), 10)
            assert ended.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "writer" in str(ended.value.details())
        else:  # the user may still publish elsewhere: each request is refused
            refused = await asyncio.wait_for(stream.read(), 10)
            assert refused.error.code == grpc.StatusCode.PERMISSION_DENIED.value[0]
            assert "no write right" in refused.error.message
            await requests.queue.put(None)
        stream.cancel()
    assert {"500", "501"} & await keys(secured) == {"500"}


async def test_a_snapshot_ends_when_its_user_loses_the_right_to_it(secured: Secured) -> None:
    """The reader's snapshot (desk A rows) is no longer readable once the reader is gone, nor the
    trader's once its row entitlement changed; the admin's is untouched."""
    async with grpc.aio.insecure_channel(secured.target) as channel:
        data: Any = data_pb2_grpc.DataServiceStub(channel)
        snaps = {
            user: (
                await call(data.OpenSnapshot(dpb.OpenSnapshotRequest(topic="orders"), metadata=as_user(user)))
            ).snapshot_id
            for user in ("reader", "trader", "admin")
        }

        async def read(user: str) -> int:
            request = dpb.ReadSnapshotRequest(snapshot_id=snaps[user])
            try:
                return len(
                    [k async for r in data.ReadSnapshot(request, metadata=as_user(user)) for k in r.records.sow_keys]
                )
            except grpc.RpcError as exc:
                raise from_rpc_error(exc) from None

        assert (await read("reader"), await read("trader"), await read("admin")) == (5, 5, 10)
        reload(secured, drop="reader", roles={"trader": {"filter": "/desk = 'B'"}})
        assert secured.server.engine is not None
        assert len(secured.server.engine.snapshots) == 1  # the admin's
        with pytest.raises(PermissionDeniedError, match="rights changed"):
            await read("trader")
        assert await read("admin") == 10


async def test_another_user_cannot_read_or_close_a_snapshot(secured: Secured) -> None:
    async with grpc.aio.insecure_channel(secured.target) as channel:
        data: Any = data_pb2_grpc.DataServiceStub(channel)
        opened = await call(data.OpenSnapshot(dpb.OpenSnapshotRequest(topic="orders"), metadata=as_user("trader")))
        for user in ("reader", "admin"):
            request = dpb.ReadSnapshotRequest(snapshot_id=opened.snapshot_id)
            with pytest.raises(NotFoundError):
                await call(data.ReadSnapshot(request, metadata=as_user(user)).read())
            closed = await call(
                data.CloseSnapshot(dpb.CloseSnapshotRequest(snapshot_id=opened.snapshot_id), metadata=as_user(user))
            )
            assert not closed.closed
        closed = await call(
            data.CloseSnapshot(dpb.CloseSnapshotRequest(snapshot_id=opened.snapshot_id), metadata=as_user("trader"))
        )
        assert closed.closed


async def test_the_stages_of_a_user_who_lost_the_write_right_are_dropped(secured: Secured) -> None:
    """Staged before the reload, committed after the right came back: the stage is gone."""
    engine = secured.server.engine
    assert engine is not None
    async with grpc.aio.insecure_channel(secured.target) as channel:
        data: Any = data_pb2_grpc.DataServiceStub(channel)

        async def one() -> AsyncIterator[dpb.StageWriteRequest]:
            yield dpb.StageWriteRequest(stage_id="s-1", topic="orders", messages=[order(600)], complete=True)

        await call(data.StageWrite(one(), metadata=as_user("writer")))
        reload(secured, roles={"writer": {"write": []}})
        assert len(engine.stages) == 0
        reload(secured)
        with pytest.raises(NotFoundError):
            await commit(data, "writer", ["s-1"])

        # a StageWrite stream open across the reload: its next request ends it, and nothing is kept
        requests = Requests()
        writing = data.StageWrite(requests.__aiter__(), metadata=as_user("writer"))
        await requests.queue.put(dpb.StageWriteRequest(stage_id="s-2", topic="orders", messages=[order(601)]))
        async with asyncio.timeout(10):
            while not len(engine.stages):  # noqa: ASYNC110  # the stage exists once the first request is in
                await asyncio.sleep(0.01)
        reload(secured, drop="writer")
        await requests.queue.put(dpb.StageWriteRequest(messages=[order(602)], complete=True))
        await requests.queue.put(None)
        with pytest.raises(PermissionDeniedError):
            await call(writing)
        assert len(engine.stages) == 0
    assert not {"600", "601", "602"} & await keys(secured)
