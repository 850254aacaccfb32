"""Columnar copies of a topic's hot fields, so that a query's top-level comparisons
(``/price > 190``, ``/side = 'B'``, ``IN``, ``BETWEEN``) are evaluated a column at a time with
numpy instead of a Python step per record; only the records they let through run the filter.

Why: a scan pays ~180 ns a record in the compiled filter, 180 ms at a million records, where
PostgreSQL answers the same query in under 200 ms end to end (issue 20). A column turns the
comparison into a few vector operations (~3 ms a million) and the scan into a gather.

The column is a *superset* filter, like a hash index: the filter still runs on every candidate,
so a column must never drop a match but may let through what does not match. Each slot of a
column records what kind of value the record holds at the path, and for the kinds whose
comparison numpy can settle exactly, the value:

- ``NUM``: an int within ±2^53 (exact as a float64), a float or a boolean (compared as 1 / 0,
  as the language does), in ``num``;
- ``STR``: a non-empty string, coded in ``code`` through the column's dictionary of distinct
  strings; a comparison is decided once per distinct string by the language's own
  :func:`sowdb.expr.values.compare`, then gathered per slot;
- ``NULL``: missing, null, an empty string or an object: no comparison is TRUE of it;
- ``OTHER``: anything else (arrays, integers beyond 2^53, strings past the dictionary's limit):
  always a candidate.

Slots: a topic with columns numbers its records (``StoredRecord.slot``); a new version takes its
predecessor's slot, a deleted record's slot is reused. Columns are wanted by the planner when a
query on a topic of at least :data:`MIN_RECORDS` records has a comparison on a path without one,
and built by the upkeep in steps (:meth:`Columns.build_step`) while the query itself scans;
publishes keep every column current from then on, a few vector writes per batch.
"""

from __future__ import annotations

import operator
import time
from collections import deque
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from sowdb.engine.records import StoredRecord, document
from sowdb.expr import Comparison, get_path
from sowdb.expr.values import COMPARISON_OPS, compare, parse_number

NULL, NUM, STR, OTHER = 0, 1, 2, 3

MIN_RECORDS = 10_000
"""Topics smaller than this scan: a scan of them costs about as much as the column's upkeep."""
MAX_COLUMNS = 8
"""Columns per topic; wanting another drops the one least recently used."""
MAX_STRINGS = 4096
"""Distinct strings a column codes; strings beyond are ``OTHER`` (high-cardinality fields are
what hash indexes are for). The codes fit :data:`CODE` exactly."""
CODE = np.int16
"""A string's code in a column: 2 bytes a slot, not 4 (a million records' two string columns
held 8 MB of codes, issue 39); :data:`MAX_STRINGS` stays below its limit."""
assert np.iinfo(CODE).max >= MAX_STRINGS
BUILD_STEP = 8192
"""Records one build step fills (a few milliseconds of the event loop)."""
WIDE = 0.5
"""A column plan letting more than this share of the records through scans instead (the
gather would cost more than it saves)."""

_EXACT = 2**53
_GROWTH = 1.5
_NUMBERS = frozenset((int, float))
_BELOW_STRINGS = frozenset(("<", "<=", "!="))
"""The ops TRUE of every number against a string that is not a number (it sorts above them)."""

Mask = npt.NDArray[np.bool_]


def worth_columns(count: int) -> bool:
    """Whether a topic of ``count`` records is worth columns (:data:`MIN_RECORDS`, read at each
    call so that tests may lower it)."""
    return count >= MIN_RECORDS


