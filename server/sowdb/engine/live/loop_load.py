"""How busy the event loop is, and how long live deliveries wait for it (issue 29).

gRPC's Python server costs about the same per frame whatever its size, and its write path gives
no early back-pressure: ``await write()`` completes once the transport has the bytes, and the
publishes a saturated server has not yet read wait in the peer's socket, where no sender sees
them (docs/benchmarks.md, "Issue 29"). What the server can see is its own event loop: the time
it spends idle, blocked in ``select()`` with nothing ready. :class:`LoopLoad` counts that time
(through :class:`TimedSelector`, the selector ``sowd``'s loop is made with) and turns the loop's
busy share into :meth:`LoopLoad.hold_s`, the least time between two deliveries of one
subscriber:

- an idle or lightly loaded loop holds nothing: a change goes at once, in a frame of its own;
- a loop busy more than :data:`BUSY` of a window doubles the hold (from :data:`FIRST_HOLD_S`),
  so every subscriber sends fewer, larger frames and the loop gets back to reading publishes;
- a loop busy less than :data:`CALM` halves it, down to nothing;
- more than :data:`FRAME_CEILING` deliveries a second count as busy (the transport's threads).

Each subscriber waits its own hold since its own last delivery (no line shared among
subscribers, which is what a window of in-flight deliveries was, and what made it lose to the
fixed pace under TLS); the only thing shared is the measurement. The hold never grows past
``subscribers / FRAME_BUDGET``, the fixed pace it replaces, so a saturated server batches at
least as much as it did.

Without a timed selector (an engine in a test's loop) nothing is measured and nothing is held.
"""

from __future__ import annotations

import selectors
from collections.abc import Callable
from time import monotonic
from typing import Any

FRAME_BUDGET = 2000.0
"""Deliveries per second that all subscribers together get at least (the hold's ceiling)."""
WINDOW_S = 0.01
"""How often the busy share is taken and the hold adjusted."""
BUSY = 0.85
"""A loop busier than this share of a window is saturated: the hold doubles."""
CALM = 0.6
"""A loop busy less than this share has room: the hold halves."""
FRAME_CEILING = 2500.0
"""Deliveries per second above which a window counts as saturated whatever the loop's idle
time: gRPC's own threads (HTTP/2 framing, TLS) share the cores, and a loop waiting on them looks
idle while its frames are what keeps them busy. At 2,500 (85 % of it: about the fixed pace's
2,000 a second) a saturated server batches as the pace did; measured at 5,000, publishing with
10 subscribers fell to 0.82x the pace's on a loaded 2-core machine (docs/benchmarks.md)."""
FIRST_HOLD_S = 0.0005
"""The hold a saturated loop starts from (and below which a halving drops it to nothing)."""


class LoopLoad:
    """The loop's idle time, the busy share of the last window, and the hold it gives."""

    def __init__(self, clock: Callable[[], float] = monotonic) -> None:
        self._clock = clock
        self.idle_s = 0.0  # time blocked in select(), counted by a TimedSelector
        self.measured = False  # a TimedSelector counts for it
        self.hold = 0.0  # seconds between two deliveries of one subscriber
        self.busy = 0.0  # the busy share of the last window
        self._window_start = clock()
        self._window_idle = 0.0
        self.deliveries = 0  # in the current window, counted by the senders

    def hold_s(self, subscribers: int) -> float:
        """The least time between two deliveries of one subscriber now (0: at once)."""
        if not self.measured:
            return 0.0
        now = self._clock()
        span = now - self._window_start
        if span >= WINDOW_S:
            self.busy = busy = max(
                1.0 - (self.idle_s - self._window_idle) / span, self.deliveries / span / FRAME_CEILING
            )
            self.deliveries = 0
            self._window_start, self._window_idle = now, self.idle_s
            if busy > BUSY:
                self.hold = min(max(self.hold * 2, FIRST_HOLD_S), subscribers / FRAME_BUDGET)
            elif busy < CALM:
                self.hold = self.hold / 2 if self.hold >= 2 * FIRST_HOLD_S else 0.0
        return self.hold

    def selector(self) -> TimedSelector:
        """A selector for the loop this gauge measures (``asyncio.SelectorEventLoop(...)``)."""
        self.measured = True
        return TimedSelector(self)


class TimedSelector(selectors.DefaultSelector):
    """The platform's selector, counting the time its ``select()`` blocks into a :class:`LoopLoad`."""

    def __init__(self, load: LoopLoad) -> None:
        super().__init__()
        self._load = load

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        if timeout is not None and timeout <= 0:  # callbacks are ready: the loop is not idle
            return super().select(timeout)
        clock = self._load._clock
        start = clock()
        try:
            return super().select(timeout)
        finally:
            self._load.idle_s += clock() - start


LOAD = LoopLoad()
"""The process's gauge: ``sowd`` makes its loop with ``LOAD.selector()``."""
