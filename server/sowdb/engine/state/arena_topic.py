"""A configured SOW topic whose current records live in an arena (issue 39).

The same questions as :class:`~sowdb.engine.state.sow_topic.SowTopic` (put, remove, head,
snapshot, the planner's indexes and columns), answered from the arena: ``records`` is an
:class:`~sowdb.engine.state.arena_records.ArenaRecords`, an index is a
:class:`~sowdb.engine.state.slot_index.SlotIndex`, the columns are by slot. What stays as objects
is what the arena does not hold: the past versions of a topic with history (the chain behind a
key's current version, in ``_past``) and its tombstones; and, for such a topic, the current
versions its publishes made (``_heads``), which the next version's chain links to.

Derived topics (views, conflated topics) stay :class:`SowTopic`: their rows are written with
their sources' bookmarks, which do not ascend per topic as an arena's must.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from itertools import count, repeat
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sowdb.config import TopicConfig
from sowdb.engine.arena import AsOfHeads
from sowdb.engine.records import PublishParts, StoredRecord
from sowdb.engine.state.arena_columns import ArenaColumns
from sowdb.engine.state.arena_records import ArenaRecords, PinnedRecords
from sowdb.engine.state.slot_index import SlotIndex
from sowdb.engine.state.sow_topic import SowTopic
from sowdb.expr import CompiledFilter, Conjunct

log = logging.getLogger("sowdb.engine")

MIN_SHM_FREE = 1 << 30
"""The RAM file system must have this much free for the arenas to go there (a container's
default ``/dev/shm`` is 64 MB: an arena outgrowing it would crash the process on a write)."""


def new_arena_root(fallback: Path | None = None) -> Path:
    """A new directory for a server's arenas: on the RAM file system when it has
    :data:`MIN_SHM_FREE` free (the arena is memory; RocksDB is the records' durable copy), else
    under ``fallback`` (the data directory's ``arena/``: mapped files the kernel writes back),
    else the system's temporary directory.

    Its name carries this process's id: the directories of processes that are gone (killed
    before they could remove theirs) are removed here, and this one at exit if not before.
    """
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free >= MIN_SHM_FREE:
        base = shm
    elif fallback is not None:
        base = fallback
        base.mkdir(parents=True, exist_ok=True)
        log.warning("%s has less than %d MiB free: the arenas go to %s", shm, MIN_SHM_FREE >> 20, base)
    else:
        base = Path(tempfile.gettempdir())
    for stale in base.glob("sowdb-arena-*-*"):
        pid = stale.name.split("-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)
    root = Path(tempfile.mkdtemp(prefix=f"sowdb-arena-{os.getpid()}-", dir=base))
    atexit.register(shutil.rmtree, root, True)
    return root


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ArenaTopic(SowTopic):
    """State of one configured SOW topic, its records in an arena under ``directory``."""

    olds_at_hand = False  # made from their slots, when a follower reads them

    def __init__(self, config: TopicConfig, directory: Path) -> None:
        super().__init__(config)
        self.store = ArenaRecords(config.name, directory)
        self.records = self.store  # type: ignore[assignment]
        self.slot_indexes = {path: SlotIndex(path) for path in config.indexes}
        self.indexes = {}
        self._index_list = []
        self._past: dict[str, StoredRecord] = {}  # history: the version behind a key's current one
        self._heads: dict[str, StoredRecord] = {}  # history: a key's current version, as its publish made it

    @property
    def stored_bytes(self) -> int:
        return self.store.stored_bytes

    @stored_bytes.setter
    def stored_bytes(self, value: int) -> None:
        pass  # kept by the arena

    def _olds(self, ended: list[int], sow_keys: list[str]) -> list[StoredRecord | None]:
        """The versions a change ended (in ``ended``, -1: none). With history, the object the
        key's publish made is taken where it is still the one in its slot: the chain keeps it
        anyway, and making it again from the slot was a third of what the arena added to an
        update of such a topic (``make bench-store-publish ARGS="--history"``)."""
        if self.history is None:
            return self.store.ended(ended, sow_keys)
        heads, past = self._heads, self._past
        olds: list[StoredRecord | None] = [
            h if slot >= 0 and (h := heads.pop(key, None)) is not None and h.slot == slot else None
            for slot, key in zip(ended, sow_keys, strict=True)
        ]
        lost = [i for i, (old, slot) in enumerate(zip(olds, ended, strict=True)) if old is None and slot >= 0]
        if lost:
            made = self.store.ended([ended[i] for i in lost], [sow_keys[i] for i in lost])
            for i, rec in zip(lost, made, strict=True):
                olds[i] = rec
        for old in olds:
            if old is not None:
                old.prev = past.get(old.sow_key)
        return olds

    def put(self, rec: StoredRecord) -> StoredRecord | None:
        return self.put_many([rec])[0]

    def put_many(self, recs: list[StoredRecord], *, want_olds: bool = True) -> list[StoredRecord | None]:
        """Insert or replace each record in order; returns the version each one replaced (made
        from its slot only when wanted, or when the history links it)."""
        ended = self.store.put_many(recs)
        olds: list[StoredRecord | None] = (
            self._olds(ended, [r.sow_key for r in recs])
            if want_olds or self.history is not None
            else [None] * len(recs)
        )
        self._after_put(recs, olds)
        if self.history is not None:
            heads = self._heads
            for rec in recs:
                heads[rec.sow_key] = rec
        return olds

    def put_docs(self, parts: PublishParts) -> None:
        """A publish nobody needs the versions of, written from its parts: the arena keeps the
        JSON, the indexes and columns take the decoded documents, and no ``StoredRecord`` is
        made (a read makes one from the slot when it wants it)."""
        if self.history is not None:
            super().put_docs(parts)
            return
        slots, _ = self.store.put_docs(parts.sow_keys, parts.raws, parts.first, parts.now)
        self._file_docs(parts.sow_keys, slots, parts.docs)

    def versions(self, parts: PublishParts) -> list[StoredRecord]:
        """A publish's versions for its followers: the arena, not these objects, keeps the
        records, so a version holds its decoded document only until the followers have had it
        (:meth:`after_fan_out`) and stays out of the ring of recent documents, where entering
        costs ~0.6 µs a version and would push out a document a query still reads. A topic
        with history keeps its versions in its chains: they are made as a topic of objects
        makes them."""
        if self.history is not None:
            return super().versions(parts)
        name, now = self.name, parts.now
        out = [
            StoredRecord(name, key, None, raw, seq, now, expiry)
            for key, raw, seq, expiry in zip(parts.sow_keys, parts.raws, count(parts.first), parts.exps or repeat(0))
        ]
        for rec, data in zip(out, parts.docs, strict=True):
            rec.kept = data
        return out

    def after_fan_out(self, versions: list[StoredRecord]) -> None:
        """Drop the documents :meth:`versions` gave the versions: what holds a version after
        the fan-out (a subscriber's queue, a page, a change the delivery gate holds) decodes it
        again if it reads it, through the ring of recent documents, as any record."""
        if self.history is None:
            for rec in versions:
                rec.kept = None

    def put_followed(
        self, versions: list[StoredRecord], parts: PublishParts, *, want_olds: bool
    ) -> list[StoredRecord | None]:
        """A followed publish: the arena written from the publish's parts, as :meth:`put_docs`
        writes it (the versions made for the followers are only numbered, not read back), and
        the versions it ended made when wanted. A topic with history or expiry takes
        :meth:`put_many` (its versions are kept, or carry an expiry per message)."""
        if self.history is not None or parts.exps is not None:
            return self.put_many(versions, want_olds=want_olds)
        sow_keys = parts.sow_keys
        slots, ended = self.store.put_docs(sow_keys, parts.raws, parts.first, parts.now)
        for rec, slot in zip(versions, slots, strict=True):
            rec.slot = slot
        self._file_docs(sow_keys, slots, parts.docs)
        return self.store.ended(ended, sow_keys) if want_olds else [None] * len(versions)

    def _file_docs(self, sow_keys: list[str], slots: list[int], docs: list[dict[str, Any]]) -> None:
        """File a publish's decoded documents, just written to ``slots``, in the key lookup, the
        slot indexes and the columns."""
        if self.lookup is not None:
            self.lookup.observe_keys(sow_keys)
        for index in self.slot_indexes.values():
            index.put_docs(slots, docs)
        if self.columns is not None:
            assert isinstance(self.columns, ArenaColumns)  # new_columns'
            self.columns.put_docs(slots, docs)

    def new_keys(self, sow_keys: list[str]) -> int:
        """How many distinct keys of ``sow_keys`` hold no record now (one vector probe)."""
        return self.store.new_keys(sow_keys)

    def indexed(self, conjuncts: Sequence[Conjunct]) -> Sequence[StoredRecord] | None:
        best: NDArray[np.int64] | None = None
        arena = self.store.arena
        for c in conjuncts:
            index = self.slot_indexes.get(c.path)
            if index is not None:
                found = index.lookup(c.values, arena.slots.died, arena.high)
                if best is None or len(found) < len(best):
                    best = found
        return None if best is None else self.store.pinned(best)

    def load(self, recs: list[StoredRecord]) -> None:
        """Records read back at start, each key once, in any bookmark order."""
        self.store.load(recs)
        self._after_put(recs, [None] * len(recs))

    def _after_put(self, recs: list[StoredRecord], olds: list[StoredRecord | None]) -> None:
        if self.lookup is not None:
            self.lookup.observe(recs)
        for index in self.slot_indexes.values():
            index.put_many(recs)
        if self.columns is not None:
            self.columns.put_many(olds, recs)
        hist = self.history
        if hist is not None:
            latest: dict[str, StoredRecord] = {}  # a key's earlier version of this batch
            for rec, old in zip(recs, olds, strict=True):
                hist.link(rec, latest.get(rec.sow_key, old))
                latest[rec.sow_key] = rec
                self._keep_past(rec)

    def _keep_past(self, rec: StoredRecord) -> None:
        if rec.prev is None:
            self._past.pop(rec.sow_key, None)
        else:
            self._past[rec.sow_key] = rec.prev

    def remove(self, sow_key: str, bookmark: int = 0, timestamp_us: int = 0) -> StoredRecord | None:
        """Delete at ``bookmark``; returns the removed version."""
        slot = self.store.remove(sow_key, bookmark)
        if slot < 0:
            return None
        old = self._olds([slot], [sow_key])[0]
        assert old is not None
        if self.history is not None:
            self._past.pop(sow_key, None)
            self._heads.pop(sow_key, None)
            self.history.bury(old, bookmark, timestamp_us)
        return old

    def head(self, sow_key: str) -> StoredRecord | None:
        rec = self.store.get(sow_key)
        if rec is not None:
            if self.history is not None:
                rec.prev = self._past.get(sow_key)
            return rec
        if self.history is not None:
            return self.history.tombstones.get(sow_key)
        return None

    def heads_at(self, seq: int, timestamp_us: int, flt: CompiledFilter | None = None) -> AsOfHeads:
        """The chains a historical query at (``seq``, ``timestamp_us``) walks back, in two parts.
        A current record written at or before the point was current then too: those stay slots,
        pinned, which a scan decodes a chunk at a time as it does the current state's. Only the
        others (written since, and the tombstones) are made into records, each with the chain
        behind it, to be walked back. Making every head a record took 2.8x the objects store's
        CPU for a query halfway back in ``make bench-history`` (100k orders, each updated once).

        The columns describe the current records, so they narrow the unchanged ones for ``flt``
        as they do a current query (and settle them where they decide it exactly)."""
        snap = self.store.snapshot()
        slots, arrays = snap.slots, self.store.arena.slots
        then = (arrays.born[slots] <= seq) & (arrays.ts[slots] <= timestamp_us)
        walked = self.store.records(slots[~then])
        still, exact = slots[then], False
        columns = self.columns
        if flt is not None and flt.comparisons and isinstance(columns, ArenaColumns):
            found = columns.candidate_slots(flt.comparisons, len(self.store))
            if found is not None:
                still = still[np.isin(still, found, assume_unique=True)]
                exact = flt.only_comparisons and columns.settles(flt.comparisons)
        if self.history is not None:
            past = self._past
            for rec in walked:
                rec.prev = past.get(rec.sow_key)
            walked.extend(self.history.tombstones.values())
        pinned = self.store.pinned(still)
        pinned.settled = exact
        return AsOfHeads(pinned, walked)

    def snapshot(self) -> PinnedRecords:  # type: ignore[override]
        return self.store.snapshot()

    def live_bookmark(self, sow_key: str) -> int | None:
        arena = self.store.arena
        slot = arena.get(sow_key.encode())
        return None if slot < 0 else arena.bookmark(slot)

    def restore_past(self, sow_key: str, past: list[StoredRecord]) -> None:
        """The versions behind a current record, read back at start, linked without making a
        record of the current one (the arena holds it): making one per key took ~40 % of a
        start-up of 100k keys with history (``make bench-history``, arena 1.37x the objects'
        CPU)."""
        assert self.history is not None
        arena = self.store.arena
        self.history.restore_behind(past, arena.timestamp(arena.get(sow_key.encode())))
        self._past[sow_key] = past[-1]

    def restore_chain(self, chain: list[StoredRecord]) -> None:
        assert self.history is not None
        self.history.restore(chain)
        head = chain[-1]
        self._keep_past(head)
        if self.lookup is not None:
            self.lookup.observe(chain[-1:])

    def trim_history(self, cutoff_us: int, limit: int) -> tuple[list[tuple[str, int]], bool]:
        """H-1's trim over the chains behind the current versions (see TopicHistory.trim)."""
        assert self.history is not None
        heads = _Heads(self)
        out = self.history.trim(heads, cutoff_us, limit)  # type: ignore[arg-type]
        for rec in heads.given.values():
            self._keep_past(rec)
        return out

    def build_columns(self) -> bool:
        if self.columns is None or not self.columns.building:
            return False
        self.columns.build_step()
        return self.columns.building

    def new_columns(self) -> ArenaColumns:
        return ArenaColumns(self.store)

    def close(self) -> None:
        self.store.close()


class _Heads:
    """The current versions as history's trim reads them: each with its chain behind it, and
    remembered, so that what trim unlinks is kept (:meth:`ArenaTopic.trim_history`)."""

    def __init__(self, topic: ArenaTopic) -> None:
        self.topic = topic
        self.given: dict[str, StoredRecord] = {}

    def get(self, key: str) -> StoredRecord | None:
        rec = self.given.get(key)
        if rec is None:
            rec = self.topic.store.get(key)
            if rec is None:
                return None
            rec.prev = self.topic._past.get(key)
            self.given[key] = rec
        return rec
