"""Records decoded on demand (issue 30) answer every read path exactly as records that keep
their decoded document: the same random publishes, deltas and deletes are run on an engine whose
recent-versions rings hold one version (every read decodes and encodes; :mod:`sowdb.engine.records`)
and on one whose rings hold them all (the model before issue 30), and every answer is compared —
queries current and as of a bookmark, with filters the columns, the index or only a scan serve,
order_by with top_n, select, aggregation, a view, subscriptions with oof and delta (each
delivery's document and bytes) — and the current state with a plain model of the documents.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sowdb.engine import Engine, GroupEnd, QueryOptions, RecordBatch, SubscriptionOptions
from sowdb.engine import records as records_module
from sowdb.engine.state import columns as cols
from tests.support import open_engine, publish

TOPICS: dict[str, Any] = {
    "topic": [{"name": "t", "key": ["/id"], "indexes": ["/sym"], "history": {"window": "1h"}}],
    "view": [
        {
            "name": "by_sym",
            "underlying": "t",
            "grouping": ["/sym"],
            "projection": ["/sym", "SUM(/qty) AS /qty", "COUNT(/id) AS /n", "MAX(/px) AS /px"],
        }
    ],
}
FILTERS = ["", "/px > 50", "/sym = 'A'", "/sym IN ('B', 'C') AND /qty >= 3", "/id = 3",
           "/side LIKE 'b%' OR /qty % 3 = 1", "/tags[0] = 'x'", "/n/a > 1"]  # fmt: skip
QUERIES: list[dict[str, Any]] = [
    *({"filter": f} for f in FILTERS),
    {"filter": "/px > 10", "order_by": "/px DESC, /qty", "top_n": 5},
    {"filter": "/qty > 0", "select": "+/id,+/px,+/n/a"},
    {"filter": "/qty > 0", "grouping": ["/sym"], "projection": ["/sym", "SUM(/qty) AS /q", "AVG(/px) AS /p"]},
]

docs = st.fixed_dictionaries(
    {"id": st.integers(0, 12)},
    optional={
        "sym": st.sampled_from(["A", "B", "C", "7", ""]),
        "px": st.one_of(st.integers(0, 100), st.floats(0, 100, allow_nan=False)),
        "qty": st.integers(0, 9),
        "side": st.sampled_from(["buy", "sell", "b"]),
        "tags": st.lists(st.sampled_from(["x", "y"]), max_size=2),
        "n": st.fixed_dictionaries({}, optional={"a": st.integers(0, 3), "b": st.text(max_size=3)}),
    },
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.lists(docs, min_size=1, max_size=6)),
        st.tuples(st.just("delta"), st.lists(docs, min_size=1, max_size=3)),
        st.tuples(st.just("delete"), st.integers(0, 12)),
    ),
    min_size=1,
    max_size=14,
)


async def answers(engine: Engine, topic: str, **opts: Any) -> list[Any]:
    out: list[Any] = []
    async for event in engine.sow(QueryOptions(topic=topic, batch_size=4, **opts)):
        if isinstance(event, RecordBatch):
            out.extend((r.sow_key, r.bookmark, orjson.loads(r.raw), r.data) for r in event.records)
        elif isinstance(event, GroupEnd):
            out.append(("end", event.scanned))
    return out


async def transcript(path: Path, steps: list[tuple[str, Any]]) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """Every answer of the scenario, the documents the topic holds, and those a plain model of
    the publishes, deltas and deletes says it holds."""
    engine = open_engine(path, TOPICS)
    out: list[Any] = []
    model: dict[str, Any] = {}
    try:
        subs = [
            engine.placement.subscribe("t", filter=f, options=SubscriptionOptions(oof=True, delta=delta))
            for f in ("/px > 50", "/sym = 'A'", "")
            for delta in (False, True)
        ]
        await answers(engine, "t", filter="/px > 0 AND /qty > 0")  # asks for the columns
        while engine.build_columns():
            pass
        marks = []
        for kind, arg in steps:
            if kind == "delete":
                engine.sow_delete("t", sow_keys=[str(arg)])
                model.pop(str(arg), None)
            else:
                marks.append(publish(engine, "t", *arg, delta=kind == "delta")[1])
                for d in arg:
                    old = model.get(str(d["id"])) if kind == "delta" else None
                    model[str(d["id"])] = records_module.merge_delta(old, d) if old is not None else d
            out.append(
                [(e.kind, e.reason, e.record.sow_key, e.record.data, e.record.raw) for s in subs for e in s.drain()]
            )
        for q in QUERIES:
            out.append(await answers(engine, "t", **q))
            for mark in marks[::2]:
                if "grouping" not in q:
                    out.append(await answers(engine, "t", bookmark=str(mark), **q))
        out.append(await answers(engine, "by_sym"))
        current = [a for a in await answers(engine, "t") if a[0] != "end"]
        assert all(doc == data for _, _, doc, data in current)  # the JSON sent is the document read
        return out, {key: doc for key, _, doc, _ in current}, model
    finally:
        engine.close()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=ops)
def test_records_decoded_on_demand_answer_as_records_that_keep_their_documents(
    monkeypatch: pytest.MonkeyPatch, steps: list[tuple[str, Any]]
) -> None:
    monkeypatch.setattr(cols, "MIN_RECORDS", 0)  # the columns serve what they can
    monkeypatch.setattr(cols, "WIDE", 1.0)
    runs = []
    for size in (1, 1 << 16):
        monkeypatch.setattr(records_module, "_recent", records_module._Recent(size, 1 << 40))
        monkeypatch.setattr(records_module, "_recent_wire", records_module._Recent(size, 1 << 40, wire=True))
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(asyncio.run(transcript(Path(tmp), steps)))
    (decoding, state, model), (keeping, kept_state, _) = runs
    assert decoding == keeping
    assert state == kept_state == model
