"""Storage batches: written at commit only, atomic, values round-trip through the journal,
current and history."""

from __future__ import annotations

from pathlib import Path

from sowdb.storage import Store
from sowdb.storage import keys as k


def test_batch_is_written_at_commit_only(tmp_path: Path) -> None:
    store = Store(tmp_path)
    b = store.batch("orders", current=True, history=True)
    b.publish(1, 10, "k1", b'{"a":1}', 99)
    b.publish(2, 10, "k2", b'{"a":2}')
    assert store.last_sequence() == 0  # not yet
    assert list(store.load_current()) == []
    b.commit()
    assert store.last_sequence() == 2
    assert store.last_applied() == (2, 2)
    assert [(t, s, v.bookmark, v.expiry_us, v.payload) for t, s, v in store.load_current()] == [
        ("orders", "k1", 1, 99, b'{"a":1}'),
        ("orders", "k2", 2, 0, b'{"a":2}'),
    ]
    d = store.batch("orders", current=True, history=True)
    d.remove(3, 11, "k1", b'{"a":1}')
    d.commit()
    assert [s for _, s, _ in store.load_current()] == ["k2"]
    journal = list(store.iter_journal())
    assert [(e.seq, e.op, e.topic, e.sow_key, e.payload) for e in journal] == [
        (1, k.OP_PUBLISH, "orders", "k1", b'{"a":1}'),
        (2, k.OP_PUBLISH, "orders", "k2", b'{"a":2}'),
        (3, k.OP_DELETE, "orders", "k1", b'{"a":1}'),  # a removal journals the last state
    ]
    assert [e.seq for e in store.iter_journal(after=2)] == [3]
    assert [(e.sow_key, e.seq, e.op, e.payload) for e in store.iter_history()] == [
        ("k1", 1, k.OP_PUBLISH, b'{"a":1}'),
        ("k1", 3, k.OP_DELETE, b""),
        ("k2", 2, k.OP_PUBLISH, b'{"a":2}'),
    ]
    store.close()
    reopened = Store(tmp_path)
    assert reopened.last_sequence() == 3
    reopened.close()


def test_transient_and_plain_topics_write_the_journal_only(tmp_path: Path) -> None:
    store = Store(tmp_path)
    b = store.batch("quotes", current=False, history=False)
    b.publish(1, 1, "A", b"{}")
    b.commit()
    assert store.last_sequence() == 1
    assert list(store.load_current()) == []
    store.close()
