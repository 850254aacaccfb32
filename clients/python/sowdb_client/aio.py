"""The asyncio client: the calls of :class:`sowdb_client.Client`, awaitable. The calls that
return a stream are defined once for both (:class:`~sowdb_client.calls.Calls`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, Unpack

import grpc

from sowdb_api.v1 import admin_pb2
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import calls
from sowdb_client import options as o
from sowdb_client import types as t
from sowdb_client.calls import DEFAULT_KEEPALIVE, Calls, Connection, EventStream, SowFrames
from sowdb_client.errors import DataLossError, NotFoundError, SowdbError, from_rpc_error
from sowdb_client.events import Event
from sowdb_client.publishing import PublishTally, publish_requests
from sowdb_client.servers import DEFAULT_FAILOVER_TIMEOUT, PROBE_TIMEOUT, Failover, Outbox, ReadFrom, Resume, Servers

T = TypeVar("T")


class AsyncSowResult(SowFrames):
    """The result of an asyncio ``sow`` query: ``async for`` it for the records."""

    async def events(self) -> AsyncIterator[pb.SowResponse]:
        """Every response of the stream: group_begin, record batches (packed, as for
        :meth:`SowResult.events`: :func:`sowdb_client.records_of` reads them), group_end."""
        if self._call is None and self._opener is not None:
            self._call = await self._opener()
        if self._call is None:  # cancelled before it was opened
            return
        with calls.rpc_errors():
            async for resp in self._call:
                self._note(resp)
                yield resp

    async def __aiter__(self) -> AsyncIterator[t.Record]:
        async for resp in self.events():
            if resp.WhichOneof("event") == "records":
                for r in t.records_of(resp.records):
                    yield r

    async def records(self) -> list[t.Record]:
        """Every record of the result, as a list: a batch at a time (``async for`` over the
        records costs an await per record)."""
        out: list[t.Record] = []
        async for resp in self.events():
            if resp.WhichOneof("event") == "records":
                out += t.records_of(resp.records)
        return out


class AsyncSubscriptionStream(EventStream):
    """A live subscription: ``async for`` it for :class:`Event` objects; :meth:`cancel` ends it.
    Given a server list, it resumes on another server when its own fails (HA-5)."""

    async def __aiter__(self) -> AsyncIterator[Event]:
        if self._reopen is None:
            try:
                async for resp in self._call:
                    yield self._event(resp)
            except grpc.RpcError as exc:
                self._failed(exc)
            except asyncio.CancelledError:
                if not self._cancelled:
                    raise
            return
        error: SowdbError | None = None
        progressed = False
        while not self._cancelled:
            self._call = await self._reopen(error, progressed)
            error, progressed = None, False
            try:
                async for resp in self._call:
                    progressed = True
                    event = self._event(resp)
                    shown = self._resume.admit(event) if self._resume is not None else event
                    if shown is not None:
                        yield shown
                return
            except grpc.RpcError as exc:
                error = from_rpc_error(exc)
            except asyncio.CancelledError:
                if not self._cancelled:
                    raise
                return
            except DataLossError:  # resumed on a history that is not the one it delivered
                self._call.cancel()
                raise
            except SowdbError as exc:  # its server is behind the resume point
                self._call.cancel()
                error = exc
            if self._resume is None and not self._cancelled:  # sow_and_subscribe: not resumed
                raise error


class AsyncClient(Calls[AsyncSowResult, AsyncSubscriptionStream, AsyncIterator[t.PublishAck]]):
    """An asyncio connection to a sowdb server; use ``async with AsyncClient(target) as c``."""

    def __init__(
        self,
        target: str | Sequence[str] = t.DEFAULT_TARGET,
        *,
        token: str | None = None,
        tls: bool | t.Tls | None = None,
        max_message_bytes: int = t.DEFAULT_MAX_MESSAGE_BYTES,
        read_from: ReadFrom = "primary",
        failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT,
        keepalive: float | None = DEFAULT_KEEPALIVE,
    ) -> None:
        """See :class:`Client`."""
        self.target = target if isinstance(target, str) else ",".join(target)
        self._servers = Servers(target, read_from=read_from, failover_timeout=failover_timeout)
        self._max_message_bytes = max_message_bytes

        def connect(address: str) -> Connection[grpc.aio.Channel]:
            channel = calls.open_channel(
                grpc.aio.insecure_channel, grpc.aio.secure_channel, address, tls, max_message_bytes, keepalive
            )
            return Connection(address, channel)

        self._connect = connect
        self._conns = {address: connect(address) for address in self._servers.addresses[:1]}
        first = self._conns[self._servers.addresses[0]]
        self._metadata = calls.token_metadata(token)
        self._stub = first.stub  # a single server's calls go straight to it, as before server lists

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for conn in self._conns.values():
            await conn.channel.close()

    def _conn(self, address: str) -> Connection[grpc.aio.Channel]:
        if address not in self._conns:
            self._conns[address] = self._connect(address)
        return self._conns[address]

    def _sow_result(self, call: Any, opener: Any = None) -> AsyncSowResult:
        return AsyncSowResult(call, opener)

    def _subscription(self, call: Any, reopen: Any = None, resume: Resume | None = None) -> AsyncSubscriptionStream:
        return AsyncSubscriptionStream(call, reopen, resume)

    async def _publish(self, tally: PublishTally, call: Any) -> AsyncIterator[t.PublishAck]:
        try:
            with calls.rpc_errors():
                async for resp in call:
                    yield tally.ack(resp)
            tally.end()
        finally:
            call.cancel()  # a no-op once the call has ended; stops sending when we stop early

    # --- a server list (HA-5): as Client's, awaited

    async def _reach(self, failover: Failover, *, probe: bool = False) -> Connection[grpc.aio.Channel]:
        """See :meth:`Client._reach`."""
        while True:
            conn = self._conn(failover.address())
            try:
                if failover.needs_confirm(conn.address):
                    failover.confirmed(conn.address, calls.role_of(await self._status_of(conn)))
                elif probe or not failover.to_primary:
                    with calls.rpc_errors():
                        await calls.health_check_async(conn, PROBE_TIMEOUT, self._metadata)
                return conn
            except SowdbError as exc:
                await asyncio.sleep(failover.failed(conn.address, exc))

    async def _status_of(self, conn: Connection[grpc.aio.Channel]) -> list[admin_pb2.ClusterNode] | SowdbError:
        try:
            with calls.rpc_errors():
                reply = await conn.admin.ClusterStatus(
                    admin_pb2.ClusterStatusRequest(), timeout=PROBE_TIMEOUT, metadata=self._metadata
                )
                return list(reply.nodes)
        except SowdbError as exc:
            return exc

    async def _call(self, fn: Callable[[Connection[grpc.aio.Channel]], Awaitable[T]], *, write: bool = False) -> T:
        """See :meth:`Client._call`."""
        if not self._servers.many:
            with calls.rpc_errors():
                return await fn(self._conns[self._servers.addresses[0]])
        failover = self._servers.failover(write=write)
        while True:
            conn = await self._reach(failover)
            try:
                with calls.rpc_errors():
                    return await fn(conn)
            except SowdbError as exc:
                await asyncio.sleep(failover.failed(conn.address, exc))

    def _opener(self, method: str, request: Any, timeout: float | None) -> Callable[[], Awaitable[Any]]:
        async def open_call() -> Any:
            failover = self._servers.failover(write=False)
            metadata = self._servers.read_metadata(self._metadata)
            while True:  # see Client._opener
                conn = await self._reach(failover)
                call = getattr(conn.stub, method)(request, timeout=timeout, metadata=metadata)
                refused = await calls.refused_at_once_async(call) if failover.to_primary else None
                if refused is None:
                    return call
                await asyncio.sleep(failover.failed(conn.address, refused))

        return open_call

    def _reopener(self, resume: Resume, timeout: float | None) -> Callable[[SowdbError | None, bool], Awaitable[Any]]:
        failover = self._servers.failover(write=False)

        async def reopen(error: SowdbError | None, progressed: bool) -> Any:
            if progressed:
                failover.succeeded()
            if error is not None:
                await asyncio.sleep(failover.failed(resume.address, resume.judged(error)))
            conn = await self._reach(failover, probe=error is not None)
            resume.address = conn.address
            metadata = self._servers.read_metadata(self._metadata)
            return conn.stub.Subscribe(resume.resumed_request(), timeout=timeout, metadata=metadata)

        return reopen

    async def _publish_failover(
        self,
        tally: PublishTally,
        topic: str,
        messages: Iterable[t.PublishItem],
        options: Mapping[str, Any],
        timeout: float | None,
    ) -> AsyncIterator[t.PublishAck]:
        with self._servers.producing(options, tally.sizes) as given:
            outbox = Outbox(publish_requests(topic, iter(messages), given, tally, self._max_message_bytes))
            failover = self._servers.failover(write=True)
            while True:
                conn = await self._reach(failover)
                call = conn.stub.Publish(outbox.attempt(), timeout=timeout, metadata=self._metadata)
                try:
                    with calls.rpc_errors():
                        async for resp in call:
                            ack = tally.ack(resp)
                            outbox.acknowledged()
                            failover.succeeded()
                            yield ack
                    tally.end()
                    return
                except SowdbError as exc:
                    await asyncio.sleep(failover.failed(conn.address, exc))
                finally:
                    call.cancel()

    async def find_primary(self) -> str:
        """The address of the primary among this client's servers (see :meth:`Client.find_primary`)."""

        async def address(c: Connection[grpc.aio.Channel]) -> str:
            return c.address

        return await self._call(address, write=True)

    async def ping(self, *, timeout: float = 5.0) -> float:
        """Round-trip time in seconds of a health check (see :meth:`Client.ping`)."""
        start = time.perf_counter()

        async def check(c: Connection[grpc.aio.Channel]) -> None:
            await calls.health_check_async(c, timeout, self._metadata)

        await self._call(check)
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
        request = self._replace(sub_id, options)
        for conn in list(self._conns.values())[:-1]:  # a server list: where the subscription is
            try:
                with calls.rpc_errors():
                    reply = await conn.stub.ReplaceSubscription(request, timeout=timeout, metadata=self._metadata)
                    return int(reply.bookmark)
            except NotFoundError:
                continue
        with calls.rpc_errors():
            last = list(self._conns.values())[-1]
            return int(
                (await last.stub.ReplaceSubscription(request, timeout=timeout, metadata=self._metadata)).bookmark
            )

    async def sow_delete(self, topic: str, *, timeout: float | None = None, **options: Unpack[o.DeleteOptions]) -> int:
        """Delete by exactly one of filter, SowKeys or data; returns the number deleted."""
        request = self._delete(topic, options)

        async def delete(c: Connection[grpc.aio.Channel]) -> int:
            return int((await c.stub.SowDelete(request, timeout=timeout, metadata=self._metadata)).deleted_count)

        return await self._call(delete, write=True)

    async def list_topics(self, *, timeout: float | None = None) -> list[pb.TopicInfo]:
        """The configured topics with kind, key, durability and record count."""

        async def listed(c: Connection[grpc.aio.Channel]) -> list[pb.TopicInfo]:
            return list(
                (await c.stub.ListTopics(pb.ListTopicsRequest(), timeout=timeout, metadata=self._metadata)).topics
            )

        return await self._call(listed)

    async def stats(
        self, topic: str = "", *, topics_only: bool = False, timeout: float | None = None
    ) -> admin_pb2.StatsResponse:
        """The server's figures (see :meth:`Client.stats`)."""
        request = admin_pb2.StatsRequest(topic=topic, topics_only=topics_only)

        async def stats(c: Connection[grpc.aio.Channel]) -> admin_pb2.StatsResponse:
            reply: admin_pb2.StatsResponse = await c.admin.Stats(request, timeout=timeout, metadata=self._metadata)
            return reply

        return await self._call(stats)

    async def cluster_status(self, *, timeout: float | None = None) -> list[admin_pb2.ClusterNode]:
        """The cluster as this server sees it (see :meth:`Client.cluster_status`)."""
        request = admin_pb2.ClusterStatusRequest()

        async def status(c: Connection[grpc.aio.Channel]) -> list[admin_pb2.ClusterNode]:
            return list((await c.admin.ClusterStatus(request, timeout=timeout, metadata=self._metadata)).nodes)

        return await self._call(status)
