"""Staged writes and J-4 on the engine: a commit prepares in slices (others run meanwhile) and
applies in one step of the writer; what it wrote (and the producer's sequence) survives a
restart; expired stages and snapshots go."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage
from sowdb.storage import Store


def open_engine(path: Path) -> Engine:
    raw = {"topic": [{"name": "book", "key": ["/id"]}], "server": {"data_dir": str(path)}}
    return Engine.open(config_from_dict(raw, source="<tests>"), Store(path))


async def test_a_commit_prepares_in_slices_and_applies_in_one_step(tmp_path: Path) -> None:
    engine = open_engine(tmp_path)
    n = 60_000
    builder = engine.stages.begin("s", "book")
    for i in range(0, n, 5000):
        builder.add([InMessage(orjson.dumps({"id": j, "pad": "x" * 50})) for j in range(i, i + 5000)])
    builder.seal()
    ticks = 0
    seen_partial = False

    async def ticker() -> None:
        nonlocal ticks, seen_partial
        while True:
            ticks += 1
            count = len(engine.topics.sow["book"].records)
            seen_partial = seen_partial or 0 < count < n
            await asyncio.sleep(0)

    running = asyncio.create_task(ticker())
    done = await engine.stages.commit("book", ["s"], ("loader", 7))
    running.cancel()
    assert (done.first, done.last, done.count) == (1, n, n)
    assert ticks > 3  # the preparation let the loop run
    assert not seen_partial  # nobody ever saw part of the batch
    engine.close()
    engine = open_engine(tmp_path)
    assert len(engine.topics.sow["book"].records) == n
    assert engine.writer.producers.last == {"\x00book\x00loader": 7}  # written in the same WriteBatch (user "")
    builder = engine.stages.begin("again", "book")
    builder.add([InMessage(b'{"id": 1}')])
    builder.seal()
    assert (await engine.stages.commit("book", ["again"], ("loader", 7))).duplicate
    engine.close()


async def test_leases_end(tmp_path: Path) -> None:
    engine = open_engine(tmp_path)
    engine.stages.lease_us = 0
    engine.stages.begin("s", "book").add([InMessage(b'{"id": 1}')])
    info = await engine.snapshots.open("book", lease_s=0.000001)
    await asyncio.sleep(0.01)
    assert engine.stages.expire() == 1
    assert engine.snapshots.expire() == 1
    assert info.record_count == 0
    assert engine.stages.staged_bytes == 0
    engine.close()
