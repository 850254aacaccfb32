"""The scalar functions of FILTERS.md, with their arity and calling convention.

A function receives evaluated arguments. Unless it is declared ``arrays=True`` its arguments
are reduced to their first element first ("functions use the first element"). Any runtime
problem -- a bad number, an invalid format -- yields NULL or NaN, never an exception.
"""

from __future__ import annotations

import calendar
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

import regex

from sowdb.expr.matching import compile_pattern as compile_regex
from sowdb.expr.numeric import NAN, fit, format_number, to_number
from sowdb.expr.values import Value, is_null, order_key, to_text


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    impl: Callable[..., Value]
    min_args: int
    max_args: int | None  # None: variadic
    arrays: bool = False  # receives array arguments whole
    nondeterministic: bool = False
    meta: str | None = None  # reads this attribute of the message metadata instead of args


def _text_fn(fn: Callable[..., Value]) -> Callable[..., Value]:
    """Wrap a function of text arguments: NULL in, NULL out."""

    def wrapped(*args: Value) -> Value:
        texts = [to_text(a) for a in args]
        if any(t is None for t in texts):
            return None
        return fn(*texts)

    return wrapped


def _num_fn(fn: Callable[..., Value]) -> Callable[..., Value]:
    """Wrap a function of numeric arguments: NULL in, NULL out; NaN in, NaN out; domain
    errors give NaN; an integer result beyond 64 bits is a float."""

    def wrapped(*args: Value) -> Value:
        nums = [to_number(a) for a in args]
        if any(n is None for n in nums):
            return None
        if any(n != n for n in nums):
            return NAN
        try:
            r = fn(*nums)
        except (ValueError, OverflowError, ZeroDivisionError):
            return NAN
        return fit(r) if type(r) is int else r

    return wrapped


def _int_arg(v: Value) -> int | None:
    n = to_number(v)
    if n is None or n != n or n in (math.inf, -math.inf):
        return None
    return int(n)


def _concat(*args: Value) -> Value:
    parts = [t for t in (to_text(a) for a in args) if t is not None]
    return "".join(parts) or None


def _instr(s: str, sub: str) -> int:
    return s.find(sub) + 1


def _instr_i(s: str, sub: str) -> int:
    return s.casefold().find(sub.casefold()) + 1


def _strequal_i(a: str, b: str) -> int:
    return 1 if a.casefold() == b.casefold() else 0


def _replace(s: Value, old: Value, new: Value) -> Value:
    st, ot = to_text(s), to_text(old)
    if st is None or ot is None:
        return None
    return st.replace(ot, to_text(new) or "") or None


def _regexp_replace(s: Value, pattern: Value, replacement: Value) -> Value:
    st, pt = to_text(s), to_text(pattern)
    if st is None or pt is None:
        return None
    try:
        return compile_regex(pt).sub(to_text(replacement) or "", st) or None
    except (ValueError, regex.error, IndexError):
        return None


def _substr(s: Value, position: Value, length: Value = 1 << 62) -> Value:
    st = to_text(s)
    p, n = _int_arg(position), _int_arg(length)
    if st is None or p is None or n is None:
        return None
    if n <= 0:
        return None
    start = p - 1 if p > 0 else (len(st) + p if p < 0 else 0)
    start = max(start, 0)
    return st[start : start + n] or None


def _left(s: Value, n: Value) -> Value:
    st, k = to_text(s), _int_arg(n)
    if st is None or k is None:
        return None
    return st[: max(k, 0)] or None


def _right(s: Value, n: Value) -> Value:
    st, k = to_text(s), _int_arg(n)
    if st is None or k is None:
        return None
    return (st[-k:] if k > 0 else "") or None


def _trimmer(method: str) -> Callable[..., Value]:
    def trim(s: Value, chars: Value = None) -> Value:
        st = to_text(s)
        if st is None:
            return None
        return getattr(st, method)(to_text(chars)) or None

    return trim


def _round(x: int | float, places: int | float = 0) -> int | float:
    p = int(places)
    if type(x) is int and p >= 0:
        return x
    if math.isinf(x):
        return x
    try:
        q = Decimal(repr(x)).quantize(Decimal(1).scaleb(-p), rounding=ROUND_HALF_UP)
    except InvalidOperation:
        return x
    result: int | float = int(q) if p <= 0 and type(x) is int else float(q)
    return result


