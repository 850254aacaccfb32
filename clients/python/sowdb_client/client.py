"""The synchronous client."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
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

SERVICE = "sowdb.v1.SowService"


class SowResult:
    """The result of a ``sow`` query: iterate it for the records.

    ``group_begin`` and ``group_end`` (with the counts) are set as the frames arrive;
    :meth:`events` gives the raw frames instead of records.
    """

    def __init__(self, call: Any) -> None:
        self._call = call
        self.group_begin: pb.GroupBegin | None = None
        self.group_end: pb.GroupEnd | None = None

    def events(self) -> Iterator[pb.SowResponse]:
        """Every response of the stream: group_begin, record batches, group_end."""
        try:
            for resp in self._call:
                kind = resp.WhichOneof("event")
                if kind == "group_begin":
                    self.group_begin = resp.group_begin
                elif kind == "group_end":
                    self.group_end = resp.group_end
                yield resp
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    def __iter__(self) -> Iterator[Record]:
        for resp in self.events():
            if resp.WhichOneof("event") == "records":
                yield from records_from_pb(resp.records.records)

    def cancel(self) -> None:
        """Stop receiving (the server stops sending)."""
        self._call.cancel()


class SubscriptionStream:
    """A live subscription: iterate it for :class:`Event` objects; :meth:`cancel` ends it.

    ``sub_id`` is set once the ``subscribed`` event has arrived.
    """

    def __init__(self, call: Any) -> None:
        self._call = call
        self._cancelled = False
        self.sub_id = ""

    def __iter__(self) -> Iterator[Event]:
        try:
            for resp in self._call:
                event = event_from_pb(resp)
                if event.kind == "subscribed":
                    self.sub_id = event.sub_id
                yield event
        except grpc.RpcError as exc:
            if self._cancelled:
                return
            raise from_rpc_error(exc) from None

    def cancel(self) -> None:
        """End the subscription (the iterator then stops)."""
        self._cancelled = True
        self._call.cancel()


class Client:
    """A connection to a sowdb server.

    Usage::

        with Client("127.0.0.1:9007") as c:
            c.publish("orders", [{"orderId": 1, "symbol": "SYM1"}])
            for rec in c.sow("orders", filter="/symbol = 'SYM1'"):
                print(rec.json())
    """

    def __init__(self, target: str = DEFAULT_TARGET, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        self.target = target
        self._channel = grpc.insecure_channel(target, options=channel_options(max_message_bytes))
        self._stub = sow_pb2_grpc.SowServiceStub(self._channel)
        self._health: Any = health_pb2_grpc.HealthStub(self._channel)  # its stubs omit Check

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def ping(self, *, timeout: float = 5.0) -> float:
        """Round-trip time in seconds of a health check.

        Raises:
            SowdbError: the server is unreachable or not serving.
        """
        start = time.perf_counter()
        try:
            resp = self._health.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=timeout)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        if resp.status != health_pb2.HealthCheckResponse.SERVING:
            raise SowdbError(grpc.StatusCode.UNAVAILABLE, "server is not serving")
        return time.perf_counter() - start

    def publish(
        self,
        topic: str,
        messages: Iterable[PublishItem],
        *,
        delta: bool = False,
        batch_size: int = DEFAULT_PUBLISH_BATCH,
        timeout: float | None = None,
    ) -> PublishAck:
        """Publish messages in atomic batches of ``batch_size`` over one stream.

        Messages are JSON bytes or str, mappings (encoded here), or :class:`Message` for a
        SowKey or expiration. Returns once every batch is acknowledged, with the count and the
        bookmarks of the first and last message.

        Raises:
            PublishError: a batch was refused. That batch and every later one are not stored
                (the server stops at the first refusal, even with batches in flight); the
                earlier ones are, and the error says how many (``stored``, ``first_bookmark``,
                ``last_bookmark``). ``message_index`` counts from the first message of this call.
            SowdbError: the call failed; the batches acknowledged before are stored (use
                :meth:`publish_iter` to know which).
        """
        tally = PublishTally()
        for _ in self._publish(tally, topic, messages, delta=delta, batch_size=batch_size, timeout=timeout):
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
    ) -> Iterator[PublishAck]:
        """Publish as :meth:`publish` does, yielding one :class:`PublishAck` per acknowledged
        batch (its size and bookmarks) as it arrives, for progress reports and running totals.

        Closing the iterator early cancels the call; batches already sent may still be stored.

        Raises:
            PublishError: as for :meth:`publish`, after the acks of the batches stored before.
            SowdbError: the call failed.
        """
        return self._publish(PublishTally(), topic, messages, delta=delta, batch_size=batch_size, timeout=timeout)

    def _publish(
        self,
        tally: PublishTally,
        topic: str,
        messages: Iterable[PublishItem],
        *,
        delta: bool,
        batch_size: int,
        timeout: float | None,
    ) -> Iterator[PublishAck]:
        requests = publish_requests(topic, messages, delta=delta, batch_size=batch_size, sizes=tally.sizes)
        call = self._stub.Publish(requests, timeout=timeout)
        try:
            for resp in call:
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
    ) -> SowResult:
        """Query the state of a topic (or of every topic a regex matches); iterate the result."""
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
        return SowResult(self._stub.Sow(req, timeout=timeout))

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
    ) -> SubscriptionStream:
        """Subscribe to every later message of a topic (or of every topic a regex matches).

        ``bookmark`` replays the journal after that point first (then ``completed``);
        ``conflation`` (seconds) delivers at most one update per key per interval, the latest
        state, keyed by ``conflation_key`` paths or the SowKey (C-1); ``no_empties`` with
        ``delta`` drops deliveries in which no data field changed.
        """
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
        return SubscriptionStream(self._stub.Subscribe(req, timeout=timeout))

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
    ) -> SubscriptionStream:
        """Query and subscribe at one atomic point: ``subscribed``, ``group_begin``, ``sow``
        batches, ``group_end``, then live events (feed them to a :class:`Mirror`)."""
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
        return SubscriptionStream(self._stub.SowAndSubscribe(req, timeout=timeout))

    def replace_subscription(
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
            resp = self._stub.ReplaceSubscription(req, timeout=timeout)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return resp.bookmark

    def sow_delete(
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
            resp = self._stub.SowDelete(
                sow_delete_request(topic, filter=filter, sow_keys=sow_keys, data=data), timeout=timeout
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return resp.deleted_count

    def list_topics(self, *, timeout: float | None = None) -> list[pb.TopicInfo]:
        """The configured topics with kind, key, durability and record count."""
        try:
            return list(self._stub.ListTopics(pb.ListTopicsRequest(), timeout=timeout).topics)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
