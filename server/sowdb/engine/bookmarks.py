"""Bookmarks as clients write them (H-2, H-4): a sequence number, a timestamp, ``0`` or ``now``.

A sequence number names a point of the one total order exactly. A timestamp names the last
point at or before that time; the writer keeps journal timestamps non-decreasing in sequence
order, so "the last sequence with a timestamp ≤ T" is well defined and found by bisection.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sowdb.errors import InvalidArgument

_COMPACT = re.compile(r"^(\d{8})T(\d{6})(\.\d{1,6})?Z$")


@dataclass(frozen=True)
class Point:
    """A parsed bookmark: exactly one of ``seq`` and ``timestamp_us`` is set, or ``now``."""

    seq: int | None = None
    timestamp_us: int | None = None
    now: bool = False


NOW = Point(now=True)


@dataclass(frozen=True)
class AsOf:
    """The point a historical query looks at (H-2).

    Attributes:
        seq: the sequence point (for a timestamp, the last journal entry at or before it).
        timestamp_us: set for a timestamp bookmark: versions are then chosen by time.
        gone: topics whose history window no longer reaches the point (they return nothing).
    """

    seq: int
    timestamp_us: int | None = None
    gone: frozenset[str] = frozenset()

    @property
    def walk(self) -> tuple[int, int]:
        """(sequence, timestamp) a version must be at or before to be the one seen here (the
        other bound open): what :func:`~sowdb.engine.state.version_at` walks a chain back to."""
        return (self.seq, FOREVER) if self.timestamp_us is None else (FOREVER, self.timestamp_us)


FOREVER = 2**63
"""A bound no sequence or timestamp reaches."""


def parse_bookmark(text: str, *, field: str = "bookmark") -> Point:
    """Parse a client's bookmark.

    ``0`` is the epoch (the point before every message); ``now`` is the latest point;
    digits are a sequence number; ``YYYYMMDDTHHMMSS[.ffffff]Z`` or an ISO-8601 time (UTC when
    it names no zone) is a timestamp.

    Raises:
        InvalidArgument: none of these forms.
    """
    t = text.strip()
    if t.lower() == "now":
        return NOW
    if t.isascii() and t.isdigit():  # not "²" or other digits int() refuses
        if len(t) > 20 or int(t) >= 2**64:
            raise InvalidArgument(f"bookmark {t[:40]!r} is beyond the largest bookmark (2^64 - 1)", field=field)
        return Point(seq=int(t))
    m = _COMPACT.match(t)
    try:
        if m:
            when = datetime.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S").replace(tzinfo=UTC)
            micros = int((m.group(3) or ".0")[1:].ljust(6, "0"))
            return Point(timestamp_us=_micros(when) + micros)
        when = datetime.fromisoformat(t)
    except (ValueError, OverflowError):
        raise InvalidArgument(
            f"bookmark {text[:100]!r} is not a sequence number, a timestamp (20260102T150405Z or ISO-8601), "
            "'0' or 'now'",
            field=field,
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return Point(timestamp_us=_micros(when))


def _micros(when: datetime) -> int:
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def last_seq_at_or_before(timestamp_us: int, lo: int, hi: int, timestamp_of: Callable[[int], int | None]) -> int:
    """The greatest sequence in ``[lo, hi]`` whose timestamp is ≤ ``timestamp_us``, or
    ``lo - 1`` when there is none; ``timestamp_of`` reads one journal entry (O(log n) reads).
    """
    answer = lo - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        ts = timestamp_of(mid)
        if ts is not None and ts <= timestamp_us:
            answer, lo = mid, mid + 1
        else:
            hi = mid - 1
    return answer


def historical(text: str) -> bool:
    """Whether a request's bookmark asks for a past state (H-2), not the current one ("" or
    ``now``): what a query of a topic without history is refused for.

    Raises:
        InvalidArgument: not a bookmark.
    """
    return bool(text.strip()) and not parse_bookmark(text).now
