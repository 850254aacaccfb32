"""Typed events of subscription streams, and a mirror that applies them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client.types import Record, records_from_pb, records_of

_REASONS = {pb.OOF_REASON_DELETED: "deleted", pb.OOF_REASON_EXPIRED: "expired", pb.OOF_REASON_MATCH: "match"}


class Event(NamedTuple):
    """One event of a subscription stream.

    Attributes:
        kind: ``subscribed``, ``group_begin``, ``sow`` (query results), ``group_end``,
            ``publish`` (live records), ``oof``, ``deleted``, ``completed`` or ``heartbeat``.
        records: the records of ``sow``, ``publish``, ``oof`` and ``deleted`` events.
        reason: for ``oof``: ``deleted``, ``expired`` or ``match``.
        bookmark: the bookmark of ``subscribed``, ``group_begin``, ``completed`` and ``heartbeat``.
        group_end: the counts of a ``group_end``.
    """

    kind: str
    records: tuple[Record, ...] = ()
    reason: str = ""
    sub_id: str = ""
    query_id: str = ""
    bookmark: int = 0
    group_end: pb.GroupEnd | None = None


def event_from_pb(resp: pb.SowAndSubscribeResponse | pb.SubscribeResponse) -> Event:
    kind = resp.WhichOneof("event")
    if kind == "publish":
        return Event("publish", tuple(records_from_pb(resp.publish.records)))
    if kind == "records" and isinstance(resp, pb.SowAndSubscribeResponse):
        return Event("sow", tuple(records_of(resp.records)))
    if kind == "oof":
        return Event("oof", (Record.from_pb(resp.oof.record),), reason=_REASONS.get(resp.oof.reason, ""))
    if kind == "deleted" and isinstance(resp, pb.SubscribeResponse):
        return Event("deleted", tuple(records_from_pb(resp.deleted.records)))
    if kind == "subscribed":
        return Event("subscribed", sub_id=resp.subscribed.sub_id, bookmark=resp.subscribed.bookmark)
    if kind == "group_begin" and isinstance(resp, pb.SowAndSubscribeResponse):
        gb = resp.group_begin
        return Event("group_begin", query_id=gb.query_id, bookmark=gb.bookmark)
    if kind == "group_end" and isinstance(resp, pb.SowAndSubscribeResponse):
        return Event("group_end", query_id=resp.group_end.query_id, group_end=resp.group_end)
    if kind == "completed":
        return Event("completed", bookmark=resp.completed.bookmark)
    if kind == "heartbeat":
        return Event("heartbeat", bookmark=resp.heartbeat.bookmark)
    return Event(kind or "unknown")


class Mirror:
    """A local copy of a subscription's result set: ``{(topic, sow_key): Record}`` kept exact
    by applying every event of a ``sow_and_subscribe`` (query results, live publishes, oof and
    deletes; delta publishes are merged into the record held). Keyed by topic too, because a
    regex subscription covers topics whose SowKeys may be the same.

    Usage::

        mirror = Mirror()
        for event in client.sow_and_subscribe("orders", filter="/symbol = 'SYM1'", oof=True):
            mirror.apply(event)
            if mirror.ready: show(mirror.records)
    """

    def __init__(self, *, delta: bool = False) -> None:
        self.records: dict[tuple[str, str], Record] = {}
        self.ready = False
        self.bookmark = 0
        self._delta = delta

    def apply(self, event: Event) -> None:
        if event.kind == "sow":
            self._put(event.records)
        elif event.kind == "publish":
            self._put(event.records, merge=self._delta)
        elif event.kind in ("oof", "deleted"):
            for r in event.records:
                self.records.pop((r.topic, r.sow_key), None)
        elif event.kind == "group_end":
            self.ready = True
        for r in event.records:
            self.bookmark = max(self.bookmark, r.bookmark)

    def apply_all(self, events: Iterable[Event]) -> None:
        for e in events:
            self.apply(e)

    def values(self) -> list[Any]:
        """The decoded documents."""
        return [r.json() for r in self.records.values()]

    def _put(self, records: Iterable[Record], *, merge: bool = False) -> None:
        for r in records:
            key = (r.topic, r.sow_key)
            held = self.records.get(key)
            if merge and held is not None:
                doc = held.json()
                _merge(doc, r.json())
                r = r._replace(data=json.dumps(doc, separators=(",", ":")).encode())
            self.records[key] = r


def _merge(into: dict[str, Any], delta: dict[str, Any]) -> None:
    for k, v in delta.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = v
