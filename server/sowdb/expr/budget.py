"""What one evaluation of an expression may build and read through (issue 37, findings 1 and
2), so that no client's filter can take gigabytes or hold the event loop for seconds.

Each function that builds text charges its result's length to :data:`MAX_BUILT_CHARS` before
building it; each that reads text through (a search, a case fold, a slice) charges what it reads
to :data:`MAX_SCANNED_CHARS`. Past either, the function is NULL -- the language's evaluation
error (FILTERS.md, "Errors") -- so the record does not match. The compiler resets both when a
compiled expression that charges them is entered (:func:`new_evaluation`).
"""

from __future__ import annotations

import threading

MAX_BUILT_CHARS = 4 * 1024 * 1024
"""The most characters one evaluation of an expression may build (4 Mi: four times the default
largest document, so a function of any field's text stays inside it)."""


MAX_SCANNED_CHARS = 16 * 1024 * 1024
"""The most characters one evaluation may read through in the functions that scan text
(``INSTR``, ``INSTR_I``, ``STREQUAL_I``, ``REPLACE``, ``TRIM``, ``SUBSTR``, ``LIKE``...): some tens of
milliseconds at most (a field of the largest default document read through 16 times), where
3,000 ``INSTR_I`` of a 900 KB field held the loop for seconds (issue 37, finding 2)."""


class _Built(threading.local):
    """Characters the current evaluation may still build, and scan, per thread (Spark
    snapshots evaluate filters on worker threads)."""

    left: int = MAX_BUILT_CHARS
    scan_left: int = MAX_SCANNED_CHARS
    exceeded: bool = False  # the current evaluation passed a budget
    overruns: int = 0  # evaluations that passed a budget, ever (on this thread)


_BUILT = _Built()


def new_evaluation() -> None:
    """Start an evaluation's budgets afresh (the compiled expression calls it on entry)."""
    _BUILT.left = MAX_BUILT_CHARS
    _BUILT.scan_left = MAX_SCANNED_CHARS
    _BUILT.exceeded = False


def _overrun() -> bool:
    if not _BUILT.exceeded:
        _BUILT.exceeded = True
        _BUILT.overruns += 1
    return False


def overruns() -> int:
    """How many evaluations on this thread have passed a budget: who evaluates a filter again
    and again (a subscription) compares it before and after, to end a filter that keeps
    passing it (:data:`MAX_OVERRUNS`)."""
    return _BUILT.overruns


OVERRUN = (
    "the subscription's filter passed its evaluation budget (text built or read through) on {records} records: "
    "it was ended; subscribe again with a simpler filter"
)
"""The message a subscription ends with past :data:`MAX_OVERRUNS`."""

MAX_OVERRUNS = 100
"""Evaluations past a budget after which a subscription's filter is ended: each one costs the
budget's worth of work, on every change, for nothing."""


def scan(size: int) -> bool:
    """Take ``size`` characters from the current evaluation's scanning budget; False (nothing
    taken) when that would pass it: the caller then yields NULL instead of scanning."""
    left = _BUILT.scan_left - size
    if left < 0:
        return _overrun()
    _BUILT.scan_left = left
    return True


def charge(size: int) -> bool:
    """Take ``size`` characters from the current evaluation's budget; False (nothing taken)
    when that would pass it: the caller then yields NULL instead of building."""
    left = _BUILT.left - size
    if left < 0:
        return _overrun()
    _BUILT.left = left
    return True


def built_left() -> int:
    """Characters the current evaluation may still build."""
    return _BUILT.left
