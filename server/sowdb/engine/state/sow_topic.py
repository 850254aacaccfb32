"""A SOW topic's state in memory: its records by SowKey, its hash indexes
(:mod:`sowdb.engine.state.indexes`), its key lookup (:mod:`sowdb.engine.state.key_lookups`), its
columns (:mod:`sowdb.engine.state.columns`) and its version chains. Which of them a query uses
is the planner's choice (:mod:`sowdb.engine.read.planner`).

The in-memory map is what queries scan; its records keep their JSON and decode it when read
(issue 30: a decoded dict per record made a topic ~10x its data), the columns sparing most
queries the decoding. RocksDB's ``current`` column family is its durable copy for persistent
topics and is loaded back at start. Records are immutable, so ``snapshot()`` is a list of references
that later publishes cannot change.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count, repeat
from operator import attrgetter

from sowdb.config import TopicConfig
from sowdb.engine.records import KeySpec, PublishParts, StoredRecord
from sowdb.engine.state.columns import Columns
from sowdb.engine.state.history import TopicHistory
from sowdb.engine.state.indexes import HashIndex
from sowdb.engine.state.key_lookups import KeyLookup
from sowdb.expr import CompiledFilter, Conjunct


class SowTopic:
    """State of one SOW topic."""

    olds_at_hand = True
    """Whether the versions a publish replaces cost nothing to give (here they are the records
    kept); where not, the writer asks for them only when a follower reads them."""

    def __init__(self, config: TopicConfig) -> None:
        self.config = config
        self.name = config.name
        self.persistent = config.durability == "persistent"
        self.keys = KeySpec(config.key) if config.key else None
        self.lookup = KeyLookup(self.keys) if self.keys is not None else None
        self.records: dict[str, StoredRecord] = {}
        self.stored_bytes = 0  # the size of the records' documents (SPEC §12), kept per batch
        self.indexes = {path: HashIndex(path) for path in config.indexes}
        self._index_list = list(self.indexes.values())
        self.history = TopicHistory(config.history) if config.history is not None else None
        self.columns: Columns | None = None  # made when a query first wants one

    def put(self, rec: StoredRecord) -> StoredRecord | None:
        """Insert or replace; returns the previous version."""
        records = self.records
        old = records.get(rec.sow_key)
        records[rec.sow_key] = rec
        self.stored_bytes += len(rec.raw) - (len(old.raw) if old is not None else 0)
        if self.lookup is not None:
            self.lookup.observe((rec,))
        if self.history is not None:
            self.history.link(rec, old)
        for index in self._index_list:
            index.replace_many((old,), (rec,))
        if self.columns is not None:
            self.columns.put_many((old,), (rec,))
        return old

    def new_keys(self, sow_keys: list[str]) -> int:
        """How many distinct keys of ``sow_keys`` hold no record now."""
        records = self.records
        return len({k for k in sow_keys if k not in records})

    def put_many(self, recs: list[StoredRecord], *, want_olds: bool = True) -> list[StoredRecord | None]:
        """Insert or replace each record in order; returns the version each one replaced (an
        earlier record of ``recs`` when a key repeats)."""
        records = self.records
        get = records.get
        olds: list[StoredRecord | None] = []
        append = olds.append
        for rec in recs:
            key = rec.sow_key
            append(get(key))
            records[key] = rec
        self.stored_bytes += sum(map(len, map(_raw, recs))) - sum([len(o.raw) for o in olds if o is not None])
        if self.lookup is not None:
            self.lookup.observe(recs)
        if self.history is not None:
            link = self.history.link
            for rec, old in zip(recs, olds, strict=True):
                link(rec, old)
        for index in self._index_list:
            index.replace_many(olds, recs)
        if self.columns is not None:
            self.columns.put_many(olds, recs)
        return olds

    def put_docs(self, parts: PublishParts) -> None:
        """:meth:`put_many` of a publish whose versions nobody needs back (no subscriber, no
        history, no expiry), from its parts. Here the versions are the records kept; a store
        that keeps records in its own form makes none (:meth:`ArenaTopic.put_docs
        <sowdb.engine.state.arena_topic.ArenaTopic.put_docs>`)."""
        name, now = self.name, parts.now
        self.put_many(
            [
                StoredRecord(name, k, d, r, b, now)
                for k, d, r, b in zip(parts.sow_keys, parts.docs, parts.raws, count(parts.first))
            ],
            want_olds=False,
        )

    def versions(self, parts: PublishParts) -> list[StoredRecord]:
        """A publish's versions as objects: here they become the records kept, each decoded
        while among the recent ones."""
        name, now = self.name, parts.now
        return [
            StoredRecord(name, key, data, raw, seq, now, expiry)
            for key, data, raw, seq, expiry in zip(
                parts.sow_keys, parts.docs, parts.raws, count(parts.first), parts.exps or repeat(0)
            )
        ]

    def after_fan_out(self, versions: list[StoredRecord]) -> None:
        """The followers have had a publish's ``versions`` (see :meth:`ArenaTopic.after_fan_out
        <sowdb.engine.state.arena_topic.ArenaTopic.after_fan_out>`); here nothing is left to do."""

    def put_followed(
        self, versions: list[StoredRecord], parts: PublishParts, *, want_olds: bool
    ) -> list[StoredRecord | None]:
        """:meth:`put_many` of a publish's ``versions``, made for those who follow the topic, with
        the ``parts`` they were made of: here the versions are the records kept; a store that
        keeps records in its own form writes the parts (:meth:`ArenaTopic.put_followed
        <sowdb.engine.state.arena_topic.ArenaTopic.put_followed>`)."""
        return self.put_many(versions, want_olds=want_olds)

    def remove(self, sow_key: str, bookmark: int = 0, timestamp_us: int = 0) -> StoredRecord | None:
        """Delete (at ``bookmark``, for the history); returns the removed version."""
        old = self.records.pop(sow_key, None)
        if old is not None:
            self.stored_bytes -= len(old.raw)
            for index in self.indexes.values():
                index.remove(old)
            if self.columns is not None:
                self.columns.remove(old)
            if self.history is not None:
                self.history.bury(old, bookmark, timestamp_us)
        return old

    def head(self, sow_key: str) -> StoredRecord | None:
        """The newest version of a key: its record, or its tombstone when deleted (history)."""
        rec = self.records.get(sow_key)
        if rec is None and self.history is not None:
            return self.history.tombstones.get(sow_key)
        return rec

    def heads(self) -> list[StoredRecord]:
        """Every version chain's newest version, as of now (records, then tombstones)."""
        out = list(self.records.values())
        if self.history is not None:
            out.extend(self.history.tombstones.values())
        return out

    def heads_at(self, seq: int, timestamp_us: int, flt: CompiledFilter | None = None) -> Sequence[StoredRecord]:
        """The chains a historical query at (``seq``, ``timestamp_us``) walks back: every one
        (:meth:`heads`); an arena sets apart those it need not walk."""
        return self.heads()

    def snapshot(self) -> list[StoredRecord]:
        """Every record, as of now."""
        return list(self.records.values())

    def live_bookmark(self, sow_key: str) -> int | None:
        """The bookmark of ``sow_key``'s current record, None if it has none."""
        rec = self.records.get(sow_key)
        return None if rec is None else rec.bookmark

    def restore_past(self, sow_key: str, past: list[StoredRecord]) -> None:
        """:meth:`restore_chain` of the versions before ``sow_key``'s current record (oldest first)."""
        self.restore_chain([*past, self.records[sow_key]])

    def restore_chain(self, chain: list[StoredRecord]) -> None:
        """Re-link a key's versions read back at start (:meth:`TopicHistory.restore`); the key
        of a deleted record, in the history only, counts for the point lookups too."""
        assert self.history is not None
        self.history.restore(chain)
        if self.lookup is not None:
            self.lookup.observe(chain[-1:])

    def indexed(self, conjuncts: Sequence[Conjunct]) -> Sequence[StoredRecord] | None:
        """The records the hash index with the fewest candidates finds for the filter's
        equality conjuncts, or None when no conjunct has an index (the planner's)."""
        best: dict[str, StoredRecord] | None = None
        for c in conjuncts:
            index = self.indexes.get(c.path)
            if index is not None:
                found = index.lookup(c.values)
                if best is None or len(found) < len(best):
                    best = found
        return None if best is None else list(best.values())

    def load(self, recs: list[StoredRecord]) -> None:
        """Records read back at start, each key once."""
        self.put_many(recs)

    def trim_history(self, cutoff_us: int, limit: int) -> tuple[list[tuple[str, int]], bool]:
        """H-1's trim of the version chains (:meth:`TopicHistory.trim`)."""
        assert self.history is not None
        return self.history.trim(self.records, cutoff_us, limit)

    def new_columns(self) -> Columns:
        """The columns a query first wants (the planner's)."""
        return Columns(self.records)

    def close(self) -> None:
        """Let go of what the topic holds outside Python objects (nothing, here)."""

    def build_columns(self) -> bool:
        """One step of building the wanted columns (the upkeep's chore); True while more remain."""
        if self.columns is None or not self.columns.building:
            return False
        self.columns.build_step()
        return self.columns.building


_raw = attrgetter("raw")
