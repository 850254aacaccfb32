"""Checking a store: every block read back against its checksum, the journal's sequences
contiguous, each topic's ``current`` records as many as its count says, every value decodable.

Start-up runs the journal check within a time budget (the journal can be long; ``current`` and
``history`` are read whole at start anyway, through checked scans, and their counts compared by
the engine); ``sowd verify`` runs every check to the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from sowdb.errors import DataLoss
from sowdb.storage import keys as k
from sowdb.storage.store import Store


@dataclass
class Report:
    """What a check found; ``problems`` is empty for a whole store."""

    journal_entries: int = 0
    journal_first: int = 0
    journal_last: int = 0
    journal_complete: bool = True  # False: the time budget ran out before the end
    records: dict[str, int] = field(default_factory=dict)
    history_versions: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_journal(
    store: Store, report: Report, *, budget_s: float | None = None, advance: Callable[[int], None] = lambda n: None
) -> None:
    """Read the journal back (checksums) and check its sequences follow each other from the
    retention point; within ``budget_s`` seconds when given."""
    started = time.perf_counter()
    expected = store.journal_trimmed() + 1
    n = 0
    try:
        for key, _ in store.iter_journal_raw(expected - 1):
            seq = k.decode_seq(key)
            if seq != expected:
                report.problems.append(f"journal: bookmarks {expected}..{seq - 1} are missing")
            expected = seq + 1
            n += 1
            if n % 65536 == 0:
                advance(65536)
                if budget_s is not None and time.perf_counter() - started > budget_s:
                    report.journal_complete = False
                    break
    except DataLoss as exc:
        report.problems.append(f"journal: {exc.message}")
    report.journal_entries = n
    report.journal_first = store.journal_trimmed() + 1 if n else 0
    report.journal_last = expected - 1 if n else 0


def check_current(store: Store, report: Report, topics: list[str]) -> None:
    """Read every ``current`` record back, decode it, and compare each topic's count."""
    counts = store.record_counts()
    for topic in topics:
        n = 0
        try:
            for _, value in store.load_records(topic):
                orjson.loads(value.payload)
                n += 1
        except DataLoss as exc:
            report.problems.append(f"current ({topic}): {exc.message}")
            continue
        except (orjson.JSONDecodeError, UnicodeDecodeError, ValueError) as exc:
            report.problems.append(f"current ({topic}): a record cannot be decoded after {n} ({exc})")
            continue
        report.records[topic] = n
        if topic in counts and counts[topic] != n:
            report.problems.append(f"current ({topic}): {n} records, but its count says {counts[topic]}")
    last = store.last_sequence()
    applied_current, applied_history = store.last_applied()
    for name, applied in (("current", applied_current), ("history", applied_history)):
        if applied > last:
            report.problems.append(f"{name}: applied up to bookmark {applied}, after the journal's last ({last})")


def check_history(store: Store, report: Report) -> None:
    try:
        report.history_versions = sum(1 for _ in store.iter_history())
    except DataLoss as exc:
        report.problems.append(f"history: {exc.message}")


def verify(store: Store, topics: list[str], advance: Callable[[int], None] = lambda n: None) -> Report:
    """``sowd verify``: every check, to the end."""
    report = Report()
    check_journal(store, report, advance=advance)
    check_current(store, report, topics)
    check_history(store, report)
    return report
