"""The writer's path for a small batch (a publish's ~100 messages): key by key in Python, the
slots written through memoryviews, without a numpy call.

Why: measured inside the engine (the object store and the arena publishing alternately in
one process, per CPU-second), a numpy call costs several times its ~1 µs in isolation: the
rest of a publish (decoding, RocksDB's write) leaves numpy's code out of the CPU's caches. The
vector path made ~60 of them a batch of 100; this one makes none, and keeps the vector path
(:meth:`TopicArena.put_batch <sowdb.engine.arena.store.TopicArena.put_batch>`) for what it
does not take: large batches, repeated keys, bookmarks or times per message, and slots that
are not consecutive.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, NamedTuple

from sowdb.engine.arena.keys import EMPTY, KeyTable, key_hash
from sowdb.engine.arena.segments import POSITION, SHIFT
from sowdb.engine.arena.slots import LIVE

if TYPE_CHECKING:
    from sowdb.engine.arena.store import TopicArena


SMALL = 128
"""Batches of at most this many distinct keys take this path."""


class Each(NamedTuple):
    """A probe of distinct keys key by key: what :meth:`TopicArena.new_keys` keeps for the
    :meth:`~TopicArena.put_batch` after it."""

    keys: list[bytes]
    table: KeyTable  # the table probed (a rehash makes the probe void)
    hashes: list[int]
    pos: list[int]  # each key's entry, or the first empty one on its path
    heads: list[int]  # its newest slot, or -1
    live: list[bool]  # whether that slot is live


def probe(arena: TopicArena, distinct: list[bytes]) -> Each:
    """Probe ``distinct`` keys one by one: :meth:`KeyTable.probe
    <sowdb.engine.arena.keys.KeyTable.probe>`, with :meth:`ArenaView.same
    <sowdb.engine.arena.view.ArenaView.same>` inline (the writer maps every segment)."""
    table, one, maps = arena.table, arena.slots.one, arena.keys.maps
    cells, mask = table.cells, table.mask
    khash, klen, koff, died = one.khash, one.klen, one.koff, one.died
    hashes: list[int] = []
    pos: list[int] = []
    heads: list[int] = []
    live: list[bool] = []
    add_hash, add_pos, add_head, add_live = hashes.append, pos.append, heads.append, live.append
    for key in distinct:
        h = key_hash(key)
        j, n = h & mask, len(key)
        while True:
            s: int = cells[j]
            if s == EMPTY:
                break  # EMPTY is -1: no slot
            if s >= 0 and khash[s] == h and klen[s] == n:
                at = koff[s]
                start = at & POSITION
                if maps[at >> SHIFT][start : start + n] == key:
                    break
            j = (j + 1) & mask
        add_hash(h)
        add_pos(j)
        add_head(s)
        add_live(s >= 0 and died[s] == LIVE)
    return Each(distinct, table, hashes, pos, heads, live)


def put(
    arena: TopicArena, keys: list[bytes], docs: list[bytes], first: int, ts: int, exp: int, looked: Each | None
) -> list[int] | None:
    """:meth:`TopicArena.put_batch` of distinct ``keys`` at bookmarks ``first``, ``first + 1``, …
    with one time and expiry; None where this path does not apply (nothing is changed then).
    The caller checked the sizes and the bookmarks."""
    n = len(keys)
    if looked is None or looked.table is not arena.table or looked.keys != keys:
        if len(dict.fromkeys(keys)) < n:
            return None
        if arena.table.crowded(n):
            arena.rehash(n)
        looked = probe(arena, keys)
    lo = arena.run(n)
    if lo < 0:
        return None
    hi = lo + n
    one = arena.slots.one  # after run(): growing replaces the slots file
    # the new versions, fully written before anything points at them; died last, after born
    places, lengths, total = arena.json.append_each(docs)
    kplaces, klens, _ = arena.keys.append_each(keys)
    one.off[lo:hi] = array("l", places)
    one.koff[lo:hi] = array("l", kplaces)
    one.length[lo:hi] = array("I", lengths)
    one.klen[lo:hi] = array("H", klens)
    one.khash[lo:hi] = array("I", looked.hashes)
    one.ts[lo:hi] = array("l", (ts,)) * n
    one.exp[lo:hi] = array("l", (exp,)) * n
    heads, live = looked.heads, looked.live
    one.prev[lo:hi] = array("i", heads)
    one.born[lo:hi] = array("l", range(first, first + n))
    died, length = one.died, one.length
    died[lo:hi] = array("l", (LIVE,)) * n
    ends = 0
    for i, s in enumerate(heads):
        if live[i]:
            died[s] = first + i
            total -= length[s]
            ends += 1
    table = arena.table
    cells, mask, entered = table.cells, table.mask, 0
    for i, j in enumerate(looked.pos):
        if heads[i] < 0:  # a new key: its empty entry, or the next one an earlier key left empty
            while cells[j] != EMPTY:
                j = (j + 1) & mask
            entered += 1
        cells[j] = lo + i
    table.keys += entered
    arena.written = list(range(lo, hi))
    arena.live_count += n - ends
    arena.live_bytes += total
    arena.last = max(arena.last, first + n - 1)
    return [s if live[i] else -1 for i, s in enumerate(heads)]
