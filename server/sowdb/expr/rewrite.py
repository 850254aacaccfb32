"""Rewriting a published message: a topic's ``preprocessing`` (EN-1) and ``enrichment`` (EN-2),
each a list of ``EXPR AS /field`` items in the filter language.

Compiled once (the config's validation compiles them, :func:`compile_rewrite`), applied per
message by the single writer. Items apply in order, each to the message as the items before
it left it, so a later item can read an earlier one's field.

The rule for an expression that fails on one message (a type error, a bad number, a budget of
built text passed): the language never raises at run time (FILTERS.md, "Errors"), it yields
NULL, and a NULL result leaves the field absent -- which the language reads as NULL again, and
which is what a view's projection does with a NULL. A value JSON cannot hold (NaN, an infinity)
is NULL too. No publish is refused for what its data computes: the rule is the same whoever
publishes (a publish, a delta publish, a Spark commit), and a refused batch would fail whole
(K-3) for one record's arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sowdb.errors import ExpressionError
from sowdb.expr import nodes as n
from sowdb.expr.compiler import Fn, _Compiler
from sowdb.expr.functions import FUNCTIONS
from sowdb.expr.parser import parse_list


class Context:
    """What a rewrite's expressions read besides the message: the metadata functions
    (``SOW_KEY()``, ``TOPIC_NAME()``, ``BOOKMARK()``, ``LAST_UPDATED()``) and, for enrichment,
    the record's previous version (``/a OF PREVIOUS``; None when there is none).

    The writer uses one context for a whole request (:meth:`at` moves it to the next message),
    and hands the previous version as what ``decode`` finds it by (``source``: its SowKey),
    found and decoded only when an expression reads it: most evaluations never do.
    """

    __slots__ = ("_decode", "_previous", "_source", "bookmark", "sow_key", "timestamp", "topic")

    def __init__(
        self,
        topic: str,
        sow_key: str | None = None,
        bookmark: int | None = None,
        timestamp: int | None = None,
        previous: Any = None,
        decode: Callable[[Any], Any] | None = None,
    ) -> None:
        self.topic, self.sow_key, self.bookmark, self.timestamp = topic, sow_key, bookmark, timestamp
        self._previous, self._source, self._decode = previous, None, decode

    def at(self, sow_key: str, bookmark: int, previous: Any, source: Any = None) -> Context:
        """This context, moved to the next message (``previous``: its previous version, or None
        and ``source``, what ``decode`` finds that version by)."""
        self.sow_key, self.bookmark, self._previous, self._source = sow_key, bookmark, previous, source
        return self

    @property
    def previous(self) -> Any:
        """The previous version's document, decoded on first use."""
        if self._source is not None and self._decode is not None:
            self._previous, self._source = self._decode(self._source), None
        return self._previous


@dataclass(frozen=True, slots=True)
class Assignment:
    """One ``EXPR AS /field`` item: its evaluator and the output path (parents, then leaf)."""

    text: str
    fn: Fn
    parents: tuple[str, ...]
    leaf: str


