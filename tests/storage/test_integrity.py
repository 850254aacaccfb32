"""Damaged storage is never silent (issue 15): a data directory without CURRENT is refused, not
replaced by an empty database; a damaged block is DataLoss, never the end of the data; a
topic's records are checked against its count; start-up rebuilds a damaged ``current`` from the
journal, or refuses when the journal cannot rebuild it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from sowdb.config import config_from_dict
from sowdb.engine import Engine, InMessage
from sowdb.errors import DataLoss
from sowdb.storage import Store, StoreUnusable, repair
from sowdb.storage.verify import verify
from tests.support import flip_byte, sst_files

TOPICS: dict[str, Any] = {"topic": [{"name": "book", "key": ["/id"], "history": {"window": "1d"}}]}
N = 20_000


def _engine(path: Path, **server: Any) -> Engine:
    cfg = config_from_dict({**TOPICS, "server": {"data_dir": str(path), **server}}, source="<tests>")
    return Engine.open(cfg, Store(path))


def _filled(path: Path) -> dict[str, list[Path]]:
    """A store of N records of ``book`` (journal, current, history flushed to SST files)."""
    engine = _engine(path)
    for i in range(0, N, 1000):
        engine.publish("book", [InMessage(orjson.dumps({"id": j, "pad": "x" * 40})) for j in range(i, i + 1000)])
    files = sst_files(engine.store)
    engine.close()
    return files


def test_a_directory_without_current_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    _filled(tmp_path)
    (tmp_path / "CURRENT").unlink()
    before = sorted(os.listdir(tmp_path))
    for _ in range(2):  # the first attempt used to write a fresh CURRENT; the second then served nothing
        with pytest.raises(StoreUnusable) as err:
            Store(tmp_path)
        assert "no CURRENT file" in str(err.value)
        assert "sowd repair" in str(err.value)
    assert sorted(os.listdir(tmp_path)) == before
    assert "restored CURRENT" in repair(str(tmp_path))
    engine = _engine(tmp_path)
    assert len(engine.topics.sow["book"].records) == N
    assert engine.last_seq == N
    engine.close()


@pytest.mark.parametrize("family", ["journal", "current", "history"])
def test_a_damaged_block_is_data_loss_never_the_end_of_the_data(tmp_path: Path, family: str) -> None:
    files = _filled(tmp_path)
    flip_byte(max(files[family], key=lambda f: f.stat().st_size))
    store = Store(tmp_path)
    reads = {
        "journal": lambda: sum(1 for _ in store.iter_journal()),
        "current": lambda: sum(1 for _ in store.load_records("book")),
        "history": lambda: sum(1 for _ in store.iter_history()),
    }
    with pytest.raises(DataLoss) as err:
        reads[family]()
    assert family in err.value.message
    assert "damaged" in err.value.message
    report = verify(store, ["book"])
    assert not report.ok
    assert any(p.startswith(family) for p in report.problems)
    store.close()


def test_a_damaged_current_is_rebuilt_from_the_journal_at_start(tmp_path: Path) -> None:
    files = _filled(tmp_path)
    flip_byte(max(files["current"], key=lambda f: f.stat().st_size))
    engine = _engine(tmp_path)  # logs the damage, rebuilds current and history from the journal
    assert len(engine.topics.sow["book"].records) == N
    assert engine.recovery is not None
    assert engine.recovery.entries == N
    assert verify(engine.store, ["book"]).ok
    engine.close()


def test_a_current_missing_records_is_caught_by_its_count(tmp_path: Path) -> None:
    """No checksum can see a record that is simply gone: the count written with every change
    can (here the records are removed behind the store's back)."""
    _filled(tmp_path)
    store = Store(tmp_path)
    store.reset_topics("current", ["book"])
    store.close()
    engine = _engine(tmp_path)
    assert len(engine.topics.sow["book"].records) == N
    engine.close()


def test_a_damaged_current_with_a_trimmed_journal_is_refused(tmp_path: Path) -> None:
    files = _filled(tmp_path)
    store = Store(tmp_path)
    store.trim_journal(100)  # retention: the journal can no longer rebuild everything
    flip_byte(max(files["current"], key=lambda f: f.stat().st_size))
    store.close()
    with pytest.raises(StoreUnusable) as err:
        _engine(tmp_path)
    assert "cannot rebuild it" in str(err.value)
    assert "up to 100" in str(err.value)


def test_a_damaged_journal_refuses_the_start(tmp_path: Path) -> None:
    files = _filled(tmp_path)
    flip_byte(max(files["journal"], key=lambda f: f.stat().st_size))
    with pytest.raises(StoreUnusable) as err:
        _engine(tmp_path)
    assert "journal" in str(err.value)
    assert "damaged" in str(err.value)
