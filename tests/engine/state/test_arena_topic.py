"""A topic in an arena against the same topic as objects (issue 39): random publishes (keys
repeated within a batch), deletes, history and its trims, compactions and snapshots taken earlier; after every
step every read path of the state layer answers alike: point reads, the records, a snapshot
taken before (still what it was), the hash index, the columns, the point lookup and the
version chains of the history (walked back to random points)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from sowdb.config import HistoryConfig, TopicConfig
from sowdb.engine import records
from sowdb.engine.records import PublishParts, StoredRecord
from sowdb.engine.state import ArenaTopic, SowTopic, arena_topic, version_at
from sowdb.expr import compile_filter

KEYS = ["1", "2", "42", "ключ", "k" * 300, "x"]
SYMBOLS = ["A", "B", "7", "", None]


def _rows(recs: Sequence[StoredRecord]) -> dict[str, tuple[bytes, int]]:
    return {r.sow_key: (r.raw, r.bookmark) for r in recs}


class TopicMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="arena-topic-"))
        self.bookmark = 0
        self.now = 1_000_000
        self.snapshots: list[tuple[Sequence[StoredRecord], dict[str, tuple[bytes, int]]]] = []

    @initialize(history=st.booleans())
    def start(self, history: bool) -> None:
        config = TopicConfig(
            name="t",
            key=("/id",),
            indexes=("/s",),
            history=HistoryConfig(window_s=3600.0, granularity_s=0.0) if history else None,
        )
        self.arena = ArenaTopic(config, self.dir / "a")
        self.objects = SowTopic(config)

    def _version(self, key: str, s: Any, p: int) -> list[StoredRecord]:
        self.bookmark += 1
        doc = {"id": key, "p": p} | ({} if s is None else {"s": s})
        raw = orjson.dumps(doc)
        return [StoredRecord("t", key, orjson.loads(raw), raw, self.bookmark, self.now) for _ in range(2)]

    @rule(batch=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(SYMBOLS), st.integers(0, 9)), max_size=6))
    def publish(self, batch: list[tuple[str, Any, int]]) -> None:
        self.now += 1_000
        pairs = [self._version(k, s, p) for k, s, p in batch]
        olds_a = self.arena.put_many([a for a, _ in pairs])
        olds_o = self.objects.put_many([o for _, o in pairs])
        ended = [o and (o.sow_key, o.raw, o.bookmark, o.timestamp_us, o.expiry_us) for o in olds_a]
        assert ended == [o and (o.sow_key, o.raw, o.bookmark, o.timestamp_us, o.expiry_us) for o in olds_o]

    @rule(batch=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(SYMBOLS), st.integers(0, 9)), max_size=6))
    def publish_unfollowed(self, batch: list[tuple[str, Any, int]]) -> None:
        """A publish nobody takes the versions of (``put_docs``): the arena makes no record."""
        self.now += 1_000
        first = self.bookmark + 1
        self.bookmark += len(batch)
        keys = [k for k, _, _ in batch]
        raws = [orjson.dumps({"id": k, "p": p} | ({} if s is None else {"s": s})) for k, s, p in batch]
        self.arena.put_docs(PublishParts(keys, [orjson.loads(r) for r in raws], raws, first, self.now))
        self.objects.put_docs(PublishParts(keys, [orjson.loads(r) for r in raws], raws, first, self.now))

    @rule(
        batch=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(SYMBOLS), st.integers(0, 9)), max_size=6),
        want_olds=st.booleans(),
    )
    def publish_followed(self, batch: list[tuple[str, Any, int]], want_olds: bool) -> None:
        """A publish someone follows (``versions``, ``put_followed``, ``after_fan_out``): the same
        versions ended, and every version's content while its followers have it."""
        self.now += 1_000
        first = self.bookmark + 1
        self.bookmark += len(batch)
        keys = [k for k, _, _ in batch]
        raws = [orjson.dumps({"id": k, "p": p} | ({} if s is None else {"s": s})) for k, s, p in batch]
        olds = []
        for topic in (self.arena, self.objects):
            docs = [orjson.loads(r) for r in raws]
            parts = PublishParts(keys, docs, raws, first, self.now)
            versions = topic.versions(parts)
            ended = topic.put_followed(versions, parts, want_olds=want_olds)
            assert [(v.sow_key, v.data, v.raw, v.bookmark) for v in versions] == [
                (k, d, r, b) for k, d, r, b in zip(keys, docs, raws, range(first, first + len(keys)), strict=True)
            ]
            topic.after_fan_out(versions)
            assert [v.data for v in versions] == docs  # decoded again where dropped
            olds.append([o and (o.sow_key, o.raw, o.bookmark, o.timestamp_us, o.data) for o in ended])
        if want_olds:
            assert olds[0] == olds[1]

    @rule(key=st.sampled_from(KEYS))
    def delete(self, key: str) -> None:
        self.bookmark += 1
        self.now += 1_000
        a = self.arena.remove(key, self.bookmark, self.now)
        o = self.objects.remove(key, self.bookmark, self.now)
        assert (a and (a.raw, a.bookmark)) == (o and (o.raw, o.bookmark))

    @rule(back=st.integers(0, 12_000), limit=st.integers(1, 4))
    def trim(self, back: int, limit: int) -> None:
        """H-1's trim below a cutoff, a few entries at a time: the chains behind the current
        versions lose the same versions in both, and a later update links the chain as trimmed
        (the arena keeps the current versions a publish made: a stale chain behind one would
        bring a trimmed version back)."""
        if self.arena.history is None:
            return
        cutoff = self.now - back
        assert self.arena.trim_history(cutoff, limit) == self.objects.trim_history(cutoff, limit)

    @rule()
    def compact(self) -> None:
        self.arena.store.compact(force=True)

    @rule()
    def take_snapshot(self) -> None:
        snap = self.arena.snapshot()
        self.snapshots.append((snap, _rows(self.objects.snapshot())))
        del self.snapshots[:-3]

    @invariant()
    def same_records(self) -> None:
        if not hasattr(self, "arena"):
            return
        assert len(self.arena.records) == len(self.objects.records)
        assert self.arena.stored_bytes == self.objects.stored_bytes
        assert _rows(self.arena.snapshot()) == _rows(self.objects.snapshot())
        for key in KEYS:
            a, o = self.arena.records.get(key), self.objects.records.get(key)
            assert (a and (a.raw, a.bookmark, a.timestamp_us)) == (o and (o.raw, o.bookmark, o.timestamp_us))
            assert (key in self.arena.records) == (key in self.objects.records)

    @invariant()
    def snapshots_keep_what_they_saw(self) -> None:
        for snap, rows in self.snapshots:
            assert _rows(snap) == rows

    @invariant()
    def the_index_and_the_columns_find_the_matches(self) -> None:
        if not hasattr(self, "arena"):
            return
        for literal in ("A", "7", 7):
            flt = compile_filter(f"/s = {orjson.dumps(literal).decode()} AND /p >= 0")
            found = self.arena.indexed(flt.conjuncts)
            assert found is not None
            expected = {r.sow_key for r in self.objects.snapshot() if flt(r.data or {}, r)}
            assert {r.sow_key for r in found if flt(r.data or {}, r)} == expected
            if self.arena.columns is None:
                self.arena.columns = self.arena.new_columns()
            for term in flt.comparisons:
                self.arena.columns.want(term)
            while self.arena.build_columns():
                pass
            candidates = self.arena.columns.candidates(flt.comparisons, 1 << 30)
            assert candidates is not None
            assert expected <= {r.sow_key for r in candidates}

    @invariant()
    def the_history_walks_back_alike(self) -> None:
        if not hasattr(self, "arena") or self.arena.history is None:
            return
        for key in KEYS:
            for point in range(0, self.bookmark + 1, max(1, self.bookmark // 7)):
                a = version_at(self.arena.head(key), point, 1 << 62)
                o = version_at(self.objects.head(key), point, 1 << 62)
                assert (a and (a.raw, a.bookmark)) == (o and (o.raw, o.bookmark)), (key, point)

    @invariant()
    def the_heads_at_a_point_walk_back_alike(self) -> None:
        """A historical query's chains (``heads_at``): the arena's, in its two parts, reach the
        same versions as the objects' chains, by bookmark and by time."""
        if not hasattr(self, "arena") or self.arena.history is None:
            return
        for point in range(0, self.bookmark + 1, max(1, self.bookmark // 5)):
            for walk in ((point, 1 << 62), (1 << 62, 1_000_000 + point * 100)):
                seen = [version_at(h, *walk) for h in self.arena.heads_at(*walk)]
                want = [version_at(h, *walk) for h in self.objects.heads_at(*walk)]
                assert _rows([v for v in seen if v]) == _rows([v for v in want if v]), walk

    def teardown(self) -> None:
        if hasattr(self, "arena"):
            self.arena.close()
        shutil.rmtree(self.dir, ignore_errors=True)


TopicMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
test_an_arena_topic_answers_as_the_object_topic = TopicMachine.TestCase


def test_columns_of_an_arena_topic_skip_ended_versions() -> None:
    """A version replaced or deleted keeps its slot until a compaction, and its values in the
    columns: the candidates are the current versions only."""
    root = Path(tempfile.mkdtemp(prefix="arena-topic-"))
    try:
        topic = ArenaTopic(TopicConfig(name="t", key=("/id",)), root / "a")
        flt = compile_filter("/p > 5")
        topic.columns = topic.new_columns()
        topic.columns.want(flt.comparisons[0])
        for b, (key, p) in enumerate([("a", 9), ("b", 9), ("a", 1), ("c", 7)], 1):
            raw = orjson.dumps({"id": key, "p": p})
            topic.put(StoredRecord("t", key, orjson.loads(raw), raw, b, 0))
        topic.remove("c", 5, 0)
        while topic.build_columns():
            pass
        found = topic.columns.candidates(flt.comparisons, 1 << 30)
        assert found is not None
        assert sorted(r.sow_key for r in found) == ["b"]
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_arenas_go_to_the_data_directory_when_the_ram_file_system_is_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A container's ``/dev/shm`` is 64 MB by default: an arena outgrowing it would crash the
    server on a write, so below ``MIN_SHM_FREE`` free the arenas go under the data directory."""
    monkeypatch.setattr(arena_topic, "MIN_SHM_FREE", 1 << 62)
    root = arena_topic.new_arena_root(tmp_path / "data" / "arena")
    assert root.parent == tmp_path / "data" / "arena"
    topic = ArenaTopic(TopicConfig(name="t", key=("/id",)), root / "0000")
    raw = orjson.dumps({"id": "a"})
    topic.put(StoredRecord("t", "a", orjson.loads(raw), raw, 1, 0))
    assert topic.records["a"].raw == raw
    topic.close()


def test_a_followed_publishs_versions_in_an_arena_keep_their_documents_only_for_the_fan_out(tmp_path: Path) -> None:
    """The arena keeps the records: the versions made for a publish's followers hold their
    decoded documents without entering the ring of recent documents, and drop them once the
    followers have had them (a topic of objects keeps its versions, decoded while recent)."""
    config = TopicConfig(name="t", key=("/id",), indexes=("/s",))
    arena, objects = ArenaTopic(config, tmp_path / "a"), SowTopic(config)
    raws = [orjson.dumps({"id": k, "s": "A"}) for k in ("a", "b")]
    for topic in (arena, objects):
        docs = [orjson.loads(r) for r in raws]
        parts = PublishParts(["a", "b"], docs, raws, 1, 0)
        versions = topic.versions(parts)
        assert [v.kept for v in versions] == docs  # for the followers
        topic.put_followed(versions, parts, want_olds=True)
        topic.after_fan_out(versions)
        kept = [v.kept for v in versions]
        in_ring = [any(v is r for r in records._recent.held) for v in versions]
        if topic is arena:
            assert kept == [None, None]
            assert in_ring == [False, False]
            assert [v.slot for v in versions] == [arena.store.slot("a"), arena.store.slot("b")]
        else:
            assert kept == docs
            assert in_ring == [True, True]
    assert [r.sow_key for r in arena.indexed(compile_filter("/s = 'A'").conjuncts) or []] == ["a", "b"]
    arena.close()


def test_a_point_in_the_past_walks_only_the_chains_written_since(tmp_path: Path) -> None:
    """A historical query over an arena makes records only of the keys written after its point
    (and the tombstones): a record current then and now stays a slot, scanned as the current
    state is (issue 39: making every head a record cost 2.8x the objects store's CPU)."""
    config = TopicConfig(name="t", key=("/id",), history=HistoryConfig(window_s=3600.0, granularity_s=0.0))
    topic = ArenaTopic(config, tmp_path / "a")
    for b, (key, p) in enumerate([("a", 1), ("b", 1), ("c", 1), ("d", 1), ("a", 2)], 1):
        raw = orjson.dumps({"id": key, "p": p})
        topic.put(StoredRecord("t", key, orjson.loads(raw), raw, b, b * 10))
    topic.remove("d", 6, 60)
    heads = topic.heads_at(4, 1 << 62)
    assert sorted(topic.store.arena.key(int(s)) for s in heads.still.slots) == [b"b", b"c"]
    assert [(r.sow_key, type(r).__name__) for r in heads.walked] == [("a", "StoredRecord"), ("d", "Tombstone")]
    then = [version_at(h, 4, 1 << 62) for h in heads.walked]
    assert [v and v.raw for v in then] == [b'{"id":"a","p":1}', b'{"id":"d","p":1}']
    by_time = topic.heads_at(1 << 62, 35)  # written at times 10 .. 50: a's second version after 35
    assert sorted(topic.store.arena.key(int(s)) for s in by_time.still.slots) == [b"b", b"c"]
    topic.close()
