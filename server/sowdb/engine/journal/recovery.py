"""Start-up: bring ``current`` and ``history`` level with the journal (J-2), then load state
into memory, rebuilding transient topics from the journal (J-3).

The journal is the authority. ``current`` and ``history`` each carry the last sequence applied
to them (see :mod:`sowdb.storage.keys`); a family behind the journal — because it was lost,
dropped, damaged and reset, or a rebuild was asked for — is brought level by replaying the
journal entries after its marker, in chunks of one WriteBatch each, with a progress bar on a
terminal and a log line of counts, time and rate.
"""

from __future__ import annotations

import logging
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from sowdb.config import Config
from sowdb.engine.bookmarks import last_seq_at_or_before
from sowdb.engine.records import StoredRecord
from sowdb.engine.state import ExpiryQueue, SowTopic, Tombstone, release_free_memory
from sowdb.errors import DataLoss
from sowdb.storage import Store
from sowdb.storage import keys as k
from sowdb.storage.failures import StoreUnusable
from sowdb.storage.rebuild import ReplayPlan, replay_journal
from sowdb.storage.verify import Report, check_journal

log = logging.getLogger("sowdb.recovery")

PROGRESS_THRESHOLD = 200_000  # entries: below this a bar would only flicker


@dataclass(frozen=True)
class RecoveryReport:
    """What a replay of the journal into the store did."""

    entries: int
    seconds: float
    first: int
    last: int

    @property
    def rate(self) -> float:
        return self.entries / self.seconds if self.seconds > 0 else 0.0


class StoreDamaged(Exception):
    """A stored record could not be read back; ``current`` must be rebuilt from the journal."""


def _progress(total: int, label: str) -> tuple[Callable[[int], None], Callable[[], None]]:
    """(advance, close) of a rich progress bar on stderr, or no-ops off a terminal."""
    if total < PROGRESS_THRESHOLD or not sys.stderr.isatty():
        return (lambda n: None), (lambda: None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed or 0:>10,.0f} entries/s")

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = bar.add_task(label, total=total)
    bar.start()
    return (lambda n: bar.advance(task, n)), bar.stop


def check_journal_at_start(store: Store, budget_s: float) -> None:
    """Read the journal back against its checksums, from its start, for at most ``budget_s``
    seconds (with a progress bar on a terminal); ``sowd verify`` reads all of it.

    Raises:
        StoreUnusable: a block of the journal is damaged, or sequences are missing from it: the
            journal is the authority, and bookmark replays and rebuilds would silently skip them.
    """
    if budget_s <= 0:
        return
    total = store.last_sequence() - store.journal_trimmed()
    advance, close = _progress(total, "checking the journal")
    started = time.perf_counter()
    report = Report()
    try:
        check_journal(store, report, budget_s=budget_s, advance=advance)
    finally:
        close()
    if report.problems:
        raise StoreUnusable(
            f"the journal in {store.path} is damaged: {'; '.join(report.problems)}. Restore the data directory from a "
            f"checkpoint (`sowd checkpoint`), or run `sowd repair --data-dir {store.path}` to drop what cannot be read "
            "(bookmarks in it are lost) and `sowd verify`"
        )
    how = "all of it" if report.journal_complete else f"the first {report.journal_entries} entries (the time budget)"
    log.info("checked the journal: %s in %.2f s", how, time.perf_counter() - started)


def recover(store: Store, config: Config) -> RecoveryReport | None:
    """Start-up before anything is loaded: the journal checked against its checksums (within
    ``verify_budget``), the store brought level with it (J-2), topics whose durability changed
    rebuilt; returns what the replay did (None: nothing to replay)."""
    check_journal_at_start(store, config.server.verify_budget_s)
    report = replay_into_store(store, config)
    follow_durability_changes(store, config)
    return report


def replay_into_store(store: Store, config: Config) -> RecoveryReport | None:
    """J-2: replay journal entries newer than ``current``'s or ``history``'s marker.

    Returns None when both are level with the journal (the normal start).
    """
    cur_from, hist_from = store.last_applied()
    if min(cur_from, hist_from) >= store.last_sequence():
        return None
    kept = _kept_topics(config)
    with_history = {name for name, history in kept.items() if history}
    return _replay(store, ReplayPlan(set(kept), with_history, cur_from, hist_from, _granularities(config)))


