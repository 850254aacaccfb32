"""The scalar functions of FILTERS.md, with their arity and calling convention.

A function receives evaluated arguments. Unless it is declared ``arrays=True`` its arguments
are reduced to their first element first ("functions use the first element"). Any runtime
problem -- a bad number, an invalid format -- yields NULL or NaN, never an exception.

What one evaluation may build is bounded (issue 37, finding 1): each function that builds a
string (``CONCAT``, ``REPLACE``, ``UPPER``...) charges the length of its result to a budget of
:data:`MAX_BUILT_CHARS` characters *before* building it, and yields NULL -- the language's
evaluation error (FILTERS.md, "Errors") -- when the budget would be passed. Five nested
``REPLACE`` calls on a 20,000-character literal, each ten times longer, once took the server's
memory from 400 MB to 2.3 GB and froze every other call; now the third level is NULL. The
compiler resets the budget when a compiled expression that builds is entered
(:func:`new_evaluation`), so the bound is per evaluation, never per query.
"""

from __future__ import annotations

import calendar
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from sowdb.expr.budget import MAX_BUILT_CHARS, MAX_SCANNED_CHARS, charge, new_evaluation, scan
from sowdb.expr.matching import compile_pattern as compile_regex
from sowdb.expr.numeric import NAN, fit, format_number, to_number
from sowdb.expr.text import (
    case,
    concat,
    instr,
    instr_i,
    int_arg,
    left,
    regexp_replace,
    replace,
    right,
    strequal_i,
    substr,
    text_fn,
    trimmer,
)
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
    builds: bool = False  # builds or scans text: charged to the evaluation's budgets


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
    d = to_text(delimiter) or ""
    if not charge(sum(map(len, texts)) + len(d) * max(len(texts) - 1, 0)):
        return None
    return d.join(texts) or None


def _coalesce(*args: Value) -> Value:
    for a in args:
        if not is_null(a):
            return a
    return None


def _char_value(n: Value) -> Value:
    k = int_arg(n)
    if k is None or not 0 < k <= 0x10FFFF or 0xD800 <= k <= 0xDFFF:  # a surrogate is no text
        return None
    return chr(k)


def _strftime(fmt: Value, ts: Value) -> Value:
    f, t = to_text(fmt), to_number(ts)
    if f is None or t is None or t != t:
        return None
    if not charge(16 * len(f)):  # a directive of two characters is at most ~30 (``%c``: 24)
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
        Function("CONCAT", concat, 1, None, builds=True),
        Function("UPPER", case("upper"), 1, 1, builds=True),
        Function("LOWER", case("lower"), 1, 1, builds=True),
        Function("LENGTH", text_fn(len), 1, 1),
        Function("INSTR", text_fn(instr, scans=True), 2, 2, builds=True),
        Function("INSTR_I", text_fn(instr_i, scans=True), 2, 2, builds=True),
        Function("STREQUAL_I", text_fn(strequal_i, scans=True), 2, 2, builds=True),
        Function("REPLACE", replace, 3, 3, builds=True),
        Function("REGEXP_REPLACE", regexp_replace, 3, 3, builds=True),
        Function("SUBSTR", substr, 2, 3, builds=True),
        Function("LEFT", left, 2, 2, builds=True),
        Function("RIGHT", right, 2, 2, builds=True),
        Function("TRIM", trimmer("strip"), 1, 2, builds=True),
        Function("LTRIM", trimmer("lstrip"), 1, 2, builds=True),
        Function("RTRIM", trimmer("rstrip"), 1, 2, builds=True),
        Function("REVERSE", text_fn(lambda s: s[::-1], scans=True), 1, 1, builds=True),
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
        Function("ARRAY_TO_STRING", _array_to_string, 2, 3, arrays=True, builds=True),
        # other
        Function("COALESCE", _coalesce, 1, None, arrays=True),
        Function("NAN_VALUE", lambda: NAN, 0, 0),
        Function("TRUE_VALUE", lambda: True, 0, 0),
        Function("FALSE_VALUE", lambda: False, 0, 0),
        Function("CHAR_VALUE", _char_value, 1, 1),
        Function("UNIX_TIMESTAMP", time.time, 0, 0, nondeterministic=True),
        Function("STRFTIME", _strftime, 2, 2, builds=True),
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


__all__ = [
    "AGGREGATES",
    "FUNCTIONS",
    "MAX_BUILT_CHARS",
    "MAX_SCANNED_CHARS",
    "Function",
    "call",
    "charge",
    "compile_regex",
    "format_number",
    "new_evaluation",
    "scan",
]
