"""A node's epoch history (SPEC §13, HA-4): which epoch wrote which bookmarks of its journal.

PostgreSQL's timeline history. A node that becomes the primary at epoch E records ``(E, its
first bookmark, itself)`` before it serves a write; a replica adopts its primary's history as it
follows (the primary sends it in the stream's first frame). So each node's store holds, for each
epoch that wrote entries of its journal, the bookmark that epoch's entries start at.

The records are journal **meta** entries, in the ``meta`` column family (``epoch_at | 0x00 |
epoch (BE u64)`` → ``first bookmark (BE u64) | node``), not journal entries: they take no
bookmark, so no topic's reader, subscription, replay, rebuild, ``sowd verify`` or journal read of
the data service ever meets them, and a replica's journal stays the primary's entry for entry.
A checkpoint copy carries them with the rest of ``meta``; a fork cut drops those that describe
only entries it cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from rocksdict import WriteBatch

from sowdb.storage.keys import SEQ, decode_seq
from sowdb.storage.store import Store

EPOCH_PREFIX = b"epoch_at\x00"


class EpochStart(NamedTuple):
    """Epoch ``epoch`` (the leader key's create_revision) wrote this node's entries from
    bookmark ``first`` on (until the next record's), as primary ``node``."""

    epoch: int
    first: int
    node: str


def epoch_history(store: Store) -> list[EpochStart]:
    """The node's epoch records, oldest epoch first."""
    return [
        EpochStart(decode_seq(key[len(EPOCH_PREFIX) :]), decode_seq(value[: SEQ.size]), value[SEQ.size :].decode())
        for key, value in store.db.scan("meta", EPOCH_PREFIX, prefix=EPOCH_PREFIX)
    ]


def write_epoch_history(store: Store, records: Sequence[EpochStart]) -> None:
    """Make the stored history exactly ``records`` (one WriteBatch: never half of it)."""
    wb = WriteBatch(raw_mode=True)
    cf = store.db.handle("meta")
    wb.delete_range(EPOCH_PREFIX, EPOCH_PREFIX[:-1] + b"\x01", cf)
    for r in records:
        wb.put(EPOCH_PREFIX + SEQ.pack(r.epoch), SEQ.pack(r.first) + r.node.encode(), cf)
    store.db.write(wb)


def begin_epoch(store: Store, epoch: int, node: str, last: int) -> EpochStart:
    """Record that ``node`` writes from bookmark ``last + 1`` on at ``epoch`` (a new primary,
    before its first write; ``last``: its writer's last bookmark). Records of entries this
    journal does not hold (a former primary's that never arrived here) are dropped: the history
    describes this journal. A primary that leads again at the same epoch (an abandoned
    switchover) keeps its record."""
    history = epoch_history(store)
    for r in history:
        if r.epoch == epoch:
            return r
    start = EpochStart(epoch, last + 1, node)
    write_epoch_history(store, [*(r for r in history if r.first <= last and r.epoch < epoch), start])
    return start


def cut_epoch_history(store: Store, upto: int) -> None:
    """After the journal was cut back to ``upto``: drop the records of epochs that wrote only
    entries after it."""
    history = epoch_history(store)
    kept = [r for r in history if r.first <= upto]
    if kept != history:
        write_epoch_history(store, kept)


def fork_point(mine: Sequence[EpochStart], theirs: Sequence[EpochStart], last: int, their_last: int) -> int | None:
    """The last bookmark at which two journals agree, told by their epoch histories alone: an
    entry is written once, by its epoch's primary, so two journals hold the same entry at a
    bookmark exactly when the same epoch wrote it in both. ``last``, ``their_last``: the two
    journals' last bookmarks. None when a history does not cover its journal from bookmark 1 (a
    store older than the records): the caller finds the point another way."""
    if not mine or not theirs or mine[0].first != 1 or theirs[0].first != 1:
        return None
    end = min(last, their_last)
    for start in sorted({r.first for r in (*mine, *theirs)}):
        if start > end:
            break
        if epoch_at(mine, start) != epoch_at(theirs, start):
            return start - 1
    return end


def epoch_at(history: Sequence[EpochStart], bookmark: int) -> int:
    """The epoch that wrote ``bookmark`` by ``history`` (0: no record covers it)."""
    return max(((r.first, r.epoch) for r in history if r.first <= bookmark), default=(0, 0))[1]
