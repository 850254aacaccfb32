"""Storage keys: the encodings sort as the engine needs and round-trip."""

from __future__ import annotations

import random

from sowdb.storage import keys as k


def test_journal_keys_sort_numerically() -> None:
    seqs = [*random.Random(1).sample(range(1, 2**40), 500), 1, 255, 256, 65535, 65536, 2**63]
    assert sorted(seqs, key=k.encode_seq) == sorted(seqs)
    assert all(k.decode_seq(k.encode_seq(s)) == s for s in seqs)


def test_current_keys_keep_each_topic_contiguous() -> None:
    pairs = [(t, s) for t in ("a", "ab", "abc", "b", "a.b") for s in ("", "1", "\x01", "zz", "a\x7f")]
    ordered = sorted(pairs, key=lambda p: k.current_key(*p))
    topics = [t for t, _ in ordered]
    assert all(topics.count(t) == len(list(g)) for t, g in __import__("itertools").groupby(topics))
    assert [k.split_current_key(k.current_key(t, s)) for t, s in ordered] == ordered
    for t, s in pairs:
        assert k.current_key(t, s).startswith(k.topic_prefix(t))


def test_history_keys_order_versions_by_bookmark() -> None:
    keys = [k.history_key("t", "k", b) for b in (300, 2, 70000, 1)]
    assert sorted(keys) == [k.history_key("t", "k", b) for b in (1, 2, 300, 70000)]