def _granularities(config: Config) -> dict[str, int]:
    """The history granularity in µs of each topic that has one."""
    return {
        t.name: int(t.history.granularity_s * 1_000_000)
        for t in config.topics
        if t.history is not None and t.history.granularity_s > 0
    }


def follow_durability_changes(store: Store, config: Config) -> None:
    """Bring ``current`` and ``history`` in line with the topics the config now keeps there.

    The store records which persistent topics it keeps (and which of them keep history). A
    topic that became persistent, or gained history, since the last run has its range rebuilt
    from the journal — without this it would start empty, or, switched back after a transient
    spell, with the state it had before it (records deleted meanwhile would come back). A topic
    that stopped being kept loses its range, so a later switch back rebuilds it too. The
    replay logs its counts and rate like any other.
    """
    wanted = _kept_topics(config)
    stored = store.stored_topics()
    if stored is not None and stored != wanted:
        gained = {name for name in wanted if name not in stored}
        gained_history = {name for name, h in wanted.items() if h and not stored.get(name, False)}
        dropped = stored.keys() - wanted.keys()
        store.reset_topics("current", gained | dropped)
        store.write_record_counts(dict.fromkeys(dropped, 0))
        store.reset_topics("history", gained_history | {n for n, h in stored.items() if h and not wanted.get(n)})
        if gained or gained_history:
            log.info(
                "rebuilding from the journal: current of %s, history of %s (newly kept)",
                ", ".join(sorted(gained)) or "no topic",
                ", ".join(sorted(gained_history)) or "no topic",
            )
            _replay(store, ReplayPlan(gained, gained_history, granularity=_granularities(config), markers=False))
    if stored != wanted:
        store.record_stored_topics(wanted)


def _kept_topics(config: Config) -> dict[str, bool]:
    """The topics ``current`` keeps (the persistent ones), each with whether ``history`` does."""
    return {t.name: t.history is not None for t in config.topics if t.durability == "persistent"}


def _replay(store: Store, plan: ReplayPlan) -> RecoveryReport:
    """Carry out a replay of the journal into ``current`` and ``history``
    (:func:`replay_journal`), with a progress bar on a terminal and a log line of counts, time
    and rate."""
    last = store.last_sequence()
    start = plan.start
    trimmed = store.journal_trimmed()
    if start < trimmed:
        log.warning(
            "the journal keeps only bookmarks after %d (retention); records last changed before that cannot be "
            "recovered from it",
            trimmed,
        )
    advance, close = _progress(last - max(start, trimmed), "replaying the journal")
    started = time.perf_counter()
    try:
        n = replay_journal(store, plan, advance)
    finally:
        close()
    # the replay wrote current in bulk: the topics' record counts are taken anew from it
    store.write_record_counts({topic: store.count_records(topic) for topic in plan.persistent})
    report = RecoveryReport(n, time.perf_counter() - started, max(start, trimmed) + 1, last)
    log.info(
        "replayed %d journal entries (bookmarks %d..%d) into current/history in %.2f s (%.0f entries/s)",
        report.entries,
        report.first,
        report.last,
        report.seconds,
        report.rate,
    )
    return report


def rebuild(store: Store, config: Config) -> RecoveryReport | None:
    """``sowd rebuild``: empty ``current`` and ``history`` and replay the whole journal."""
    store.reset_derived()
    report = replay_into_store(store, config)
    store.record_stored_topics(_kept_topics(config))
    return report


LOAD_BATCH = 4096
"""Records read back at start that a topic takes in one call."""


