"""Join conditions of a joined view (V-2): ``[orders]./customer_id = [customers]./id``.

A joined view's ``underlying`` names its first topic, and each ``join`` entry brings in one more
topic by equality of a field of a topic already in the view with a field of the new one; the
entries, in order, so form a tree rooted at the first topic (:func:`join_plan`). Such a tree
lets the upkeep find the rows a change touches by walking the edges from the changed topic, one
hash lookup per edge, instead of recomputing the join.

Two kinds: an *inner* join (the default, as in the AMPS views sowdb follows) keeps a row only
where every topic has a matching record; ``LEFT [a]./x = [b]./y`` (sowdb's spelling) keeps the
rows of ``a`` that no record of ``b`` matches, with ``b``'s fields (and those of topics joined
through ``b``) missing (NULL).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sowdb.errors import ExpressionError
from sowdb.expr.compiler import get_path
from sowdb.expr.lexer import EOF, OP, PATH, WORD, tokenize
from sowdb.expr.values import hashable


@dataclass(frozen=True)
class JoinEdge:
    """One join entry, oriented from the topic already in the view (``parent``) to the topic it
    brings in (``child``); ``parent_value`` and ``child_value`` read each side's join value from
    a record's document (:func:`value_getter`)."""

    parent: str
    parent_steps: tuple[str | int, ...]
    child: str
    child_steps: tuple[str | int, ...]
    outer: bool = False  # LEFT: the parent's rows stay without a match
    text: str = ""
    parent_value: Callable[[Any], Any] = field(init=False, repr=False, compare=False)
    child_value: Callable[[Any], Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parent_value", value_getter(self.parent_steps))
        object.__setattr__(self, "child_value", value_getter(self.child_steps))


def _side(token: Any) -> tuple[str, tuple[str | int, ...]]:
    if token.kind != PATH or not str(token.value[0]).startswith("["):
        raise ExpressionError("expected a field of a topic, as [topic]./field", column=token.column, token=token.text)
    steps = token.value
    return steps[0][1:-1], steps[1:]


def parse_join(text: str) -> JoinEdge:
    """One ``join`` entry, as written (its sides in the order written).

    Raises:
        ExpressionError: not ``[LEFT] [a]./x = [b]./y`` with two different topics.
    """
    tokens = tokenize(text)
    i = 0
    outer = False
    if tokens[0].kind == WORD and tokens[0].key == "LEFT":
        outer, i = True, 1
        if tokens[1].kind == WORD and tokens[1].key == "JOIN":
            i = 2
    if len(tokens) != i + 4:
        token = tokens[min(len(tokens) - 1, i + 3)]
        raise ExpressionError(
            "a join is [LEFT] [topic]./field = [topic]./field", column=token.column, token=token.text, field="join"
        )
    a, eq, b, end = tokens[i : i + 4]
    left, right = _side(a), _side(b)
    if eq.kind != OP or eq.key not in ("=", "==") or end.kind != EOF:
        raise ExpressionError("a join compares two fields with =", column=eq.column, token=eq.text, field="join")
    if left[0] == right[0]:
        raise ExpressionError("a join names two different topics", column=b.column, token=b.text, field="join")
    return JoinEdge(left[0], left[1], right[0], right[1], outer, text)


def join_plan(underlying: str, joins: Sequence[str]) -> list[JoinEdge]:
    """The join entries as a tree rooted at ``underlying``: each entry, in order, names one topic
    already joined and one new topic (either side may be written first).

    Raises:
        ExpressionError: a bad entry, or one whose topics are both or neither in the view yet
            (the message names the entry).
    """
    joined = [underlying]
    edges: list[JoinEdge] = []
    for text in joins:
        e = parse_join(text)
        if e.parent in joined and e.child not in joined:
            edges.append(e)
        elif e.child in joined and e.parent not in joined and not e.outer:
            edges.append(JoinEdge(e.child, e.child_steps, e.parent, e.parent_steps, False, text))
        else:
            which = "both are" if e.parent in joined and e.child in joined else "neither is"
            raise ExpressionError(
                f"each join brings in one new topic ({which} in the view yet: {', '.join(joined)}; "
                "a LEFT join names the topic already in the view first)",
                column=1,
                token=text,
                field="join",
            )
        joined.append(edges[-1].child)
    return edges


def join_value(data: Any, steps: tuple[str | int, ...]) -> Any:
    """A record's join field as a dict key; None (a missing or NULL field) never matches."""
    return hashable(get_path(data, steps))


def value_getter(steps: tuple[str | int, ...]) -> Callable[[Any], Any]:
    """:func:`join_value` for one path, made once: a top-level field holding a string or a
    number (the usual join key) is read without walking a path, on the upkeep's hot path."""
    if len(steps) != 1 or type(steps[0]) is not str:
        return lambda data: hashable(get_path(data, steps))
    name = steps[0]

    def top_level(data: Any) -> Any:
        value = data.get(name) if type(data) is dict else None
        kind = type(value)
        if kind is str:
            return value or None  # as hashable(): the empty string is NULL
        if kind is int or kind is float:
            return value
        return hashable(value)

    return top_level


def joined_topics(underlying: str, joins: Sequence[str]) -> tuple[str, ...]:
    """Every topic of a view: ``underlying``, then each topic its joins bring in."""
    return (underlying, *(e.child for e in join_plan(underlying, joins)))
