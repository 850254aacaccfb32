"""The arena against a plain model (issue 39): random publishes (keys repeated within a batch,
gaps between bookmarks, as a topic sees the journal's), delta publishes, deletes, expirations,
compactions and pins taken at earlier bookmarks; after every step, every read path (point reads
now and as of a pin, version chains, pinned iteration, chunked scans, records, a reader over
the same files at the committed bookmark) answers as the model does."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from sowdb.engine.arena import ArenaReader, Pin, StalePin, TopicArena
from sowdb.engine.records import merge_delta
from tests.engine.arena.model import Model

KEYS = [b"1", b"2", b"42", "ключ".encode(), "🔑".encode(), b'"EU",7', b"k" * 300, b""]
keys = st.sampled_from(KEYS)
values = st.fixed_dictionaries(
    {"v": st.integers(-5, 5), "s": st.text(max_size=8)},
    optional={
        "pad": st.sampled_from(["", "x" * 150, "é" * 1000]),
        "n": st.fixed_dictionaries({"a": st.integers(-(2**62), 2**62)}),
    },
)


class ArenaMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="arena-"))
        self.model = Model()
        self.pins: list[Pin] = []
        self.now = 1_000

    @initialize(segment=st.sampled_from([64, 256, 4096]), slots=st.sampled_from([1, 4, 64]))
    def start(self, segment: int, slots: int) -> None:
        self.arena = TopicArena(
            self.dir / "a",
            "t",
            segment_bytes=segment,
            max_segment_bytes=4 * segment,
            slot_capacity=slots,
            table_capacity=2,
        )
        self.reader = ArenaReader(self.dir / "a", "t")

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # ---------------------------------------------------------------------------------- changes

    @rule(
        batch=st.lists(st.tuples(keys, values, st.sampled_from([0, 0, 1, 3, 8])), min_size=1, max_size=6),
        gap=st.integers(1, 3),
        spread=st.booleans(),
        commit=st.booleans(),
        whole=st.booleans(),
        counted=st.booleans(),
    )
    def publish(
        self,
        batch: list[tuple[bytes, dict[str, Any], int]],
        gap: int,
        spread: bool,
        commit: bool,
        whole: bool,
        counted: bool,
    ) -> None:
        """``whole``: as the writer gives a publish, the first bookmark and one expiry (where they
        are so: the small path takes it); ``counted``: after ``new_keys``, as the writer does."""
        first = self.model.last + gap
        marks = [first + 2 * i for i in range(len(batch))] if spread else list(range(first, first + len(batch)))
        docs = [orjson.dumps(v) for _, v, _ in batch]
        exps = [self.now + ttl if ttl else 0 for _, _, ttl in batch]
        ks = [k for k, _, _ in batch]
        if counted:
            assert self.arena.new_keys(ks) == sum(self.model.live(k) is None for k in dict.fromkeys(ks))
        self._put(ks, docs, marks, exps, commit, whole=whole)

    @rule(key=keys, delta=values)
    def delta_publish(self, key: bytes, delta: dict[str, Any]) -> None:
        slot = self.arena.get(key)
        live = self.model.live(key)
        assert (slot >= 0) == (live is not None)
        base = orjson.loads(self.arena.raw(slot)) if slot >= 0 else {}
        assert live is None or base == orjson.loads(live.doc)
        self._put([key], [orjson.dumps(merge_delta(base, delta))], [self.model.last + 1], [0], True)

    def _put(
        self,
        ks: list[bytes],
        docs: list[bytes],
        marks: list[int],
        exps: list[int],
        commit: bool,
        *,
        whole: bool = False,
    ) -> None:
        self.now += 1
        one = whole and marks == list(range(marks[0], marks[0] + len(marks))) and len(set(exps)) == 1
        ended = self.arena.put_batch(
            ks, docs, marks[0] if one else marks, self.now, exps[0] if one else exps, commit=commit
        )
        for key, doc, mark, exp, slot in zip(ks, docs, marks, exps, ended, strict=True):
            old = self.model.put(key, doc, mark, self.now, exp)
            assert (slot >= 0) == (old is not None)
            if old is not None:
                assert self.arena.key(slot) == key
                assert self.arena.bookmark(slot) == old.born
                assert self.arena.ended(slot) == mark

    @rule(key=keys, gap=st.integers(1, 2))
    def delete(self, key: bytes, gap: int) -> None:
        mark = self.model.last + gap
        slot = self.arena.delete(key, mark)
        old = self.model.delete(key, mark)
        assert (slot >= 0) == (old is not None)
        assert old is None or self.arena.bookmark(slot) == old.born

    @rule(dt=st.integers(0, 6))
    def expire(self, dt: int) -> None:
        self.now += dt
        mark = self.model.last + 1
        slots = self.arena.expire(self.now, mark)
        due = self.model.due(self.now)
        assert [self.arena.key(s) for s in slots] == [v.key for v in due]
        for i, v in enumerate(due):
            self.model.delete(v.key, mark + i)

    @rule(data=st.data(), garbage=st.sampled_from([0.0, 0.5, 1.0]))
    def compact(self, data: st.DataObject, garbage: float) -> None:
        oldest = data.draw(st.integers(self.model.floor, self.model.last + 2))
        self.arena.compact(oldest, garbage)
        self.model.compact(oldest)
        assert self.arena.floor == self.model.floor
        for pin in self.pins:
            if pin.bookmark < self.model.floor:
                try:
                    list(pin)
                except StalePin:
                    pass
                else:
                    raise AssertionError(f"{pin} below the floor {self.model.floor} still reads")
        self.pins = [p for p in self.pins if p.bookmark >= self.model.floor]

    @rule(data=st.data())
    def take_pin(self, data: st.DataObject) -> None:
        at = data.draw(st.integers(self.model.floor, self.model.last))
        self.pins = [*self.pins[-3:], self.arena.pin(at)]

    @precondition(lambda self: self.arena.committed != self.arena.last)
    @rule()
    def commit(self) -> None:
        self.arena.commit()

    # ---------------------------------------------------------------------------------- reads

    @invariant()
    def current_state(self) -> None:
        a, m = self.arena, self.model
        live = {k: v for k in m.versions if (v := m.live(k)) is not None}
        assert a.live_count == len(live)
        assert a.live_bytes == sum(len(v.doc) for v in live.values())
        for key in KEYS:
            slot, v = a.get(key), live.get(key)
            assert (slot >= 0) == (v is not None), key
            if v is not None:
                assert (a.raw(slot), a.bookmark(slot), a.timestamp(slot), a.expiry(slot)) == (
                    v.doc,
                    v.born,
                    v.ts,
                    v.exp,
                )
                rec = a.record(slot)
                assert (rec.sow_key, rec.raw, rec.bookmark, rec.topic) == (key.decode(), v.doc, v.born, "t")
            assert [a.bookmark(s) for s in a.versions(key)] == [v.born for v in m.kept(key)], key

    @invariant()
    def pinned_reads(self) -> None:
        a, m = self.arena, self.model
        for pin in [*self.pins, a.pin()]:
            want = m.visible(pin.bookmark)
            got = {a.key(s): s for s in pin}
            assert {k: a.raw(s) for k, s in got.items()} == {k: v.doc for k, v in want.items()}
            for key in KEYS:
                slot, v = a.get(key, at=pin.bookmark), want.get(key)
                assert (a.bookmark(slot) if slot >= 0 else None) == (v.born if v else None)
            scanned = [(int(s), d) for slots, docs in pin.scan(chunk=3) for s, d in zip(slots, docs, strict=True)]
            assert sorted(s for s, _ in scanned) == sorted(got.values())
            assert all(d == orjson.loads(a.raw(s)) for s, d in scanned)

    @invariant()
    def reader_sees_the_commit(self) -> None:
        r, m = self.reader, self.model
        committed = self.arena.committed
        assert r.committed == committed
        want = m.visible(committed)
        assert {r.key(s): r.raw(s) for s in r.pin()} == {k: v.doc for k, v in want.items()}
        for key in KEYS[:3]:
            slot = r.get(key)
            assert (r.raw(slot) if slot >= 0 else None) == (want[key].doc if key in want else None)


ArenaMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestArena = ArenaMachine.TestCase
