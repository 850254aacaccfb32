"""The arena's edges: empty, growth of every structure, large documents, unicode, compaction
keeping pins and slot ids, the files it leaves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from sowdb.engine.arena import LIVE, ArenaReader, StalePin, TopicArena, key_hash


def _docs(n: int, tag: int = 0, first: int = 0) -> tuple[list[bytes], list[bytes]]:
    return [str(i).encode() for i in range(first, first + n)], [
        orjson.dumps({"id": i, "tag": tag}) for i in range(first, first + n)
    ]


def test_an_empty_arena(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t", "t")
    assert (a.get(b"x"), a.get(b"x", at=0), a.live_count, a.versions(b"x")) == (-1, -1, 0, [])
    assert list(a.pin()) == []
    assert list(a.pin().scan()) == []
    assert a.pin().count() == 0
    assert a.put_batch([], [], 1, 0) == []
    assert a.expire(10**18, 1) == []
    assert a.delete(b"x", 1) == -1
    assert a.compact(1) == 0
    r = ArenaReader(tmp_path / "t")
    assert (r.get(b"x"), r.live_count, list(r.pin())) == (-1, 0, [])


def test_every_structure_grows(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t", segment_bytes=64, max_segment_bytes=512, slot_capacity=1, table_capacity=1)
    bookmark = 1
    for tag in range(3):
        for first in range(0, 3000, 250):
            keys, docs = _docs(250, tag, first)
            a.put_batch(keys, docs, bookmark, tag)
            bookmark += 250
    assert a.live_count == 3000
    assert a.high == 9000
    assert a.slots.capacity >= 9000
    assert a.slots.number > 5
    assert a.table.mask + 1 >= 2 * 3000
    assert a.table.number > 2
    assert len(a.json.sizes) > 20
    assert max(a.json.sizes.values()) == 512
    assert len(a.keys.sizes) > 5
    for i in (0, 1234, 2999):
        s = a.get(str(i).encode())
        assert orjson.loads(a.raw(s)) == {"id": i, "tag": 2}
        assert [orjson.loads(a.raw(v))["tag"] for v in a.versions(str(i).encode())] == [2, 1, 0]
    scanned = [d for _, ds in a.pin().scan() for d in ds]
    assert sorted(d["id"] for d in scanned) == list(range(3000))
    assert {d["tag"] for d in scanned} == {2}
    assert len(list(a.pin(3000))) == 3000  # the first load, as of its last bookmark
    assert sorted(p.name for p in (tmp_path / "t").glob("slots.*")) == [f"slots.{a.slots.number:06d}"]


def test_large_documents_and_unicode(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t", segment_bytes=1024, max_segment_bytes=4096)
    big = orjson.dumps({"text": "ü€𝄞" * 500_000})  # ~4.5 MB, over any segment
    keys = ["ключ".encode(), '🔑,"EU"'.encode(), b"\xff\xfe", b"k" * 4000]
    docs = [big, orjson.dumps({"ключ": "значение"}), b'{"a":1}', orjson.dumps({"b": "𝄞"})]
    a.put_batch(keys, docs, 1, 0)
    for key, doc in zip(keys, docs, strict=True):
        s = a.get(key)
        assert (a.key(s), a.raw(s)) == (key, doc)
    assert {bytes(a.key(int(s))): d for slots, ds in a.pin().scan() for s, d in zip(slots, ds, strict=True)} == {
        k: orjson.loads(d) for k, d in zip(keys, docs, strict=True)
    }
    assert a.record(a.get(keys[0])).sow_key == "ключ"
    with pytest.raises(ValueError, match="over the limit"):
        a.put_batch([b"x" * 70_000], [b"{}"], a.last + 1, 0)


def test_a_batch_numbers_and_chains_its_repeated_keys(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t")
    assert a.put_batch([b"a", b"b"], [b'{"v":1}', b'{"v":2}'], [10, 12], 5) == [-1, -1]
    ended = a.put_batch([b"a", b"a", b"c", b"a"], [b'{"v":3}', b'{"v":4}', b'{"v":5}', b'{"v":6}'], 20, [6, 7, 8, 9])
    assert ended == [0, 2, -1, 3]
    assert [(a.bookmark(s), a.ended(s)) for s in a.versions(b"a")] == [(23, LIVE), (21, 23), (20, 21), (10, 20)]
    assert (a.raw(a.get(b"a")), a.timestamp(a.get(b"a")), a.live_count) == (b'{"v":6}', 9, 3)
    assert a.raw(a.get(b"a", at=21)) == b'{"v":4}'
    assert a.get(b"c", at=21) == -1
    assert a.get(b"b", at=11) == -1
    with pytest.raises(ValueError, match="ascend"):
        a.put_batch([b"a"], [b"{}"], 23, 0)
    with pytest.raises(ValueError, match="ascend"):
        a.put_batch([b"a", b"b"], [b"{}", b"{}"], [30, 30], 0)


def test_deletes_and_expirations_end_versions_in_order(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t")
    a.put_batch([b"x", b"y", b"z", b"w"], [b"{}"] * 4, 1, 0, [50, 0, 40, 40])
    assert a.delete(b"y", 5) == 1
    assert a.delete(b"y", 6) == -1
    assert a.due(39).tolist() == []
    assert a.due(50).tolist() == [0, 2, 3]
    assert a.expire(45, 7) == [2, 3]
    assert [a.ended(s) for s in (2, 3)] == [7, 8]
    assert (a.last, a.live_count, a.get(b"z"), a.get(b"z", at=6)) == (8, 1, -1, 2)
    a.put_batch([b"z"], [b'{"again":1}'], 9, 0)
    assert a.versions(b"z") == [4, 2]
    assert a.get(b"z", at=8) == -1


def test_compaction_keeps_slot_ids_and_pins_and_drops_files(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t", segment_bytes=256, max_segment_bytes=256)
    keys, docs = _docs(100, 0)
    a.put_batch(keys, docs, 1, 0)
    keys2, docs2 = _docs(100, 1)
    a.put_batch(keys2[:50], docs2[:50], 101, 0)
    pin_old, pin_new = a.pin(100), a.pin()
    before = {s: a.raw(s) for s in [*pin_old, *pin_new]}
    files = set((tmp_path / "t").glob("json.*"))
    assert a.compact(100, garbage=0.0) == 0  # nothing ended at or before 100: bytes move, slots stay
    assert {s: a.raw(s) for s in [*pin_old, *pin_new]} == before
    assert not files & set((tmp_path / "t").glob("json.*"))  # every old segment went
    assert a.compact(a.last, garbage=0.5) == 50  # the replaced versions
    with pytest.raises(StalePin):
        list(pin_old)
    with pytest.raises(StalePin):
        a.get(b"1", at=100)
    assert {s: a.raw(s) for s in pin_new} == {s: before[s] for s in pin_new}
    assert a.free.tolist() == list(range(50))
    a.put_batch([b"new"], [b'{"n":1}'], a.last + 1, 0)
    assert a.get(b"new") == 0
    assert a.versions(b"1") == [101]


def test_a_fresh_load_scans_one_slice_a_chunk(tmp_path: Path) -> None:
    a = TopicArena(tmp_path / "t", segment_bytes=1 << 20)
    keys, docs = _docs(10_000)
    for first in range(0, 10_000, 100):
        a.put_batch(keys[first : first + 100], docs[first : first + 100], first + 1, 0)
    chunks = list(a.pin().scan())
    assert [len(s) for s, _ in chunks] == [4096, 4096, 1808]
    slots = np.concatenate([s for s, _ in chunks])
    assert slots.tolist() == list(range(10_000))
    assert [d["id"] for _, ds in chunks for d in ds] == list(range(10_000))


def test_the_key_hash_is_stable() -> None:
    assert key_hash(b"42") == 0x3224B088
    assert key_hash("ключ".encode()) == key_hash("ключ".encode())


@pytest.mark.parametrize("most", [0, 128], ids=["vector", "key by key"])
def test_keys_that_share_a_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, most: int) -> None:
    """Eight hashes for every key: most keys find another key's entry first and walk on, and a
    probe finds slots whose hash matches and whose key does not; in vector steps and key by key
    (a batch of at most ``SMALL`` distinct keys)."""
    from sowdb.engine.arena import small, store, view

    def few(key: bytes) -> int:
        return key_hash(key) & 7

    monkeypatch.setattr(store, "key_hash", few)
    monkeypatch.setattr(view, "key_hash", few)
    monkeypatch.setattr(small, "key_hash", few)
    monkeypatch.setattr(small, "SMALL", most)
    a = TopicArena(tmp_path / "t", table_capacity=1)
    model: dict[bytes, int] = {}  # key -> the tag of its live version
    bookmark = 1
    for tag, (first, n) in enumerate([(0, 40), (20, 40), (0, 80), (70, 5), (5, 30)]):
        keys, docs = _docs(n, tag, first)
        if tag % 2:
            keys, docs = keys + keys[:3], docs + docs[:3]  # repeats in one batch
        assert a.new_keys(keys) == len(set(keys) - set(model))
        ended = a.put_batch(keys, docs, bookmark, tag)
        assert [e >= 0 for e in ended[: len(set(keys))]] == [k in model for k in keys[: len(set(keys))]]
        model.update(dict.fromkeys(keys, tag))
        bookmark += len(keys)
        gone = f"{first + 1}".encode()
        a.delete(gone, bookmark)
        model.pop(gone, None)
        bookmark += 1
    r = ArenaReader(tmp_path / "t")
    for i in range(100):
        key = str(i).encode()
        got = [orjson.loads(v.raw(s))["tag"] if (s := v.get(key)) >= 0 else None for v in (a, r)]
        assert got == [model.get(key)] * 2, key
    assert a.live_count == len(model)
    assert list(a.get_many([str(i).encode() for i in range(100)]) >= 0) == [
        str(i).encode() in model for i in range(100)
    ]
