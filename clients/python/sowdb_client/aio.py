"""The asyncio client: the same calls as :class:`sowdb_client.Client`, awaitable."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client.client import SERVICE
from sowdb_client.errors import SowdbError, from_rpc_error
from sowdb_client.events import Event, event_from_pb
from sowdb_client.publishing import PublishTally, publish_requests
from sowdb_client.types import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PUBLISH_BATCH,
    DEFAULT_TARGET,
    PublishAck,
    PublishItem,
    Record,
    channel_options,
    records_from_pb,
    replace_request,
    sow_and_subscribe_request,
    sow_delete_request,
    sow_request,
    subscribe_request,
)


class AsyncSowResult:
    """The result of an asyncio ``sow`` query: ``async for`` it for the records."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self.group_begin: pb.GroupBegin | None = None
        self.group_end: pb.GroupEnd | None = None

    async def events(self) -> AsyncIterator[pb.SowResponse]:
        """Every response of the stream: group_begin, record batches, group_end."""
        try:
            async for resp in self._call:
                kind = resp.WhichOneof("event")
                if kind == "group_begin":
                    self.group_begin = resp.group_begin
                elif kind == "group_end":
                    self.group_end = resp.group_end
                yield resp
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    async def __aiter__(self) -> AsyncIterator[Record]:
        async for resp in self.events():
            if resp.WhichOneof("event") == "records":
                for r in records_from_pb(resp.records.records):
                    yield r

    async def records(self) -> list[Record]:
        """Every record of the result, as a list."""
        return [r async for r in self]

    def cancel(self) -> None:
        self._call.cancel()


