"""Runtime value semantics of the filter language (FILTERS.md, "Types and comparison").

Values in flight are the plain Python objects that JSON decoding produces -- ``None``, ``bool``,
``int``, ``float``, ``str``, ``list``, ``dict`` -- so that a compiled filter reads a decoded
message without any conversion step. The functions here define what those values mean to the
language; both the compiler's fast paths and the reference evaluator must agree with them.

Three-valued logic: predicates return ``True``, ``False`` or ``None`` (NULL). A value "matches"
when it is TRUE or a non-zero number (:func:`truthy`).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import Any

from sowdb.expr.budget import scan
from sowdb.expr.numeric import format_number
from sowdb.expr.numeric import parse_number as parse_number  # re-exported: the hash index uses it

Value = Any
"""Any JSON-decoded value (or a NaN produced by arithmetic)."""


def first(v: list[Value]) -> Value:
    """An array's first scalar, through nested arrays (``[[[1]]]`` -> 1); ``[]`` if it has
    none. A loop, not recursion: data may nest a thousand levels deep."""
    while v and type(v) is list:
        v = v[0]
    return v


def is_null(v: Value) -> bool:
    """NULL is a missing value, JSON null, the empty string, the empty array or an object."""
    t = type(v)
    if t is str or t is list:
        return not v
    return v is None or t is dict


def truthy(v: Value) -> bool:
    """TRUE, or a non-zero (non-NaN) number: the values that make a filter match."""
    if v is True:
        return True
    t = type(v)
    return (t is int or t is float) and v != 0 and v == v


def falsy(v: Value) -> bool:
    """FALSE or a zero number: the values ``OR`` looks past (AMPS's left-to-right tables)."""
    if v is False:
        return True
    t = type(v)
    return (t is int or t is float) and v == 0


def logical_not(v: Value) -> bool | None:
    if truthy(v):
        return False
    if falsy(v):
        return True
    return None


# --- comparison -------------------------------------------------------------------------------

_STR_ABOVE_NUMBER = (1, 0)
_NUMBER_BELOW_STR = (0, 1)


def _comparable(a: Value, b: Value) -> tuple[Any, Any] | None:
    """Bring two scalars to a pair Python can compare, or None when either is NULL.

    A string meets a number by conversion; a string that does not convert is greater than
    every number, which the two sentinel pairs encode.
    """
    ta, tb = type(a), type(b)
    if ta is bool:
        a, ta = int(a), int
    if tb is bool:
        b, tb = int(b), int
    a_num = ta is int or ta is float
    b_num = tb is int or tb is float
    if a_num and b_num:
        return a, b
    if ta is str and tb is str:
        if not a or not b:
            return None
        return a, b
    if ta is str and b_num:
        if not a:
            return None
        n = parse_number(a)
        return _STR_ABOVE_NUMBER if n is None else (n, b)
    if a_num and tb is str:
        if not b:
            return None
        n = parse_number(b)
        return _NUMBER_BELOW_STR if n is None else (a, n)
    return None


def _scalar_compare(op: Callable[[Any, Any], bool], a: Value, b: Value) -> bool | None:
    pair = _comparable(a, b)
    if pair is None:
        return None
    return bool(op(pair[0], pair[1]))


def compare(op: Callable[[Any, Any], bool], a: Value, b: Value) -> bool | None:
    """Compare two values; with arrays, TRUE if any element (pair) satisfies the operator."""
    if type(a) is list or type(b) is list:
        result: bool | None = None
        for x in a if type(a) is list else (a,):
            for y in b if type(b) is list else (b,):
                r = _scalar_compare(op, x, y)
                if r:
                    return True
                if r is False:
                    result = False
        return result
    return _scalar_compare(op, a, b)


COMPARISON_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


# The comparison operators, each ``compare`` bound to one operator (partial objects are called
# in C, with no Python frame of their own).
cmp_eq = functools.partial(compare, operator.eq)
cmp_ne = functools.partial(compare, operator.ne)
cmp_lt = functools.partial(compare, operator.lt)
cmp_le = functools.partial(compare, operator.le)
cmp_gt = functools.partial(compare, operator.gt)
cmp_ge = functools.partial(compare, operator.ge)


COMPARE_FUNCS: dict[str, Callable[[Value, Value], bool | None]] = {
    "=": cmp_eq,
    "!=": cmp_ne,
    "<": cmp_lt,
    "<=": cmp_le,
    ">": cmp_gt,
    ">=": cmp_ge,
}


def between(x: Value, low: Value, high: Value) -> bool | None:
    """Inclusive range test; an array matches if any element lies in the range."""
    if type(x) is list:
        result: bool | None = None
        for e in x:
            r = between(e, low, high) if type(e) is not list else None
            if r:
                return True
            if r is False:
                result = False
        return result
    lo = _scalar_compare(operator.ge, x, low)
    if lo is not True:
        return lo
    return _scalar_compare(operator.le, x, high)


def expand(items: Iterable[Value]) -> list[Value]:
    """Flatten array-valued IN-list items into their elements."""
    out: list[Value] = []
    for item in items:
        if type(item) is list:
            out.extend(item)
        else:
            out.append(item)
    return out


def in_list(x: Value, items: Iterable[Value]) -> bool | None:
    """``x IN (items)``: NULL on the left is NULL; NULL items never match."""
    if is_null(x):
        return None
    candidates = expand(items)
    for e in x if type(x) is list else (x,):
        for item in candidates:
            if _scalar_compare(operator.eq, e, item):
                return True
    return False


def not3(v: bool | None) -> bool | None:
    """NOT over a three-valued predicate result."""
    return None if v is None else not v


# --- text -------------------------------------------------------------------------------------


def to_text(v: Value) -> str | None:
    """A scalar in string context, or None for NULL. Booleans read as ``true``/``false``."""
    t = type(v)
    if t is str:
        return v or None
    if t is bool:
        return "true" if v else "false"
    if t is int or t is float:
        return format_number(v)
    if t is list:
        v = first(v)
        return None if type(v) is list else to_text(v)
    return None


def _text_test(x: Value, test: Callable[[str], bool | None]) -> bool | None:
    if type(x) is list:
        result: bool | None = None
        for e in x:
            r = _text_test(e, test) if type(e) is not list else None
            if r:
                return True
            if r is False:
                result = False
        return result
    s = to_text(x)
    if s is None:
        return None
    return test(s)


def like(x: Value, rx: Any) -> bool | None:
    """Unanchored regex search (a :class:`sowdb.expr.matching.Pattern`); numbers are formatted
    first; a match its time budget stopped is no match; past the evaluation's budget of scanned
    text (``budget.MAX_SCANNED_CHARS``) the test is NULL (so ``NOT`` of it does not match either)."""
    return _text_test(x, lambda s: rx.search(s) if scan(len(s)) else None)


def begins_with(x: Value, prefixes: tuple[str, ...]) -> bool | None:
    return _text_test(x, lambda s: s.startswith(prefixes))


def ends_with(x: Value, suffixes: tuple[str, ...]) -> bool | None:
    return _text_test(x, lambda s: s.endswith(suffixes))


def is_nan(v: Value) -> bool:
    """IS NAN: a NaN number (from arithmetic or NAN_VALUE()); arrays test every element."""
    if type(v) is not list:
        return type(v) is float and v != v
    pending = [v]  # nested arrays, walked without recursion
    while pending:
        for e in pending.pop():
            if type(e) is list:
                pending.append(e)
            elif type(e) is float and e != e:
                return True
    return False


KEY_DEPTH = 32
"""How deep a group key follows nested arrays; an array nested deeper counts as NULL there."""


def hashable(x: Value, depth: int = 0) -> Value:
    """A group-key part: an array becomes a tuple (an empty one None), NULLs None.

    Arrays deeper than :data:`KEY_DEPTH` are cut off: hashing and comparing nested tuples
    recurses in C, and a record may nest arrays a thousand levels deep.
    """
    t = type(x)
    if t is int or t is float or (t is str and x):
        return x
    if t is list:
        if depth >= KEY_DEPTH:
            return None
        return tuple([hashable(e, depth + 1) for e in x]) or None
    if type(x) is dict or (type(x) is str and not x):
        return None
    return x


# --- ordering ---------------------------------------------------------------------------------


def order_key(v: Value) -> tuple[int, Any]:
    """A total order for sorting: NULL, NaN, numbers, then strings (bytewise).

    The comparison operators are not a total order (a numeric string equals a number but sorts
    among strings), so ``order_by``, MIN/MAX and ARRAY_MIN/MAX use this one instead.
    """
    t = type(v)
    if t is list:
        v = first(v)
        t = type(v)
    if t is bool:
        return (2, int(v))
    if t is int or t is float:
        return (1, 0) if v != v else (2, v)
    if t is str and v:
        return (3, v)
    return (0, 0)
