"""The writer's background chores: expiration (X-1), conflated topics' refreshes (C-2), history
trimming (H-1), journal retention.

They run as one task on the event loop, so each chore is a step of the single writer like a
publish; each step does a bounded amount of work and returns, so publishers are not stalled.
"""

from __future__ import annotations

import asyncio
import logging

from sowdb.engine.engine import Engine

log = logging.getLogger("sowdb.upkeep")

TRIM_PERIOD_S = 5.0
MAX_SLEEP_S = 0.05  # how late an expiration or a conflated topic's refresh may be


async def run_upkeep(engine: Engine, *, trim_period_s: float = TRIM_PERIOD_S) -> None:
    """Run the chores until cancelled."""
    loop = asyncio.get_running_loop()
    next_trim = 0.0
    while True:
        try:
            engine.expire_due()
            engine.flush_conflated()
            now = loop.time()
            if now >= next_trim:
                more = engine.trim_history()
                engine.trim_journal()
                next_trim = now if more else now + trim_period_s
        except Exception:
            log.exception("upkeep step failed; retrying")
        due = engine.expiry.next_due()
        wait = MAX_SLEEP_S if due is None else (due - engine.clock()) / 1e6
        await asyncio.sleep(min(max(wait, 0.005), MAX_SLEEP_S))
