"""How many live deliveries may be in flight at once, across every subscriber (issue 29).

A delivery is in flight from the moment its sender hands it to the protocol layer until the
protocol layer asks for the next event, that is until gRPC has completed the write. The window
lets :attr:`DeliveryWindow.size` deliveries be in flight at once; a sender that finds it full
waits in line (first come, first served: no subscriber starves another), and whatever reaches
its subscription meanwhile goes in the delivery it makes once its turn comes.

What sets the batch size is therefore how fast the transport completes writes, and how busy the
event loop is: a write completes only once the loop gets round to it. The window's size follows
the loop like a delay-based congestion window: each time a waiting sender is handed a slot, the
time it took the loop to resume it (one turn of the loop) is measured; a turn longer than
:data:`LOOP_DELAY_S` shrinks the window by one, a turn under a quarter of it grows the window
by one, between 1 and :data:`MOST`. On an idle server a slot is free and a change goes at once,
in a frame of its own; on a busy one the window closes, senders wait longer, and each
subscriber sends fewer, larger frames (gRPC's Python layer costs about the same per frame
whatever its size), leaving the loop to the publishes.

Measured (docs/benchmarks.md): an ``await`` on gRPC's write completes once the transport has
taken the bytes, long before the subscriber reads them (flow-control windows grow to
megabytes), so a write's completion — and the loop's delay in getting to it — is the only
back-pressure there is; this is how it is used.

A write that a stalled subscriber blocks (its flow-control window full) would hold its slot for
ever: after :data:`STALL_S` the slot is given back, the delivery stays in flight, and the
subscriber is left to the slow-consumer rule (SL-1).
"""

from __future__ import annotations

import asyncio
from collections import deque

MOST = 4
"""The most deliveries in flight at once across all subscribers (the window's size when idle):
enough that 100 subscribers of an idle server get a change within a few write round trips, few
enough that more than a handful of busy subscribers form a line, whose hand-overs measure the
loop (measured against 16: with 10 subscribers no one waited, so the window never closed)."""

LOOP_DELAY_S = 0.0003
"""A hand-over the loop took longer than this to resume closes the window by one (measured
against 1 ms, which a saturated loop of many short turns never reached)."""

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

    def __init__(self, most: int = MOST, delay_s: float = LOOP_DELAY_S, stall_s: float = STALL_S) -> None:
        self.size = most
        self._most, self._delay_s, self._stall_s = most, delay_s, stall_s
        self._in_flight = 0
        self._waiters: deque[asyncio.Future[float]] = deque()

    @property
    def waiting(self) -> int:
        """Senders waiting for a slot."""
        return len(self._waiters)

    async def acquire(self) -> Slot:
        """A slot: at once while one is free and no one waits, else in turn."""
        if self._in_flight < self.size and not self._waiters:
            self._in_flight += 1
        else:
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[float] = loop.create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter  # the loop's time when the slot was handed over
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._give_back()  # handed a slot, but leaving: pass it on
                else:
                    self._waiters.remove(waiter)
                raise
            self._adapt(loop.time() - handed)
        return Slot(self, self._stall_s)

    def _adapt(self, turn: float) -> None:
        if turn > self._delay_s:
            self.size = max(1, self.size - 1)
        elif turn < self._delay_s / 4 and self.size < self._most:
            self.size += 1
            self._hand_over()

    def _give_back(self) -> None:
        self._in_flight -= 1
        self._hand_over()

    def _hand_over(self) -> None:
        while self._waiters and self._in_flight < self.size:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self._in_flight += 1
                waiter.set_result(asyncio.get_running_loop().time())
