"""The single writer: publish, delete, expiration and the trimming of history and journal.

One writer, one total order: every publish, delete and expiration runs synchronously on the
event loop from validation to the RocksDB write and the in-memory update, so sequence numbers
are handed out in exactly the order changes are applied, and nothing else observes a
half-applied batch. A publish request is validated completely before it gets any sequence
number; a refused request therefore changes nothing and leaves no gap in the journal.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import count
from typing import Any

from sowdb.config import Config
from sowdb.engine.access import EVERYONE, Access
from sowdb.engine.changes import OOF_DELETED, OOF_EXPIRED, Change
from sowdb.engine.clock import Clock
from sowdb.engine.counters import Counters
from sowdb.engine.filters import request_filter
from sowdb.engine.read import plan_candidates
from sowdb.engine.records import PublishParts, StoredRecord, decode_document
from sowdb.engine.state import ExpiryQueue, SowTopic, Topics, check_topic_name
from sowdb.engine.write.conflation import Refreshed, refresh
from sowdb.engine.write.enrichment import check_rows, enrich, of_topic, preprocess_one
from sowdb.engine.write.fanout import FanOut
from sowdb.engine.write.messages import MessageLike, as_received, check_ttls, decode_batch, expiries, merge_deltas
from sowdb.engine.write.producers import Producer, Producers, scoped
from sowdb.engine.write.replicated import ProducerUpdate, apply_entries
from sowdb.errors import InvalidArgument, SowdbError
from sowdb.storage import Batch, Store
from sowdb.storage.keys import OP_DELETE, OP_EXPIRE, JournalEntry

HISTORY_TRIM_BATCH = 50_000

log = logging.getLogger("sowdb.engine")


class Writer:
    """Every change to state goes through these methods, one at a time; the only assigner of
    sequence numbers (``last_seq``) and of the journal's timestamps."""

    refreshed: Refreshed | None = None  # told of each conflated topic's refresh (a primary ships it)

    def __init__(
        self,
        config: Config,
        store: Store,
        topics: Topics,
        fan_out: FanOut,
        expiry: ExpiryQueue,
        clock: Clock,
        counters: Counters | None = None,
    ) -> None:
        self.store, self.topics, self.fan_out = store, topics, fan_out
        self.expiry, self.clock = expiry, clock
        self.counters = counters or Counters(topics.sow)
        self.max_document_bytes = config.server.max_document_bytes
        self.last_seq = store.last_sequence()
        self.producers = Producers(store.producer_seqs())
        last = store.journal_entry(self.last_seq) if self.last_seq else None
        self.last_ts = last.timestamp_us if last is not None else 0

    def _now(self) -> int:
        """The writer's clock: never behind the last journal timestamp, so timestamps are
        non-decreasing in bookmark order and a timestamp names one point (H-2)."""
        now = self.clock()
        if now < self.last_ts:
            now = self.last_ts
        self.last_ts = now
        return now

    def publish(
        self,
        topic_name: str,
        messages: Sequence[MessageLike],
        *,
        delta: bool = False,
        ttls: Sequence[float | None] | None = None,
        access: Access = EVERYONE,
        producer: Producer | None = None,
    ) -> tuple[int, int]:
        """Apply one atomic batch; returns the (first, last) bookmark assigned, or (0, 0) for a
        duplicate of a request the ``producer`` had already applied (J-4, nothing is applied).

        Every step works on the whole request at once (decode, keys, the WriteBatch, the
        in-memory update): this is the server's hot path, and a loop per step with its
        invariants in locals costs much less than a chain of calls per message.

        Args:
            messages: objects with ``data`` (JSON bytes) and ``sow_key`` (``InMessage`` or the
                protobuf ``PublishMessage`` itself, which saves a copy per message).
            ttls: per-message time to live in seconds (None: the topic's default), if any.
            producer: J-4 (producer id, sequence): applied only if the sequence is above the
                producer's last applied one, which is written in the same WriteBatch. The id is
                the caller's own on this topic (:func:`~sowdb.engine.write.producers.scoped`).

        Raises:
            PublishError: a message is invalid; it names the message (K-3). Nothing is stored.
            InvalidArgument: the topic name is invalid, there are no messages, a bad producer.
            FailedPrecondition: the topic is a view or conflated topic (K-4).
        """
        check_topic_name(topic_name)
        access.require_write(topic_name)
        if producer is not None:
            producer = scoped(producer, access.user, topic_name)
        self.topics.check_writable(topic_name, "publish to")
        if not messages:
            raise InvalidArgument("a publish request needs at least one message", field="messages")
        if ttls is not None:
            check_ttls(ttls, len(messages))
        topic = self.topics.get(topic_name)
        raws, pre, plain = [m.data for m in messages], of_topic(topic).preprocessing, topic is None
        keys, max_bytes = None if topic is None else topic.keys, self.max_document_bytes
        docs, sow_keys = decode_batch(
            topic_name, keys, messages, raws, max_bytes, key_optional=plain, preprocessing=pre
        )
        received = as_received(topic, pre, access, messages, sow_keys, delta)  # A-2 judges them before EN-1
        if delta and topic is not None:
            merge_deltas(topic, sow_keys, raws, docs)
        return self.publish_decoded(topic_name, sow_keys, docs, raws, ttls, producer, access=access, received=received)

    def publish_decoded(
        self,
        topic_name: str,
        sow_keys: list[str],
        docs: list[dict[str, Any]],
        raws: list[bytes],
        ttls: Sequence[float | None] | None,
        producer: Producer | None,
        *,
        access: Access = EVERYONE,
        received: list[dict[str, Any]] | None = None,
    ) -> tuple[int, int]:
        """Apply messages decoded and keyed beforehand (staged writes, :mod:`sowdb.engine.write.staging`)
        as one atomic batch, exactly as :meth:`publish` applies a request; (0, 0) for a duplicate.
        A ``producer`` here is keyed already (:func:`~sowdb.engine.write.producers.scoped`).
        EN-2 rewrites ``docs`` and ``raws`` here, once A-2 has judged ``received`` (else ``docs``).

        Raises:
            FailedPrecondition: the topic became read-only.
            PermissionDenied: ``access`` has a row entitlement on the topic and a message would
                replace a record outside it, or leave one outside it (nothing is applied).
        """
        self.topics.check_writable(topic_name, "publish to")
        if producer is not None and self.producers.duplicate(*producer):
            return 0, 0
        topic = self.topics.get(topic_name)
        if topic is None:
            return self._publish_plain(topic_name, sow_keys, docs, raws, self._now(), producer)
        now = self._now()
        exps = expiries(topic.config.expiration_s, ttls, len(raws), now)
        hist, first = topic.history, self.last_seq + 1
        if not access.unrestricted:
            check_rows(access, topic, sow_keys, received or docs, first, now)
        if (enrichment := of_topic(topic).enrichment) is not None:
            enrich(enrichment, topic, sow_keys, docs, raws, first, now)
        wanted = self.fan_out.wanted(topic_name)
        lean = exps is None and hist is None and not wanted  # nothing takes the versions as objects
        parts = PublishParts(sow_keys, docs, raws, first, now, exps)
        versions = None if lean else topic.versions(parts)
        batch = self.store.batch(topic_name, current=topic.persistent, history=hist is not None and topic.persistent)
        batch.publish_many(first, now, sow_keys, raws, exps)
        if topic.persistent:
            batch.set_record_count(len(topic.records) + topic.new_keys(sow_keys))
        if hist is not None and hist.granularity_us and versions is not None:
            self._thin_history(topic, batch, versions, now)
        self._commit(batch, producer)
        self.last_seq = last = first + len(raws) - 1
        self.counters.topic(topic_name).published(raws)
        if versions is None:
            topic.put_docs(parts)
            return first, last
        if exps is not None:
            self.expiry.add_many(versions)
        want_olds = wanted and (topic.olds_at_hand or self.fan_out.olds_wanted(topic_name))
        olds = topic.put_followed(versions, parts, want_olds=want_olds)
        if wanted:
            changes = [
                Change(topic_name, r.sow_key, r.bookmark, now, o, r) for r, o in zip(versions, olds, strict=True)
            ]
            self.fan_out(topic_name, changes, now)
        topic.after_fan_out(versions)
        return first, last

    @staticmethod
    def _thin_history(topic: SowTopic, batch: Batch, versions: list[StoredRecord], now: int) -> None:
        """H-1 granularity: a new version replaces (rather than follows) the key's previous
        version of the same interval, whose history entry goes in the same WriteBatch."""
        hist = topic.history
        assert hist is not None
        pending: dict[str, StoredRecord] = {}
        for rec in versions:
            previous = pending.get(rec.sow_key) or topic.head(rec.sow_key)
            if previous is not None and hist.drops(previous, now):
                batch.drop_history(rec.sow_key, previous.bookmark)
            pending[rec.sow_key] = rec

    def _commit(self, batch: Batch, producer: Producer | None) -> None:
        """Write a batch, with the producer's sequence (J-4) in the same WriteBatch."""
        if producer is None:
            batch.commit()
            return
        self.producers.write(batch, *producer)
        batch.commit()
        self.producers.applied(*producer)

    def _publish_plain(
        self,
        topic_name: str,
        sow_keys: list[str],
        docs: list[dict[str, Any]],
        raws: list[bytes],
        now: int,
        producer: Producer | None = None,
    ) -> tuple[int, int]:
        """K-5: a topic without a SOW is journaled (for subscribers and replay), not stored."""
        first = self.last_seq + 1
        batch = self.store.batch(topic_name, current=False, history=False)
        batch.publish_many(first, now, sow_keys, raws)
        self._commit(batch, producer)
        self.last_seq = last = first + len(raws) - 1
        self.counters.unconfigured.published(raws)
        if self.fan_out.wanted(topic_name):
            live = [
                Change(topic_name, key, seq, now, None, StoredRecord(topic_name, key, data, raw, seq, now))
                for key, data, raw, seq in zip(sow_keys, docs, raws, count(first))
            ]
            self.fan_out(topic_name, live, now)
        return first, last

    def sow_delete(
        self,
        topic_name: str,
        *,
        filter: str = "",
        sow_keys: Sequence[str] = (),
        data: bytes = b"",
        access: Access = EVERYONE,
    ) -> tuple[int, int]:
        """Delete by exactly one of filter, SowKeys or data; returns (count, last bookmark).

        A role with a row entitlement deletes only the rows it may see (A-2); a write right
        without a read right deletes by key only (sow_keys or data): the count of a filter's
        deletes would answer the filter about rows it may not read (issue 26).

        Raises:
            InvalidArgument: not exactly one selector, or an invalid one.
            FailedPrecondition: not a SOW topic.
            PermissionDenied: no write right; a filter without a read right.
        """
        given = [name for name, v in (("filter", filter.strip()), ("sow_keys", sow_keys), ("data", data)) if v]
        if len(given) != 1:
            raise InvalidArgument(
                "give exactly one of filter, sow_keys or data" + (f" (got {', '.join(given)})" if given else ""),
                field=given[1] if len(given) > 1 else "filter",
            )
        access.require_write(topic_name)
        topic = self.topics.sow_topic(topic_name, access.known)
        self.topics.check_writable(topic_name, "delete from")
        flt = request_filter(filter)
        if flt is not None:
            access.require_read(topic_name, "delete by filter from")
            records = plan_candidates(topic, flt)
            if records is None:
                records = topic.snapshot()
            if not access.unrestricted:  # the entitlement before the caller's filter (issue 37, 9)
                records = [r for r in records if access.entitled(topic_name, r.data, r)]
            victims = [r.sow_key for r in records if flt.matches(r.data, r)]
        elif sow_keys:
            victims = [k for k in dict.fromkeys(sow_keys) if k in topic.records]
        else:
            key = self._key_of_data(topic, data)
            victims = [key] if key in topic.records else []
        if not access.unrestricted:  # a role deletes only the rows it may see
            held = topic.records
            victims = [k for k in victims if access.entitled(topic_name, held[k].data, held[k])]
        return self._delete(topic, victims)

    def _key_of_data(self, topic: SowTopic, raw: bytes) -> str:
        if topic.keys is None:
            raise InvalidArgument(
                f"topic {topic.name!r} has publisher-provided SowKeys; delete by sow_keys instead of data", field="data"
            )
        return topic.keys.sow_key(preprocess_one(of_topic(topic).preprocessing, topic.name, decode_document(raw)))

    def _delete(
        self, topic: SowTopic, victims: list[str], *, op: int = OP_DELETE, reason: str = OOF_DELETED
    ) -> tuple[int, int]:
        """Remove records (deletes or expirations) as one batch; returns (count, last bookmark)."""
        if not victims:
            return 0, 0
        now = self._now()
        hist = topic.history
        batch = self.store.batch(topic.name, current=topic.persistent, history=hist is not None and topic.persistent)
        if topic.persistent:
            batch.set_record_count(len(topic.records) - len(victims))
        seq = self.last_seq
        for key in victims:
            seq += 1
            old = topic.records[key]
            batch.remove(seq, now, key, old.raw, op)
            if hist is not None and hist.drops(old, now):
                batch.drop_history(key, old.bookmark)
        batch.commit()
        first = self.last_seq + 1
        self.last_seq = seq
        self.counters.topic(topic.name).removed(len(victims), expired=op == OP_EXPIRE)
        changes = []
        for bookmark, key in enumerate(victims, first):
            changes.append(Change(topic.name, key, bookmark, now, topic.remove(key, bookmark, now), None, reason))
        self.fan_out(topic.name, changes, now)
        return len(victims), seq

    def expire_due(self) -> int:
        """X-1: remove every record whose time to live has passed; returns how many.

        Raises:
            StorageFull, StorageFailed: the expirations could not be written; the records stay
                queued and expire once writes succeed again.
        """
        now = self.clock()
        due = self.expiry.pop_due(now)
        if not due:
            return 0
        by_topic: dict[str, list[str]] = {}
        for topic_name, sow_key, bookmark in due:
            rec = self.topics.sow[topic_name].records.get(sow_key)
            if rec is not None and rec.bookmark == bookmark:  # not replaced or deleted since
                by_topic.setdefault(topic_name, []).append(sow_key)
        count = 0
        pending = list(by_topic.items())
        for i, (topic_name, keys) in enumerate(pending):
            try:
                count += self._delete(self.topics.sow[topic_name], keys, op=OP_EXPIRE, reason=OOF_EXPIRED)[0]
            except SowdbError:
                # this topic's and every later topic's due records go back: pop_due took them all
                for name, left in pending[i:]:
                    records = self.topics.sow[name].records
                    for key in left:
                        self.expiry.add(records[key])
                raise
        return count

    def apply_replicated(self, entries: Sequence[JournalEntry], producers: Sequence[ProducerUpdate] = ()) -> int:
        """A replica writes the primary's journal entries with their bookmarks and timestamps,
        and the producer state (J-4) their batches wrote (SPEC §13, HA-2;
        :mod:`sowdb.engine.write.replicated`); returns the last bookmark."""
        return apply_entries(self, entries, producers)

    @property
    def writable(self) -> bool:
        """Whether changes can be written now (False while the storage is failed)."""
        return self.store.writable

    def recover_storage(self) -> bool:
        """Try to make the storage writable again after a failed write (a full disk); returns
        whether it is. A write that was reported as failed but reached RocksDB's log anyway
        is rolled back, so that the store holds exactly what was acknowledged (J-1)."""
        if self.store.writable:
            return True
        if not self.store.reopen():
            return False
        if self.store.last_sequence() > self.last_seq:
            current: dict[tuple[str, str], tuple[int, int, int, bytes] | None] = {}
            for e in self.store.iter_journal(self.last_seq):
                topic = self.topics.sow.get(e.topic)
                if topic is not None and topic.persistent:
                    rec = topic.records.get(e.sow_key)
                    current[(e.topic, e.sow_key)] = (
                        None if rec is None else (rec.bookmark, rec.timestamp_us, rec.expiry_us, rec.raw)
                    )
            history = {name for name, t in self.topics.sow.items() if t.persistent and t.history is not None}
            self.store.roll_back(self.last_seq, current, history)
            self.store.write_producer_seqs(self.producers.last)  # J-4: what was acknowledged
        return True

    def trim_history(self) -> bool:
        """H-1: drop versions older than each topic's window (the state at the window's start
        is kept). Does a bounded amount of work; returns True when more is waiting."""
        now = self.clock()
        more = False
        for topic in self.topics.sow.values():
            hist = topic.history
            if hist is None:
                continue
            removed, left = topic.trim_history(now - hist.window_us, HISTORY_TRIM_BATCH)
            more = more or left
            if not removed:
                continue
            hist.floor = max(hist.floor, max(seq for _, seq in removed))
            if topic.persistent:
                self.store.trim_history(topic.name, removed, hist.floor)
        return more

    def flush_conflated(self, at_us: int | None = None, topic: str = "") -> int:
        """C-2 (:func:`~sowdb.engine.write.conflation.refresh`); returns the changes published."""
        return refresh(self, at_us, topic)
