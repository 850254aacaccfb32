"""A replica applies the primary's journal entries (SPEC §13, HA-2), entry for entry.

The primary's writer assigned every bookmark and timestamp; a replica never assigns its own. It
writes each entry with the primary's bookmark, timestamp, expiry and data, one RocksDB
WriteBatch per run of entries of one topic (the primary writes one topic per batch, so a run is
one of its batches or several whole ones), then updates memory and hands the changes to its own
subscribers and derived topics, so that its journal, ``current`` and ``history`` are the
primary's. Views are recomputed from the changes, handed over once per batch of the primary (a
batch's entries share topic, kind and timestamp), so each view change is the primary's; two
batches of one topic in the same microsecond, or a batch split across two frames, fold as one
or as two, which changes no view's final state, only which intermediate state is published.

The producers' state (J-4) comes with the entries: the primary's ``producer_at`` log entries
(see :mod:`sowdb.engine.write.producers`), each keyed by the last bookmark of the batch that
wrote it. A replica writes each one, and the producer's sequence, in the WriteBatch of the run
that holds that bookmark, so a promoted replica refuses a producer's retry as the primary would
have, and a replica that crashes never keeps entries without their producer state or the reverse.

History thinning by granularity (H-1) is the primary's too: a version that replaced the previous
version of its key's interval on the primary (by the primary's timestamps) drops that version's
``history`` entry in the same WriteBatch here, as the primary's writer did; memory's version
chains thin themselves as they link (:class:`~sowdb.engine.state.history.TopicHistory`).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import TYPE_CHECKING

from sowdb.engine.changes import OOF_DELETED, OOF_EXPIRED, Change
from sowdb.engine.records import StoredRecord, decode_document
from sowdb.errors import FailedPrecondition
from sowdb.storage.keys import OP_EXPIRE, OP_PUBLISH, JournalEntry

if TYPE_CHECKING:
    from sowdb.engine.state import SowTopic
    from sowdb.engine.write.writer import Writer
    from sowdb.storage import Batch


ProducerUpdate = tuple[int, str, int]
"""(bookmark of the batch's last entry, scoped producer id, sequence): a ``producer_at`` entry."""


def apply_entries(writer: Writer, entries: Sequence[JournalEntry], producers: Sequence[ProducerUpdate] = ()) -> int:
    """Write ``entries`` (bookmark order, continuing the writer's journal) as the primary wrote
    them, with the ``producers`` state their batches wrote; returns the last bookmark applied.

    Raises:
        FailedPrecondition: the entries do not continue this node's journal (a gap, or a
            replica ahead of its primary): nothing is applied, the replica must follow anew.
        StorageFull, StorageFailed: a run could not be written; the earlier runs were.
    """
    if not entries:
        return writer.last_seq
    for expected, entry in enumerate(entries, writer.last_seq + 1):
        if entry.seq != expected:
            raise FailedPrecondition(
                f"replicated entry {entry.seq} does not continue this node's journal at {expected - 1}"
            )
    for topic_name, run in groupby(entries, key=lambda e: e.topic):
        entries_run = list(run)
        first, last = entries_run[0].seq, entries_run[-1].seq
        _apply_run(writer, topic_name, entries_run, [p for p in producers if first <= p[0] <= last])
    return writer.last_seq


def _apply_run(writer: Writer, topic_name: str, run: list[JournalEntry], producers: list[ProducerUpdate]) -> None:
    """One topic's consecutive entries: one WriteBatch, then memory, then fan-out."""
    topic = writer.topics.get(topic_name)
    if topic is None:  # K-5: journaled, not stored
        batch = writer.store.batch(topic_name, current=False, history=False)
        for e in run:
            batch.publish(e.seq, e.timestamp_us, e.sow_key, e.payload)
        _commit(writer, batch, producers)
        _advance(writer, run)
        writer.counters.unconfigured.published([e.payload for e in run])
        if writer.fan_out.wanted(topic_name):
            for e in run:
                rec = StoredRecord(topic_name, e.sow_key, decode_document(e.payload), e.payload, e.seq, e.timestamp_us)
                writer.fan_out(
                    topic_name, [Change(topic_name, e.sow_key, e.seq, e.timestamp_us, None, rec)], e.timestamp_us
                )
        return
    hist = topic.history
    batch = writer.store.batch(topic_name, current=topic.persistent, history=hist is not None and topic.persistent)
    records = topic.records
    count = len(records)  # the records held after the run: counted from the run's keys alone
    held: dict[str, bool] = {}  # a key the run touched -> held after its last entry so far
    newest: dict[str, tuple[int, int, bool]] | None = {} if hist is not None and hist.granularity_us else None
    # the primary's batches: entries of one kind (publish or removal) and one timestamp, whose
    # publishes are written, and put in memory, as the primary's writer did: a call per batch
    groups = [
        (removal, now, list(g))
        for (removal, now), g in groupby(run, key=lambda e: (e.op != OP_PUBLISH, e.timestamp_us))
    ]
    for removal, now, group in groups:
        for e in group:
            was = held.get(e.sow_key)
            if was is None:
                was = e.sow_key in records
            count += (not was) if not removal else -was
            held[e.sow_key] = not removal
        if removal:
            for e in group:
                batch.remove(e.seq, now, e.sow_key, e.payload, e.op)
        else:
            keys, raws = [e.sow_key for e in group], [e.payload for e in group]
            batch.publish_many(group[0].seq, now, keys, raws, [e.expiry_us for e in group])
        if newest is not None:  # after the group's own writes: a version it replaces may be one of them
            for e in group:
                _thin(topic, batch, newest, e)
    if topic.persistent:
        batch.set_record_count(count)
    _commit(writer, batch, producers)
    _advance(writer, run)
    counters = writer.counters.topic(topic_name)
    # memory, then fan-out once per batch of the primary, so views fold each batch as its did
    for removal, now, group in groups:
        changes: list[Change] = []
        if not removal:
            versions = [
                StoredRecord(topic_name, e.sow_key, decode_document(e.payload), e.payload, e.seq, now, e.expiry_us)
                for e in group
            ]
            counters.published([e.payload for e in group])
            for rec in versions:
                if rec.expiry_us:
                    writer.expiry.add(rec)
            olds = topic.put_many(versions)
            changes = [
                Change(topic_name, e.sow_key, e.seq, now, old, rec)
                for e, old, rec in zip(group, olds, versions, strict=True)
            ]
        else:
            for e in group:
                if e.sow_key in topic.records:
                    counters.removed(1, expired=e.op == OP_EXPIRE)
                    old = topic.remove(e.sow_key, e.seq, now)
                    reason = OOF_EXPIRED if e.op == OP_EXPIRE else OOF_DELETED
                    changes.append(Change(topic_name, e.sow_key, e.seq, now, old, None, reason))
        # removals go to fan-out always, as the writer's own do (derived topics follow them)
        if changes and (removal or writer.fan_out.wanted(topic_name)):
            writer.fan_out(topic_name, changes, now)


def _thin(topic: SowTopic, batch: Batch, newest: dict[str, tuple[int, int, bool]], e: JournalEntry) -> None:
    """H-1 granularity as the primary's writer applied it: entry ``e`` replaces the key's
    previous version when both fall in one interval, so that version's ``history`` entry goes.
    ``newest`` holds each key's newest version written earlier in the run (bookmark, timestamp,
    live), which memory does not show yet. A publish replaces the record or its tombstone
    (``Writer._thin_history``); a removal, only a live record (``Writer._delete``)."""
    hist = topic.history
    assert hist is not None
    previous = newest.get(e.sow_key)
    publish = e.op == OP_PUBLISH
    if previous is None:
        head = topic.head(e.sow_key) if publish else topic.records.get(e.sow_key)
        if head is not None:
            previous = (head.bookmark, head.timestamp_us, True)
    if previous is not None and (publish or previous[2]) and hist.same_interval(previous[1], e.timestamp_us):
        batch.drop_history(e.sow_key, previous[0])
    newest[e.sow_key] = (e.seq, e.timestamp_us, publish)


def _commit(writer: Writer, batch: Batch, producers: list[ProducerUpdate]) -> None:
    """Write the run with the producer state of its batches (J-4), in one WriteBatch."""
    for bookmark, producer, seq in producers:
        writer.producers.write(batch, producer, seq, bookmark)
    batch.commit()
    for _, producer, seq in producers:
        writer.producers.applied(producer, seq)


def _advance(writer: Writer, run: list[JournalEntry]) -> None:
    writer.last_seq = run[-1].seq
    writer.last_ts = max(writer.last_ts, run[-1].timestamp_us)
