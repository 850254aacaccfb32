"""sowd as a process: the CLI, grpcurl through reflection, graceful shutdown, config errors."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sowdb_client import Client
from tests.support import Process, sow, start_sowd

BIN = Path(sys.executable).parent


ORDERS = "\n".join(
    json.dumps({"orderId": i, "symbol": f"SYM{i % 3}", "price": 100 + i, "side": "B" if i % 2 else "S"})
    for i in range(12)
)


def test_cli_tour(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    ping = sow("ping", *s)
    assert ping.returncode == 0 and ping.stdout.startswith("pong from")

    pub = sow("publish", "-topic", "orders", *s, stdin=ORDERS + "\n\n")
    assert pub.returncode == 0, pub.stderr
    assert "published 12 messages to orders (bookmarks 1..12)" in pub.stdout

    q = sow("sow", "-topic", "orders", "-filter", "/symbol = 'SYM1'", "-orderby", "/price DESC", *s)
    assert q.returncode == 0, q.stderr
    assert [json.loads(line)["orderId"] for line in q.stdout.splitlines()] == [10, 7, 4, 1]

    full = sow(
        "sow", "-topic", "orders", "-sowkeys", "3,4", "-orderby", "/orderId", "-format", "full", "-queryid", "Q", *s
    )
    lines = [json.loads(line) for line in full.stdout.splitlines()]
    assert [x["command"] for x in lines] == ["group_begin", "sow", "sow", "group_end"]
    assert lines[1]["sow_key"] == "3" and lines[1]["bookmark"] == 4 and lines[1]["data"]["orderId"] == 3
    assert lines[1]["timestamp"].endswith("Z") and lines[0]["query_id"] == lines[-1]["query_id"] == "Q"
    assert lines[-1]["records_returned"] == 2

    agg = sow("sow", "-topic", "orders", "-grouping", "/symbol", "-projection", "/symbol", "-projection",
              "COUNT(/orderId) AS /n", "-orderby", "/symbol", *s)  # fmt: skip
    assert next(json.loads(line) for line in agg.stdout.splitlines()) == {"symbol": "SYM0", "n": 4}

    note = sow("publish", "-topic", "notes", "-sowkey", "n-1", *s, stdin='{"text": "hello"}')
    assert note.returncode == 0, note.stderr
    assert sow("sow", "-topic", "notes", *s).stdout.strip() == '{"text": "hello"}'

    delta = sow("publish", "-topic", "orders", "-delta", *s, stdin='{"orderId": 1, "price": 1}')
    assert delta.returncode == 0
    got = json.loads(sow("sow", "-topic", "orders", "-sowkeys", "1", *s).stdout)
    assert got == {"orderId": 1, "symbol": "SYM1", "price": 1, "side": "B"}

    deleted = sow("sow_delete", "-topic", "orders", "-filter", "/price > 105", *s)
    assert deleted.returncode == 0 and deleted.stdout.strip() == "6"
    assert sow("sow_delete", "-topic", "orders", "-data", '{"orderId": 0}', *s).stdout.strip() == "1"
    assert sow("sow_delete", "-topic", "orders", "-sowkeys", "2,3", *s).stdout.strip() == "2"
    assert len(sow("sow", "-topic", "orders", *s).stdout.splitlines()) == 3


def test_cli_errors_are_one_line_and_non_zero(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    bad = sow("sow", "-topic", "orders", "-filter", "/price >", *s)
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "INVALID_ARGUMENT" in bad.stderr and "column" in bad.stderr
    pub = sow("publish", "-topic", "orders", *s, stdin='{"orderId": 1}\n{"symbol": 2}\n')
    assert pub.returncode == 1 and "at input line 2" in pub.stderr and "/orderId" in pub.stderr
    assert sow("sow", "-topic", "ticks", *s).returncode == 1
    down = sow("ping", "-server", "127.0.0.1:1")
    assert down.returncode == 1 and "UNAVAILABLE" in down.stderr


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
    assert bad.returncode != 0 and "InvalidArgument" in bad.stderr and "batch_size" in bad.stderr


def test_sigterm_shuts_down_gracefully_and_data_survives(tmp_path: Path) -> None:
    data = tmp_path / "data"
    p = start_sowd(data)
    with Client(p.target) as c:
        ack = c.publish("orders", [{"orderId": i} for i in range(100)])
    p.proc.send_signal(signal.SIGTERM)
    out, _ = p.proc.communicate(timeout=30)
    assert p.proc.returncode == 0 and "sowd stopped" in out
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
    with Client(p.target) as c:
        c.publish("orders", [{"orderId": i, "v": i} for i in range(50)])
        c.sow_delete("orders", filter="/v >= 40")
        busy = subprocess.run(
            [str(BIN / "sowd"), "rebuild", "--data-dir", str(data)], capture_output=True, text=True, timeout=60
        )
        assert busy.returncode == 1 and "cannot open" in busy.stderr  # not under a running server
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
    p.proc.send_signal(signal.SIGINT)
    assert p.proc.wait(timeout=30) == 0


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
    run = subprocess.run(
        [sys.executable, "-m", "sowdb.main", "--config", str(cfg), "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert str(cfg) in run.stderr and words in run.stderr, run.stderr


def test_config_file_is_used(tmp_path: Path) -> None:
    cfg = tmp_path / "sowdb.toml"
    cfg.write_text('[server]\nmax_document_bytes = 2048\n\n[[topic]]\nname = "books"\nkey = ["/isbn"]\n')
    p = start_sowd(tmp_path / "data", "--config", str(cfg))
    try:
        with Client(p.target) as c:
            assert [t.name for t in c.list_topics()] == ["books"]
    finally:
        p.stop()


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The rest of a process's output after lines were read with readline (``communicate``
    would read the pipes' descriptors directly and lose what the file objects had buffered)."""
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read()
    proc.wait(timeout=30)
    return out, proc.stderr.read()


