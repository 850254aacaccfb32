"""The planner's choices (:mod:`sowdb.engine.read.planner`) on one topic: a point lookup when the
filter fixes the key, else the hash index with the fewest candidates, else a scan (None); a
historical query is narrowed only by a point lookup. Each choice is a superset of the matches."""

from __future__ import annotations

from pathlib import Path

import orjson

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage
from sowdb.engine.read import plan_candidates, plan_heads
from sowdb.expr import compile_filter
from sowdb.storage import Store


def test_the_planner_prefers_the_key_then_the_narrowest_index_then_a_scan(tmp_path: Path) -> None:
    topic_cfg = {"name": "t", "key": ["/id"], "indexes": ["/s", "/b"], "history": {"window": "1d"}}
    cfg = config_from_dict({"topic": [topic_cfg], "server": {"data_dir": str(tmp_path)}}, source="<tests>")
    engine = Engine.open(cfg, Store(tmp_path))
    try:
        docs = [{"id": i, "s": "x" if i < 90 else "y", "b": i % 2, "p": i} for i in range(100)]
        engine.publish("t", [InMessage(orjson.dumps(d)) for d in docs])
        topic = engine.topics.sow["t"]

        def keys(flt: str) -> list[str] | None:
            found = plan_candidates(topic, compile_filter(flt))
            return None if found is None else sorted(r.sow_key for r in found)

        assert keys("/id = 7 AND /p > 0") == ["7"]  # the key is fixed: one record
        assert keys("/s = 'y' AND /b = 1") == sorted(str(i) for i in range(90, 100))  # /s: 10 < /b: 50
        assert keys("/s = 'x' AND /b = 1") == sorted(str(i) for i in range(1, 100, 2))  # /b: 50 < /s: 90
        assert keys("/p > 5") is None  # no index, and too few records for columns: a scan
        heads = plan_heads(topic, compile_filter("/id IN (3, 4, 1000)"))
        assert heads is not None
        assert sorted(r.sow_key for r in heads) == ["3", "4"]
        assert plan_heads(topic, compile_filter("/s = 'y'")) is None  # indexes describe now only
    finally:
        engine.close()
