"""``order_by`` (``/field [ASC|DESC], ...``): parsing and sort keys.

Sorting uses :func:`sowdb.expr.values.order_key`: NULL first, then NaN, numbers, strings
(bytewise). A descending part is inverted in place (see :func:`_descending`) so that one key
tuple serves ``sorted``, ``heapq`` and sorted containers alike.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from sowdb.errors import ExpressionError
from sowdb.expr.compiler import get_path
from sowdb.expr.lexer import EOF, PATH, tokenize
from sowdb.expr.values import order_key


def _descending(key: tuple[int, Any]) -> tuple[int, Any]:
    """The key that sorts in the opposite order, built of plain ints, floats and tuples so that
    comparisons stay in C (a wrapper class with ``__lt__`` made each comparison a Python call,
    which dominated the upkeep of sorted pages). Ranks and numbers are negated; a string
    becomes its negated code points closed by ``1``, which is greater than any of them, so a
    longer string sorts before its prefix."""
    rank, value = key
    if rank == 3:
        return (-3, (*(-ord(c) for c in value), 1))
    return (-rank, -value)


_INVERT = bytes(range(255, -1, -1))
_DOUBLE = struct.Struct(">d")
_U64 = struct.Struct(">Q")
_SIGN = 1 << 63
_ALL = (1 << 64) - 1


def _part_bytes(value: Any) -> bytes:
    """One value's sort key as bytes, ordered like :func:`order_key`: a rank byte, then for a
    number its IEEE double with the sign bit flipped (all bits for negatives), so that byte
    order is numeric order; for a string its UTF-8 (code point order) with NUL escaped as
    ``00 ff`` and closed by ``00 00``, so that a prefix sorts first. Integers beyond 2**53 are
    compared as the nearest double."""
    rank, v = order_key(value)
    if rank == 2:
        try:
            f = float(v) + 0.0  # + 0.0: -0.0 and 0.0 are the same key
        except OverflowError:
            f = float("inf") if v > 0 else float("-inf")
        bits = _U64.unpack(_DOUBLE.pack(f))[0]
        return b"\x02" + _U64.pack(bits ^ _ALL if bits & _SIGN else bits | _SIGN)
    if rank == 3:
        return b"\x03" + str(v).encode().replace(b"\x00", b"\x00\xff") + b"\x00\x00"
    return bytes((rank,))


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
            _descending(order_key(get_path(data, p.steps))) if p.descending else order_key(get_path(data, p.steps))
            for p in self.parts
        )

    def byte_key(self, data: dict[str, Any]) -> bytes:
        """The same order as :meth:`key`, as one ``bytes``: a descending part is its bytes
        inverted (every part is fixed-length or self-terminated, so inversion reverses it).
        Sorted containers compare bytes with one ``memcmp`` instead of walking nested tuples,
        which halves the cost of keeping a large sorted result (P-1)."""
        return b"".join(
            _part_bytes(get_path(data, p.steps)).translate(_INVERT)
            if p.descending
            else _part_bytes(get_path(data, p.steps))
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
