"""The journal as the time axis (engine/journal.py) without a server: bookmarks (sequence
numbers, timestamps, ``0``, ``now``) resolved to points of the total order (H-2, H-3, H-4),
the replay of a range as changes, and retention by count and by age on the engine's clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from sowdb.engine import Engine
from sowdb.engine.bookmarks import parse_bookmark
from sowdb.errors import InvalidArgument, OutOfRange
from tests.support import T0, ManualClock, S, open_engine, publish

T0_TEXT = "20231114T221320Z"
""":data:`T0` as a timestamp bookmark."""


def at(seconds: int) -> str:
    """The timestamp bookmark ``seconds`` after :data:`T0` (within the first minute)."""
    return f"20231114T2213{20 + seconds:02d}Z"


@pytest.fixture
def timeline(engine: Engine, clock: ManualClock) -> Engine:
    """Bookmarks 1-2 at T0, 3 at T0+2s, 4-5 at T0+4s (book: key /id, history)."""
    publish(engine, "book", {"id": 1, "v": 1}, {"id": 2, "v": 1})
    clock.advance(2)
    publish(engine, "book", {"id": 1, "v": 2})
    clock.advance(2)
    publish(engine, "book", {"id": 1, "v": 3}, {"id": 2, "v": 2})
    return engine


def test_a_timestamp_names_the_last_entry_at_or_before_it(timeline: Engine) -> None:
    j = timeline.journal
    assert at(0) == T0_TEXT
    assert [j.seq_at(T0 + s * S) for s in (-1, 0, 1, 2, 3, 4, 60)] == [0, 2, 2, 3, 3, 5, 5]
    assert j.seq_at(T0 + 2 * S, inclusive=False) == 2
    assert [j.replay_start(parse_bookmark(at(s))) for s in (0, 1, 2, 4)] == [2, 2, 3, 5]


def test_sequence_numbers_zero_and_now(timeline: Engine) -> None:
    j = timeline.journal
    assert j.replay_start(parse_bookmark("3")) == 3
    assert j.replay_start(parse_bookmark("0")) == 0
    assert j.replay_start(parse_bookmark("now")) == 5
    with pytest.raises(InvalidArgument, match="bookmark 6 is after the latest bookmark 5"):
        j.replay_start(parse_bookmark("6"))


def test_as_of_a_point_and_a_history_window_that_no_longer_reaches_it(timeline: Engine, clock: ManualClock) -> None:
    j, book = timeline.journal, timeline.topics.sow["book"]
    by_seq = j.as_of([book], parse_bookmark("3"))
    assert (by_seq.seq, by_seq.timestamp_us, by_seq.gone) == (3, None, frozenset())
    by_time = j.as_of([book], parse_bookmark(at(3)))
    assert (by_time.seq, by_time.timestamp_us) == (3, T0 + 3 * S)
    clock.advance(86_400)  # a day later: the 1d window starts after T0+3s
    assert j.as_of([book], parse_bookmark(at(3))).gone == {"book"}
    assert j.as_of([book], parse_bookmark(at(4))).gone == frozenset()


def test_retention_by_count_and_then_a_bookmark_before_it_is_out_of_range(tmp_path: Path) -> None:
    engine = open_engine(tmp_path, journal_max_entries=3)
    try:
        for i in range(1, 8):
            publish(engine, "markers", {"id": i})
        assert engine.journal.trim() == 4
        assert [e.seq for e in engine.store.iter_journal(0)] == [5, 6, 7]
        assert engine.journal.replay_start(parse_bookmark("0")) == 4  # "everything there is"
        assert engine.journal.replay_start(parse_bookmark("4")) == 4
        with pytest.raises(OutOfRange) as refused:
            engine.journal.replay_start(parse_bookmark("3"))
        assert refused.value.oldest_bookmark == 4
        with pytest.raises(OutOfRange):  # H-3 from bookmark 0 needs the whole journal
            engine.journal.replay_start(parse_bookmark("0"), whole=True)
    finally:
        engine.close()


def test_retention_by_age_follows_the_engine_clock(tmp_path: Path) -> None:
    clock = ManualClock()
    engine = open_engine(tmp_path, clock=clock, journal_max_age="10s")
    try:
        publish(engine, "markers", {"id": 1}, {"id": 2})
        clock.advance(5)
        publish(engine, "markers", {"id": 3})
        clock.advance(6)  # entries 1-2 are 11 s old, entry 3 is 6 s old
        assert engine.journal.trim() == 2
        clock.advance(5)
        assert engine.journal.trim() == 3
        assert list(engine.store.iter_journal(0)) == []
        with pytest.raises(OutOfRange):  # no retained entry is at or before that time
            engine.journal.replay_start(parse_bookmark(at(1)))
    finally:
        engine.close()


async def test_a_replay_is_the_changes_of_the_range_in_order(timeline: Engine) -> None:
    sub = timeline.placement.subscribe("book", bookmark="1", filter="/id = 1")
    assert sub.replay_from == (1, 5)
    replay = timeline.journal.replay(sub.replay_from, sub.wants, track_old=sub.options.delta)
    changes = [c async for batch in replay for c in batch]
    assert [(c.bookmark, c.sow_key, c.new.data if c.new else None) for c in changes] == [
        (2, "2", {"id": 2, "v": 1}),  # the replay offers every change of the topic; the filter picks
        (3, "1", {"id": 1, "v": 2}),
        (4, "1", {"id": 1, "v": 3}),
        (5, "2", {"id": 2, "v": 2}),
    ]