class AsyncSubscriptionStream:
    """A live subscription: ``async for`` it for :class:`Event` objects; :meth:`cancel` ends it."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._cancelled = False
        self.sub_id = ""

    async def __aiter__(self) -> AsyncIterator[Event]:
        try:
            async for resp in self._call:
                event = event_from_pb(resp)
                if event.kind == "subscribed":
                    self.sub_id = event.sub_id
                yield event
        except grpc.RpcError as exc:
            if self._cancelled:
                return
            raise from_rpc_error(exc) from None
        except asyncio.CancelledError:
            if not self._cancelled:
                raise

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()


class AsyncClient:
    """An asyncio connection to a sowdb server; use ``async with AsyncClient(target) as c``."""

    def __init__(self, target: str = DEFAULT_TARGET, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.target = target
        self._channel = grpc.aio.insecure_channel(target, options=channel_options(max_message_bytes))
        self._stub = sow_pb2_grpc.SowServiceStub(self._channel)
        self._health: Any = health_pb2_grpc.HealthStub(self._channel)  # its stubs omit Check

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def ping(self, *, timeout: float = 5.0) -> float:
        """Round-trip time in seconds of a health check."""
        start = time.perf_counter()
        try:
            resp = await self._health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=timeout)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        if resp.status != health_pb2.HealthCheckResponse.SERVING:
            raise SowdbError(grpc.StatusCode.UNAVAILABLE, "server is not serving")
        return time.perf_counter() - start

    async def publish(
        self,
        topic: str,
        messages: Iterable[PublishItem],
        *,
        delta: bool = False,
        batch_size: int = DEFAULT_PUBLISH_BATCH,
        timeout: float | None = None,
    ) -> PublishAck:
        """Publish in atomic batches, stopping at the first refusal; see
        :meth:`sowdb_client.Client.publish`."""
        tally = PublishTally()
        async for _ in self._publish(tally, topic, messages, delta=delta, batch_size=batch_size, timeout=timeout):
            pass
        return tally.total()

    def publish_iter(
        self,
        topic: str,
        messages: Iterable[PublishItem],
        *,
        delta: bool = False,
        batch_size: int = DEFAULT_PUBLISH_BATCH,
        timeout: float | None = None,
    ) -> AsyncIterator[PublishAck]:
        """Publish, yielding one :class:`PublishAck` per acknowledged batch; see
        :meth:`sowdb_client.Client.publish_iter`."""
        return self._publish(PublishTally(), topic, messages, delta=delta, batch_size=batch_size, timeout=timeout)

    async def _publish(
        self,
        tally: PublishTally,
        topic: str,
        messages: Iterable[PublishItem],
        *,
        delta: bool,
        batch_size: int,
        timeout: float | None,
    ) -> AsyncIterator[PublishAck]:
        requests = publish_requests(topic, messages, delta=delta, batch_size=batch_size, sizes=tally.sizes)
        call = self._stub.Publish(requests, timeout=timeout)
        try:
            async for resp in call:
                yield tally.ack(resp)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        finally:
            call.cancel()  # a no-op once the call has ended; stops sending when we stop early

    def sow(
        self,
        topic: str,
        *,
        filter: str = "",
        order_by: str = "",
        top_n: int | None = None,
        skip_n: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        sow_keys: Sequence[str] = (),
        query_id: str = "",
        bookmark: str = "",
        grouping: Sequence[str] = (),
        projection: Sequence[str] = (),
        select: str = "",
        timeout: float | None = None,
    ) -> AsyncSowResult:
        """Query the state of a topic; ``async for`` the result."""
        req = sow_request(
            topic,
            filter=filter,
            order_by=order_by,
            top_n=top_n,
            skip_n=skip_n,
            batch_size=batch_size,
            sow_keys=sow_keys,
            query_id=query_id,
            bookmark=bookmark,
            grouping=grouping,
            projection=projection,
            select=select,
        )
        return AsyncSowResult(self._stub.Sow(req, timeout=timeout))

    def subscribe(
        self,
        topic: str,
        *,
        filter: str = "",
        oof: bool = False,
        delta: bool = False,
        no_empties: bool = False,
        bookmark: str = "",
        conflation: float | None = None,
        conflation_key: Sequence[str] = (),
        sub_id: str = "",
        timeout: float | None = None,
    ) -> AsyncSubscriptionStream:
        """Subscribe to every later message of a topic; ``async for`` the events. The options
        are those of :meth:`sowdb_client.Client.subscribe`."""
        req = subscribe_request(
            topic,
            filter=filter,
            oof=oof,
            delta=delta,
            no_empties=no_empties,
            bookmark=bookmark,
            sub_id=sub_id,
            conflation=conflation,
            conflation_key=conflation_key,
        )
        return AsyncSubscriptionStream(self._stub.Subscribe(req, timeout=timeout))

    def sow_and_subscribe(
        self,
        topic: str,
        *,
        filter: str = "",
        order_by: str = "",
        top_n: int | None = None,
        skip_n: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        sow_keys: Sequence[str] = (),
        query_id: str = "",
        select: str = "",
        bookmark: str = "",
        grouping: Sequence[str] = (),
        projection: Sequence[str] = (),
        oof: bool = False,
        delta: bool = False,
        no_empties: bool = False,
        conflation: float | None = None,
        conflation_key: Sequence[str] = (),
        sub_id: str = "",
        timeout: float | None = None,
    ) -> AsyncSubscriptionStream:
        """Query and subscribe at one atomic point; see :meth:`sowdb_client.Client.sow_and_subscribe`."""
        query = {
            "filter": filter,
            "order_by": order_by,
            "top_n": top_n,
            "skip_n": skip_n,
            "batch_size": batch_size,
            "sow_keys": sow_keys,
            "query_id": query_id,
            "select": select,
            "bookmark": bookmark,
            "grouping": grouping,
            "projection": projection,
        }
        req = sow_and_subscribe_request(
            topic,
            query=query,
            oof=oof,
            delta=delta,
            no_empties=no_empties,
            conflation=conflation,
            conflation_key=conflation_key,
            sub_id=sub_id,
        )
        return AsyncSubscriptionStream(self._stub.SowAndSubscribe(req, timeout=timeout))

    async def replace_subscription(
        self,
        sub_id: str,
        *,
        filter: str = "",
        oof: bool = False,
        delta: bool = False,
        no_empties: bool = False,
        order_by: str = "",
        top_n: int | None = None,
        skip_n: int | None = None,
        timeout: float | None = None,
    ) -> int:
        """R-1: new filter and options for a live subscription of this client; records newly
        in scope arrive on its stream, records leaving it get an oof. Returns the bookmark at
        which the change took effect. A paginated subscription takes its page again
        (``top_n``, ``skip_n``, ``order_by``).

        Raises:
            NotFoundError: no such subscription on this client's connection.
        """
        req = replace_request(
            sub_id,
            filter=filter,
            oof=oof,
            delta=delta,
            no_empties=no_empties,
            order_by=order_by,
            top_n=top_n,
            skip_n=skip_n,
        )
        try:
            resp = await self._stub.ReplaceSubscription(req, timeout=timeout)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return resp.bookmark

    async def sow_delete(
        self,
        topic: str,
        *,
        filter: str = "",
        sow_keys: Sequence[str] = (),
        data: bytes | str | Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> int:
        """Delete by exactly one of filter, SowKeys or data; returns the number deleted."""
        try:
            resp = await self._stub.SowDelete(
                sow_delete_request(topic, filter=filter, sow_keys=sow_keys, data=data), timeout=timeout
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return resp.deleted_count

    async def list_topics(self, *, timeout: float | None = None) -> list[pb.TopicInfo]:
        """The configured topics."""
        try:
            resp = await self._stub.ListTopics(pb.ListTopicsRequest(), timeout=timeout)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return list(resp.topics)