class Column:
    """One field path's values for every slot of a topic (see the module's kinds)."""

    def __init__(self, path: str, steps: tuple[str | int, ...], capacity: int) -> None:
        self.path, self.steps = path, steps
        self._top = steps[0] if len(steps) == 1 and isinstance(steps[0], str) else None
        self.kind = np.zeros(capacity, np.int8)
        self.num = np.zeros(capacity, np.float64)
        self.code = np.zeros(capacity, CODE)
        self.codes: dict[str, int] = {}
        self.texts: list[str] = []
        self.filled = 0  # slots below this have been filled by the build
        self.undecided = False
        """Whether some slot may hold ``OTHER``: set when one is written, cleared only by the
        pass in :meth:`settles` that finds none (so a column that never held one costs no pass)."""
        self.ready = False
        self.used = time.monotonic()
        self._tables: dict[tuple[str, type, Any], Mask] = {}

    def grow(self, capacity: int) -> None:
        n = len(self.kind)
        if capacity > n:
            extra = capacity - n
            self.kind = np.concatenate((self.kind, np.zeros(extra, np.int8)))
            self.num = np.concatenate((self.num, np.zeros(extra, np.float64)))
            self.code = np.concatenate((self.code, np.zeros(extra, CODE)))

    def values(self, recs: Sequence[StoredRecord]) -> list[Any]:
        return self.values_in(_documents(recs))

    def values_in(self, docs: list[dict[str, Any]]) -> list[Any]:
        top, steps = self._top, self.steps
        if top is not None:
            return [d.get(top) for d in docs]
        return [get_path(d, steps) for d in docs]

    def set(self, slots: list[int], values: list[Any]) -> None:
        """Fill ``slots`` with ``values`` in a few vector writes: a run of numbers (ints within
        ±2^53, floats: the usual publish batch) or of strings directly, anything else classified
        value by value (which also writes ``code``: a column of numbers leaves its codes'
        pages untouched, so they cost no memory)."""
        types = set(map(type, values))
        if types and types <= _NUMBERS and (int not in types or (min(values) > -_EXACT and max(values) < _EXACT)):
            self.kind[slots] = NUM
            self.num[slots] = values
        elif types == {str}:
            self._strings(slots, values)
        elif values:
            kinds, nums, codes = zip(*map(self._classify, values), strict=True)
            self.kind[slots], self.num[slots], self.code[slots] = kinds, nums, codes
            self.undecided = self.undecided or OTHER in kinds

    def _strings(self, slots: list[int], values: list[str]) -> None:
        codes, texts = self.codes, self.texts
        for s in set(values).difference(codes):
            if s and len(texts) < MAX_STRINGS:
                codes[s] = len(texts)
                texts.append(s)
        get = codes.get
        found = np.fromiter([get(s, -1) for s in values], np.int32, len(values))
        kinds = np.where(found >= 0, np.int8(STR), np.int8(OTHER))
        if "" in values:
            kinds[[i for i, s in enumerate(values) if not s]] = NULL
        self.kind[slots] = kinds
        self.code[slots] = np.maximum(found, 0)
        self.undecided = self.undecided or bool((kinds == OTHER).any())

    def _classify(self, value: Any) -> tuple[int, float, int]:
        """(kind, number, string code) of one value."""
        t = type(value)
        if t is int or t is bool:
            return (NUM, value, 0) if -_EXACT < value < _EXACT else (OTHER, 0.0, 0)
        if t is float:
            return NUM, value, 0
        if t is str:
            if not value:
                return NULL, 0.0, 0
            code = self.codes.get(value)
            if code is None and len(self.texts) < MAX_STRINGS:
                code = self.codes[value] = len(self.texts)
                self.texts.append(value)
            return (OTHER, 0.0, 0) if code is None else (STR, 0.0, code)
        return (OTHER, 0.0, 0) if t is list else (NULL, 0.0, 0)  # NULL: None or an object

    def mask(self, term: Comparison, n: int) -> Mask:
        """The slots below ``n`` for which ``term`` may be TRUE (every one for which it is)."""
        self.used = time.monotonic()
        kind = self.kind[:n]
        out: Mask = kind == OTHER
        is_num = kind == NUM
        is_str = kind == STR if self.texts else None
        for literal in term.values:
            out |= is_num & self._numbers(term.op, literal, n)
            if is_str is not None:
                out |= is_str & self._table(term.op, literal)[self.code[:n]]
        return out

    def settles(self, term: Comparison, n: int) -> bool:
        """Whether :meth:`mask` is ``term`` itself, not a superset, over the first ``n`` slots:
        no value it lets through undecided (``OTHER``) and no literal it compares loosely (an
        integer beyond 2^53, written or as a numeric string)."""
        for literal in term.values:
            if type(literal) is str:
                literal = parse_number(literal)
            if type(literal) is int and not -_EXACT < literal < _EXACT:
                return False
        if self.undecided:
            self.undecided = bool((self.kind[:n] == OTHER).any())
        return not self.undecided

    def _numbers(self, op: str, literal: Any, n: int) -> Mask | bool:
        """Whether ``num op literal`` holds, for the slots holding numbers."""
        if type(literal) is str:
            parsed = parse_number(literal)
            if parsed is None:  # a string that is not a number is above every number
                return op in _BELOW_STRINGS
            literal = parsed
        literal = int(literal) if type(literal) is bool else literal
        if type(literal) is int and not -_EXACT < literal < _EXACT:
            return True  # not exact as a float64: every number is a candidate
        # operator.gt and the rest, which are numpy's comparisons on arrays (typed for scalars)
        compare_arrays = cast(Callable[[Any, Any], Mask], COMPARISON_OPS[op])
        return compare_arrays(self.num[:n], literal)

    def _table(self, op: str, literal: Any) -> Mask:
        """Per distinct string, whether ``string op literal`` is TRUE (the language decides,
        once per string); extended as the dictionary grows."""
        key = (op, type(literal), literal)
        table = self._tables.get(key)
        texts = self.texts
        if table is None or len(table) < len(texts):
            known = 0 if table is None else len(table)
            fn = COMPARISON_OPS[op]
            more = np.fromiter((compare(fn, s, literal) is True for s in texts[known:]), np.bool_, len(texts) - known)
            table = more if table is None else np.concatenate((table, more))
            if len(self._tables) >= 256:
                self._tables.clear()
            self._tables[key] = table
        return table