def _sign(x: int | float) -> int:
    return (x > 0) - (x < 0)


def _power(x: int | float, y: int | float) -> int | float:
    if type(x) is int and type(y) is int and 0 <= y <= 64 and abs(x) < 2**32:
        r: int = x**y
        if -(2**63) <= r < 2**63:
            return r
    return math.pow(x, y)


def _log(fn: Callable[[float], float]) -> Callable[[int | float], float]:
    def log(x: int | float) -> float:
        return fn(x) if x > 0 else NAN

    return log


def _ceil(x: int | float) -> int | float:
    return x if math.isinf(x) else math.ceil(x)


def _floor(x: int | float) -> int | float:
    return x if math.isinf(x) else math.floor(x)


def _extreme(pick: Callable[..., Value]) -> Callable[..., Value]:
    """GREATEST / LEAST: over the arguments that are numbers (a numeric string converts, a
    boolean is 1 or 0); NULLs, other strings and NaN are left out; NaN when none is left."""

    def extreme(*args: Value) -> Value:
        nums = [x for x in map(to_number, args) if x is not None and x == x]
        return pick(nums) if nums else NAN

    return extreme


def _width_bucket(x: float, low: float, high: float, count: float) -> int | None:
    n = int(count)
    if n <= 0 or low == high:
        return None
    if low < high:
        if x < low:
            return 0
        if x >= high:
            return n + 1
        return int((x - low) * n / (high - low)) + 1
    if x > low:
        return 0
    if x <= high:
        return n + 1
    return int((low - x) * n / (low - high)) + 1


def _elements(v: Value) -> list[Value]:
    if type(v) is list:
        return [e for e in v if not is_null(e)]
    return [] if is_null(v) else [v]


def _array_count(v: Value) -> int:
    if type(v) is list:
        return len(v)
    return 0 if is_null(v) else 1


def _array_sum(v: Value) -> Value:
    total: int | float | None = None
    for e in _elements(v):
        n = to_number(e)
        if n is not None:
            try:
                total = n if total is None else total + n
            except OverflowError:  # an int beyond the float range (not from JSON) plus a float
                return NAN
    return fit(total) if type(total) is int else total


def _array_extreme(pick: Callable[..., Value]) -> Callable[[Value], Value]:
    def extreme(v: Value) -> Value:
        items = [e for e in _elements(v) if type(e) is not list and type(e) is not dict]
        return pick(items, key=order_key) if items else None

    return extreme


def _array_to_string(v: Value, delimiter: Value, null_text: Value = None) -> Value:
    """The elements' texts joined by the delimiter; a NULL element is ``null_text``, or left
    out when that is absent or NULL. A NULL array is NULL."""
    if is_null(v):
        return None
    fill = to_text(null_text)
    texts = []
    for e in v if type(v) is list else (v,):
        t = to_text(e)
        if t is None:
            t = fill
        if t is not None:
            texts.append(t)
    return (to_text(delimiter) or "").join(texts) or None


def _coalesce(*args: Value) -> Value:
    for a in args:
        if not is_null(a):
            return a
    return None


def _char_value(n: Value) -> Value:
    k = _int_arg(n)
    if k is None or not 0 < k <= 0x10FFFF or 0xD800 <= k <= 0xDFFF:  # a surrogate is no text
        return None
    return chr(k)


def _strftime(fmt: Value, ts: Value) -> Value:
    f, t = to_text(fmt), to_number(ts)
    if f is None or t is None or t != t:
        return None
    try:
        return time.strftime(f, time.gmtime(t)) or None
    except (ValueError, OverflowError, OSError):
        return None


def _strptime(s: Value, fmt: Value) -> Value:
    st, f = to_text(s), to_text(fmt)
    if st is None or f is None:
        return None
    try:
        return calendar.timegm(time.strptime(st, f))
    except (ValueError, OverflowError, re.error):  # re.error: a directive repeated ('%m%m')
        return None


FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in [
        # string
        Function("CONCAT", _concat, 1, None),
        Function("UPPER", _text_fn(lambda s: s.upper()), 1, 1),
        Function("LOWER", _text_fn(lambda s: s.lower()), 1, 1),
        Function("LENGTH", _text_fn(len), 1, 1),
        Function("INSTR", _text_fn(_instr), 2, 2),
        Function("INSTR_I", _text_fn(_instr_i), 2, 2),
        Function("STREQUAL_I", _text_fn(_strequal_i), 2, 2),
        Function("REPLACE", _replace, 3, 3),
        Function("REGEXP_REPLACE", _regexp_replace, 3, 3),
        Function("SUBSTR", _substr, 2, 3),
        Function("LEFT", _left, 2, 2),
        Function("RIGHT", _right, 2, 2),
        Function("TRIM", _trimmer("strip"), 1, 2),
        Function("LTRIM", _trimmer("lstrip"), 1, 2),
        Function("RTRIM", _trimmer("rstrip"), 1, 2),
        Function("REVERSE", _text_fn(lambda s: s[::-1]), 1, 1),
        # numeric
        Function("ABS", _num_fn(abs), 1, 1),
        Function("CEILING", _num_fn(_ceil), 1, 1),
        Function("FLOOR", _num_fn(_floor), 1, 1),
        Function("ROUND", _num_fn(_round), 1, 2),
        Function("SIGN", _num_fn(_sign), 1, 1),
        Function("SQRT", _num_fn(lambda x: math.sqrt(x) if x >= 0 else NAN), 1, 1),
        Function("POWER", _num_fn(_power), 2, 2),
        Function("EXP", _num_fn(math.exp), 1, 1),
        Function("LN", _num_fn(_log(math.log)), 1, 1),
        Function("LOG10", _num_fn(_log(math.log10)), 1, 1),
        Function("LOG2", _num_fn(_log(math.log2)), 1, 1),
        Function("GREATEST", _extreme(max), 1, None),
        Function("LEAST", _extreme(min), 1, None),
        Function("WIDTH_BUCKET", _num_fn(_width_bucket), 4, 4),
        # arrays
        Function("ARRAY_COUNT", _array_count, 1, 1, arrays=True),
        Function("ARRAY_SUM", _array_sum, 1, 1, arrays=True),
        Function("ARRAY_MIN", _array_extreme(min), 1, 1, arrays=True),
        Function("ARRAY_MAX", _array_extreme(max), 1, 1, arrays=True),
        Function("ARRAY_TO_STRING", _array_to_string, 2, 3, arrays=True),
        # other
        Function("COALESCE", _coalesce, 1, None, arrays=True),
        Function("NAN_VALUE", lambda: NAN, 0, 0),
        Function("TRUE_VALUE", lambda: True, 0, 0),
        Function("FALSE_VALUE", lambda: False, 0, 0),
        Function("CHAR_VALUE", _char_value, 1, 1),
        Function("UNIX_TIMESTAMP", time.time, 0, 0, nondeterministic=True),
        Function("STRFTIME", _strftime, 2, 2),
        Function("STRPTIME", _strptime, 2, 2),
        # message metadata
        Function("SOW_KEY", lambda: None, 0, 0, meta="sow_key"),
        Function("TOPIC_NAME", lambda: None, 0, 0, meta="topic"),
        Function("BOOKMARK", lambda: None, 0, 0, meta="bookmark"),
        Function("LAST_UPDATED", lambda: None, 0, 0, meta="timestamp"),
    ]
}

AGGREGATES = frozenset(["COUNT", "COUNT_DISTINCT", "SUM", "AVG", "MIN", "MAX", "STDDEV_POP", "STDDEV_SAMP"])


def scalar(v: Value) -> Value:
    """Reduce an array argument to its first element (NULL when empty)."""
    if type(v) is list:
        return v[0] if v else None
    return v


def call(fn: Function, args: list[Value]) -> Value:
    """Apply a function the way the language does; used by the reference evaluator."""
    if not fn.arrays:
        args = [scalar(a) for a in args]
    return fn.impl(*args)


__all__ = ["AGGREGATES", "FUNCTIONS", "Function", "call", "compile_regex", "format_number"]
