"""A node whose journal forked from the primary's comes back (SPEC §13, HA-4).

A former primary may hold entries that never reached its successor; the successor then wrote
other entries at the same bookmarks. The new primary refuses such a follower
(:mod:`sowdb.cluster.shipping`), and the follower finds the **fork point** — the last
bookmark at which its entry is the primary's — from the two epoch histories, confirmed by probes,
else by probing alone (the journals agree on a prefix, so a binary search over its own bookmarks
finds it). It records the point in ``DATA_DIR/fork-at`` and stops; at its next start, before the
engine opens, :func:`cut_at_fork` appends every entry after the point to
``DATA_DIR/lost-writes.jsonl`` (one JSON object a line: bookmark, timestamp, topic, SowKey,
operation, data, the epoch that wrote it — never served, there for the operator), removes them
from the journal and the epochs that wrote only them from the history, and rebuilds ``current``
and ``history`` from what is left (J-2's rebuild). The node then follows from the fork point
like any replica. Under ``sync`` none of the lost entries was acknowledged; under ``async`` they
are the writes HA-3 allows a failover to lose.

Not every entry cut was lost: a client whose publish got no answer sends it again (J-4), and
the new primary applies it at a bookmark of its own. So the file is the list of what was lost,
each line cut is checked once the node has caught up with the primary
(:func:`check_lost_writes`): a line whose write (topic, SowKey, operation and data) the
primary's journal holds after the fork point gets ``"lost": false`` and ``"applied_at"``, its
bookmark there; the others ``"lost": true``. A retry that reaches the primary later than that
is not seen.

The cut happens at a start rather than in the running server because memory, views and
subscriptions would all have to be unwound; a start rebuilds them from the store anyway.

**A poisoned epoch** (issue 40): a node that once followed a primary etcd never elected (a
forged leader key, before nodes checked certificates and epochs) holds entries of an epoch etcd
never granted, and refuses the real primary as older than that epoch. ``sowd cut-epoch --epoch
E`` (:func:`cut_epoch`, on the stopped node) cuts the journal back to just before epoch E's
first entry, the same way: every entry from there on goes to the lost-writes file (checked
against the primary's journal once the node has caught up, as after a fork), the records of
E and of the epochs after it leave the history, and the node follows the primary again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from sowdb.config import Config
from sowdb.engine.replication import rebuild
from sowdb.storage import Store
from sowdb.storage.epochs import cut_epoch_history, epoch_at, epoch_history
from sowdb.storage.keys import OP_DELETE, OP_EXPIRE, JournalEntry

log = logging.getLogger("sowdb.cluster")

FORK_FILE = "fork-at"
LOST_WRITES = "lost-writes.jsonl"
CHECK_FILE = "lost-writes.check"
"""Holds the fork point while the lines of the last cut wait for :func:`check_lost_writes`."""
_OPERATIONS = {OP_DELETE: "delete", OP_EXPIRE: "expire"}


_WRITE = ("topic", "sow_key", "operation", "data")
"""What makes two journal entries the same write (a client's retry of it, J-4)."""


def _write(e: JournalEntry) -> dict[str, str]:
    """The fields of :data:`_WRITE` of an entry, as a lost-writes line holds them."""
    return {
        "topic": e.topic,
        "sow_key": e.sow_key,
        "operation": _OPERATIONS.get(e.op, "publish"),
        "data": e.payload.decode("utf-8", "replace"),
    }


def mark_fork(data_dir: str | Path, bookmark: int) -> None:
    """Record that the journal forked after ``bookmark`` (cut at the next start)."""
    (Path(data_dir) / FORK_FILE).write_text(f"{bookmark}\n")


def cut_at_fork(store: Store, config: Config) -> int:
    """At start: when a fork was recorded, move the entries after it to the lost-writes file,
    cut them from the journal and rebuild; returns how many entries were cut."""
    marker = Path(config.server.data_dir) / FORK_FILE
    if not marker.exists():
        return 0
    upto = int(marker.read_text().strip())
    lost = list(store.iter_journal(upto))
    history = epoch_history(store)
    with (Path(config.server.data_dir) / LOST_WRITES).open("a") as out:
        for e in lost:
            record = {"bookmark": e.seq, "timestamp_us": e.timestamp_us, **_write(e)}
            record["epoch"] = epoch_at(history, e.seq)  # the epoch that wrote it (0: unknown)
            out.write(json.dumps(record) + "\n")
    cut_epoch_history(store, upto)
    if lost:
        (Path(config.server.data_dir) / CHECK_FILE).write_text(f"{upto}\n")
        store.roll_back(upto, {}, set(), f"which the primary never got (the journal forked): kept in {LOST_WRITES}")
        rebuild(store, config)
        # a rebuild of a journal cut to nothing replays nothing, and leaves the counts as they were
        store.write_record_counts({topic: store.count_records(topic) for topic in store.record_counts()})
    marker.unlink()
    log.error(
        "the journal forked after bookmark %d: %d entries that never reached the primary moved to %s",
        upto,
        len(lost),
        LOST_WRITES,
    )
    return len(lost)


def lost_writes_unchecked(data_dir: str | Path) -> bool:
    """Whether the lines of a cut wait to be checked against the primary's journal."""
    return (Path(data_dir) / CHECK_FILE).exists()


def check_lost_writes(
    journal_after: Callable[[int], Iterable[JournalEntry]], data_dir: str | Path
) -> tuple[int, int] | None:
    """Mark each line of the last cut ``lost`` or not: not when this node's journal -- the
    primary's, now that it has caught up -- holds the same write after the fork point (a
    client sent it again). Returns (lines checked, of them lost), None when none waited.
    Called once the node has caught up, from a thread (it reads the journal from the fork)."""
    marker, path = Path(data_dir) / CHECK_FILE, Path(data_dir) / LOST_WRITES
    if not marker.exists():
        return None
    upto = int(marker.read_text().strip())
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    waiting: dict[tuple[str, ...], list[dict[str, object]]] = {}
    for line in lines:
        if "lost" not in line:
            waiting.setdefault(tuple(str(line[field]) for field in _WRITE), []).append(line)
    for e in journal_after(upto):
        found = waiting.get(tuple(_write(e).values()))
        if found:
            for line in found:
                line.setdefault("applied_at", e.seq)
    lost = 0
    for group in waiting.values():
        for line in group:
            line["lost"] = "applied_at" not in line
            lost += bool(line["lost"])
    checked = sum(len(g) for g in waiting.values())
    partial = path.with_name(LOST_WRITES + ".new")
    partial.write_text("".join(json.dumps(line) + "\n" for line in lines))
    partial.replace(path)  # whole or not at all
    marker.unlink()
    log.warning(
        "of the %d entries cut at the fork after bookmark %d, %d were applied by the primary since (sent again "
        "by their clients) and %d are lost: marked in %s",
        checked,
        upto,
        checked - lost,
        lost,
        LOST_WRITES,
    )
    return checked, lost


class EpochNotFound(ValueError):
    """The node's epoch history has no record of the epoch to cut (nothing was cut)."""


def cut_epoch(config: Config, epoch: int, from_bookmark: int = 0) -> tuple[int, int]:
    """Cut a stopped node's journal back to just before epoch ``epoch``'s first entry (or
    before bookmark ``from_bookmark``, for a history that no longer records the epoch): the
    entries cut go to the lost-writes file, as at a fork. Returns (the last bookmark kept, how
    many entries were cut).

    Raises:
        EpochNotFound: no such epoch in the history (and no ``from_bookmark``).
        OSError: the store cannot be opened (a server runs on it).
    """
    store = Store(config.server.data_dir)
    try:
        history = epoch_history(store)
        if not from_bookmark:
            found = next((r for r in history if r.epoch == epoch), None)
            if found is None:
                known = ", ".join(f"{r.epoch} from bookmark {r.first} ({r.node})" for r in history) or "none"
                raise EpochNotFound(f"epoch {epoch} wrote nothing in this journal (its epochs: {known})")
            from_bookmark = found.first
        mark_fork(config.server.data_dir, from_bookmark - 1)
        cut = cut_at_fork(store, config)
    finally:
        store.close()
    return from_bookmark - 1, cut