class SettledRecords(list[StoredRecord]):
    """Candidates the columns decided exactly (:meth:`Columns.settles`): the filter need not run
    on them again (a scan reads ``settled``; every other reader of candidates may run it)."""

    settled = True


def settled(found: Sequence[StoredRecord]) -> Sequence[StoredRecord]:
    """``found`` marked as decided exactly (a list copied into :class:`SettledRecords`, a
    sequence of an arena's slots marked in place)."""
    if isinstance(found, list):
        return SettledRecords(found)
    found.settled = True  # type: ignore[attr-defined]
    return found


def _documents(recs: Sequence[StoredRecord]) -> list[dict[str, Any]]:
    """The records' documents, decoded once and not kept (``{}`` for none)."""
    return [d if d is not None else {} for d in map(document, recs)]


class Columns:
    """A topic's slots and columns.

    The records are numbered (``StoredRecord.slot``) by the first build step, not when the
    first column is wanted (~150 ms a million records, kept off the query that asks); until
    then publishes have nothing to keep and the planner nothing to use.
    """

    def __init__(self, records: dict[str, StoredRecord]) -> None:
        self._records = records
        self.slots: list[StoredRecord | None] | None = None
        self._free: list[int] = []
        self.by_path: dict[str, Column] = {}

    def _number(self) -> None:
        slots = self.slots = list(self._records.values())
        deque(map(setattr, slots, repeat("slot"), range(len(slots))), maxlen=0)  # a C loop
        self._grow()  # records published since the columns were wanted

    def _grow(self) -> None:
        """Make room in every column for every slot."""
        need = len(self.slots or ())
        if any(len(c.kind) < need for c in self.by_path.values()):
            capacity = self._capacity()
            for col in self.by_path.values():
                col.grow(capacity)

    def _capacity(self) -> int:
        return max(1024, int(len(self.slots or self._records) * _GROWTH))

    def want(self, term: Comparison) -> None:
        """Start a column for the term's path (built by :meth:`build_step`)."""
        if term.path in self.by_path:
            return
        if len(self.by_path) >= MAX_COLUMNS:
            del self.by_path[min(self.by_path.values(), key=lambda c: c.used).path]
        self.by_path[term.path] = Column(term.path, term.steps, self._capacity())

    @property
    def building(self) -> bool:
        return any(not c.ready for c in self.by_path.values())

    def build_step(self, budget: int = BUILD_STEP) -> None:
        """Number the records, or fill up to ``budget`` slots of a column being built."""
        slots = self.slots
        if slots is None:
            self._number()
            return
        building = [col for col in self.by_path.values() if not col.ready]
        if not building:
            return
        start = building[0].filled
        end = min(start + budget, len(slots))
        chunk = slots[start:end]
        if None in chunk:
            at = [i for i in range(start, end) if slots[i] is not None]
            docs = _documents([r for r in chunk if r is not None])
        else:
            at = list(range(start, end))
            docs = _documents(chunk)  # type: ignore[arg-type]
        for col in building:  # the columns as far as the first: the chunk decoded once for all
            if col.filled == start:
                col.set(at, col.values_in(docs))
                col.filled = end
                col.ready = end >= len(slots)

    def put_many(self, olds: Sequence[StoredRecord | None], recs: Sequence[StoredRecord]) -> None:
        """Give each new version its predecessor's slot (a new key a free one) and write its
        values into every column."""
        slots = self.slots
        if slots is None:
            return
        free = self._free
        numbers: list[int] = []
        for old, rec in zip(olds, recs, strict=True):
            if old is not None:
                slot = old.slot
            elif free:
                slot = free.pop()
            else:
                slot = len(slots)
                slots.append(None)
            rec.slot = slot
            slots[slot] = rec
            numbers.append(slot)
        if not self.by_path:
            return
        self._grow()
        for col in self.by_path.values():
            col.set(numbers, col.values(recs))

    def remove(self, old: StoredRecord) -> None:
        if self.slots is None:
            return
        slot = old.slot
        self.slots[slot] = None
        self._free.append(slot)
        for col in self.by_path.values():
            col.kind[slot] = NULL

    def mask(self, terms: Sequence[Comparison], n: int) -> Mask | None:
        """The first ``n`` slots the ready columns let through for ``terms`` (ANDed), or None
        when no term has a ready column."""
        mask: Mask | None = None
        for term in terms:
            col = self.by_path.get(term.path)
            if col is not None and col.ready:
                m = col.mask(term, n)
                mask = m if mask is None else mask & m
        return mask

    def used(self) -> int:
        """The slots in use (the columns' arrays may be longer)."""
        return len(self.slots or ())

    def settles(self, terms: Sequence[Comparison]) -> bool:
        """Whether every term has a ready column that decides it exactly (:meth:`Column.settles`):
        the AND of their masks is then the AND of the terms."""
        n = self.used()
        for term in terms:
            col = self.by_path.get(term.path)
            if col is None or not col.ready or not col.settles(term, n):
                return False
        return True

    def candidates(self, terms: Sequence[Comparison], count: int) -> list[StoredRecord] | None:
        """The records the ready columns let through for ``terms`` (ANDed), or None when no
        term has a ready column or they let through more than :data:`WIDE` of ``count``."""
        slots = self.slots
        if slots is None:
            return None
        mask = self.mask(terms, len(slots))
        if mask is None:
            return None
        at = np.flatnonzero(mask)
        if len(at) > WIDE * count:
            return None
        if len(at) == 0:
            return []
        found = [slots[int(at[0])]] if len(at) == 1 else list(operator.itemgetter(*at.tolist())(slots))
        # Freed slots are NULL in every column, which no comparison is TRUE of: no None here.
        assert None not in found
        return cast(list[StoredRecord], found)
