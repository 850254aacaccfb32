"""The records a live subscription sends in place of a whole version: the key alone, the version
its subscriber last saw (an oof under A-2), two deltas merged (C-1 with D-2).
"""

from __future__ import annotations

import orjson

from sowdb.engine.changes import Change
from sowdb.engine.records import StoredRecord


def last_seen(c: Change) -> StoredRecord:
    """What an oof carries when the update that moved a record out may not be shown (A-2): the
    version the subscriber last saw, or, when that is not at hand (a replay's first change of
    the record), the record's key alone."""
    if c.old is not None:
        return c.old
    return key_only(StoredRecord(c.topic, c.sow_key, None, b"", c.bookmark, c.timestamp_us))


def key_only(rec: StoredRecord) -> StoredRecord:
    """A record's identity without its data: what an oof carries when the caller may not see it."""
    return StoredRecord(rec.topic, rec.sow_key, {}, b"{}", rec.bookmark, rec.timestamp_us)


def merged_delta(earlier: StoredRecord, later: StoredRecord) -> StoredRecord:
    """Two deltas of one record as one (C-1 with D-2): every field either changed, at its
    latest value, so the subscriber misses no change that conflation held back."""
    data = {**(earlier.data or {}), **(later.data or {})}
    return StoredRecord(later.topic, later.sow_key, data, orjson.dumps(data), later.bookmark, later.timestamp_us)
