"""Compaction: free the versions no pin sees any more, and move live bytes out of segments that
are mostly garbage.

A version ended at bookmark D is seen by pins at bookmarks below D only; given the oldest
bookmark still pinned P, every slot with ``died <= P`` is freed: its id goes back to the free
list (a new version takes it later, born after every pin, so no pin sees the reuse), its bytes
become garbage, the chain link to it is cut, and where it was its key's newest version the key
leaves the table. Slot ids of the versions kept never change, so a pin at or after P needs no
fixing: it reads the same slots, and their offsets, which a move rewrites after the copy.

Readers in other processes see the compaction through the header's generation, odd while one
runs (a reader waits) and different afterwards (what a reader read meanwhile is void and read
again); segments and files go only after the header moved on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from sowdb.engine.arena.segments import SHIFT, Segments

if TYPE_CHECKING:
    from sowdb.engine.arena.store import TopicArena


def compact(arena: TopicArena, oldest_pinned: int, garbage: float) -> int:
    """:meth:`TopicArena.compact`."""
    arena.commit()
    arena.gen += 1  # odd: readers wait, and a reader pinning from now on checks the floor after
    arena._publish()
    held = arena.pins.oldest()  # after the odd generation is out (the fence in oldest())
    floor = max(arena.floor, min(oldest_pinned, arena.last, arena.last if held is None else held))
    freed = _free(arena, floor)
    s, high = arena.slots, arena.high
    for segments, places, lengths in ((arena.json, s.off, s.length), (arena.keys, s.koff, s.klen)):
        victims = segments.compactable(garbage)
        if not victims:
            continue
        if segments.current in victims:
            segments.seal()  # the copies go to a fresh segment, not to one about to go
        in_use = np.flatnonzero(s.died[:high] != 0)
        numbers = places[in_use] >> SHIFT
        for number in victims:
            moved = in_use[numbers == number]
            if len(moved):
                places[moved] = segments.append(_items(segments, places[moved], lengths[moved].astype(np.int64)))[0]
            segments.drop(number)
    if arena.table.gone > arena.table.keys:
        arena.rehash(0)
    arena.floor = floor
    arena.gen += 1  # even: settled
    arena.commit()  # and the dropped files go
    return freed


def _free(arena: TopicArena, floor: int) -> int:
    """Free the slots ended at or before ``floor``; how many."""
    s, high = arena.slots, arena.high
    died = s.died[:high]
    freed = np.flatnonzero((died != 0) & (died <= floor))
    if not len(freed):
        return 0
    arena.json.release(s.off[freed], s.length[freed].astype(np.int64))
    arena.keys.release(s.koff[freed], s.klen[freed].astype(np.int64))
    gone = np.zeros(high, bool)
    gone[freed] = True
    arena.table.forget(gone)
    prev = s.prev[:high]
    linked = np.flatnonzero(prev >= 0)
    cut = linked[gone[prev[linked]] & ~gone[linked]]
    prev[cut] = -1  # the kept versions' links to freed ones (a chain's freed part is its oldest)
    s.died[freed] = 0  # died before born: a reader sees a slot being freed as unborn
    s.born[freed] = 0
    s.prev[freed] = -1
    arena.free = np.union1d(arena.free, freed)
    return len(freed)


def _items(segments: Segments, places: NDArray[np.int64], lengths: NDArray[np.int64]) -> list[bytes]:
    return [segments.read(p, n) for p, n in zip(places.tolist(), lengths.tolist(), strict=True)]
