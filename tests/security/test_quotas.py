"""Issue 37, finding 3: quotas hold under concurrency, and the server has bounds of its own.

60 concurrent OpenSnapshot calls from one user held 22 snapshots against its quota of 16: each
call checked the quota, then awaited its scan, before any was held. Beside each user's quota, the
server bounds what all users hold together (subscriptions, snapshots, staged bytes).
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from sowdb.config.security import QUOTAS
from sowdb.engine.live import admission
from sowdb.engine.read import execution
from sowdb_api.v1 import data_pb2 as dpb
from sowdb_api.v1 import data_pb2_grpc
from sowdb_client import ResourceExhaustedError
from tests.security.conftest import Secured
from tests.support import TOKENS, take


async def test_concurrent_snapshots_stay_within_the_quota(secured: Secured, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(execution, "SLICE_S", 0.0)  # each chunk of a scan lets the others run
    async with secured.client("admin") as admin:  # scans of many chunks, as a big topic's
        await admin.publish("orders", [{"orderId": 100 + i, "desk": "A", "qty": i} for i in range(5000)])
    meta = (("authorization", f"Bearer {TOKENS['reader']}"),)
    async with grpc.aio.insecure_channel(secured.target) as channel:
        stub = data_pb2_grpc.DataServiceStub(channel)
        calls = [stub.OpenSnapshot(dpb.OpenSnapshotRequest(topic="orders"), metadata=meta) for _ in range(60)]
        results = await asyncio.gather(*calls, return_exceptions=True)
    opened = [r for r in results if isinstance(r, dpb.OpenSnapshotResponse)]
    refused = [r for r in results if isinstance(r, grpc.aio.AioRpcError)]
    assert len(opened) == QUOTAS["max_snapshots"] == 16
    assert {e.code() for e in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert all("max_snapshots" in (e.details() or "") for e in refused)


async def test_the_server_bounds_subscriptions_of_all_users_together(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The admin has no quota: the server-wide bound still stops it, and the next user."""
    monkeypatch.setattr(admission, "MAX_SUBSCRIPTIONS", 3)
    async with secured.client("admin") as admin, secured.client("reader") as reader:
        streams = [admin.subscribe("orders") for _ in range(3)]
        for stream in streams:
            assert [e.kind for e in await take(stream, 1)] == ["subscribed"]
        for client in (admin, reader):
            with pytest.raises(ResourceExhaustedError, match="3 subscriptions"):
                await take(client.subscribe("orders"), 1)
        for stream in streams:
            stream.cancel()
