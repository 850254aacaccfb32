"""The wake-up flag a subscription's sender waits on."""

from __future__ import annotations

import asyncio

from sowdb.engine.live.wakeup import Wakeup


async def test_wakeup_is_raised_waited_on_and_times_out() -> None:
    """The subscription's wake-up flag: already raised returns at once, raised while waiting
    wakes the waiter, not raised returns False after the timeout, and a cancelled wait leaves
    nothing behind."""
    w = Wakeup()
    w.set()
    assert await asyncio.wait_for(w.wait(10), 1) is True
    w.clear()
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await w.wait(0.05) is False
    assert loop.time() - start >= 0.04
    loop.call_later(0.01, w.set)
    assert await asyncio.wait_for(w.wait(10), 1) is True
    w.clear()
    waiting = asyncio.ensure_future(w.wait(10))
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert w._waiter is None
    w.set()  # no waiter: just raises the flag
    assert w.is_set()
