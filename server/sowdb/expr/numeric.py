"""Numbers of the filter language (FILTERS.md, "Literals", "Types", "Arithmetic").

Integers are 64-bit: signed, or unsigned up to 2**64 - 1 -- exactly the range in which orjson
decodes a JSON integer to an ``int``. A number beyond that range is a float, as orjson reads
the same JSON number: an integer literal or numeric string too long, and an integer result of
arithmetic or of a numeric function that overflows. So every integer the language produces
fits a JSON document again, and no conversion ever meets Python's 4,300-digit limit on
int <-> str conversion: nothing here raises, whatever the data.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import regex

NAN = float("nan")

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1
_UINT64_DIGITS = len(str(UINT64_MAX))

# ASCII digits only: Python's int() and float() also take other scripts' digits ('١٢').
_NUMBER = regex.compile(r"[+-]?(?:[0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")

_CACHED_TEXT = 64
"""Numeric strings up to this length are parsed through a cache; longer ones, rare, are not,
so that the cache never holds on to large strings of records."""


def to_float(n: int | float) -> float:
    """``float(n)``, or an infinity where the integer is beyond the float range."""
    try:
        return float(n)
    except OverflowError:
        return math.inf if n > 0 else -math.inf


def fit(n: int) -> int | float:
    """An integer result: itself within the 64-bit range, else the nearest float."""
    if INT64_MIN <= n <= UINT64_MAX:
        return n
    return to_float(n)


def integer(text: str) -> int | float:
    """The value of a (signed) run of ASCII digits, by the rule above.

    Only a run of at most 20 significant digits is given to ``int()``; a longer one is beyond
    64 bits anyway and ``float()`` reads it (an infinity when beyond the float range).
    """
    body = text.lstrip("+-").lstrip("0")
    if len(body) > _UINT64_DIGITS:
        return float(text)
    return fit(-int(body) if text[:1] == "-" else int(body or "0"))


def _parse(text: str) -> int | float | None:
    m = _NUMBER.fullmatch(text)
    if m is None:
        return None
    if m.group(1) is None and m.group(2) is None:
        return integer(text)
    return float(text)


_parse_cached = lru_cache(maxsize=8192)(_parse)


def parse_number(text: str) -> int | float | None:
    """Parse a whole string as a number, or return None when it is not one.

    Strict on purpose: no surrounding blanks, no ``_`` separators, no ``inf``/``nan`` words, so
    that ``'2.000' <> '2.0'`` stays a string comparison and ``'Crank It Up'`` never converts.
    """
    return _parse_cached(text) if len(text) <= _CACHED_TEXT else _parse(text)


def format_number(v: int | float) -> str:
    """Numbers in string context: integers (also integral floats) print without ``.0``."""
    if type(v) is int:
        if INT64_MIN <= v <= UINT64_MAX:
            return str(v)
        v = to_float(v)  # only from data that did not come through JSON decoding
    if v != v:
        return "NaN"
    if v in (math.inf, -math.inf):
        return "Infinity" if v > 0 else "-Infinity"
    if float(v).is_integer() and abs(v) < 1e16:
        return str(int(v))
    return repr(v)


def to_number(v: Any) -> int | float | None:
    """A value in arithmetic: NULL stays None, an unparseable string is NaN, arrays use their
    first element, booleans are 1 and 0."""
    t = type(v)
    if t is int or t is float:
        return v  # type: ignore[no-any-return]
    if t is bool:
        return int(v)
    if t is str:
        if not v:
            return None
        n = parse_number(v)
        return NAN if n is None else n
    if t is list:
        while type(v) is list:  # a loop, not recursion: data may nest a thousand levels deep
            if not v:
                return None
            v = v[0]
        return to_number(v)
    return None


# --- arithmetic -------------------------------------------------------------------------------


def _numeric_op(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def op(a: Any, b: Any) -> Any:
        x, y = to_number(a), to_number(b)
        if x is None or y is None:
            return None
        try:
            r = fn(x, y)
        except (OverflowError, ValueError):
            return NAN
        if type(r) is int and not INT64_MIN <= r <= UINT64_MAX:
            return to_float(r)
        return r

    op.__name__ = fn.__name__
    return op


def _division(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """What / and % share: NaN in gives NaN, and a zero divisor gives NULL, not an error."""

    def op(x: int | float, y: int | float) -> int | float | None:
        if x != x or y != y:
            return NAN
        if y == 0:
            return None
        return fn(x, y)  # type: ignore[no-any-return]

    op.__name__ = fn.__name__
    return op


@_division
def _div(x: int | float, y: int | float) -> int | float:
    """Integers divide truncating toward zero, as in C and SQL (Python floors)."""
    if type(x) is int and type(y) is int:
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q
    return x / y


@_division
def _mod(x: int | float, y: int | float) -> int | float:
    """The remainder takes the dividend's sign, as in C and SQL (Python's takes the divisor's)."""
    if type(x) is int and type(y) is int:
        r = abs(x) % abs(y)
        return -r if x < 0 else r
    return math.fmod(x, y)


add = _numeric_op(operator.add)
sub = _numeric_op(operator.sub)
mul = _numeric_op(operator.mul)
div = _numeric_op(_div)
mod = _numeric_op(_mod)


def neg(v: Any) -> Any:
    x = to_number(v)
    if x is None:
        return None
    return fit(-x) if type(x) is int else -x


def pos(v: Any) -> Any:
    return to_number(v)


ARITHMETIC_FUNCS: dict[str, Callable[[Any, Any], Any]] = {
    "+": add,
    "-": sub,
    "*": mul,
    "/": div,
    "%": mod,
}
