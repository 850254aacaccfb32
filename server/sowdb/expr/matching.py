"""Client regular expressions (LIKE, REGEXP_REPLACE, regex topic names) that cannot stall the server.

A backtracking engine (``regex``, like Python's ``re``) can take exponential time on a pattern
such as ``((.*)*)*x``: one client's filter or topic name would freeze the event loop that
serves everyone (issue 26, items 5 and 6). So a pattern is run, where it can be, on RE2
(``google-re2``), whose time is linear in the text whatever the pattern. RE2 has no
backreferences or lookaround and its ``\\w``/``\\d``/``\\s``/``\\b`` and ``$`` are ASCII and
end-of-text only, so:

- a pattern RE2 cannot compile (``(.)\\1``, ``(?=x)``, ``\\Z``, possessive quantifiers), or one it
  reads differently (``a{,3}``, ``a{ 2}``), runs on ``regex`` -- the language's reference
  engine (FILTERS.md), unchanged;
- a pattern whose classes or anchors are Unicode-dependent runs on RE2 only against printable
  ASCII text, where both engines agree, and on ``regex`` otherwise.

What runs on ``regex`` draws on two time budgets (token buckets): one per pattern and one
shared by the whole server. A match is charged the time it took beyond a small allowance
(:data:`FREE_MATCH_S`, which an honest pattern's match stays well under, so a query over a
million records is never cut short), and it is stopped when either budget is spent: a
catastrophic pattern costs at most its budget -- never a multiple of the number of records or
subscriptions it is evaluated against -- and all of them together at most the shared budget's
share of the CPU. A stopped match counts as no match (the record is not selected), as a runaway
match always did.
"""

from __future__ import annotations

import threading
import time
from functools import lru_cache
from typing import Any

import re2
import regex

MAX_PATTERN_LENGTH = 2048
MATCH_TIMEOUT_S = 0.05
"""The longest one backtracking match may run, budget permitting."""

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a pattern RE2 refuses is expected, not worth a log line
_RE2_OPTIONS.max_mem = 8 << 20  # a huge pattern falls back instead of taking memory

# What RE2 reads differently from ``regex``: counted repetitions with spaces or no lower bound.
_LOOSE_REPEAT = regex.compile(r"\{\s*,|\{\s*\d+\s*(?:,\s*\d*\s*)?\}")
_STRICT_REPEAT = regex.compile(r"\{\d+(?:,\d*)?\}")
# Unicode-dependent constructs: class escapes, word boundaries, `$`, POSIX classes.
_UNICODE_DEPENDENT = regex.compile(r"\\[bBdDsSwWZ]|\$|\[:")


class Budget:
    """A token bucket of matching time: ``rate_s`` seconds a second, at most ``burst_s`` saved.

    Thread-safe: filters are also evaluated on the worker threads that run Spark snapshots.
    """

    def __init__(self, rate_s: float, burst_s: float) -> None:
        self.rate_s = rate_s
        self.burst_s = burst_s
        self._left = burst_s
        self._at = time.monotonic()
        self._lock = threading.Lock()

    def left(self) -> float:
        """Seconds of matching this budget allows now."""
        with self._lock:
            now = time.monotonic()
            self._left = min(self.burst_s, self._left + (now - self._at) * self.rate_s)
            self._at = now
            return self._left

    def spend(self, seconds: float) -> None:
        with self._lock:
            self._left -= seconds


SHARED_BUDGET = Budget(rate_s=0.2, burst_s=0.2)
"""Every backtracking match of the server together: at most a fifth of one core's time."""

FREE_MATCH_S = 0.0002
"""The part of one match's time no budget is charged for: honest matches take microseconds."""
_MIN_TIMEOUT_S = 0.0005


class _TooLong(Exception):
    """A replacement passed the length its caller allowed."""


class Pattern:
    """A client's compiled regular expression (or literal), searched in bounded time.

    Attributes:
        pattern: the text as the client wrote it.
        backtracking: the ``regex`` compilation, which validates the pattern and runs what RE2
            cannot.
    """

    def __init__(self, pattern: str, *, literal: bool = False) -> None:
        self.pattern = pattern
        self.literal = literal
        self.backtracking: Any = regex.compile(regex.escape(pattern) if literal else pattern)
        self.linear: Any = None if literal else _linear(pattern)
        self.ascii_only = self.linear is not None and _UNICODE_DEPENDENT.search(pattern) is not None
        self.budget = Budget(rate_s=0.02, burst_s=MATCH_TIMEOUT_S)

    def search(self, text: str) -> bool:
        """Whether the pattern occurs in ``text``; False for a match stopped by the budgets."""
        if self.literal:
            return self.pattern in text
        if self.linear is not None and (not self.ascii_only or (text.isascii() and text.isprintable())):
            return self.linear.search(text) is not None
        return bool(self._bounded(self.backtracking.search, text))

    def sub(self, replacement: str, text: str, *, limit: int | None = None) -> str | None:
        """``text`` with every match replaced (``regex`` replacement syntax); None when the
        budgets stopped it, or when the replacements made would pass ``limit`` characters
        (None: no limit; the caller has bounded the result's length already)."""
        if limit is None:
            template: Any = replacement
        else:
            made = [0]

            def template(m: Any) -> str:
                piece: str = m.expand(replacement)
                made[0] += len(piece)
                if made[0] > limit:
                    raise _TooLong
                return piece

        try:
            result = self._bounded(lambda t, timeout: self.backtracking.sub(template, t, timeout=timeout), text)
        except _TooLong:
            return None
        return result if isinstance(result, str) else None

    def _bounded(self, run: Any, text: str) -> Any:
        timeout = min(MATCH_TIMEOUT_S, self.budget.left(), SHARED_BUDGET.left())
        if timeout < _MIN_TIMEOUT_S:
            return None
        start = time.thread_time()  # CPU time: a preempted honest match is not charged
        try:
            return run(text, timeout=timeout)
        except TimeoutError:
            return None
        finally:
            spent = time.thread_time() - start - FREE_MATCH_S
            if spent > 0:
                self.budget.spend(spent)
                SHARED_BUDGET.spend(spent)


def _linear(pattern: str) -> Any:
    """The RE2 compilation of ``pattern``, or None where RE2 cannot run it with the same meaning."""
    if any(not _STRICT_REPEAT.fullmatch(m.group()) for m in _LOOSE_REPEAT.finditer(pattern)):
        return None
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error:
        return None


@lru_cache(maxsize=256)
def compile_pattern(pattern: str, literal: bool = False) -> Pattern:
    """Compile a client's regular expression, refusing ones that cost too much to build.

    Cached: the same text shares one compilation and one budget, whoever sends it.

    Raises:
        ValueError: the pattern is invalid or too large.
    """
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise ValueError(f"pattern longer than {MAX_PATTERN_LENGTH} characters")
    if not literal:
        for m in regex.finditer(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}", pattern):
            if any(g and int(g) > 1000 for g in m.groups()):
                raise ValueError("repetition count above 1000")
        if len(regex.findall(r"\{\s*\d", pattern)) > 1 and regex.search(r"\d{3,}\s*[,}]", pattern):
            raise ValueError("nested large repetition counts")
    try:
        return Pattern(pattern, literal=literal)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise ValueError(str(exc)) from None
