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
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from typing import Any

import orjson

from sowdb.config import Config
from sowdb.engine.bookmarks import last_seq_at_or_before
from sowdb.engine.expiry import ExpiryQueue
from sowdb.engine.history import Tombstone
from sowdb.engine.records import StoredRecord
from sowdb.engine.topic import SowTopic
from sowdb.storage import Store
from sowdb.storage import keys as k

log = logging.getLogger("sowdb.recovery")

RECOVERY_CHUNK = 100_000
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


def replay_into_store(store: Store, config: Config) -> RecoveryReport | None:
    """J-2: replay journal entries newer than ``current``'s or ``history``'s marker.

    Returns None when both are level with the journal (the normal start).
    """
    last = store.last_sequence()
    cur_from, hist_from = store.last_applied()
    start = min(cur_from, hist_from)
    if start >= last:
        return None
    persistent = {t.name.encode() for t in config.topics if t.durability == "persistent"}
    with_history = {t.name.encode() for t in config.topics if t.durability == "persistent" and t.history}
    trimmed = store.journal_trimmed()
    if start < trimmed:
        log.warning(
            "the journal keeps only bookmarks after %d (retention); records last changed before that cannot be "
            "recovered from it",
            trimmed,
        )
    total = last - max(start, trimmed)
    advance, close = _progress(total, "replaying the journal")
    started = time.perf_counter()
    head, cur_head, seq_pack = k.JOURNAL_HEAD, k.CURRENT_HEAD.pack, k.SEQ.pack
    hsize = head.size
    current: dict[bytes, bytes | None] = {}
    history: list[tuple[bytes, bytes]] = []
    n = seq = 0
    try:
        for key, value in store.iter_journal_raw(start):
            seq = k.decode_seq(key)
            ts, op, exp, lt, lk = head.unpack_from(value)
            topic = value[hsize : hsize + lt]
            if topic in persistent:
                rkey = topic + b"\x00" + value[hsize + lt : hsize + lt + lk]
                if seq > cur_from:
                    current[rkey] = cur_head(seq, ts, exp) + value[hsize + lt + lk :] if op == k.OP_PUBLISH else None
                if seq > hist_from and topic in with_history:
                    payload = value[hsize + lt + lk :] if op == k.OP_PUBLISH else b""
                    history.append((rkey + b"\x00" + seq_pack(seq), k.encode_history(op, ts, payload)))
            n += 1
            if n % RECOVERY_CHUNK == 0:
                store.write_recovered(
                    current, history, current_upto=max(seq, cur_from), history_upto=max(seq, hist_from)
                )
                current, history = {}, []
                advance(RECOVERY_CHUNK)
        store.write_recovered(current, history, current_upto=max(last, cur_from), history_upto=max(last, hist_from))
    finally:
        close()
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
    return replay_into_store(store, config)


def load_state(
    store: Store, config: Config, topics: dict[str, SowTopic], expiry: ExpiryQueue, now_us: int
) -> dict[str, int]:
    """Load persistent topics (records and version chains) and rebuild transient topics.

    Returns:
        The history floor of each topic with history.

    Raises:
        StoreDamaged: a stored record cannot be decoded.
    """
    loads = orjson.loads
    try:
        for topic_name, sow_key, value in store.load_current():
            topic = topics.get(topic_name)
            if topic is None or not topic.persistent:
                continue  # a topic no longer configured keeps its data on disk, unused
            rec = StoredRecord(
                topic_name, sow_key, loads(value.payload), value.payload, value.bookmark, value.timestamp_us
            )
            rec.expiry_us = value.expiry_us
            topic.put(rec)
            if rec.expiry_us:
                expiry.add(rec)
        _restore_history(store, topics)
    except (orjson.JSONDecodeError, ValueError, UnicodeDecodeError) as exc:
        raise StoreDamaged(str(exc)) from exc
    _rebuild_transient(store, config, topics, expiry, now_us)
    floors = {}
    for name, topic in topics.items():
        if topic.history is not None:
            topic.history.sort_queue()
            floors[name] = store.history_floor(name) if topic.persistent else 0
    return floors


def _restore_history(store: Store, topics: dict[str, SowTopic]) -> None:
    loads = orjson.loads

    def chain_key(e: k.HistoryEntry) -> tuple[str, str]:
        return e.topic, e.sow_key

    for (topic_name, sow_key), versions in groupby(store.iter_history(), key=chain_key):
        topic = topics.get(topic_name)
        if topic is None or topic.history is None or not topic.persistent:
            continue
        live = topic.records.get(sow_key)
        chain: list[StoredRecord] = []
        for e in versions:
            if live is not None and e.seq >= live.bookmark:
                break
            if e.op == k.OP_PUBLISH:
                chain.append(StoredRecord(topic_name, sow_key, loads(e.payload), e.payload, e.seq, e.timestamp_us))
            else:
                chain.append(Tombstone(topic_name, sow_key, None, b"", e.seq, e.timestamp_us))
        if live is not None:
            chain.append(live)
        topic.history.restore(chain)


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
    for e in store.iter_journal(min(starts.values())):
        after = starts.get(e.topic)
        if after is None or e.seq <= after:
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
