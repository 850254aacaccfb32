"""sowd as a process: grpcurl through reflection, graceful shutdown, ``sowd rebuild``, config errors.
The CLI against it: ``test_cli.py``, ``test_cli_commands.py``."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sowdb_client import Client
from tests.support import Process, sowd_command, start_sowd

BIN = Path(sys.executable).parent


def grpcurl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "grpcurl"), "-plaintext", *args], capture_output=True, text=True, timeout=60)


def test_grpcurl_lists_describes_and_queries_through_reflection(sowd_process: Process) -> None:
    with Client(sowd_process.target) as c:
        c.publish("orders", [{"orderId": i, "symbol": f"SYM{i % 3}"} for i in range(6)])
    listed = grpcurl(sowd_process.target, "list")
    assert listed.returncode == 0, listed.stderr
    assert set(listed.stdout.split()) >= {"sowdb.v1.SowService", "grpc.health.v1.Health"}
    described = grpcurl(sowd_process.target, "describe", "sowdb.v1.SowService")
    assert "rpc Sow ( .sowdb.v1.SowRequest ) returns ( stream .sowdb.v1.SowResponse )" in described.stdout
    request = json.dumps({"topic": "orders", "filter": "/symbol = 'SYM1'", "batchSize": 10, "queryId": "g"})
    out = grpcurl("-d", request, sowd_process.target, "sowdb.v1.SowService/Sow")
    assert out.returncode == 0, out.stderr
    frames = [json.loads(chunk) for chunk in out.stdout.replace("}\n{", "}\x00{").split("\x00")]
    assert frames[0]["group_begin"]["query_id"] == "g"
    records = frames[1]["records"]["records"]
    assert sorted(r["sow_key"] for r in records) == ["1", "4"]
    assert json.loads(base64.b64decode(records[0]["data"]))["symbol"] == "SYM1"
    assert frames[-1]["group_end"]["records_returned"] == "2"
    bad = grpcurl("-d", '{"topic": "orders", "batchSize": 0}', sowd_process.target, "sowdb.v1.SowService/Sow")
    assert bad.returncode != 0
    assert "InvalidArgument" in bad.stderr
    assert "batch_size" in bad.stderr


def test_sigterm_shuts_down_gracefully_and_data_survives(tmp_path: Path) -> None:
    data = tmp_path / "data"
    p = start_sowd(data)
    with Client(p.target) as c:
        ack = c.publish("orders", [{"orderId": i} for i in range(100)])
    status, out = p.stop(signal.SIGTERM)
    assert status == 0
    assert "sowd stopped" in out
    p2 = start_sowd(data)
    try:
        with Client(p2.target) as c:
            assert len(list(c.sow("orders", batch_size=100))) == 100
            assert c.publish("orders", [{"orderId": 1}]).first_bookmark == ack.last_bookmark + 1
    finally:
        p2.stop()


def test_sowd_rebuild_recreates_current_from_the_journal(tmp_path: Path) -> None:
    data = tmp_path / "data"
    p = start_sowd(data)
    try:
        with Client(p.target) as c:
            c.publish("orders", [{"orderId": i, "v": i} for i in range(50)])
            c.sow_delete("orders", filter="/v >= 40")
            busy = subprocess.run(
                [str(BIN / "sowd"), "rebuild", "--data-dir", str(data)], capture_output=True, text=True, timeout=60
            )
            assert busy.returncode == 1  # not under a running server
            assert "in use by another sowd" in busy.stderr
    finally:
        p.stop()
    done = subprocess.run(
        [str(BIN / "sowd"), "rebuild", "--data-dir", str(data)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "replayed 60 journal entries (bookmarks 1..60)" in done.stdout
    p = start_sowd(data)
    try:
        with Client(p.target) as c:
            assert sorted(r.json()["v"] for r in c.sow("orders", batch_size=100)) == list(range(40))
    finally:
        p.stop()


def test_sigint_also_stops_it(tmp_path: Path) -> None:
    p = start_sowd(tmp_path / "data")
    assert p.stop(signal.SIGINT)[0] == 0


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ('[[topic]]\nname = "a"\nkey = "/x y"\n', '[[topic]] #1 "a": key:'),
        ('[[topic]]\nname = "a"\ndurability = "forever"\n', "durability: 'forever'"),
        ('[[topic]]\nname = "a"\nbogus = 1\n', "unknown setting 'bogus'"),
        ('[[view]]\nname = "v"\nunderlying = "nope"\ngrouping = ["/a"]\nprojection = ["/a"]\n', "underlying: 'nope'"),
        ("[[topic]\n", "not valid TOML"),
    ],
)
def test_invalid_config_stops_the_server_with_a_message(tmp_path: Path, toml: str, words: str) -> None:
    cfg = tmp_path / "sowdb.toml"
    cfg.write_text(toml)
    run = sowd_command("--config", str(cfg), "--data-dir", str(tmp_path / "d"))
    assert run.returncode == 2
    assert str(cfg) in run.stderr, run.stderr
    assert words in run.stderr, run.stderr


def test_config_file_is_used(tmp_path: Path) -> None:
    cfg = tmp_path / "sowdb.toml"
    cfg.write_text('[server]\nmax_document_bytes = 2048\n\n[[topic]]\nname = "books"\nkey = ["/isbn"]\n')
    p = start_sowd(tmp_path / "data", "--config", str(cfg))
    try:
        with Client(p.target) as c:
            assert [t.name for t in c.list_topics()] == ["books"]
    finally:
        p.stop()