def test_cli_subscriptions_end_on_count_and_timeout(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    assert sow("publish", "-topic", "orders", *s, stdin=ORDERS).returncode == 0
    sas = subprocess.Popen(
        [sys.executable, "-m", "sowdb_client.cli", "sow_and_subscribe", "-topic", "orders", "-filter", "/price < 102",
         "-oof", "-format", "full", "-count", "4", *s],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    sub = subprocess.Popen(
        [sys.executable, "-m", "sowdb_client.cli", "subscribe", "-topic", "orders", "-timeout", "4", "-format", "full",
         *s],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for proc in (sas, sub):  # wait until both subscriptions are placed
        assert proc.stdout is not None and json.loads(proc.stdout.readline())["command"] == "subscribed"
    assert sow("publish", "-topic", "orders", *s, stdin='{"orderId": 0, "price": 900}\n').returncode == 0
    assert sow("sow_delete", "-topic", "orders", "-sowkeys", "1", *s).returncode == 0
    out, err = finish(sas)
    assert sas.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["command"] for x in lines] == ["group_begin", "sow", "sow", "group_end", "oof", "oof"]
    assert [(x["sow_key"], x["reason"]) for x in lines[4:]] == [("0", "match"), ("1", "deleted")]
    out, err = finish(sub)  # ends after its 4 s timeout, exit 0
    assert sub.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [(x["command"], x["data"]) for x in events if x["command"] != "heartbeat"] == [
        ("publish", {"orderId": 0, "price": 900}),
        ("deleted", {"orderId": 1, "symbol": "SYM1", "price": 101, "side": "B"}),
    ]
    conflated = sow("sow_and_subscribe", "-topic", "orders", "-conflation", "0.5", "-count", "3", *s)
    assert conflated.returncode == 0, conflated.stderr
    bad = sow("sow_and_subscribe", "-topic", "orders", "-conflationkey", "/a b", "-conflation", "1", *s)
    assert bad.returncode == 1 and "conflation_key" in bad.stderr
