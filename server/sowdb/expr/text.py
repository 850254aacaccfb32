"""The string functions of the filter language (docs/filters.md), each charging what it builds
or reads through to the evaluation's budgets (:mod:`sowdb.expr.budget`) before doing it, and
NULL past them (issue 37, findings 1 and 2). :mod:`sowdb.expr.functions` lists them with the
rest of the functions."""

from __future__ import annotations

import math
from collections.abc import Callable

import regex

from sowdb.expr.budget import built_left, charge, scan
from sowdb.expr.matching import compile_pattern as compile_regex
from sowdb.expr.numeric import to_number
from sowdb.expr.values import Value, to_text


def text_fn(fn: Callable[..., Value], *, scans: bool = False) -> Callable[..., Value]:
    """Wrap a function of text arguments: NULL in, NULL out; one that ``scans`` its texts is
    charged their length first (:func:`scan`)."""

    def wrapped(*args: Value) -> Value:
        texts = [to_text(a) for a in args]
        if any(t is None for t in texts):
            return None
        if scans and not scan(sum(map(len, texts))):  # type: ignore[arg-type]
            return None
        return fn(*texts)

    return wrapped


def int_arg(v: Value) -> int | None:
    n = to_number(v)
    if n is None or n != n or n in (math.inf, -math.inf):
        return None
    return int(n)


def concat(*args: Value) -> Value:
    parts = [t for t in (to_text(a) for a in args) if t is not None]
    if not charge(sum(map(len, parts))):
        return None
    return "".join(parts) or None


def case(method: str) -> Callable[[Value], Value]:
    """UPPER / LOWER: the length is charged before; a result that grew (``'ß'.upper()`` is
    ``'SS'``, at most three times longer) is charged its growth after."""

    def change(s: Value) -> Value:
        st = to_text(s)
        if st is None or not charge(len(st)):
            return None
        r: str = getattr(st, method)()
        if len(r) > len(st) and not charge(len(r) - len(st)):
            return None
        return r or None

    return change


def instr(s: str, sub: str) -> int:
    return s.find(sub) + 1


def instr_i(s: str, sub: str) -> int:
    return s.casefold().find(sub.casefold()) + 1


def strequal_i(a: str, b: str) -> int:
    return 1 if a.casefold() == b.casefold() else 0


def replace(s: Value, old: Value, new: Value) -> Value:
    st, ot = to_text(s), to_text(old)
    if st is None or ot is None:
        return None
    nt = to_text(new) or ""
    if not scan(len(st) + len(ot)):
        return None
    # The result's length from the count of occurrences, before building it ('' occurs
    # between every two characters and at both ends, as Python's replace inserts it there).
    if not charge(len(st) + st.count(ot) * (len(nt) - len(ot))):
        return None
    return st.replace(ot, nt) or None


def regexp_replace(s: Value, pattern: Value, replacement: Value) -> Value:
    st, pt = to_text(s), to_text(pattern)
    if st is None or pt is None:
        return None
    rt = to_text(replacement) or ""
    if not scan(len(st)):
        return None
    try:
        rx = compile_regex(pt)
        if (len(st) + 1) * (len(rt) + 1) + len(st) <= built_left():
            result = rx.sub(rt, st)  # even a match at every position fits: no tally needed
        else:  # the replacements are tallied as they are made, and stopped past the budget
            result = rx.sub(rt, st, limit=built_left())
    except (ValueError, regex.error, IndexError):
        return None
    if result is None or not charge(len(result)):
        return None
    return result or None


def substr(s: Value, position: Value, length: Value = 1 << 62) -> Value:
    st = to_text(s)
    p, n = int_arg(position), int_arg(length)
    if st is None or p is None or n is None:
        return None
    if n <= 0:
        return None
    start = p - 1 if p > 0 else (len(st) + p if p < 0 else 0)
    start = max(start, 0)
    if not scan(min(n, max(len(st) - start, 0))):
        return None
    return st[start : start + n] or None


def left(s: Value, n: Value) -> Value:
    st, k = to_text(s), int_arg(n)
    if st is None or k is None or not scan(min(max(k, 0), len(st))):
        return None
    return st[: max(k, 0)] or None


def right(s: Value, n: Value) -> Value:
    st, k = to_text(s), int_arg(n)
    if st is None or k is None or not scan(min(max(k, 0), len(st))):
        return None
    return (st[-k:] if k > 0 else "") or None


def trimmer(method: str) -> Callable[..., Value]:
    def trim(s: Value, chars: Value = None) -> Value:
        st, ct = to_text(s), to_text(chars)
        if st is None:
            return None
        if ct is not None and len(ct) > 64:
            ct = "".join(dict.fromkeys(ct))  # each character once: each step looks through them all
        # each character stripped is looked for among ``chars``
        if not scan(len(st) * (1 if ct is None else max(len(ct), 1)) + len(to_text(chars) or "")):
            return None
        return getattr(st, method)(ct) or None

    return trim
