"""The asyncio client: the calls of :class:`sowdb_client.Client`, awaitable. The calls that
return a stream are defined once for both (:class:`~sowdb_client.calls.Calls`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any, Unpack

import grpc
from grpc_health.v1 import health_pb2_grpc

from sowdb_api.v1 import admin_pb2, admin_pb2_grpc, sow_pb2_grpc
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import calls
from sowdb_client import options as o
from sowdb_client import types as t
from sowdb_client.calls import Calls, EventStream, SowFrames
from sowdb_client.events import Event
from sowdb_client.publishing import PublishTally


class AsyncSowResult(SowFrames):
    """The result of an asyncio ``sow`` query: ``async for`` it for the records."""

    async def events(self) -> AsyncIterator[pb.SowResponse]:
        """Every response of the stream: group_begin, record batches, group_end."""
        with calls.rpc_errors():
            async for resp in self._call:
                self._note(resp)
                yield resp

    async def __aiter__(self) -> AsyncIterator[t.Record]:
        async for resp in self.events():
            if resp.WhichOneof("event") == "records":
                for r in t.records_from_pb(resp.records.records):
                    yield r

    async def records(self) -> list[t.Record]:
        """Every record of the result, as a list."""
        return [r async for r in self]


class AsyncSubscriptionStream(EventStream):
    """A live subscription: ``async for`` it for :class:`Event` objects; :meth:`cancel` ends it."""

    async def __aiter__(self) -> AsyncIterator[Event]:
        try:
            async for resp in self._call:
                yield self._event(resp)
        except grpc.RpcError as exc:
            self._failed(exc)
        except asyncio.CancelledError:
            if not self._cancelled:
                raise


class AsyncClient(Calls[AsyncSowResult, AsyncSubscriptionStream, AsyncIterator[t.PublishAck]]):
    """An asyncio connection to a sowdb server; use ``async with AsyncClient(target) as c``."""

    def __init__(
        self,
        target: str = t.DEFAULT_TARGET,
        *,
        token: str | None = None,
        tls: bool | t.Tls | None = None,
        max_message_bytes: int = t.DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        """See :class:`Client`."""
        self.target = target
        self._channel = calls.open_channel(
            grpc.aio.insecure_channel, grpc.aio.secure_channel, target, tls, max_message_bytes
        )
        self._metadata = calls.token_metadata(token)
        self._stub = sow_pb2_grpc.SowServiceStub(self._channel)
        self._admin = admin_pb2_grpc.AdminServiceStub(self._channel)
        self._health: Any = health_pb2_grpc.HealthStub(self._channel)  # its stubs omit Check

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    def _sow_result(self, call: Any) -> AsyncSowResult:
        return AsyncSowResult(call)

    def _subscription(self, call: Any) -> AsyncSubscriptionStream:
        return AsyncSubscriptionStream(call)

    async def _publish(self, tally: PublishTally, call: Any) -> AsyncIterator[t.PublishAck]:
        try:
            with calls.rpc_errors():
                async for resp in call:
                    yield tally.ack(resp)
        finally:
            call.cancel()  # a no-op once the call has ended; stops sending when we stop early

    async def ping(self, *, timeout: float = 5.0) -> float:
        """Round-trip time in seconds of a health check (see :meth:`Client.ping`)."""
        start = time.perf_counter()
        with calls.rpc_errors():
            calls.check_serving(await self._health.Check(calls.HEALTH_CHECK, timeout=timeout, metadata=self._metadata))
        return time.perf_counter() - start

    async def publish(
        self,
        topic: str,
        messages: Iterable[t.PublishItem],
        *,
        timeout: float | None = None,
        **options: Unpack[o.PublishOptions],
    ) -> t.PublishAck:
        """Publish in atomic batches, stopping at the first refusal (see :meth:`Client.publish`)."""
        count = first = last = duplicates = 0
        async for ack in self.publish_iter(topic, messages, timeout=timeout, **options):
            count, duplicates = count + ack.count, duplicates + ack.duplicates
            first, last = first or ack.first_bookmark, ack.last_bookmark or last
        return t.PublishAck(count, first, last, duplicates)

    async def replace_subscription(
        self, sub_id: str, *, timeout: float | None = None, **options: Unpack[o.ReplaceOptions]
    ) -> int:
        """R-1 (see :meth:`Client.replace_subscription`); returns the bookmark it took effect at."""
        with calls.rpc_errors():
            return int(
                (
                    await self._stub.ReplaceSubscription(
                        self._replace(sub_id, options), timeout=timeout, metadata=self._metadata
                    )
                ).bookmark
            )

    async def sow_delete(self, topic: str, *, timeout: float | None = None, **options: Unpack[o.DeleteOptions]) -> int:
        """Delete by exactly one of filter, SowKeys or data; returns the number deleted."""
        with calls.rpc_errors():
            return int(
                (
                    await self._stub.SowDelete(self._delete(topic, options), timeout=timeout, metadata=self._metadata)
                ).deleted_count
            )

    async def list_topics(self, *, timeout: float | None = None) -> list[pb.TopicInfo]:
        """The configured topics with kind, key, durability and record count."""
        with calls.rpc_errors():
            return list(
                (await self._stub.ListTopics(pb.ListTopicsRequest(), timeout=timeout, metadata=self._metadata)).topics
            )

    async def stats(
        self, topic: str = "", *, topics_only: bool = False, timeout: float | None = None
    ) -> admin_pb2.StatsResponse:
        """The server's figures (see :meth:`Client.stats`)."""
        with calls.rpc_errors():
            return await self._admin.Stats(
                admin_pb2.StatsRequest(topic=topic, topics_only=topics_only), timeout=timeout, metadata=self._metadata
            )

    async def cluster_status(self, *, timeout: float | None = None) -> list[admin_pb2.ClusterNode]:
        """The cluster as this server sees it (see :meth:`Client.cluster_status`)."""
        with calls.rpc_errors():
            request = admin_pb2.ClusterStatusRequest()
            return list((await self._admin.ClusterStatus(request, timeout=timeout, metadata=self._metadata)).nodes)
