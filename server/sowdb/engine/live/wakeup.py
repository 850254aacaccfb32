"""How the writer tells a subscription's sender that there is something to send."""

from __future__ import annotations

import asyncio


class Wakeup:
    """Raised by the writer when a subscription has something to send; waited on by its one
    sender, with a timeout (heartbeats, conflation).

    ``asyncio.Event`` under ``asyncio.wait_for`` would do, but ``wait_for`` creates a task per
    wait and a busy subscriber waits once per frame; this is one future and one timer.
    """

    __slots__ = ("_flag", "_waiter")

    def __init__(self) -> None:
        self._flag = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        if not self._flag:
            self._flag = True
            waiter = self._waiter
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._flag = False

    def is_set(self) -> bool:
        return self._flag

    async def wait(self, timeout: float) -> bool:
        """Whether it was raised (at once if it is already) within ``timeout`` seconds."""
        if not self._flag:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(timeout, _time_up, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        return self._flag


def _time_up(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