def load_state(store: Store, config: Config, topics: dict[str, SowTopic], expiry: ExpiryQueue, now_us: int) -> None:
    """Load persistent topics (records, version chains, history floors) and rebuild transient
    topics from the journal.

    Raises:
        StoreDamaged: a stored record cannot be read back or decoded, or a topic has fewer or
            more records in ``current`` than its count says (a lost or damaged file).
    """
    loads = orjson.loads
    counts = store.record_counts()
    missing_counts = {}
    try:
        for name, topic in topics.items():
            if not topic.persistent:
                continue
            batch: list[StoredRecord] = []  # loaded LOAD_BATCH at a time: the arena takes a batch in vector steps
            for sow_key, (bookmark, ts, exp, payload) in store.load_records(name):
                rec = StoredRecord(name, sow_key, loads(payload), payload, bookmark, ts, exp)
                batch.append(rec)
                if exp:
                    expiry.add(rec)
                if len(batch) >= LOAD_BATCH:
                    topic.load(batch)
                    batch = []
            if batch:
                topic.load(batch)
            expected = counts.get(name)
            if expected is None:
                missing_counts[name] = len(topic.records)  # a store from before counts were kept
            elif expected != len(topic.records):
                raise StoreDamaged(f"current holds {len(topic.records)} records of {name!r}, its count says {expected}")
            if topic.history is not None:
                _restore_history(store, topic)
                topic.history.floor = store.history_floor(name)
    except DataLoss as exc:
        raise StoreDamaged(exc.message) from None
    except (orjson.JSONDecodeError, ValueError, UnicodeDecodeError, struct.error) as exc:
        raise StoreDamaged(str(exc)) from exc
    if missing_counts:
        store.write_record_counts(missing_counts)
    _rebuild_transient(store, config, topics, expiry, now_us)
    for topic in topics.values():
        if topic.history is not None:
            topic.history.sort_queue()
    release_free_memory()  # the records and documents made to load them, dropped (state.heap)


def _restore_history(store: Store, topic: SowTopic) -> None:
    """Re-link the version chains of one persistent topic from ``history``.

    Most keys have no past version — their only history entry is the live record — so a
    record's versions are decoded only when there is more than that.
    """
    loads = orjson.loads
    name = topic.name
    for sow_key, versions in store.load_history(name):
        live = topic.live_bookmark(sow_key)  # an arena makes no record of the live version
        if len(versions) == 1 and live is not None and versions[0][0] == live:
            continue
        chain: list[StoredRecord] = []
        for seq, value in versions:
            if live is not None and seq >= live:
                break
            op, ts, payload = k.decode_version(value)
            if op == k.OP_PUBLISH:
                chain.append(StoredRecord(name, sow_key, loads(payload), payload, seq, ts))
            else:
                chain.append(Tombstone(name, sow_key, None, b"", seq, ts))
        if live is None:
            topic.restore_chain(chain)
        elif chain:
            topic.restore_past(sow_key, chain)


def _rebuild_transient(
    store: Store, config: Config, topics: dict[str, SowTopic], expiry: ExpiryQueue, now_us: int
) -> None:
    """J-3: transient topics keep no ``current``; replay their journal entries, each from its
    recovery point (a bookmark, or a duration back from now) or the start of the journal."""
    starts: dict[str, int] = {}
    last = store.last_sequence()
    for t in config.topics:
        if t.durability == "transient":
            starts[t.name] = _recovery_start(store, t.recovery_bookmark, t.recovery_window_s, last, now_us)
    if not starts:
        return
    started = time.perf_counter()
    applied = 0
    loads = orjson.loads
    for e in store.iter_journal(min(starts.values()), topics=starts):
        if e.seq <= starts[e.topic]:
            continue
        topic = topics[e.topic]
        if e.op == k.OP_PUBLISH:
            rec = StoredRecord(e.topic, e.sow_key, loads(e.payload), e.payload, e.seq, e.timestamp_us, e.expiry_us)
            topic.put(rec)
            if rec.expiry_us:
                expiry.add(rec)
        else:
            topic.remove(e.sow_key, e.seq, e.timestamp_us)
        applied += 1
    log.info(
        "rebuilt %d transient topic(s) from the journal: %d entries in %.2f s",
        len(starts),
        applied,
        time.perf_counter() - started,
    )


def _recovery_start(store: Store, bookmark: int | None, window_s: float | None, last: int, now_us: int) -> int:
    """The sequence after which a transient topic's replay starts."""
    trimmed = store.journal_trimmed()
    if bookmark is not None:
        return max(bookmark, trimmed)
    if window_s is None:
        return trimmed
    since = now_us - int(window_s * 1_000_000)

    def timestamp_of(seq: int) -> int | None:
        e = store.journal_entry(seq)
        return None if e is None else e.timestamp_us

    return last_seq_at_or_before(since, trimmed + 1, last, timestamp_of)
