"""Damaged data directories through ``sowd`` itself (issue 15): refused in one line with the way
out, ``sowd repair`` and ``sowd verify``, and a damaged journal reaching a client as DATA_LOSS
rather than as a short replay that ends with ``completed``."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from sowdb.storage import Store
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import Client
from tests.support import collect, flip_byte, sowd_command, sst_files, start_sowd

N = 20_000


def _load(data: Path) -> dict[str, Path]:
    """N acknowledged orders in ``data``, flushed to SST files, the server stopped; the largest
    SST file of each column family."""
    sowd = start_sowd(data)
    try:
        with Client(sowd.target) as c:
            c.publish("orders", ({"orderId": i, "pad": "x" * 40} for i in range(N)))
    finally:
        sowd.stop()
    store = Store(data)
    files = sst_files(store)
    store.close()
    return {family: max(paths, key=lambda f: f.stat().st_size) for family, paths in files.items() if paths}


def _count(target: str) -> int:
    with Client(target) as c:
        return len(c.sow("orders", batch_size=10_000).records())


def test_a_missing_current_is_one_line_then_repaired(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _load(data)
    (data / "CURRENT").unlink()
    for _ in range(2):
        run = sowd_command("--data-dir", str(data), "--listen", "127.0.0.1:0")
        assert run.returncode == 1
        assert "Traceback" not in run.stderr
        (line,) = [x for x in run.stderr.splitlines() if x.startswith("sowd:")]
        assert "no CURRENT file" in line
        assert "sowd repair" in line
    repaired = sowd_command("repair", "--data-dir", str(data))
    assert repaired.returncode == 0
    assert "restored CURRENT" in repaired.stdout
    assert sowd_command("verify", "--data-dir", str(data)).returncode == 0
    sowd = start_sowd(data)
    try:
        assert _count(sowd.target) == N
    finally:
        sowd.stop()


def test_verify_says_whole_or_names_the_damage(tmp_path: Path) -> None:
    data = tmp_path / "data"
    journal = _load(data)["journal"]
    ok = sowd_command("verify", "--data-dir", str(data))
    assert ok.returncode == 0
    assert f"current orders: {N} records" in ok.stdout
    assert "the store is whole" in ok.stdout
    flip_byte(journal)
    bad = sowd_command("verify", "--data-dir", str(data))
    assert bad.returncode == 1
    assert "PROBLEM: journal" in bad.stdout


def test_a_damaged_journal_is_data_loss_to_a_replaying_client(tmp_path: Path) -> None:
    """With the start-up check off (``verify_budget = 0``), a replay that meets the damaged
    block ends with DATA_LOSS; it used to end with ``completed`` after half the entries."""
    data = tmp_path / "data"
    journal = _load(data)["journal"]
    flip_byte(journal)
    refused = sowd_command("--data-dir", str(data), "--listen", "127.0.0.1:0")
    assert refused.returncode == 1
    assert "journal" in refused.stderr
    assert "damaged" in refused.stderr
    config = tmp_path / "sowd.toml"
    config.write_text('[server]\nverify_budget = "0s"\n[[topic]]\nname = "orders"\nkey = ["/orderId"]\n')
    sowd = start_sowd(data, "--config", str(config))
    try:
        with grpc.insecure_channel(sowd.target) as channel:
            stub = sow_pb2_grpc.SowServiceStub(channel)
            got: list[pb.SubscribeResponse] = []
            replay = stub.Subscribe(pb.SubscribeRequest(topic="orders", bookmark="0"), timeout=30)
            with pytest.raises(grpc.RpcError) as err:
                collect(replay, got)
            assert err.value.code() == grpc.StatusCode.DATA_LOSS
            assert "completed" not in [r.WhichOneof("event") for r in got]
            assert _count(sowd.target) == N  # current is whole: queries go on
    finally:
        sowd.stop()
