"""Journal replay for subscriptions with a bookmark (H-3, H-4).

A subscription with a bookmark is registered, held, at the writer's current point R; the
journal entries after the bookmark and up to R are then read back in chunks and turned into
the same :class:`Change` objects the writer hands out live, so one evaluation path (filter,
oof, delta, conflation) serves both. After the replay the held live changes (after R) follow:
no gap and no duplicate at either seam.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Container

import orjson

from sowdb.engine.changes import OOF_DELETED, OOF_EXPIRED, Change
from sowdb.engine.records import StoredRecord
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
) -> AsyncIterator[list[Change]]:
    """The changes of journal entries ``(after, upto]`` on topics ``wants`` accepts, in chunks.

    Args:
        sow_topics: topics whose messages replace a record (their publishes may have an
            ``old`` version; other topics' messages are plain messages).
        track_old: remember each replayed record, so a later replayed change of the same key
            carries its previous version (delta subscriptions need it).
    """
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
