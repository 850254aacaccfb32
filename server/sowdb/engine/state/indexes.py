"""Hash indexes (``[[topic]] indexes``): field value -> the records holding it.

Equality and ``IN`` conjuncts on an indexed path are served by a lookup instead of a scan; the
filter still runs on the candidates, so a lookup may return a superset (see :func:`index_terms`)
but never misses a match. The subscription hub files subscriptions by the same terms.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sowdb.config import field_path_steps
from sowdb.engine.records import StoredRecord, document
from sowdb.expr import get_path
from sowdb.expr.values import parse_number

_NUMERIC_START = frozenset("0123456789+-.")


def index_terms(value: Any) -> list[Any]:
    """The hash-index terms under which a field value is filed.

    Equality in the filter language converts a string that holds a number when it meets a
    number (``'42' = 42``), and compares arrays element by element. So a string is filed under
    itself and, when it holds a number, also under that number; a number or boolean under
    itself (Python already hashes ``1``, ``1.0`` and ``True`` alike, and never like ``"1"``); an
    array under the terms of its elements. A lookup with the literal's own terms returns a
    superset of the matches, and the filter, which always runs on the candidates, removes the
    rest.
    """
    t = type(value)
    if t is str:
        num = parse_number(value) if value and value[0] in _NUMERIC_START else None
        if num is None or num != num:
            return [value]
        return [value, num]
    if t is int or t is float or t is bool:
        return [] if value != value else [value]
    if t is list:
        out: list[Any] = []
        for e in value:
            if type(e) is not list:
                out.extend(index_terms(e))
        return out
    return []


class HashIndex:
    """Maps the terms of one field path to the records holding them (by SowKey)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.steps = field_path_steps(path)
        self._top = self.steps[0] if len(self.steps) == 1 and isinstance(self.steps[0], str) else None
        self._map: dict[Any, dict[str, StoredRecord]] = {}
        self._several: set[str] = set()  # the keys filed under more than one term (see replace_many)

    def _value(self, rec: StoredRecord) -> Any:
        data = document(rec)
        assert data is not None
        return data.get(self._top) if self._top is not None else get_path(data, self.steps)

    def replace_many(self, olds: Sequence[StoredRecord | None], recs: Sequence[StoredRecord]) -> None:
        """File each new version ``recs[i]`` in place of ``olds[i]`` (None: a new key).

        The publish path: a version whose indexed value did not change (the usual update) only
        takes its predecessor's place in the bucket, without filing it out and back in. Whether
        it changed is told without decoding the predecessor (records keep only their JSON, issue
        30) when the new value has one term: a key filed under one term only (not in
        ``_several``) and found in that term's bucket held an equal value (or one filed alike).
        """
        top = self._top
        steps = self.steps
        m = self._map
        several = self._several
        for old, rec in zip(olds, recs, strict=True):
            data = rec.data
            assert data is not None
            value = data.get(top) if top is not None else get_path(data, steps)
            key = rec.sow_key
            if type(value) is str and value and value[0] not in _NUMERIC_START:  # the common case, inline
                bucket = m.get(value)
                if old is not None and (bucket is None or key not in bucket or key in several):
                    self._file_out(old, value)
                    bucket = m.get(value)
                if bucket is None:
                    m[value] = {key: rec}
                else:
                    bucket[key] = rec
                continue
            if old is not None:
                self._file_out(old, value)
            terms = index_terms(value)
            if len(terms) > 1:
                several.add(key)
            for term in terms:
                bucket = m.get(term)
                if bucket is None:
                    m[term] = {key: rec}
                else:
                    bucket[key] = rec

    def _file_out(self, old: StoredRecord, value: Any) -> None:
        """File ``old`` out unless its value is ``value``."""
        old_value = self._value(old)
        if type(old_value) is not type(value) or old_value != value:
            self.remove(old, old_value)

    def remove(self, rec: StoredRecord, value: Any = None) -> None:
        """File ``rec`` out (its indexed value ``value``, when known)."""
        m = self._map
        self._several.discard(rec.sow_key)
        for term in index_terms(self._value(rec) if value is None else value):
            bucket = m.get(term)
            if bucket is not None:
                bucket.pop(rec.sow_key, None)
                if not bucket:
                    del m[term]

    def lookup(self, values: Iterable[Any]) -> dict[str, StoredRecord]:
        """Every record that may equal one of ``values``, by SowKey."""
        out: dict[str, StoredRecord] = {}
        for v in values:
            for term in index_terms(v):
                bucket = self._map.get(term)
                if bucket:
                    if out:
                        out.update(bucket)
                    else:
                        out = dict(bucket)
        return out
