"""The records a live subscription sends in place of a whole version: the key alone, the version
its subscriber last saw (an oof under A-2), a delta (D-2), two deltas merged (C-1 with D-2).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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


_MISSING = object()


def delta_record(old: StoredRecord, new: StoredRecord, keys: Iterable[str], *, no_empties: bool) -> StoredRecord | None:
    """D-2: the fields ``keys`` (a subscription's ``send_keys``: the topic's key fields) plus the
    top-level fields whose value changed; None when nothing changed and ``no_empties``."""
    before, after = old.data or {}, new.data or {}
    changed = {k: v for k, v in after.items() if before.get(k, _MISSING) != v}
    if not changed and no_empties:
        return None
    out: dict[str, Any] = {name: after[name] for name in keys if name in after}
    out.update(changed)
    return StoredRecord(new.topic, new.sow_key, out, orjson.dumps(out), new.bookmark, new.timestamp_us)


def merged_delta(earlier: StoredRecord, later: StoredRecord) -> StoredRecord:
    """Two deltas of one record as one (C-1 with D-2): every field either changed, at its
    latest value, so the subscriber misses no change that conflation held back."""
    data = {**(earlier.data or {}), **(later.data or {})}
    return StoredRecord(later.topic, later.sow_key, data, orjson.dumps(data), later.bookmark, later.timestamp_us)