class Rewrite:
    """A compiled list of ``EXPR AS /field`` items.

    Attributes:
        items: the assignments, in order.
        nondeterministic: an item calls ``UNIX_TIMESTAMP()``.
        reads_previous: an item reads ``OF PREVIOUS`` (else the writer need not look the
            previous version up).
        outputs: the output paths, as steps (a key path's steps compare with them).
    """

    def __init__(self, items: tuple[Assignment, ...], nondeterministic: bool, reads_previous: bool) -> None:
        self.items = items
        self._plan = tuple((a.fn, a.parents, a.leaf) for a in items)
        self.nondeterministic = nondeterministic
        self.reads_previous = reads_previous
        self.outputs: tuple[tuple[str | int, ...], ...] = tuple((*a.parents, a.leaf) for a in items)

    def apply(self, doc: dict[str, Any], ctx: Context, *, in_place: bool = False) -> dict[str, Any] | None:
        """The rewritten message, or None when no item changed ``doc``.

        ``doc`` is modified only ``in_place``, and then only its top object: its nested
        objects may be shared with a stored version (a delta's merge), so each object on an
        output path is copied before a write. Without ``in_place`` (preprocessing, whose
        input the entitlement check may still read) the top object is copied too.
        """
        out: dict[str, Any] | None = doc if in_place else None
        changed = False
        isfinite = math.isfinite
        for fn, parents, leaf in self._plan:
            cur: Any = doc if out is None else out
            value = fn(cur, ctx)
            if type(value) is float and not isfinite(value):
                value = None
            for s in parents:
                cur = cur.get(s) if type(cur) is dict else None
            old = cur.get(leaf, _ABSENT) if type(cur) is dict else _ABSENT
            if value is None:
                if old is _ABSENT:
                    continue
            elif type(old) is type(value) and old == value:
                continue  # unchanged: no copy, and the message's bytes can be kept
            if out is None:
                out = dict(doc)
            changed = True
            if parents:
                _set(out, parents, leaf, value)
            elif value is None:
                del out[leaf]
            else:
                out[leaf] = value
        return out if changed else None

    def update(self, doc: dict[str, Any], ctx: Context) -> bool:
        """:meth:`apply` ``in_place``, for the writer's hot path (EN-2, every message of a
        topic with enrichment): whether ``doc`` changed, without building a result."""
        changed = False
        for fn, parents, leaf in self._plan:
            value = fn(doc, ctx)
            if type(value) is float and not isfinite(value):
                value = None
            if parents:
                cur: Any = doc
                for s in parents:
                    cur = cur.get(s) if type(cur) is dict else None
                old = cur.get(leaf, _ABSENT) if type(cur) is dict else _ABSENT
            else:
                old = doc.get(leaf, _ABSENT)
            if value is None:
                if old is _ABSENT:
                    continue
            elif type(old) is type(value) and old == value:
                continue  # unchanged: the message's bytes can be kept
            changed = True
            if parents:
                _set(doc, parents, leaf, value)  # copies each nested object on the path
            elif value is None:
                del doc[leaf]
            else:
                doc[leaf] = value
        return changed


_ABSENT = object()
isfinite = math.isfinite


def _set(out: dict[str, Any], parents: tuple[str, ...], leaf: str, value: Any) -> None:
    """Put ``value`` at the path in ``out`` (a fresh top object), copying each object on the
    way and making those missing; a NULL removes the field."""
    cur = out
    for s in parents:
        nxt = cur.get(s)
        nxt = dict(nxt) if type(nxt) is dict else {}
        cur[s] = nxt
        cur = nxt
    if value is None:
        cur.pop(leaf, None)
    else:
        cur[leaf] = value


def compile_rewrite(items: Sequence[str], *, previous: bool) -> Rewrite:
    """Compile a topic's ``preprocessing`` (``previous=False``) or ``enrichment`` list.

    Raises:
        ExpressionError: an item does not parse, lacks ``AS /field``, writes into an array
            position, or (with ``previous=False``) reads ``OF PREVIOUS``; its ``field`` is the
            item's index (``[2]``) and its column is within the item's text.
    """
    assignments: list[Assignment] = []
    nondeterministic = reads_previous = False
    for i, text in enumerate(items):
        where = f"[{i}]"
        try:
            parsed = parse_list(text, aggregates=False, allow_as=True, previous=previous)
        except ExpressionError as exc:
            raise exc.for_field(where) from None
        if len(parsed) != 1:
            raise ExpressionError("one EXPR AS /field per item", column=1, token=text, field=where)
        node, out, source = parsed[0]
        if out is None:
            raise ExpressionError("an item needs AS /field (the field it sets)", column=1, token=source, field=where)
        if not out or any(type(s) is int for s in out):
            raise ExpressionError("the output path cannot index arrays", column=1, token=text, field=where)
        compiler = _Compiler()
        fn = compiler.value(node)
        calls = compiler.calls | {x.name for x in node.walk() if isinstance(x, n.Call)}
        nondeterministic = nondeterministic or any(FUNCTIONS[c].nondeterministic for c in calls)
        reads_previous = reads_previous or any(isinstance(x, n.Path) and x.previous for x in node.walk())
        steps = tuple(str(s) for s in out)
        assignments.append(Assignment(text, fn, steps[:-1], steps[-1]))
    return Rewrite(tuple(assignments), nondeterministic, reads_previous)
