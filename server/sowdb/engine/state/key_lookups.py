"""Point lookups by SowKey: a filter whose top-level conjuncts fix every key field of a topic
(``/orderId = 777``, ``/region = 'EU' AND /id IN (1, 2)``) is answered by looking its records
up instead of scanning the topic (SPEC §10), current or as of a bookmark.

The lookup must find every record the filter matches, and the filter language compares with
coercion: ``'0777' = 777`` is true, while the SowKey of ``{"id": "0777"}`` is ``"0777"``
(quoted) and that of ``{"id": 777}`` is ``777`` (K-1, :func:`~sowdb.engine.records.key_text`).
So each literal is turned into the SowKey text of *every* key value it can equal:

- a string literal equals the same string exactly (strings compare as strings) and, when it
  reads as a number, every number of that value (``7``, ``7.0`` are both the key ``7``) and
  the boolean of that value (``true`` is 1 to a comparison);
- a number or boolean literal equals numbers and booleans of its value, and also every string
  that reads as that number (``'777'``, ``'0777'``, ``'7.77e2'`` …), which cannot be listed.
  Such a literal is looked up only while the topic has never stored, in that key field, a
  string that reads as a number (:meth:`KeyLookup.observe` keeps that fact, per field, for
  every key the topic stores); otherwise the query scans.

The filter still runs on every record looked up, so a SowKey too many costs nothing but the
look-up; none may be missing. Every record of a keyed topic holds, at each key path, the value
its SowKey was derived from (the writer derives it from the document it stores, a delta's key
fields overwrite the merged record's), which is what makes the look-up exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from itertools import product
from operator import attrgetter
from typing import Any

import orjson

from sowdb.engine.records import KeySpec, StoredRecord, key_text
from sowdb.expr import Conjunct
from sowdb.expr.values import parse_number

MAX_LOOKUP_KEYS = 65_536
"""The most SowKeys a filter is looked up by (an IN list per key field multiplies); beyond
that the query scans or uses an index, which costs about as much and holds less memory."""

_sow_key = attrgetter("sow_key")


class KeyLookup:
    """The SowKeys a filter can match in one keyed topic, when it fixes every key field.

    Attributes:
        numeric_text: per key field, whether the topic has ever stored a string that reads as
            a number there (never reset: a deleted key may still be in the history).
    """

    __slots__ = ("_watching", "numeric_text", "steps")

    def __init__(self, keys: KeySpec) -> None:
        self.steps = keys.steps
        self.numeric_text = [False] * len(self.steps)
        self._watching = True

    def observe(self, recs: Sequence[StoredRecord]) -> None:
        """Note the SowKeys the topic now stores (on every put: ~25 ns per record, since only
        a key holding a string — a ``"`` in its text — is decoded)."""
        if self._watching:
            self.observe_keys(list(map(_sow_key, recs)))

    def observe_keys(self, sow_keys: list[str]) -> None:
        """:meth:`observe` of the SowKeys themselves (a publish that makes no records)."""
        if self._watching and '"' in "".join(sow_keys):
            for key in sow_keys:
                if '"' in key:
                    self._note(key)

    def _note(self, sow_key: str) -> None:
        # A SowKey is its key values' JSON texts joined by commas, so as a JSON array it
        # decodes back to the values (K-1).
        values = orjson.loads("[" + sow_key + "]")
        for i, value in enumerate(values):
            if type(value) is str and parse_number(value) is not None:
                self.numeric_text[i] = True
        self._watching = not all(self.numeric_text)

    def sow_keys(self, conjuncts: Sequence[Conjunct]) -> list[str] | None:
        """Every SowKey a record matching a filter with these top-level conjuncts can have,
        without repeats, or None when the conjuncts do not fix every key field (or fix them to
        values whose keys cannot be listed, or to more than :data:`MAX_LOOKUP_KEYS`)."""
        fields: list[list[str]] = []
        count = 1
        for i, steps in enumerate(self.steps):
            best: list[str] | None = None
            for c in conjuncts:
                if c.steps == steps:
                    texts = _texts(c.values, self.numeric_text[i])
                    if texts is not None and (best is None or len(texts) < len(best)):
                        best = texts
            if best is None:
                return None
            fields.append(best)
            count *= len(best)
        if count > MAX_LOOKUP_KEYS:
            return None
        if len(fields) == 1:
            return fields[0]
        return [",".join(parts) for parts in product(*fields)]  # distinct: each text delimits itself


def _texts(values: Iterable[Any], numeric_text: bool) -> list[str] | None:
    """The key texts of every key value equal to one of ``values`` (an ``IN`` list, or the
    single literal of ``=``), or None when they cannot be listed."""
    out: dict[str, None] = {}
    for value in values:
        forms = _forms(value, numeric_text)
        if forms is None:
            return None
        out.update(dict.fromkeys(forms))
    return list(out)


def _forms(literal: Any, numeric_text: bool) -> list[str] | None:
    """The key texts of the key values (strings, numbers, booleans) that ``= literal`` is TRUE
    for (:func:`sowdb.expr.values.cmp_eq`), or None when strings are among them and the key
    field may hold strings that read as numbers."""
    t = type(literal)
    if t is str:
        if not literal:  # the empty string is NULL: equal to nothing
            return []
        number = parse_number(literal)
        numbers = [] if number is None else _number_forms(number)
        try:
            return [key_text(literal, ""), *numbers]
        except TypeError:  # a lone surrogate, which no JSON document (so no key) holds
            return numbers
    if t is bool or t is int or t is float:
        return None if numeric_text else _number_forms(literal)
    return None


def _number_forms(n: int | float) -> list[str]:
    """The key texts of the numbers and booleans equal to ``n`` (a boolean compares as 0 or 1).

    An integral value is one key whether stored as ``7`` or ``7.0`` (K-1); no key is NaN or
    infinite.
    """
    if isinstance(n, float) and not math.isfinite(n):
        return []
    forms = [str(int(n)) if n == int(n) else key_text(n, "")]
    if n == 1:
        forms.append("true")
    elif n == 0:
        forms.append("false")
    return forms
