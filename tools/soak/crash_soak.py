"""Crash soak (J-1): kill -9 a publishing sowd at random moments and check nothing acknowledged
is lost and ``current`` equals the replay of the journal.

Each cycle starts ``sowd`` as a process on the same data directory, checks the data left by
the previous cycle, publishes (with acks) from a client thread, and ``SIGKILL``s the server at
a random moment. The checks, through the public API only:

- every acknowledged message is in the journal at its bookmark, with its data (a Subscribe
  with bookmark ``0`` replays the whole journal);
- the journal has no gap: bookmarks 1..N, each once;
- each persistent topic's current state (Sow) equals the state the journal replays to;
- the history topic as of a random earlier bookmark equals the replay up to that bookmark.

The test suite runs a few cycles; run this script for a longer soak:

    .venv/bin/python tools/soak/crash_soak.py --cycles 200
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sowdb import testing
from sowdb_client import Client

TOPICS_TOML = Path(__file__).resolve().parents[2] / "tests" / "topics.toml"
"""The tests' topics (one file for every test against a real sowd)."""
PERSISTENT = ("markers", "book")  # keyed by /id; book keeps history
TOPICS = (*PERSISTENT, "pulses")  # pulses: transient, keyed by /id


@dataclass
class Acked:
    """What the client saw acknowledged: bookmark -> (topic, document)."""

    messages: dict[int, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    batches: int = 0


def _publisher(target: str, rnd: random.Random, acked: Acked, stop: threading.Event) -> None:
    """Publish single-request batches (each acknowledged on its own) until the server dies."""
    n = 0
    with Client(target) as c:
        while not stop.is_set():
            topic = rnd.choice(TOPICS)
            try:
                if rnd.random() < 0.1:
                    c.sow_delete(topic, sow_keys=[str(rnd.randrange(200))])
                    continue
                docs = [{"id": rnd.randrange(200), "n": n + i, "pad": "x" * rnd.randrange(64)} for i in range(20)]
                docs = docs[: rnd.randint(1, 20)]
                ack = c.publish(topic, docs, batch_size=len(docs))
            except Exception:
                return  # the server is gone
            n += len(docs)
            for i, d in enumerate(docs):
                acked.messages[ack.first_bookmark + i] = (topic, d)
            acked.batches += 1


def _journal(c: Client) -> list[Any]:
    """Every journal entry, replayed through a Subscribe with bookmark 0, in bookmark order."""
    entries = []
    stream = c.subscribe(".*", bookmark="0")
    try:
        for event in stream:
            if event.kind == "completed":
                break
            entries += [(event.kind, r) for r in event.records]
    finally:
        stream.cancel()
    return entries


def _replayed_state(entries: list[Any], topic: str, upto: int) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for kind, r in entries:
        if r.topic != topic or r.bookmark > upto:
            continue
        if kind == "publish":
            state[r.sow_key] = r.json()
        else:
            state.pop(r.sow_key, None)
    return state


def check(target: str, acked: Acked, rnd: random.Random) -> int:
    """Run the checks against a freshly started server; returns the journal length."""
    with Client(target) as c:
        entries = _journal(c)
        bookmarks = [r.bookmark for _, r in entries]
        assert bookmarks == list(range(1, len(bookmarks) + 1)), "the journal has a gap or a duplicate"
        by_bookmark = {r.bookmark: (kind, r) for kind, r in entries}
        for bookmark, (topic, doc) in acked.messages.items():
            got = by_bookmark.get(bookmark)
            assert got is not None, f"acknowledged bookmark {bookmark} is missing"
            kind, r = got
            assert (kind, r.topic, r.json()) == ("publish", topic, doc), f"bookmark {bookmark} holds {got}"
        last = len(bookmarks)
        for topic in PERSISTENT:
            current = {r.sow_key: r.json() for r in c.sow(topic, batch_size=1000)}
            assert current == _replayed_state(entries, topic, last), f"{topic}: current differs from the journal"
        if last:
            point = rnd.randint(1, last)
            then = {r.sow_key: r.json() for r in c.sow("book", bookmark=str(point), batch_size=1000)}
            assert then == _replayed_state(entries, "book", point), f"book as of {point} differs from the journal"
        pulses = {r.sow_key: r.json() for r in c.sow("pulses", batch_size=1000)}
        assert pulses == _replayed_state(entries, "pulses", last), "transient pulses differ from the journal"
        return last


def run(cycles: int, work_dir: Path, seed: int, *, max_uptime: float = 0.8, report: Any = None) -> dict[str, int]:
    """Run ``cycles`` publish-and-kill cycles and a final check; returns totals."""
    rnd = random.Random(seed)
    data = work_dir / "data"
    acked = Acked()
    journal = 0
    for cycle in range(cycles):
        server = testing.start(data, config=TOPICS_TOML)
        try:
            journal = check(server.target, acked, rnd)
            stop = threading.Event()
            thread = threading.Thread(target=_publisher, args=(server.target, rnd, acked, stop), daemon=True)
            thread.start()
            time.sleep(rnd.uniform(0.05, max_uptime))
        finally:
            server.kill()
        stop.set()
        thread.join(30)
        if report:
            report(f"cycle {cycle + 1}/{cycles}: journal {journal}, acknowledged {len(acked.messages)}")
    server = testing.start(data, config=TOPICS_TOML)
    try:
        journal = check(server.target, acked, rnd)
    finally:
        server.kill()
    return {"cycles": cycles, "acknowledged": len(acked.messages), "batches": acked.batches, "journal": journal}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--max-uptime", type=float, default=2.0, help="longest publishing time before a kill (s)")
    parser.add_argument("--work-dir", help="where the data goes (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"seed {args.seed}, data in {work}")
        totals = run(args.cycles, work, args.seed, max_uptime=args.max_uptime, report=print)
    print(json.dumps(totals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
