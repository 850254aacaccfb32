"""A hash index over a topic's arena (``[[topic]] indexes``): a term code per slot.

Why: the index of a topic kept as objects maps each term to a dict of its records, ~60 bytes a
record per index (issue 39's budget for a record is ~2x its JSON, ~216 bytes for an order, of
which the arena takes ~180). Here each slot holds one int32, the code of the term its version
is filed under; a lookup compares the codes of the slots in use with the literal's codes (a
vector pass, ~1 ms a million slots) and keeps the current ones. The terms are those of
:func:`~sowdb.engine.state.indexes.index_terms`, so the planner's superset contract holds: the
filter runs on every candidate.

A value filed under several terms (a string holding a number, an array) has the code
:data:`SEVERAL` and its codes in a side map by slot; a slot with no term has :data:`NONE`.
Codes are never taken back: the dictionary holds every distinct term the path has held
(bounded by the field's cardinality, which is what a hash index is for).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from sowdb.config import field_path_steps
from sowdb.engine.arena import LIVE
from sowdb.engine.records import StoredRecord
from sowdb.engine.state.indexes import index_terms
from sowdb.expr import get_path

NONE, SEVERAL = -1, -2
_NUMERIC_START = frozenset("0123456789+-.")


class SlotIndex:
    """The terms of one field path, by arena slot."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.steps = field_path_steps(path)
        self._top = self.steps[0] if len(self.steps) == 1 and isinstance(self.steps[0], str) else None
        self.codes: dict[Any, int] = {}
        self.by_slot: NDArray[np.int32] = np.full(1024, NONE, np.int32)
        self._codes = self.by_slot.data  # the same, written a run at a time
        self._several: dict[int, tuple[int, ...]] = {}

    def _code(self, term: Any) -> int:
        codes = self.codes
        code = codes.get(term)
        if code is None:
            code = codes[term] = len(codes)
        return code

    def put_many(self, recs: Sequence[StoredRecord]) -> None:
        """File each new version (its ``slot`` set) under its value's terms."""
        self.put_docs([rec.slot for rec in recs], [rec.kept or rec.data for rec in recs])

    def put_docs(self, slots: list[int], docs: Sequence[dict[str, Any] | None]) -> None:
        """File the new versions in ``slots`` under the terms of their ``docs``' values (a
        publish's decoded documents: no ``StoredRecord`` needed)."""
        if not slots:
            return
        top, steps, several = self._top, self.steps, self._several
        codes, code_of = self.codes, self._code
        out: list[int] = []
        if several:
            for slot in slots:
                several.pop(slot, None)  # a reused slot's former value
        for slot, data in zip(slots, docs, strict=True):
            value = (data.get(top) if top is not None else get_path(data, steps)) if data is not None else None
            if type(value) is str and value and value[0] not in _NUMERIC_START:  # the common case, inline
                code = codes.get(value)
                out.append(code if code is not None else code_of(value))
                continue
            terms = index_terms(value)
            if not terms:
                out.append(NONE)
            elif len(terms) == 1:
                out.append(code_of(terms[0]))
            else:
                several[slot] = tuple(code_of(t) for t in terms)
                out.append(SEVERAL)
        lo, hi = slots[0], slots[-1] + 1
        consecutive = hi - lo == len(slots) and slots == list(range(lo, hi))  # a publish's fresh slots, usually
        need = hi if consecutive else max(slots) + 1
        if need > len(self.by_slot):
            grown = np.full(max(need, 2 * len(self.by_slot)), NONE, np.int32)
            grown[: len(self.by_slot)] = self.by_slot
            self.by_slot, self._codes = grown, grown.data
        if consecutive:  # one copy, without numpy's conversion of two lists
            self._codes[lo:hi] = array("i", out)
        else:
            self.by_slot[slots] = out

    def lookup(self, values: Iterable[Any], died: NDArray[np.int64], high: int) -> NDArray[np.int64]:
        """The current slots (below ``high``; ``died``: the arena's) whose value may equal one of
        ``values``."""
        wanted = {c for v in values for t in index_terms(v) if (c := self.codes.get(t)) is not None}
        if not wanted:
            return np.empty(0, np.int64)
        codes = self.by_slot[:high]
        if len(wanted) == 1:
            found = np.flatnonzero(codes == next(iter(wanted)))
        else:
            found = np.flatnonzero(np.isin(codes, np.fromiter(wanted, np.int32, len(wanted))))
        if self._several:
            more = [slot for slot, cs in self._several.items() if slot < high and not wanted.isdisjoint(cs)]
            if more:
                found = np.union1d(found, np.array(more, np.int64))
        current: NDArray[np.int64] = found[died[found] == LIVE]
        return current
