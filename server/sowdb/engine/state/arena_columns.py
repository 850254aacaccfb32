"""Columns over a topic's arena: the slots are the arena's (:mod:`sowdb.engine.state.columns`
has the kinds and the superset contract).

A topic kept as objects numbers its records for its columns; a topic in an arena already has
slot ids, one per version, so a column is indexed by them and a candidate is a slot whose
version is current. Nothing per record is kept beside the columns' arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sowdb.engine.records import StoredRecord
from sowdb.engine.state import columns as _columns
from sowdb.engine.state.arena_records import ArenaRecords
from sowdb.engine.state.columns import BUILD_STEP, Columns
from sowdb.expr import Comparison


class ArenaColumns(Columns):
    """A topic's columns, by arena slot."""

    def __init__(self, store: ArenaRecords) -> None:
        super().__init__({})
        self._store = store

    def _capacity(self) -> int:
        return max(1024, int(self._store.arena.high * 1.5))

    def _grow_to(self, need: int) -> None:
        if any(len(c.kind) < need for c in self.by_path.values()):
            capacity = max(need, self._capacity())
            for col in self.by_path.values():
                col.grow(capacity)

    def want(self, term: Comparison) -> None:
        super().want(term)
        self._grow_to(self._store.arena.high)

    def build_step(self, budget: int = BUILD_STEP) -> None:
        """Fill up to ``budget`` slots of the columns being built, their records decoded in one
        call (a chunk of the arena)."""
        building = [col for col in self.by_path.values() if not col.ready]
        if not building:
            return
        arena = self._store.arena
        high = arena.high
        self._grow_to(high)
        start = building[0].filled
        end = min(start + budget, high)
        live = np.flatnonzero(self._store.live_mask(end)[start:]) + start
        if len(live):
            slots, docs = arena.decode(live)
            at = slots.tolist()
            docs = [d if isinstance(d, dict) else {} for d in docs]
        else:
            at, docs = [], []
        for col in building:  # the columns as far as the first: the chunk decoded once for all
            if col.filled == start:
                if at:
                    col.set(at, col.values_in(docs))
                col.filled = end
                col.ready = end >= arena.high

    def put_many(self, olds: Sequence[StoredRecord | None], recs: Sequence[StoredRecord]) -> None:
        """Write each new version's values at its slot."""
        if not self.by_path or not recs:
            return
        self._grow_to(max(r.slot for r in recs) + 1)
        numbers = [r.slot for r in recs]
        for col in self.by_path.values():
            col.set(numbers, col.values(recs))

    def put_docs(self, slots: list[int], docs: list[dict[str, Any]]) -> None:
        """Write the values of a publish's decoded ``docs`` at their ``slots``."""
        if not self.by_path or not slots:
            return
        self._grow_to(max(slots) + 1)
        for col in self.by_path.values():
            col.set(slots, col.values_in(docs))

    def remove(self, old: StoredRecord) -> None:
        """Nothing to do: an ended version's slot is no longer current, which candidates check."""

    def used(self) -> int:
        return self._store.arena.high

    def candidate_slots(self, terms: Sequence[Comparison], count: int) -> np.ndarray | None:
        """The current slots the ready columns let through for ``terms`` (ANDed), or None when
        no term has a ready column or they let through more than :data:`WIDE` of ``count``."""
        n = self._store.arena.high
        mask = self.mask(terms, n)
        if mask is None:
            return None
        at = np.flatnonzero(mask & self._store.live_mask(n))
        if len(at) > _columns.WIDE * count:  # read at each call, as tests may lower it
            return None
        return at

    def candidates(self, terms: Sequence[Comparison], count: int) -> list[StoredRecord] | None:
        at = self.candidate_slots(terms, count)
        return None if at is None else self._store.pinned(at)  # type: ignore[return-value]


__all__ = ["ArenaColumns"]
