"""The engine without a server: an :class:`~sowdb.engine.Engine` over a real RocksDB store in a
temporary directory, with the test topics and a clock the test moves by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sowdb.engine import Engine
from tests.support import ManualClock, open_engine


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def engine(tmp_path: Path, clock: ManualClock) -> Iterator[Engine]:
    """The test topics (``tests/topics.toml``) on a fresh store, read by ``clock``."""
    e = open_engine(tmp_path / "data", clock=clock)
    try:
        yield e
    finally:
        e.close()
