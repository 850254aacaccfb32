"""The window of live deliveries in flight (engine/live/window.py): slots handed out first come,
first served; the window closes when the loop is slow to get round to a waiting sender and
opens again when it is quick; a stalled delivery gives its slot back."""

from __future__ import annotations

import asyncio

from sowdb.engine.live.window import DeliveryWindow


async def _take_in_line(
    window: DeliveryWindow, n: int, order: list[int], hold: asyncio.Event
) -> list[asyncio.Task[None]]:
    """``n`` senders in line for a slot, each holding it until ``hold``; ``order``: who got one."""

    async def sender(i: int) -> None:
        slot = await window.acquire()
        order.append(i)
        await hold.wait()
        slot.release()

    tasks = [asyncio.create_task(sender(i)) for i in range(n)]
    await asyncio.sleep(0)
    return tasks


async def test_slots_go_first_come_first_served_and_pass_on_when_given_back() -> None:
    window = DeliveryWindow(most=2, delay_s=float("inf"))
    order: list[int] = []
    hold = asyncio.Event()
    tasks = await _take_in_line(window, 5, order, hold)
    assert order == [0, 1]
    assert window.waiting == 3
    hold.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert window.waiting == 0


async def test_a_slow_loop_closes_the_window_to_one_and_a_quick_one_opens_it() -> None:
    """delay_s < 0: every turn is "slow", so each hand-over closes the window by one; then with a
    generous delay every hand-over opens it again, up to its most."""
    window = DeliveryWindow(most=4, delay_s=-1.0)
    order: list[int] = []
    hold = asyncio.Event()
    tasks = await _take_in_line(window, 8, order, hold)
    hold.set()
    await asyncio.gather(*tasks)
    assert window.size == 1
    window._delay_s = float("inf")  # every turn now counts as quick
    order.clear()
    hold.clear()
    tasks = await _take_in_line(window, 8, order, hold)
    hold.set()
    await asyncio.gather(*tasks)
    assert window.size == 4
    assert order == list(range(8))


async def test_a_stalled_delivery_gives_its_slot_back() -> None:
    window = DeliveryWindow(most=1, stall_s=0.0)
    stalled = await window.acquire()  # never released by its sender
    async with asyncio.timeout(5):
        second = await window.acquire()  # handed over once the first has stalled
    second.release()
    stalled.release()  # late and idempotent: the slot is not given back twice
    assert window._in_flight == 0


async def test_a_sender_that_leaves_the_line_takes_no_slot() -> None:
    window = DeliveryWindow(most=1, delay_s=float("inf"))
    first = await window.acquire()
    leaving = asyncio.create_task(window.acquire())
    await asyncio.sleep(0)
    leaving.cancel()
    await asyncio.gather(leaving, return_exceptions=True)
    first.release()
    async with asyncio.timeout(5):
        (await window.acquire()).release()
    assert window.waiting == 0
    assert window._in_flight == 0
