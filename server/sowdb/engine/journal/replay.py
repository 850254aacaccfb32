"""Journal replay for subscriptions with a bookmark (H-3, H-4).

A subscription with a bookmark is registered, held, at the writer's current point R; the
journal entries after the bookmark and up to R are then read back in chunks and turned into
the same :class:`Change` objects the writer hands out live, so one evaluation path (filter,
oof, delta, conflation) serves both. After the replay the held live changes (after R) follow:
no gap and no duplicate at either seam.

Retention may trim the journal between the placement, which checked the bookmark, and the
replay's first read (``subscribed`` and a whole as-of query are sent in between): the replay
then checks again, as it opens its iterator, that the journal still holds everything after
its start, and otherwise ends with the same ``OUT_OF_RANGE`` a too-old bookmark gets at
placement (etcd checks compaction again when a watcher catches up). Not a floor that pins
retention below pending replays: a replay's consumer may stall or vanish before it starts, so
a pin would need a release nobody can promise, and a forgotten one would hold the disk. The
check is exact: it and the iterator's creation are one synchronous step (the upkeep trims on
the same event loop), and a RocksDB iterator reads the journal as it was when created, so a
trim after that takes nothing from a replay under way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Container

import orjson

from sowdb.engine.changes import OOF_DELETED, OOF_EXPIRED, Change
from sowdb.engine.records import StoredRecord
from sowdb.errors import OutOfRange
from sowdb.storage import Store
from sowdb.storage.keys import OP_EXPIRE, OP_PUBLISH

REPLAY_CHUNK = 1000


async def replay_changes(
    store: Store,
    *,
    wants: Callable[[str], bool],
    sow_topics: Container[str],
    after: int,
    upto: int,
    track_old: bool = False,
    field: str = "bookmark",
) -> AsyncIterator[list[Change]]:
    """The changes of journal entries ``(after, upto]`` on topics ``wants`` accepts, in chunks.

    Args:
        sow_topics: topics whose messages replace a record (their publishes may have an
            ``old`` version; other topics' messages are plain messages).
        track_old: remember each replayed record, so a later replayed change of the same key
            carries its previous version (delta subscriptions need it).
        field: the request field that named the start, for the error.

    Raises:
        OutOfRange: retention trimmed the journal past ``after`` since the replay was placed.
    """
    check_retained(store, after, field)  # nothing awaited from here to the iterator's creation
    loads = orjson.loads
    last: dict[tuple[str, str], StoredRecord] = {}
    chunk: list[Change] = []
    for read, e in enumerate(store.iter_journal(after), 1):
        if e.seq > upto:
            break
        if wants(e.topic):
            key = (e.topic, e.sow_key)
            if e.op == OP_PUBLISH:
                rec = StoredRecord(e.topic, e.sow_key, loads(e.payload), e.payload, e.seq, e.timestamp_us, e.expiry_us)
                old = last.get(key) if track_old else None
                if track_old and e.topic in sow_topics:
                    last[key] = rec
                chunk.append(Change(e.topic, e.sow_key, e.seq, e.timestamp_us, old, rec))
            else:
                payload = e.payload or b"{}"
                gone = last.pop(key, None) or StoredRecord(e.topic, e.sow_key, loads(payload), payload, e.seq, 0)
                reason = OOF_EXPIRED if e.op == OP_EXPIRE else OOF_DELETED
                chunk.append(Change(e.topic, e.sow_key, e.seq, e.timestamp_us, gone, None, reason))
        if read % REPLAY_CHUNK == 0:
            if chunk:
                yield chunk
                chunk = []
            await asyncio.sleep(0)  # a replay that matches nothing must not hold the event loop
    if chunk:
        yield chunk


def check_retained(store: Store, after: int, field: str) -> None:
    """Check, just before a replay or a read opens its journal iterator, that the journal still
    holds every entry after ``after`` (see the module's docstring).

    Raises:
        OutOfRange: retention trimmed entries after ``after`` since the start was checked.
    """
    trimmed = store.journal_trimmed()
    if after < trimmed:
        raise OutOfRange(
            f"the journal was trimmed while the replay after bookmark {after} waited to start: retention removed "
            f"bookmarks up to {trimmed}; resubscribe from {trimmed} or later (or query the current state)",
            oldest_bookmark=trimmed,
            field=field,
        )
