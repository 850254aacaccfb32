"""How many live deliveries may be in flight at once, across every subscriber (issue 29).

A delivery is in flight from the moment its sender hands it to the protocol layer until the
protocol layer asks for the next event, that is until gRPC has completed the write. The window
lets :data:`WINDOW` deliveries be in flight at once; a sender that finds it full waits in line
(first come, first served: no subscriber starves another), and whatever reaches its
subscription meanwhile goes in the delivery it makes once its turn comes.

So the batch size follows the transport: on an idle server a slot is free and a change goes at
once, in a frame of its own; on a busy one a write completes only after the event loop has run
everything queued before it, the line grows, and each subscriber sends fewer, larger frames —
the loop's work per frame (gRPC's Python layer costs about the same per frame whatever its
size) stays bounded by the transport's own pace instead of a constant rate. Measured: an
``await`` on gRPC's write completes once the transport has taken the bytes, long before the
subscriber reads them (flow-control windows grow to megabytes), so the write's completion is
the only back-pressure there is, and this is how it is used.

A write that a stalled subscriber blocks (its flow-control window full) would hold its slot for
ever: after :data:`STALL_S` the slot is given back, the delivery stays in flight, and the
subscriber is left to the slow-consumer rule (SL-1).
"""

from __future__ import annotations

import asyncio
from collections import deque

WINDOW = 8
"""Deliveries in flight at once across all subscribers."""

STALL_S = 0.05
"""A delivery in flight longer than this gives its slot back (a stalled subscriber)."""


class Slot:
    """One delivery's place in the window; :meth:`release` (idempotent) gives it back."""

    __slots__ = ("_timer", "_window")

    def __init__(self, window: DeliveryWindow, stall_s: float) -> None:
        self._window: DeliveryWindow | None = window
        self._timer = asyncio.get_running_loop().call_later(stall_s, self.release)

    def release(self) -> None:
        window, self._window = self._window, None
        if window is not None:
            self._timer.cancel()
            window._give_back()


class DeliveryWindow:
    """The slots of in-flight deliveries, and the senders waiting for one, in order."""

    def __init__(self, size: int = WINDOW, stall_s: float = STALL_S) -> None:
        self._free = size
        self._stall_s = stall_s
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Senders waiting for a slot."""
        return len(self._waiters)

    async def acquire(self) -> Slot:
        """A slot: at once while one is free and no one waits, else in turn."""
        if self._free > 0 and not self._waiters:
            self._free -= 1
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter  # the slot was handed over by _give_back
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._give_back()  # handed a slot, but leaving: pass it on
                else:
                    self._waiters.remove(waiter)
                raise
        return Slot(self, self._stall_s)

    def _give_back(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to the next in line
                return
        self._free += 1
