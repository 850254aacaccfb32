"""``order_by`` (``/field [ASC|DESC], ...``): parsing and sort keys.

Sorting uses :func:`sowdb.expr.values.order_key`: NULL first, then NaN, numbers, strings
(bytewise). A descending part is wrapped so that one key tuple serves ``sorted`` and ``heapq``
alike (``top_n`` over a large result keeps only a heap of n keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sowdb.errors import ExpressionError
from sowdb.expr.compiler import get_path
from sowdb.expr.lexer import EOF, PATH, tokenize
from sowdb.expr.values import order_key


class _Descending:
    """Inverts the order of the key it wraps."""

    __slots__ = ("key",)

    def __init__(self, key: tuple[int, Any]) -> None:
        self.key = key

    def __lt__(self, other: _Descending) -> bool:
        return other.key < self.key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)


@dataclass(frozen=True, slots=True)
class OrderPart:
    steps: tuple[str | int, ...]
    path: str
    descending: bool


@dataclass(frozen=True, slots=True)
class OrderBy:
    text: str
    parts: tuple[OrderPart, ...]

    def key(self, data: dict[str, Any]) -> tuple[Any, ...]:
        """Sort key of one record's data."""
        return tuple(
            _Descending(order_key(get_path(data, p.steps))) if p.descending else order_key(get_path(data, p.steps))
            for p in self.parts
        )


def parse_order_by(text: str) -> OrderBy:
    """Parse ``/a DESC, /b`` (ASC is the default).

    Raises:
        ExpressionError: anything but a comma-separated list of paths with optional direction.
    """
    tokens = iter(tokenize(text))
    parts: list[OrderPart] = []
    tok = next(tokens)
    if tok.kind is EOF:
        raise ExpressionError("empty order_by", column=1, token="")
    while True:
        if tok.kind is not PATH:
            raise ExpressionError("order_by expects a field path such as /price", column=tok.column, token=tok.text)
        steps: tuple[str | int, ...] = tok.value  # type: ignore[assignment]
        path = tok.text
        tok = next(tokens)
        descending = False
        if tok.key in ("ASC", "DESC"):
            descending = tok.key == "DESC"
            tok = next(tokens)
        parts.append(OrderPart(steps, path, descending))
        if tok.kind is EOF:
            return OrderBy(text, tuple(parts))
        if tok.key != ",":
            raise ExpressionError("expected ',' or ASC/DESC in order_by", column=tok.column, token=tok.text)
        tok = next(tokens)
