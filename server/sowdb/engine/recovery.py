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
    cur_from, hist_from = store.last_applied()
    if min(cur_from, hist_from) >= store.last_sequence():
        return None
    kept = _kept_topics(config)
    persistent = {name.encode() for name in kept}
    with_history = {name.encode() for name, history in kept.items() if history}
    return _replay(store, persistent, with_history, cur_from, hist_from, _granularities(config), markers=True)


def _granularities(config: Config) -> dict[bytes, int]:
    """The history granularity in µs of each topic that has one."""
    return {
        t.name.encode(): int(t.history.granularity_s * 1_000_000)
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
        store.reset_topics("current", gained | (stored.keys() - wanted.keys()))
        store.reset_topics("history", gained_history | {n for n, h in stored.items() if h and not wanted.get(n)})
        if gained or gained_history:
            log.info(
                "rebuilding from the journal: current of %s, history of %s (newly kept)",
                ", ".join(sorted(gained)) or "no topic",
                ", ".join(sorted(gained_history)) or "no topic",
            )
            gained_b, history_b = {n.encode() for n in gained}, {n.encode() for n in gained_history}
            _replay(store, gained_b, history_b, 0, 0, _granularities(config), markers=False)
    if stored != wanted:
        store.record_stored_topics(wanted)


def _kept_topics(config: Config) -> dict[str, bool]:
    """The topics ``current`` keeps (the persistent ones), each with whether ``history`` does."""
    return {t.name: t.history is not None for t in config.topics if t.durability == "persistent"}


def _replay(
    store: Store,
    persistent: set[bytes],
    with_history: set[bytes],
    cur_from: int,
    hist_from: int,
    granularity: dict[bytes, int],
    *,
    markers: bool,
) -> RecoveryReport:
    """Write the journal entries of ``persistent`` topics after ``cur_from`` into ``current``,
    and of ``with_history`` topics after ``hist_from`` into ``history``; with ``markers``, the
    families' applied markers advance with each chunk.

    A topic with a history ``granularity`` keeps one entry per key per interval, as the writer
    does (H-1): an entry replaces the key's previous one of the same interval, which is the
    last one replayed here or, for a key's first entry in a replay that continues a history,
    the key's newest stored entry (one reverse seek per such key).
    """
    last = store.last_sequence()
    start = min(cur_from, hist_from)
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
    # The journal key is the BE sequence and the journal value starts with the BE timestamp,
    # op and BE expiry, so current and history values are sliced together from them without
    # decoding a number (see the layouts in sowdb.storage.keys).
    hsize = k.JOURNAL_HEAD.size
    unpack_lengths = k.JOURNAL_LENGTHS.unpack_from
    cur_from_b, hist_from_b = k.encode_seq(cur_from), k.encode_seq(hist_from)
    publish = k.OP_PUBLISH
    n = 0
    chunk = store.recovery_batch()
    put, delete, cur_cf, hist_cf = chunk.wb.put, chunk.wb.delete, chunk.current_cf, chunk.history_cf
    left = RECOVERY_CHUNK
    latest: dict[bytes, tuple[int, bytes]] = {}  # granular topics: each key's last history entry

    def commit(upto: int) -> None:
        if markers:
            chunk.commit(current_upto=max(upto, cur_from), history_upto=max(upto, hist_from))
        else:
            chunk.commit(current_upto=None, history_upto=None)

    try:
        for key, value in store.iter_journal_raw(start):
            lt, lk = unpack_lengths(value, k.JOURNAL_LENGTHS_AT)
            topic = value[hsize : hsize + lt]
            if topic in persistent or topic in with_history:
                end = hsize + lt + lk
                rkey = topic + b"\x00" + value[hsize + lt : end]
                op = value[8]
                if topic in persistent and key > cur_from_b:
                    if op == publish:
                        put(rkey, key + value[:8] + value[9:17] + value[end:], cur_cf)
                    else:
                        delete(rkey, cur_cf)
                if topic in with_history and key > hist_from_b:
                    hkey = rkey + b"\x00" + key
                    put(hkey, value[8:9] + value[:8] + (value[end:] if op == publish else b""), hist_cf)
                    g = granularity.get(topic)
                    if g:
                        interval = int.from_bytes(value[:8], "big") // g
                        previous = latest.get(rkey)
                        if previous is None and hist_from:
                            stored = store.last_history_entry(rkey + b"\x00", hist_from_b)
                            previous = None if stored is None else (stored[1] // g, stored[0])
                        if previous is not None and previous[0] == interval:
                            delete(previous[1], hist_cf)
                        latest[rkey] = (interval, hkey)
            n += 1
            left -= 1
            if not left:
                commit(k.decode_seq(key))
                chunk = store.recovery_batch()
                put, delete = chunk.wb.put, chunk.wb.delete
                left = RECOVERY_CHUNK
                advance(RECOVERY_CHUNK)
        commit(last)
        store.finish_recovery()
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
    report = replay_into_store(store, config)
    store.record_stored_topics(_kept_topics(config))
    return report


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
    head = k.CURRENT_HEAD.unpack_from
    start = k.CURRENT_HEAD.size
    try:
        for name, topic in topics.items():
            if not topic.persistent:
                continue
            put = topic.put
            for key, value in store.load_topic("current", name):
                bookmark, ts, exp = head(value)
                payload = value[start:]
                rec = StoredRecord(name, key.decode(), loads(payload), payload, bookmark, ts, exp)
                put(rec)
                if exp:
                    expiry.add(rec)
            if topic.history is not None:
                _restore_history(store, topic)
    except (orjson.JSONDecodeError, ValueError, UnicodeDecodeError, struct.error) as exc:
        raise StoreDamaged(str(exc)) from exc
    _rebuild_transient(store, config, topics, expiry, now_us)
    floors = {}
    for name, topic in topics.items():
        if topic.history is not None:
            topic.history.sort_queue()
            floors[name] = store.history_floor(name) if topic.persistent else 0
    return floors


def _restore_history(store: Store, topic: SowTopic) -> None:
    """Re-link the version chains of one persistent topic from ``history``.

    Most keys have no past version — their only history entry is the live record — so the
    entries are grouped by raw key and a group is decoded only when it holds more than that.
    """
    assert topic.history is not None
    records = topic.records
    loads = orjson.loads
    name = topic.name
    unpack_head = k.HISTORY_HEAD.unpack_from

    def relink(group: bytes, versions: list[tuple[bytes, bytes]]) -> None:
        sow_key = group.decode()
        live = records.get(sow_key)
        if len(versions) == 1 and live is not None and versions[0][0] == k.encode_seq(live.bookmark):
            return
        chain: list[StoredRecord] = []
        for seq_b, value in versions:
            seq = k.decode_seq(seq_b)
            if live is not None and seq >= live.bookmark:
                break
            op, ts = unpack_head(value)
            if op == k.OP_PUBLISH:
                payload = value[9:]
                chain.append(StoredRecord(name, sow_key, loads(payload), payload, seq, ts))
            else:
                chain.append(Tombstone(name, sow_key, None, b"", seq, ts))
        if live is not None:
            chain.append(live)
        assert topic.history is not None
        topic.history.restore(chain)

    group = b""
    versions: list[tuple[bytes, bytes]] = []
    for key, value in store.load_topic("history", name):
        g, seq_b = key[:-9], key[-8:]  # SowKey | 0x00 | seq
        if g != group:
            if versions:
                relink(group, versions)
            group, versions = g, []
        versions.append((seq_b, value))
    if versions:
        relink(group, versions)


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
    wanted = {name.encode(): k.encode_seq(after) for name, after in starts.items()}
    head = k.JOURNAL_HEAD.size
    unpack_lengths = k.JOURNAL_LENGTHS.unpack_from
    for key, value in store.iter_journal_raw(min(starts.values())):
        # most of the journal is other topics' entries: look at the topic's bytes first
        after_b = wanted.get(value[head : head + unpack_lengths(value, k.JOURNAL_LENGTHS_AT)[0]])
        if after_b is None or key <= after_b:
            continue
        e = k.decode_journal(key, value)
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
