"""The engine without a server: an :class:`~sowdb.engine.Engine` over a real RocksDB store in a
temporary directory, with the test topics and a clock the test moves by hand."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sowdb.config import model as config_model
from sowdb.engine import Engine
from tests.support import ManualClock, open_engine


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every engine test function runs over both record stores (``[server] record_store``,
    issue 39): a Python object per record, and the arena (the stateful tests, unittest cases,
    compare the two themselves)."""
    if "record_store" in metafunc.fixturenames:
        metafunc.parametrize("record_store", config_model.RECORD_STORES, indirect=True)


@pytest.fixture(autouse=True)
def record_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    store = str(getattr(request, "param", config_model.DEFAULT_RECORD_STORE))
    monkeypatch.setattr(config_model, "DEFAULT_RECORD_STORE", store)
    return store


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
