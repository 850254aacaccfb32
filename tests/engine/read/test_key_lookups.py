"""The point-lookup planner (SPEC §10, :mod:`sowdb.engine.state.key_lookups`): a filter that fixes every key
field is answered by SowKey, with exactly the answer of a scan, on the engine over a real RocksDB.

The scan a planned answer is compared with is the same query with its filter as ``(F) OR FALSE``:
the same predicate, but no top-level conjunct for the planner (or an index) to narrow it by.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from sowdb.config import RoleConfig, config_from_dict
from sowdb.engine import Engine, GroupEnd, InMessage, QueryOptions, RecordBatch
from sowdb.engine.access import EVERYONE, Access
from sowdb.storage import Store

TOPICS: dict[str, Any] = {
    "topic": [
        {"name": "single", "key": ["/id"], "indexes": ["/s"], "history": {"window": "1d"}},
        {"name": "pairs", "key": ["/region", "/n"]},
        {"name": "other", "key": ["/k"]},  # a regex query over it and "single": each by its own key
    ]
}


def open_engine(path: Path) -> Engine:
    cfg = config_from_dict({**TOPICS, "server": {"data_dir": str(path)}}, source="<tests>")
    return Engine.open(cfg, Store(path))


def publish(engine: Engine, topic: str, docs: list[dict[str, Any]]) -> int:
    return engine.publish(topic, [InMessage(orjson.dumps(d)) for d in docs])[1]


async def query(engine: Engine, access: Access | None, **opts: Any) -> tuple[list[tuple[str, str]], GroupEnd]:
    """The records of a query as (topic, SowKey) in the order sent, and its group_end."""
    out: list[tuple[str, str]] = []
    end = None
    async for event in engine.sow(QueryOptions(batch_size=1000, **opts), access or EVERYONE):
        if isinstance(event, RecordBatch):
            out.extend((r.topic, r.sow_key) for r in event.records)
        elif isinstance(event, GroupEnd):
            end = event
    assert end is not None
    return out, end


def literal(value: Any) -> str:
    """A key value as the filter language writes it."""
    if value is None:
        return "NULL"
    if type(value) is bool:
        return "TRUE" if value else "FALSE"
    if type(value) is str:
        return "'" + value.replace("'", "''") + "'"
    return json.dumps(value)


def fixes(path: str, values: list[Any], form: int) -> str:
    """A conjunct fixing ``path``: ``IN (values)``, ``path = v`` or ``v = path``."""
    if form == 0 or len(values) > 1:
        return f"{path} IN ({', '.join(map(literal, values))})"
    return f"{path} = {literal(values[0])}" if form == 1 else f"{literal(values[0])} = {path}"


def scan_of(flt: str) -> str:
    """The same predicate with no top-level conjunct: answered by a scan."""
    return f"({flt}) OR FALSE"


# Key values that compare equal across types: 7, 7.0, '7', '07', '7.0', '7e0', TRUE = 1, …
KEY_VALUES = [7, 7.0, 2.5, 1, 0, True, False, -3, "7", "07", "7.0", "7e0", "2.5", "1", "x", "X", "true", ""]
WORDS_ONLY = [v for v in KEY_VALUES if type(v) is not str or not v or not (v[0].isdigit() or v[0] == "-")]
"""Key values without a string that reads as a number: numeric literals are then looked up too."""
REGIONS = ["EU", "US", "1", 1, True, "01"]


@st.composite
def stored(draw: st.DrawFn) -> dict[str, list[Any]]:
    """What the topics hold: keys from one pool, with or without strings that read as numbers."""
    pool = draw(st.sampled_from([KEY_VALUES, WORDS_ONLY, WORDS_ONLY]))
    keys: st.SearchStrategy[Any] = st.sampled_from(pool)
    single = st.fixed_dictionaries({"id": keys, "v": st.integers(0, 5), "s": st.sampled_from(["a", "b", "7", 7])})
    return {
        "single": draw(st.lists(single, max_size=25)),
        "pairs": draw(
            st.lists(
                st.fixed_dictionaries({"region": st.sampled_from(REGIONS), "n": keys, "v": st.integers(0, 5)}),
                max_size=25,
            )
        ),
        "other": draw(st.lists(st.fixed_dictionaries({"k": keys, "id": keys}), max_size=10)),
        "later": draw(st.lists(single, max_size=10)),
        "deletes": draw(st.lists(keys, max_size=4)),
    }


query_shapes = st.fixed_dictionaries(
    {
        "order_by": st.sampled_from(["", "/v DESC", "/id"]),
        "top_n": st.sampled_from([None, None, 1, 3]),
        "skip_n": st.sampled_from([None, 1]),
        "rest": st.sampled_from(["", "/v > 1", "/s = 'a'", "/missing IS NULL", "/missing = 7"]),
        "form": st.integers(0, 2),
        "nested": st.booleans(),
    }
)


def with_rest(fix: str, shape: dict[str, Any]) -> str:
    rest = shape["rest"]
    if not rest:
        return fix
    return f"({fix}) AND ({rest})" if shape["nested"] else f"{fix} AND {rest}"


def scenario_filters(keys: list[Any], regions: list[Any], shape: dict[str, Any]) -> list[tuple[str, str]]:
    """(topic, filter) pairs whose filters fix every key field of the topic."""
    by_id = fixes("/id", keys, shape["form"])
    by_pair = f"{fixes('/region', regions, shape['form'])} AND {fixes('/n', keys, shape['form'])}"
    return [(t, with_rest(f, shape)) for t, f in (("single", by_id), ("pairs", by_pair), ("^(single|other)$", by_id))]


async def same_answers(
    engine: Engine, topic: str, flt: str, shape: dict[str, Any], access: Access | None = None, **extra: Any
) -> None:
    opts = {"order_by": shape["order_by"], **extra}
    if shape["top_n"] is not None:
        opts.update(top_n=shape["top_n"], skip_n=shape["skip_n"])
    planned, p_end = await query(engine, access, topic=topic, filter=flt, **opts)
    scanned, s_end = await query(engine, access, topic=topic, filter=scan_of(flt), **opts)
    if not shape["order_by"] and shape["top_n"] is None:
        planned, scanned = sorted(planned), sorted(scanned)  # no order asked for
    assert planned == scanned, (topic, flt, opts)
    assert (p_end.returned, p_end.matched) == (s_end.returned, s_end.matched)
    assert p_end.scanned <= s_end.scanned


@settings(max_examples=120)
@given(
    held=stored(),
    keys=st.lists(st.sampled_from([*KEY_VALUES, None]), min_size=1, max_size=3),
    regions=st.lists(st.sampled_from([*REGIONS, None]), min_size=1, max_size=2),
    shape=query_shapes,
)
def test_a_planned_lookup_answers_exactly_what_a_scan_does(
    held: dict[str, list[Any]],
    keys: list[Any],
    regions: list[Any],
    shape: dict[str, Any],
) -> None:
    """Look-alike keys (7, 7.0, '7', '07', TRUE = 1), composite keys, IN lists with NULL, missing
    fields, order_by / top_n / skip_n, deletes, a regex topic, a past point and a row
    entitlement: the planned answer is always the scanned one."""

    async def scenario(path: Path) -> None:
        engine = open_engine(path)
        try:
            for topic in ("single", "pairs", "other"):
                if held[topic]:
                    publish(engine, topic, held[topic])
            before = engine.writer.last_seq
            if held["later"]:
                publish(engine, "single", held["later"])
            for key in held["deletes"]:  # a delete by filter is planned too: it removes what a scan finds
                flt = f"/id = {literal(key)} AND /v < 3"
                expected, _ = await query(engine, None, topic="single", filter=scan_of(flt))
                assert engine.sow_delete("single", filter=flt)[0] == len(expected)
            entitled = Access(user="u", roles=(RoleConfig("r", read=(".*",), filter="/v != 4"),))
            for topic, flt in scenario_filters(keys, regions, shape):
                await same_answers(engine, topic, flt, shape)
                await same_answers(engine, topic, flt, shape, entitled)
            if before:
                topic, flt = scenario_filters(keys, regions, shape)[0]
                await same_answers(engine, topic, flt, shape, bookmark=str(before))
        finally:
            engine.close()

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp)))


async def test_a_filter_fixing_every_key_field_looks_its_records_up(tmp_path: Path) -> None:
    """The plan is used, not only right: records_scanned counts the records looked up."""
    engine = open_engine(tmp_path)
    publish(engine, "single", [{"id": i, "v": i % 5, "s": f"s{i % 3}"} for i in range(1000)])
    publish(engine, "pairs", [{"region": r, "n": i, "v": 1} for r in ("EU", "US") for i in range(500)])
    publish(engine, "other", [{"k": i, "id": i} for i in range(1000)])
    point = engine.writer.last_seq
    publish(engine, "single", [{"id": i, "v": 9} for i in range(10)])

    async def scanned(flt: str, topic: str = "single", **opts: Any) -> tuple[int, list[tuple[str, str]]]:
        rows, end = await query(engine, None, topic=topic, filter=flt, **opts)
        return end.scanned, rows

    assert await scanned("/id = 777") == (1, [("single", "777")])
    assert await scanned("/id = '777' AND /v = 2") == (1, [("single", "777")])  # '777' = 777: the number's key
    assert await scanned("/id = 777.0 AND /v = 0") == (1, [])  # looked up, then the whole filter decides
    assert (await scanned("/id IN (1, 2, 2.0, 5000, NULL)"))[0] == 2
    assert (await scanned("(/s = 's1' AND /id IN (1, 4)) AND /v < 9"))[0] == 2  # nested ANDs too
    assert await scanned("/region = 'EU' AND /n IN (3, 4)", "pairs", order_by="/n DESC") == (
        2,
        [("pairs", '"EU",4'), ("pairs", '"EU",3')],
    )
    assert (await scanned("/region = 'EU'", "pairs"))[0] == 1000  # one key field of two: a scan
    # a regex topic: each topic by its own key (/id is a key field of "single" only)
    assert (await scanned("/id = 7", "^(single|other)$"))[0] == 1 + 1000
    # as of a bookmark: the version chains of the keys only
    assert await scanned("/id IN (3, 999)", bookmark=str(point)) == (2, [("single", "3"), ("single", "999")])
    # a delete by filter is a lookup too
    assert engine.sow_delete("single", filter="/id IN (5, 6) AND /v = 9") == (2, engine.writer.last_seq)

    # Once the field holds a string that reads as a number, a number cannot be looked up by
    # key ('0777' = 777), a string still can ('777' is only ever the string or the number).
    publish(engine, "single", [{"id": "0777", "v": 1}])
    assert await scanned("/id = 777") == (999, [("single", "777"), ("single", '"0777"')])
    assert await scanned("/id = '777'") == (1, [("single", "777")])
    n, rows = await scanned("/id = '0777'")
    assert (n, sorted(rows)) == (2, [("single", '"0777"'), ("single", "777")])
    engine.close()


async def test_a_deleted_key_in_the_history_counts_after_a_restart(tmp_path: Path) -> None:
    """A string key that reads as a number and lives only in the history (deleted) still
    stops a numeric literal's lookup once the server restarted: the past state keeps it."""
    engine = open_engine(tmp_path)
    publish(engine, "single", [{"id": 1, "v": 0}, {"id": "07", "v": 0}])
    point = engine.writer.last_seq
    engine.sow_delete("single", sow_keys=['"07"'])
    engine.close()
    engine = open_engine(tmp_path)
    rows, end = await query(engine, None, topic="single", filter="/id = 7", bookmark=str(point))
    assert rows == [("single", '"07"')]
    assert end.scanned == 2
    engine.close()
