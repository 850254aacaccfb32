"""The writer's background chores: expiration (X-1), conflated topics' refreshes (C-2), history
trimming (H-1), journal retention, recovering the storage after a failed write, the end of
the data service's leases (snapshots, stages), building the columns queries asked for, and
compacting the topics' arenas.

They run as one task on the event loop, so each chore is a step of the single writer like a
publish; each step does a bounded amount of work and returns, so publishers are not stalled.
While the storage cannot be written (a full disk) the chores that write wait, and the storage
is reopened once a second until writes can succeed again.
"""

from __future__ import annotations

import asyncio
import logging

from sowdb.engine.engine import Engine
from sowdb.errors import SowdbError

log = logging.getLogger("sowdb.upkeep")

TRIM_PERIOD_S = 5.0
MAX_SLEEP_S = 0.05  # how late an expiration or a conflated topic's refresh may be
RECOVER_PERIOD_S = 1.0  # how often a failed storage is tried again
COMPACT_PERIOD_S = 1.0  # how often the arenas are looked at for enough dead versions to compact
BUILD_PAUSE_S = 0.002  # between two steps of a column's build: publishes and queries run meanwhile


async def run_upkeep(engine: Engine, *, trim_period_s: float = TRIM_PERIOD_S) -> None:
    """Run the chores until cancelled."""
    loop = asyncio.get_running_loop()
    next_trim = next_recovery = next_compaction = 0.0
    while True:
        building = False
        try:
            building = engine.build_columns()
            engine.flush_conflated()
            engine.expire_leases()  # leases of the data service (SPEC §9)
            now = loop.time()
            if not engine.writable and now >= next_recovery:
                next_recovery = now + RECOVER_PERIOD_S
                engine.recover_storage()
            if now >= next_compaction:
                next_compaction = now + COMPACT_PERIOD_S
                engine.compact()
            if engine.writable:
                engine.expire_due()
                if now >= next_trim:
                    more = engine.trim()
                    next_trim = now if more else now + trim_period_s
        except SowdbError as exc:  # the storage failed under a chore; it is retried above
            log.warning("upkeep: %s", exc.message)
        except Exception:
            log.exception("upkeep step failed; retrying")
        due = engine.next_expiry()
        wait = MAX_SLEEP_S if due is None else (due - engine.clock()) / 1e6
        await asyncio.sleep(BUILD_PAUSE_S if building else min(max(wait, 0.005), MAX_SLEEP_S))
