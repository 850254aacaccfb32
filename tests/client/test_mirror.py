"""The SDK's Mirror applies a stream of events to a local copy of the subscribed records."""

from __future__ import annotations

from sowdb_client import Event, Mirror
from sowdb_client.types import Record


def test_mirror_applies_a_whole_stream_including_delta_merges_and_removals() -> None:
    def rec(key: str, bookmark: int, data: str) -> Record:
        return Record("t", key, bookmark, 0, data.encode())

    mirror = Mirror(delta=True)
    mirror.apply_all(
        [
            Event("subscribed", sub_id="s", bookmark=2),
            Event("group_begin", bookmark=2),
            Event("sow", (rec("1", 1, '{"id":1,"a":{"x":1},"b":1}'), rec("2", 2, '{"id":2}'))),
            Event("group_end"),
            Event("publish", (rec("1", 3, '{"id":1,"a":{"y":2}}'),)),  # a delta: merged
            Event("oof", (rec("2", 4, '{"id":2}'),), reason="deleted"),
            Event("completed", bookmark=4),
        ]
    )
    assert mirror.ready
    assert mirror.bookmark == 4
    assert mirror.values() == [{"id": 1, "a": {"x": 1, "y": 2}, "b": 1}]
