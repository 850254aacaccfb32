"""A reader in another process sees exactly the committed records: never a batch the writer
has written but not committed, and the same records as the writer's pin at that bookmark."""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.connection import Connection
from pathlib import Path

import orjson
import pytest

from sowdb.engine.arena import ArenaReader, StalePin, TopicArena

View = tuple[int, dict[bytes, bytes], dict[bytes, int]]


def _view(r: ArenaReader) -> View:
    """What a reader sees: the committed bookmark, every record by key (a pinned scan) and a
    few point reads (the bookmarks of keys 0 … 9)."""
    pin = r.pin()
    records = {
        r.key(int(s)): orjson.dumps(d) for slots, docs in pin.scan(chunk=500) for s, d in zip(slots, docs, strict=True)
    }
    points = {str(k).encode(): r.get(str(k).encode()) for k in range(10)}
    return pin.bookmark, records, {k: r.bookmark(s) if s >= 0 else -1 for k, s in points.items()}


def _child(directory: str, conn: Connection) -> None:
    r = ArenaReader(directory, "orders")
    while conn.recv() == "look":
        conn.send(_view(r))


def _writers_view(a: TopicArena, at: int) -> View:
    pin = a.pin(at)
    records = {a.key(s): orjson.dumps(orjson.loads(a.raw(s))) for s in pin}
    points = {}
    for k in range(10):
        s = a.get(str(k).encode(), at=at)
        points[str(k).encode()] = a.bookmark(s) if s >= 0 else -1
    return at, records, points


def _orders(first: int, n: int, price: int) -> tuple[list[bytes], list[bytes]]:
    keys = [str(i).encode() for i in range(first, first + n)]
    return keys, [orjson.dumps({"orderId": i, "price": price, "pad": "x" * (i % 50)}) for i in range(first, first + n)]


def test_a_reader_in_another_process_sees_the_commits_only(tmp_path: Path) -> None:
    directory = tmp_path / "orders"
    a = TopicArena(
        directory, "orders", segment_bytes=4096, max_segment_bytes=1 << 16, slot_capacity=64, table_capacity=8
    )
    bookmark = 1
    for start in range(0, 3000, 100):
        keys, docs = _orders(start, 100, 1)
        a.put_batch(keys, docs, bookmark, 1_000)
        bookmark += 100
    a.delete(b"7", bookmark)
    bookmark += 1
    committed = a.committed
    # a batch written, not committed: updates, new keys, enough to grow the files
    keys, docs = _orders(0, 5000, 2)
    a.put_batch(keys, docs, bookmark, 2_000, commit=False)
    a.delete(b"3", bookmark + 5000, commit=False)
    assert a.last > committed

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(str(directory), child))
    proc.start()
    try:
        parent.send("look")
        seen = parent.recv()
        assert seen == _writers_view(a, committed)
        assert len(seen[1]) == 2999
        assert seen[2][b"7"] == -1
        assert seen[2][b"3"] >= 0

        a.commit()
        parent.send("look")
        assert parent.recv() == _writers_view(a, a.last)

        a.compact(a.last, garbage=0.0)  # frees the replaced versions, moves every live byte
        keys, docs = _orders(10, 5, 3)
        a.put_batch(keys, docs, a.last + 1, 3_000)  # into freed slots
        parent.send("look")
        after = parent.recv()
        assert after == _writers_view(a, a.last)
        assert orjson.loads(after[1][b"12"])["price"] == 3
        parent.send("stop")
    finally:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0


def test_a_reader_sees_a_compaction_under_its_scan(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t", segment_bytes=256, max_segment_bytes=1024, slot_capacity=16)
    keys, docs = _orders(0, 200, 1)
    a.put_batch(keys, docs, 1, 0)
    keys, docs = _orders(0, 200, 2)
    a.put_batch(keys, docs, 201, 0)
    r = ArenaReader(tmp_path / "t")
    scan = r.pin().scan(chunk=50)
    next(scan)
    a.compact(a.last, garbage=0.0)
    with pytest.raises(StalePin):
        list(scan)
    assert sorted(orjson.loads(r.raw(s))["orderId"] for s in r.pin()) == list(range(200))  # a new pin reads on
    with pytest.raises(StalePin):
        r.pin(100)  # below the floor


def test_a_reader_follows_files_replaced_after_it_mapped_them(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t", segment_bytes=64, max_segment_bytes=128, slot_capacity=16, table_capacity=2)
    a.put_batch([b"a"], [b'{"v":0}'], 1, 0)
    r = ArenaReader(tmp_path / "t")
    pin = r.pin()
    assert r.get(b"a") == 0
    keys, docs = _orders(0, 500, 1)
    a.put_batch(keys, docs, 2, 0)  # a larger slots file and key table; the old ones are removed
    assert r.state.slots_file == 1
    assert not (tmp_path / "t" / "slots.000001").exists()
    assert [r.raw(s) for s in pin] == [b'{"v":0}']  # the pin at bookmark 1 reads on
    assert r.get(b"499") == a.get(b"499")
    assert r.raw(r.get(b"499")) == docs[499]
    assert r.state.slots_file == a.slots.number
    assert r.live_count == 501


def test_a_held_read_survives_compactions_and_updates_in_the_writer(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t", segment_bytes=256, max_segment_bytes=1024, slot_capacity=16)
    keys, docs = _orders(0, 200, 1)
    a.put_batch(keys, docs, 1, 0)
    r = ArenaReader(tmp_path / "t")
    at = r.committed
    assert r.hold(3, at)  # reader process 3 reads at ``at``: the writer's compactions spare it
    slots = r.visible(at)
    for price, bookmark in ((2, 201), (3, 401)):  # every record replaced twice, then compacted
        keys, new = _orders(0, 200, price)
        a.put_batch(keys, new, bookmark, 0)
        a.compact(a.last, garbage=0.0)
    assert a.floor == at  # held back by the reader's pin, not the writer's last bookmark
    got = {r.key(int(s)): orjson.loads(rec.raw) for s, rec in zip(slots, r.records(slots), strict=True)}
    assert got == {k: orjson.loads(d) for k, d in zip(*_orders(0, 200, 1), strict=True)}  # moved, not freed
    assert r.hold(3, 0)
    a.compact(a.last, garbage=0.0)
    assert a.floor == a.last  # let go: the next compaction frees them


def test_a_hold_below_a_compactions_floor_is_refused(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t", segment_bytes=256, max_segment_bytes=1024, slot_capacity=16)
    keys, docs = _orders(0, 100, 1)
    a.put_batch(keys, docs, 1, 0)
    r = ArenaReader(tmp_path / "t")
    old = r.committed
    keys, docs = _orders(0, 100, 2)
    a.put_batch(keys, docs, 101, 0)
    a.compact(a.last, garbage=0.0)  # no pin at ``old``: its versions are gone
    assert not r.hold(0, old)  # the reader reads elsewhere (its process relays the query)
    assert a.pins.values[0] == 0
    assert r.hold(0, r.committed)
    assert not r.hold(0, old)
    assert a.pins.values[0] == r.committed  # a refused pin leaves the reads at the slot's pinned
