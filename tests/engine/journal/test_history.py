"""History (H-1, H-2), expiration (X-1), journal retention, recovery (J-2, J-3) on the engine
over a real RocksDB, with an injected clock so time-dependent rules are exact and fast."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.config import Config, config_from_dict
from sowdb.engine import Engine, GroupEnd, InMessage, QueryOptions, RecordBatch
from sowdb.engine.bookmarks import Point, parse_bookmark
from sowdb.engine.live.options import SubscriptionOptions
from sowdb.engine.state import columns
from sowdb.errors import FailedPrecondition, InvalidArgument, OutOfRange
from sowdb.storage import Store
from sowdb.storage.keys import OP_DELETE, OP_EXPIRE, OP_PUBLISH, encode_seq
from tests.support import T0, ManualClock, S

TOPICS: dict[str, Any] = {
    "topic": [
        {"name": "book", "key": ["/id"], "history": {"window": "100s"}, "indexes": ["/sym"]},
        {"name": "coarse", "key": ["/id"], "history": {"window": "1h", "granularity": "10s"}},
        {"name": "plain", "key": ["/id"]},
        {"name": "ticks", "key": ["/id"], "durability": "transient", "history": {"window": "100s"}},
        {"name": "ttl", "key": ["/id"], "expiration": "30s"},
    ]
}


def config(tmp_path: Path, topics: dict[str, Any] = TOPICS, **server: Any) -> Config:
    """The config as the TOML reader makes it (``server`` holds [server] settings)."""
    return config_from_dict({**topics, "server": {"data_dir": str(tmp_path), **server}}, source="<tests>")


def open_engine(tmp_path: Path, clock: ManualClock, **server: Any) -> Engine:
    cfg = config(tmp_path, **server)
    return Engine.open(cfg, Store(tmp_path), clock=clock)


def pub(engine: Engine, topic: str, *docs: dict[str, Any], ttl: float | None = None) -> int:
    msgs = [InMessage(orjson.dumps(d)) for d in docs]
    return engine.publish(topic, msgs, ttls=None if ttl is None else [ttl] * len(msgs))[1]


async def sow(engine: Engine, topic: str, bookmark: str = "", **kw: Any) -> dict[str, Any]:
    out = {}
    async for event in engine.sow(QueryOptions(topic=topic, bookmark=bookmark, batch_size=100, **kw)):
        if isinstance(event, RecordBatch):
            out.update({r.sow_key: orjson.loads(r.raw) for r in event.records})
    return out


def test_bookmark_forms() -> None:
    assert parse_bookmark("42") == Point(seq=42)
    assert parse_bookmark("now").now
    assert parse_bookmark("NOW").now
    assert parse_bookmark("0") == Point(seq=0)
    compact = parse_bookmark("20231114T221320Z").timestamp_us
    assert compact == T0
    assert parse_bookmark("20231114T221320.5Z").timestamp_us == T0 + S // 2
    assert parse_bookmark("2023-11-14T22:13:20+00:00").timestamp_us == T0
    assert parse_bookmark("2023-11-14T23:13:20+01:00").timestamp_us == T0
    assert parse_bookmark("2023-11-14 22:13:20").timestamp_us == T0  # no zone: UTC
    for bad in ("", "yesterday", "-5", "2023-13-01"):
        with pytest.raises(InvalidArgument):
            parse_bookmark(bad)


async def test_state_as_of_a_sequence_or_a_time_includes_later_deletes(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    clock.at(1)
    b1 = pub(engine, "book", {"id": 1, "v": "a", "sym": "X"}, {"id": 2, "v": "a", "sym": "Y"})
    clock.at(2)
    b2 = pub(engine, "book", {"id": 1, "v": "b", "sym": "X"})
    clock.at(3)
    engine.sow_delete("book", sow_keys=["2"])
    clock.at(4)
    pub(engine, "book", {"id": 3, "v": "a", "sym": "X"})
    clock.at(5)

    assert await sow(engine, "book", str(b1)) == {
        "1": {"id": 1, "v": "a", "sym": "X"},
        "2": {"id": 2, "v": "a", "sym": "Y"},
    }
    assert await sow(engine, "book", str(b2)) == {
        "1": {"id": 1, "v": "b", "sym": "X"},
        "2": {"id": 2, "v": "a", "sym": "Y"},
    }
    assert set(await sow(engine, "book", "now")) == {"1", "3"}
    assert await sow(engine, "book", "0") == {}
    # timestamps: the last point at or before the time
    assert set(await sow(engine, "book", "20231114T221322Z")) == {"1", "2"}  # t=2: before the delete
    assert set(await sow(engine, "book", "2023-11-14T22:13:23.5+00:00")) == {"1"}  # after it
    # filter, index field, order, paging and aggregation work on the historical state
    assert await sow(engine, "book", str(b2), filter="/sym = 'Y'") == {"2": {"id": 2, "v": "a", "sym": "Y"}}
    assert list(await sow(engine, "book", str(b1), order_by="/id DESC", top_n=1)) == ["2"]
    grouped = await sow(engine, "book", str(b2), grouping=["/sym"], projection=["/sym", "COUNT(/id) AS /n"])
    assert sorted((g["sym"], g["n"]) for g in grouped.values()) == [("X", 1), ("Y", 1)]
    assert await sow(engine, "book", str(b1), sow_keys=["2", "9"]) == {"2": {"id": 2, "v": "a", "sym": "Y"}}

    with pytest.raises(FailedPrecondition, match="keeps no history"):
        await sow(engine, "plain", "1")
    with pytest.raises(InvalidArgument, match="after the latest"):
        await sow(engine, "book", "999")
    engine.close()


async def test_points_older_than_the_window_return_nothing_and_trimming_keeps_the_window(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    clock.at(0)
    pub(engine, "book", {"id": 1, "v": 0})
    clock.at(50)
    b50 = pub(engine, "book", {"id": 1, "v": 50}, {"id": 2, "v": 50})
    clock.at(60)
    engine.sow_delete("book", sow_keys=["2"])  # deleted before the window's start below
    clock.at(200)
    pub(engine, "book", {"id": 1, "v": 200})
    clock.at(260)  # window 100 s: points before t=160 are out of reach
    assert await sow(engine, "book", str(b50)) == {}  # too old: empty, not a partial answer
    inside = await sow(engine, "book", "20231114T221600Z")  # t=160
    assert inside == {"1": {"id": 1, "v": 50}}

    assert engine.writer.trim_history() is False
    versions = [(e.sow_key, e.seq, e.op) for e in engine.store.iter_history() if e.topic == "book"]
    # key 1 keeps its state at the window's start (v=50) and later; key 2 is gone entirely
    assert versions == [("1", 2, OP_PUBLISH), ("1", 5, OP_PUBLISH)]
    assert await sow(engine, "book", "20231114T221600Z") == inside
    assert await sow(engine, "book", "now") == {"1": {"id": 1, "v": 200}}  # the current state is kept
    history = engine.topics.sow["book"].history
    assert history is not None
    floor = history.floor
    assert floor == 4
    engine.close()

    # the chains and the floor come back after a restart
    engine = open_engine(tmp_path, clock)
    assert await sow(engine, "book", "20231114T221600Z") == inside
    history = engine.topics.sow["book"].history
    assert history is not None
    assert history.floor == floor
    engine.close()


async def test_granularity_keeps_one_version_per_interval(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    for t, v in [(0, 0), (3, 3), (9, 9), (12, 12), (13, 13)]:
        clock.at(t)
        pub(engine, "coarse", {"id": 1, "v": v})
    versions = [orjson.loads(e.payload)["v"] for e in engine.store.iter_history() if e.topic == "coarse"]
    assert versions == [9, 13]  # the last of [0 s, 10 s) and of [10 s, 20 s)
    # a point is seen at the granularity: t=10 shows the last version of [0 s, 10 s); at t=5 the
    # only version of that interval (stamped t=9) is not yet in effect
    assert (await sow(engine, "coarse", "20231114T221330Z"))["1"]["v"] == 9
    assert await sow(engine, "coarse", "20231114T221325Z") == {}
    engine.close()
    engine = open_engine(tmp_path, clock)
    assert (await sow(engine, "coarse", "20231114T221331Z"))["1"]["v"] == 9
    assert (await sow(engine, "coarse", "now"))["1"]["v"] == 13
    # a delete marker thins like a version: it replaces v 32 (same interval), and v 45 does not
    # replace it (the next interval)
    for t, action in [(20, 20), (32, 32), (34, None), (45, 45)]:
        clock.at(t)
        if action is None:
            engine.sow_delete("coarse", sow_keys=["2"])
        else:
            pub(engine, "coarse", {"id": 2, "v": action})
    kept = [(e.sow_key, e.seq, e.op) for e in engine.store.iter_history() if e.topic == "coarse"]
    assert [(key, op) for key, _, op in kept if key == "2"] == [("2", OP_PUBLISH), ("2", OP_DELETE), ("2", OP_PUBLISH)]
    engine.close()
    # a rebuild from the journal thins the same way
    from sowdb.engine.journal.recovery import rebuild

    store = Store(tmp_path)
    rebuild(store, config(tmp_path))
    assert [(e.sow_key, e.seq, e.op) for e in store.iter_history() if e.topic == "coarse"] == kept
    store.close()


async def test_expiration_removes_journals_and_tells_oof_subscribers(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    sub, events = engine.placement.sow_and_subscribe(QueryOptions(topic="ttl"), options=SubscriptionOptions(oof=True))
    async for _ in events:
        pass
    sub.release()
    pub(engine, "ttl", {"id": 1})  # topic default: 30 s
    pub(engine, "ttl", {"id": 2}, ttl=5)  # per message
    pub(engine, "ttl", {"id": 3}, ttl=0)  # 0: never
    clock.at(4)
    assert engine.writer.expire_due() == 0
    clock.at(5)
    assert engine.writer.expire_due() == 1
    assert set(await sow(engine, "ttl")) == {"1", "3"}
    pub(engine, "ttl", {"id": 1, "again": True})  # republished: a new 30 s from t=5
    clock.at(31)
    assert engine.writer.expire_due() == 0
    clock.at(35)
    assert engine.writer.expire_due() == 1
    assert set(await sow(engine, "ttl")) == {"3"}
    queued = [(e.kind, e.record.sow_key, e.reason) for e in sub.drain()]
    assert queued[-1] == ("oof", "1", "expired")
    assert ("oof", "2", "expired") in queued
    ops = [(e.sow_key, e.op) for e in engine.store.iter_journal()]
    assert ops[-1] == ("1", OP_EXPIRE)
    assert ("2", OP_EXPIRE) in ops
    engine.close()

    # a record that expired while the server was down goes at the first sweep after start
    pub_engine = open_engine(tmp_path, clock)
    pub(pub_engine, "ttl", {"id": 4}, ttl=1)
    pub_engine.close()
    clock.at(100)
    engine = open_engine(tmp_path, clock)
    assert engine.writer.expire_due() == 1
    assert set(await sow(engine, "ttl")) == {"3"}
    engine.close()


async def test_journal_retention_by_entries_and_age(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock, journal_max_entries=5)
    for i in range(12):
        clock.at(i)
        pub(engine, "plain", {"id": i})
    assert engine.journal.trim() == 7
    assert [e.seq for e in engine.store.iter_journal()] == [8, 9, 10, 11, 12]
    assert engine.journal.replay_start(parse_bookmark("7")) == 7
    assert engine.journal.replay_start(parse_bookmark("0")) == 7  # 0: from the start of what is kept
    with pytest.raises(OutOfRange) as err:
        engine.journal.replay_start(parse_bookmark("6"))
    assert err.value.oldest_bookmark == 7
    with pytest.raises(OutOfRange):
        engine.journal.replay_start(parse_bookmark("20231114T221320Z"))  # t=0, journal starts at t=7
    assert engine.journal.replay_start(parse_bookmark("20231114T221328Z")) == 9  # t=8 -> entry 9
    engine.close()

    engine = open_engine(tmp_path, clock, journal_max_age="3s")
    clock.at(12)
    assert engine.journal.trim() == 9  # entries of t < 9 s
    assert engine.store.first_sequence() == 10
    engine.close()


async def test_journal_retention_by_size_keeps_about_that_much_and_frees_the_space(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    rnd = random.Random(3)
    for i in range(2000):  # ~1 KB of incompressible text each
        pub(engine, "plain", {"id": i, "pad": "".join(rnd.choice("abcdefghij0123456789") for _ in range(1000))})
    engine.close()
    store = Store(tmp_path)  # measured as it is on disk after a restart
    full = store.journal_bytes()
    store.close()
    engine = open_engine(tmp_path, clock, journal_max_bytes=full // 2)
    upto = engine.journal.trim()
    assert 800 <= upto <= 1200  # about half of the entries went
    assert engine.store.journal_bytes() <= full * 0.6  # and their space with them
    assert engine.journal.trim() <= upto + 100  # the next look sees the new size: no over-trimming
    engine.close()


async def test_a_replay_after_a_crash_thins_history_like_the_writer(tmp_path: Path) -> None:
    """J-2 + H-1: journal entries the history had not taken yet (a crash between the two) are
    thinned against the versions stored before them, as the writer would have."""
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    for t, v in [(0, 0), (3, 3)]:
        clock.at(t)
        pub(engine, "coarse", {"id": 1, "v": v}, {"id": 2, "v": v})
    engine.close()
    store = Store(tmp_path)
    b = store.batch("coarse", current=False, history=False)
    b.publish(5, T0 + 5 * S, "1", b'{"id":1,"v":5}')  # the interval of v 3: replaces it
    b.publish(6, T0 + 12 * S, "1", b'{"id":1,"v":12}')
    b.publish(7, T0 + 13 * S, "2", b'{"id":2,"v":13}')  # the next interval: follows v 3
    b.commit()
    for family in (store.db.family("current"), store.db.family("history")):
        family.put(b"\x00applied", encode_seq(4))  # as if only the journal took 5..7
    store.close()

    engine = open_engine(tmp_path, clock)
    assert engine.recovery is not None
    assert engine.recovery.entries == 3
    versions = [(e.sow_key, orjson.loads(e.payload)["v"]) for e in engine.store.iter_history() if e.topic == "coarse"]
    assert versions == [("1", 5), ("1", 12), ("2", 3), ("2", 13)]
    assert (await sow(engine, "coarse", "20231114T221329Z"))["1"]["v"] == 5
    engine.close()
    from sowdb.engine.journal.recovery import rebuild

    store = Store(tmp_path)
    rebuild(store, config(tmp_path))  # the whole journal, thinned in one pass: the same versions
    assert [(e.sow_key, orjson.loads(e.payload)["v"]) for e in store.iter_history() if e.topic == "coarse"] == versions
    store.close()


async def test_journal_ahead_of_current_is_replayed_at_start(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    pub(engine, "book", {"id": 1, "v": 1}, {"id": 2, "v": 1})
    engine.close()
    # a journal written without its current/history (as if those families were lost after it)
    store = Store(tmp_path)
    b = store.batch("book", current=False, history=False)
    b.publish(3, T0, "1", b'{"id":1,"v":2}')
    b.remove(4, T0, "2", b'{"id":2,"v":1}')
    b.publish(5, T0, "7", b'{"id":7,"v":1}')
    b._wb.delete(b"\x00applied", store.db.handle("current"))  # markers behind: journal ahead
    b._wb.delete(b"\x00applied", store.db.handle("history"))
    b.commit()
    store.db.family("current").delete(b"\x00applied")
    store.db.family("history").delete(b"\x00applied")
    store.close()

    engine = open_engine(tmp_path, clock)
    assert engine.recovery is not None
    assert engine.recovery.entries == 5
    assert await sow(engine, "book") == {"1": {"id": 1, "v": 2}, "7": {"id": 7, "v": 1}}
    assert set(await sow(engine, "book", "2")) == {"1", "2"}  # history rebuilt too
    assert engine.store.last_applied() == (5, 5)
    engine.close()


async def test_rebuild_recreates_current_and_history_from_the_journal(tmp_path: Path) -> None:
    from sowdb.engine.journal.recovery import rebuild

    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    for i in range(50):
        clock.at(i)
        pub(engine, "book", {"id": i % 7, "v": i})
    engine.sow_delete("book", filter="/id = 3")
    before_now = await sow(engine, "book")
    before_then = await sow(engine, "book", "20")
    engine.close()

    store = Store(tmp_path)
    store.reset_derived()  # current and history lost
    assert list(store.load_current()) == []
    store.close()
    engine = open_engine(tmp_path, clock)
    assert await sow(engine, "book") == before_now
    assert await sow(engine, "book", "20") == before_then
    engine.close()

    store = Store(tmp_path)
    report = rebuild(store, config(tmp_path))
    assert report is not None
    assert report.entries == 51
    store.close()
    engine = open_engine(tmp_path, clock)
    assert await sow(engine, "book") == before_now
    engine.close()


async def test_damaged_current_is_rebuilt_at_start(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    pub(engine, "book", {"id": 1, "v": 1})
    engine.close()
    store = Store(tmp_path)
    store.db.family("current")[b"book\x001"] = b"\x00" * 24 + b"{not json"
    store.close()
    engine = open_engine(tmp_path, clock)
    assert await sow(engine, "book") == {"1": {"id": 1, "v": 1}}
    engine.close()


async def test_transient_topics_rebuild_from_a_recovery_point(tmp_path: Path) -> None:
    clock = ManualClock()
    topics = {
        "topic": [
            {"name": "all", "key": ["/id"], "durability": "transient"},
            {"name": "recent", "key": ["/id"], "durability": "transient", "recovery_point": "10s"},
            {"name": "after", "key": ["/id"], "durability": "transient", "recovery_point": 3},
        ]
    }
    cfg = config(tmp_path, topics)
    engine = Engine.open(cfg, Store(tmp_path), clock=clock)
    for i in range(1, 5):
        clock.at(i * 10)
        for name in ("all", "recent", "after"):
            pub(engine, name, {"id": i})
    engine.close()
    clock.at(45)
    engine = Engine.open(cfg, Store(tmp_path), clock=clock)
    assert set(await sow(engine, "all")) == {"1", "2", "3", "4"}
    assert set(await sow(engine, "recent")) == {"4"}  # only what was published in the last 10 s
    assert set(await sow(engine, "after")) == {"2", "3", "4"}  # bookmarks after 3 (entry 3 is "all" #2)
    engine.close()


async def test_transient_history_is_rebuilt_with_its_topic(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    clock.at(1)
    b = pub(engine, "ticks", {"id": 1, "v": 1})
    clock.at(2)
    pub(engine, "ticks", {"id": 1, "v": 2})
    engine.sow_delete("ticks", sow_keys=["1"])
    engine.close()
    engine = open_engine(tmp_path, clock)
    assert await sow(engine, "ticks") == {}
    assert await sow(engine, "ticks", str(b)) == {"1": {"id": 1, "v": 1}}
    assert [e.op for e in engine.store.iter_journal()][-1] == OP_DELETE
    engine.close()


def test_long_recoveries_show_a_progress_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from sowdb.engine.journal import recovery

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    advance, close = recovery._progress(1_000_000, "replaying the journal")
    advance(500_000)
    close()
    assert "replaying the journal" in screen.getvalue()
    assert "entries/s" in screen.getvalue()
    quiet = io.StringIO()  # not a terminal: no bar
    monkeypatch.setattr("sys.stderr", quiet)
    advance, close = recovery._progress(1_000_000, "replaying the journal")
    advance(1)
    close()
    assert quiet.getvalue() == ""


async def test_the_chains_come_back_after_a_restart_without_records_of_the_current_versions(
    tmp_path: Path, record_store: str
) -> None:
    """Every point in the history reads the same after a restart, a key deleted and published
    again included (its tombstone is behind its current version, not its end); an arena links
    the chains without making a record of any current version (a record per key was ~40 % of
    the start-up of a topic with history)."""
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    clock.at(1)
    points = [pub(engine, "book", {"id": 1, "v": "a"}, {"id": 2, "v": "a"}, {"id": 3, "v": "a"})]
    clock.at(2)
    points.append(pub(engine, "book", {"id": 1, "v": "b"}))
    clock.at(3)
    points.append(engine.sow_delete("book", sow_keys=["2"])[1])
    clock.at(4)
    points.append(pub(engine, "book", {"id": 2, "v": "c"}))
    clock.at(5)
    points.append(pub(engine, "book", {"id": 1, "v": "d"}))
    before = [await sow(engine, "book", str(p)) for p in points]
    assert before[2] == {"1": {"id": 1, "v": "b"}, "3": {"id": 3, "v": "a"}}
    engine.close()

    engine = open_engine(tmp_path, clock)
    topic = engine.topics.sow["book"]
    if record_store == "arena":
        assert topic.store.made(topic.store.live_slots()) is None  # type: ignore[attr-defined]
    assert topic.history is not None
    assert "2" not in topic.history.tombstones
    assert [await sow(engine, "book", str(p)) for p in points] == before
    assert set(await sow(engine, "book", "now")) == {"1", "2", "3"}
    engine.close()


async def test_a_point_in_the_past_reads_the_unchanged_records_through_the_columns(
    tmp_path: Path, record_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The columns describe the current records, and a record unchanged since a point is the
    one seen there: an arena narrows those by the columns (the filter then decided exactly, no
    document read), and the answer is the one a scan gives, the keys changed since walked back."""
    monkeypatch.setattr(columns, "MIN_RECORDS", 10)
    clock = ManualClock()
    engine = open_engine(tmp_path, clock)
    clock.at(1)
    half = pub(engine, "book", *({"id": i, "p": i % 10} for i in range(40)))
    clock.at(2)
    pub(engine, "book", *({"id": i, "p": 9 - i % 10} for i in range(0, 40, 2)))  # the even ids change
    flt = "/p > 6"

    async def as_of(point: int) -> tuple[dict[str, Any], int]:
        out, scanned = {}, -1
        async for event in engine.sow(QueryOptions(topic="book", bookmark=str(point), filter=flt, batch_size=100)):
            if isinstance(event, RecordBatch):
                out.update({r.sow_key: orjson.loads(r.raw) for r in event.records})
            elif isinstance(event, GroupEnd):
                scanned = event.scanned
        return out, scanned

    scanned_first, looked = await as_of(half)
    assert scanned_first == {str(i): {"id": i, "p": i % 10} for i in range(40) if i % 10 > 6}
    await sow(engine, "book", filter=flt)  # the current query asks for the column of /p
    while engine.build_columns():
        pass
    found, looked_after = await as_of(half)
    assert found == scanned_first
    if record_store == "arena":  # of the 20 unchanged only the 8 of /p > 6 looked at; the 20 changed walked
        assert (looked, looked_after) == (40, 28)
    engine.close()
