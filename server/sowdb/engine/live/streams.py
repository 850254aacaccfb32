"""A subscription's life after placement, as a stream of engine events.

``subscribed``; the query's results while live changes are held (S-1); the journal replay of a
bookmark and ``completed`` (H-3, H-4); then the release of the held changes and live deliveries
until the subscriber leaves or falls too far behind (SL-1). The protocol layer only encodes
these events; every rule about what is sent when lives here.

Deliveries are batched by how busy the event loop is (:mod:`sowdb.engine.live.loop_load`): the
transport costs about the same per frame whatever its size, so when the loop is saturated each
subscriber waits :meth:`~sowdb.engine.live.loop_load.LoopLoad.hold_s` since its own last delivery and
sends what accumulated meanwhile in one; a loop with room holds nothing and a change goes at
once. What arrives while a delivery is in flight (until the protocol layer asks for the next
event, i.e. gRPC completed the write) goes in the next one. No subscriber waits for another.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from types import TracebackType
from typing import Protocol

from sowdb.engine.changes import QueuedEvent
from sowdb.engine.events import Completed, Deliveries, Heartbeat, QueryEvent, RecordBatch, StreamEvent, Subscribed
from sowdb.engine.journal import Journal, Position
from sowdb.engine.live.hub import SubscriptionHub
from sowdb.engine.live.loop_load import LOAD
from sowdb.engine.live.subscription import Subscription
from sowdb.engine.read import RECORD_OVERHEAD
from sowdb.engine.records import StoredRecord


class Unsubscriber(Protocol):
    """Who removes a subscription that ends: the engine's :class:`Placement`, or a reader
    process's own registry (:mod:`sowdb.workers`)."""

    def unsubscribe(self, sub: Subscription) -> None: ...


class SubscriptionStream:
    """One placed subscription; ``async with`` it and iterate :meth:`events`. Leaving the
    ``async with`` (the client went, or a failure) removes the subscription."""

    def __init__(
        self,
        sub: Subscription,
        query: AsyncIterator[QueryEvent] | None,
        *,
        placement: Unsubscriber,
        journal: Journal | None,
        writer: Position,
        hub: SubscriptionHub,
        heartbeat_s: float,
        frame_bytes: int,
    ) -> None:
        self.sub, self._query = sub, query
        self._placement, self._journal, self._writer, self._hub = placement, journal, writer, hub
        self._heartbeat_s, self._frame_bytes = heartbeat_s, frame_bytes

    @property
    def sub_id(self) -> str:
        return self.sub.name

    async def __aenter__(self) -> SubscriptionStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """End the subscription (idempotent)."""
        self._placement.unsubscribe(self.sub)

    async def events(self) -> AsyncGenerator[StreamEvent]:
        """Everything the subscriber is sent, in order.

        Raises:
            SlowConsumer: the subscriber fell further behind than its queue allows (SL-1).
        """
        sub = self.sub
        yield Subscribed(sub.name, self._hub.gate.since.get(sub.id, self._writer.last_seq))
        delivered: list[StoredRecord] = []
        if self._query is not None:
            async for event in self._query:
                if isinstance(event, RecordBatch) and sub.focus is not None:
                    delivered.extend(event.records)
                yield event
        sub.accept(delivered)
        if sub.replay_from is not None:
            assert self._journal is not None, "a replayed subscription is placed where the journal is"
            async for changes in self._journal.replay(sub.replay_from, sub.wants, track_old=sub.options.delta):
                sub.evaluate(changes)
                for deliveries in self._deliveries(sub.drain()):
                    yield deliveries
            yield Completed(sub.replay_from[1])
        sub.release()
        async for live in self._live():
            yield live

    async def _live(self) -> AsyncGenerator[Deliveries | Heartbeat]:
        sub = self.sub
        heartbeat = self._heartbeat_s
        period = sub.options.conflation_s  # C-1: flush the conflated publishes this often
        loop = asyncio.get_running_loop()
        last_send = last_activity = loop.time()
        next_flush = last_activity + period
        while True:
            timeout = min(heartbeat, max(0.0, next_flush - loop.time())) if period else heartbeat
            woke = await sub.wakeup.wait(timeout)
            now = loop.time()
            if period and now >= next_flush:
                sub.flush()
                next_flush = now + period
                woke = woke or sub.wakeup.is_set()
            if not woke:
                if now - last_activity >= heartbeat:
                    last_activity = now
                    yield Heartbeat(self._hub.gate.start_point(self._writer.last_seq))
                continue
            wait = last_send + LOAD.hold_s(len(self._hub.subs)) - loop.time()
            if wait > 0:  # the loop is saturated: what arrives meanwhile goes in this delivery
                await asyncio.sleep(wait)
            last_send = last_activity = loop.time()
            LOAD.deliveries += 1
            for deliveries in self._deliveries(sub.drain()):
                yield deliveries

    def _deliveries(self, events: list[QueuedEvent]) -> Iterator[Deliveries]:
        """Drained events in deliveries of about ``frame_bytes`` bytes each at most (a backlog
        of large records must not make one response over the transport's limit)."""
        limit = self._frame_bytes
        start = used = 0
        for i, e in enumerate(events):
            cost = len(e.record.raw) + RECORD_OVERHEAD
            if used + cost > limit and i > start:
                yield Deliveries(events[start:i])
                start, used = i, 0
            used += cost
        if start < len(events):
            yield Deliveries(events[start:] if start else events)
