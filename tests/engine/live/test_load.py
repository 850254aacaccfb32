"""The loop-load gauge live delivery batches on (issue 29): nothing held while the loop has room,
a hold that doubles while it is saturated (never past the fixed pace it replaced) and halves
back to nothing once it calms; a real loop's idle time is what its selector counts."""

from __future__ import annotations

import asyncio

from sowdb.engine.live.loop_load import FIRST_HOLD_S, FRAME_BUDGET, FRAME_CEILING, WINDOW_S, LoopLoad


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def window(load: LoopLoad, clock: Clock, busy: float, subscribers: int = 100) -> float:
    """One window of the gauge in which the loop was busy ``busy`` of the time; the hold after it."""
    clock.now += WINDOW_S
    load.idle_s += WINDOW_S * (1 - busy)
    return load.hold_s(subscribers)


def test_the_hold_follows_the_loop_busy_share_up_to_the_pace() -> None:
    clock = Clock()
    load = LoopLoad(clock)
    load.measured = True
    assert window(load, clock, 0.5) == 0.0  # room: a change goes at once
    holds = [window(load, clock, 0.99) for _ in range(12)]
    assert holds[:3] == [FIRST_HOLD_S, 2 * FIRST_HOLD_S, 4 * FIRST_HOLD_S]
    assert max(holds) == holds[-1] == 100 / FRAME_BUDGET  # never past the fixed pace
    assert window(load, clock, 0.7) == holds[-1]  # between calm and busy: kept
    calming = [window(load, clock, 0.2) for _ in range(12)]
    assert calming[0] == holds[-1] / 2
    assert calming[-1] == 0.0
    assert window(load, clock, 0.99, subscribers=1) == 1 / FRAME_BUDGET  # the ceiling follows the subscriber count


def test_more_deliveries_than_the_ceiling_count_as_saturated_even_on_an_idle_loop() -> None:
    """A loop that waits on gRPC's own threads looks idle while its frames keep them busy: the
    delivery rate counts too."""
    clock = Clock()
    load = LoopLoad(clock)
    load.measured = True
    load.deliveries = int(FRAME_CEILING * WINDOW_S / 2)  # half the ceiling: room
    assert window(load, clock, 0.1) == 0.0
    load.deliveries = int(FRAME_CEILING * WINDOW_S * 2)
    assert window(load, clock, 0.1) == FIRST_HOLD_S
    assert load.deliveries == 0  # counted per window


def test_an_unmeasured_loop_holds_nothing() -> None:
    """An engine in a loop that no timed selector measures (a test's) delivers at once."""
    clock = Clock()
    load = LoopLoad(clock)
    assert window(load, clock, 1.0) == 0.0


def test_a_loop_made_with_the_timed_selector_counts_its_idle_time() -> None:
    """Time blocked in select() with nothing ready counts as idle; a loop spinning does not."""
    load = LoopLoad()

    async def idle_then_busy() -> tuple[float, float]:
        before = load.idle_s
        await asyncio.sleep(0.05)
        idle = load.idle_s - before
        before = load.idle_s
        for _ in range(2000):
            await asyncio.sleep(0)  # always something ready: select() is not blocked
        return idle, load.idle_s - before

    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(load.selector())) as runner:
        idle, spinning = runner.run(idle_then_busy())
    assert idle >= 0.04
    assert spinning == 0.0
