"""Bring ``current`` and ``history`` level with the journal (J-2), byte for byte.

This is the storage half of recovery: which topics and from where is the engine's decision
(:mod:`sowdb.engine.journal.recovery`); turning journal entries into ``current`` and ``history`` values
is a matter of layouts, so it lives beside them. The journal key is the big-endian sequence and
the journal value starts with the big-endian timestamp, op and expiry, so the other families'
values are sliced from them without decoding a number (see :mod:`sowdb.storage.keys`). Chunks
are written without the WAL — a crash half-way just replays again — and flushed once at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from sowdb.storage import keys as k
from sowdb.storage.store import Store

CHUNK = 100_000


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay writes: the journal entries of ``persistent`` topics after
    ``current_from`` into ``current``, and of ``with_history`` topics after ``history_from``
    into ``history``.

    Attributes:
        granularity: per topic, its history granularity in µs (H-1): an entry replaces the
            key's previous one of the same interval, as the writer does — the last one
            replayed here or, for a key's first entry in a replay that continues a history, the
            key's newest stored entry (one reverse seek per such key).
        markers: advance each family's applied marker with each chunk (a normal recovery);
            off for a partial rebuild of some topics (the markers already cover them).
    """

    persistent: set[str]
    with_history: set[str]
    current_from: int = 0
    history_from: int = 0
    granularity: dict[str, int] = field(default_factory=dict)
    markers: bool = True

    @property
    def start(self) -> int:
        """The sequence the replay reads the journal after."""
        return min(self.current_from, self.history_from)


def replay_journal(store: Store, plan: ReplayPlan, advance: Callable[[int], None] = lambda n: None) -> int:
    """Carry out ``plan``; returns how many journal entries were read. ``advance`` is called with
    the number of entries read after each chunk (a progress bar)."""
    persistent, with_history, granularity = plan.persistent, plan.with_history, plan.granularity
    current_from, history_from, markers = plan.current_from, plan.history_from, plan.markers
    last = store.last_sequence()
    persistent_b = {t.encode() for t in persistent}
    history_b = {t.encode() for t in with_history}
    granularity_b = {t.encode(): g for t, g in granularity.items() if g}
    hsize = k.JOURNAL_HEAD.size
    unpack_lengths = k.JOURNAL_LENGTHS.unpack_from
    cur_from_b, hist_from_b = k.encode_seq(current_from), k.encode_seq(history_from)
    publish = k.OP_PUBLISH
    n = 0
    wb, families = store.bulk_batch()
    put, delete, cur_cf, hist_cf = wb.put, wb.delete, families.current, families.history
    left = CHUNK
    latest: dict[bytes, tuple[int, bytes]] = {}  # granular topics: each key's last history entry

    def commit(upto: int) -> None:
        if markers:
            wb.put(k.APPLIED_MARKER, k.encode_seq(max(upto, current_from)), cur_cf)
            wb.put(k.APPLIED_MARKER, k.encode_seq(max(upto, history_from)), hist_cf)
        store.write(wb, bulk=True)

    for key, value in store.iter_journal_raw(plan.start):
        lt, lk = unpack_lengths(value, k.JOURNAL_LENGTHS_AT)
        topic = value[hsize : hsize + lt]
        if topic in persistent_b or topic in history_b:
            end = hsize + lt + lk
            rkey = topic + b"\x00" + value[hsize + lt : end]
            op = value[8]
            if topic in persistent_b and key > cur_from_b:
                if op == publish:
                    put(rkey, key + value[:8] + value[9:17] + value[end:], cur_cf)
                else:
                    delete(rkey, cur_cf)
            if topic in history_b and key > hist_from_b:
                hkey = rkey + b"\x00" + key
                put(hkey, value[8:9] + value[:8] + (value[end:] if op == publish else b""), hist_cf)
                g = granularity_b.get(topic)
                if g:
                    interval = int.from_bytes(value[:8], "big") // g
                    previous = latest.get(rkey)
                    if previous is None and history_from:
                        stored = store.last_history_entry(rkey + b"\x00", hist_from_b)
                        previous = None if stored is None else (stored[1] // g, stored[0])
                    if previous is not None and previous[0] == interval:
                        delete(previous[1], hist_cf)
                    latest[rkey] = (interval, hkey)
        n += 1
        left -= 1
        if not left:
            commit(k.decode_seq(key))
            wb, families = store.bulk_batch()
            put, delete = wb.put, wb.delete
            left = CHUNK
            advance(CHUNK)
    commit(last)
    store.finish_recovery()
    return n
