"""Paginated subscriptions (P-1) through the real server: the seed's example, and replacement
(R-1) (the property test on the engine: ``tests/engine/live/test_pages.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from sowdb_client import InvalidArgumentError
from tests.support import Running, take


async def test_seed_example_entering_record_pushes_the_last_one_out(sowd: Running) -> None:
    c = sowd.client
    await c.publish("markers", [{"id": i} for i in (1, 2, 5, 7, 8, 9)])
    stream = c.sow_and_subscribe("markers", top_n=2, skip_n=1, order_by="/id", oof=True)
    first = await take(stream, 4)
    assert [r.json()["id"] for r in first[2].records] == [2, 5]
    assert first[3].group_end is not None
    assert first[3].group_end.records_matched == 6

    await c.publish("markers", [{"id": 4}])
    got: list[tuple[str, str, Any]] = []
    while len(got) < 2:
        got += [(e.kind, e.reason, r.json()["id"]) for e in await take(stream, 1) for r in e.records]
    assert sorted(got) == [("oof", "match", 5), ("publish", "", 4)]

    await c.sow_delete("markers", sow_keys=["2"])  # 4 moves up, 5 comes back
    got = []
    while len(got) < 2:
        got += [(e.kind, e.reason, r.json()["id"]) for e in await take(stream, 1) for r in e.records]
    assert sorted(got) == [("oof", "deleted", 2), ("publish", "", 5)]
    await c.publish("markers", [{"id": 20}])  # beyond the window: nothing
    await c.publish("markers", [{"id": 5, "note": "changed"}])  # a change inside it: delivered
    (e,) = await take(stream, 1)
    assert (e.kind, e.records[0].json()) == ("publish", {"id": 5, "note": "changed"})
    stream.cancel()


async def test_page_replacement_needs_the_page_again(sowd: Running) -> None:
    c = sowd.client
    await c.publish("markers", [{"id": i} for i in range(10)])
    stream = c.sow_and_subscribe("markers", top_n=3, skip_n=0, order_by="/id", oof=True)
    events = await take(stream, 4)
    sub_id = events[0].sub_id
    with pytest.raises(InvalidArgumentError) as err:
        await c.replace_subscription(sub_id, filter="/id > 4", oof=True)
    assert err.value.field == "top_n"
    await c.replace_subscription(sub_id, filter="/id > 4", oof=True, top_n=3, skip_n=0, order_by="/id DESC")
    got: list[tuple[str, Any]] = []
    while len(got) < 6:
        got += [(e.kind, r.json()["id"]) for e in await take(stream, 1) for r in e.records]
    assert sorted(got) == [("oof", 0), ("oof", 1), ("oof", 2), ("publish", 7), ("publish", 8), ("publish", 9)]
    plain = c.sow_and_subscribe("markers")
    plain_id = (await take(plain, 1))[0].sub_id
    await take(plain, 3)
    with pytest.raises(InvalidArgumentError):
        await c.replace_subscription(plain_id, top_n=3)
    stream.cancel()
    plain.cancel()
