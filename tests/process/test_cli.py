"""The ``sow`` CLI as a new user meets it (issue 14), through a real ``sowd`` process.

What a publish stored when it stops, composite and view keys, ``sow topics``, the default
server, help, live options, ``-count``, ``| head``, and the notes that say what silently
happened.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from sowdb_client import Client
from tests.support import Process, start_sowd

SOW = [sys.executable, "-m", "sowdb_client.cli"]


def sow(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SOW, *args], input=stdin, capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def live(*args: str) -> subprocess.Popen[str]:
    """A subscription command, once its ``subscribed`` line has been printed (``-format full``)."""
    proc = subprocess.Popen([*SOW, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["command"] == "subscribed"
    return proc


def finish(proc: subprocess.Popen[str]) -> tuple[list[dict[str, Any]], str]:
    assert proc.stdout is not None
    assert proc.stderr is not None
    out = proc.stdout.read()
    proc.wait(timeout=30)
    return [json.loads(line) for line in out.splitlines()], proc.stderr.read()


def stored_ids(target: str, topic: str = "orders") -> list[int]:
    with Client(target) as c:
        return sorted(r.json()["orderId"] for r in c.sow(topic, batch_size=1000))


ORDERS = "".join(json.dumps({"orderId": i, "symbol": f"SYM{i % 3}", "price": 100 + i}) + "\n" for i in range(12))


# --- publish: what was stored when it stops ---------------------------------------------------


def test_a_refused_line_stops_the_publish_and_the_summary_says_what_was_stored(
    sowd_process: Process, tmp_path: Path
) -> None:
    lines = [json.dumps({"orderId": i}) for i in range(250)]
    lines[150] = '{"orderId": '
    lines.insert(50, "")  # blank lines count as lines of the file: message 151 is line 152
    data = tmp_path / "orders.jsonl"
    data.write_text("\n".join(lines) + "\n")
    run = sow("publish", "-topic", "orders", "-file", str(data), "-server", sowd_process.target)
    assert run.returncode == 1
    assert run.stdout == ""
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert "INVALID_ARGUMENT" in run.stderr
    assert "stored 100 messages (bookmarks 1..100) before the error at input line 152" in run.stderr
    assert stored_ids(sowd_process.target) == list(range(100))
    first = sow("publish", "-topic", "orders", "-server", sowd_process.target, stdin='\n{"orderId": 7\n')
    assert first.returncode == 1
    assert "stored 0 messages before the error at input line 2" in first.stderr


def test_ctrl_c_during_a_publish_says_what_was_acknowledged(sowd_process: Process) -> None:
    """A publisher reading a pipe that stays open (a person typing, a slow producer) is
    interrupted after two acknowledged requests of ten messages."""
    proc = subprocess.Popen(
        [*SOW, "publish", "-topic", "orders", "-batchsize", "10", "-server", sowd_process.target],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stderr is not None
    proc.stdin.write("".join(json.dumps({"orderId": i}) + "\n" for i in range(25)))
    proc.stdin.flush()
    deadline = time.monotonic() + 30
    while len(stored_ids(sowd_process.target)) < 20:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(1)  # the second ack reaches the CLI
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    err = proc.stderr.read()
    proc.stdin.close()
    assert "interrupted: stored 20 messages (bookmarks 1..20), through input line 20" in err, err
    assert "in flight" in err
    assert "Traceback" not in err


def test_publishing_to_an_unconfigured_topic_says_it_keeps_no_sow(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    ticks = sow("publish", "-topic", "ticks", *s, stdin='{"x": 1}\n')
    assert ticks.returncode == 0
    assert "published 1 message to ticks" in ticks.stdout
    assert "ticks" in ticks.stderr
    assert "journaled only, no SOW" in ticks.stderr
    orders = sow("publish", "-topic", "orders", *s, stdin='{"orderId": 1}\n')
    assert orders.returncode == 0
    assert orders.stderr == ""


def test_publish_can_print_only_the_bookmark_for_a_shell_variable(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    assert sow("publish", "-topic", "orders", *s, stdin=ORDERS).returncode == 0
    run = sow("publish", "-topic", "prices", "-format", "bookmark", *s, stdin='{"symbol": "ABC", "px": 100}\n')
    assert run.returncode == 0
    assert run.stdout == "13\n"
    full = sow("publish", "-topic", "prices", "-format", "full", *s, stdin='{"symbol": "ABC", "px": 1}\n' * 2)
    line = json.loads(full.stdout)
    assert (line["command"], line["topic"], line["count"]) == ("published", "prices", 2)
    assert (line["first_bookmark"], line["last_bookmark"]) == (14, 15)


# --- keys ---------------------------------------------------------------------------------------

PAIRS_CONFIG = """
[[topic]]
name = "pairs"
key = ["/id", "/region"]

[[view]]
name = "by_region"
underlying = "pairs"
grouping = ["/region"]
projection = ["/region", "COUNT(/id) AS /n"]
"""


@pytest.fixture
def pairs(tmp_path: Path) -> Iterator[Process]:
    config = tmp_path / "sowd.toml"
    config.write_text(PAIRS_CONFIG)
    p = start_sowd(tmp_path / "data", "--config", str(config))
    try:
        with Client(p.target) as c:
            c.publish("pairs", [{"id": 1, "region": "A"}, {"id": 2, "region": "B"}, {"id": 3, "region": "A"}])
        yield p
    finally:
        p.stop()


def ids(run: subprocess.CompletedProcess[str]) -> list[int]:
    assert run.returncode == 0, run.stderr
    return sorted(json.loads(line)["id"] for line in run.stdout.splitlines())


def test_composite_keys_by_repeated_sowkey_or_a_json_list(pairs: Process) -> None:
    s = ("-server", pairs.target)
    assert ids(sow("sow", "-topic", "pairs", "-sowkey", '1,"A"', "-sowkey", '2,"B"', *s)) == [1, 2]
    assert ids(sow("sow", "-topic", "pairs", "-sowkeys", '["1,\\"A\\"", "3,\\"A\\""]', *s)) == [1, 3]
    sas = sow("sow_and_subscribe", "-topic", "pairs", "-sowkey", '2,"B"', "-count", "1", *s)
    assert ids(sas) == [2]
    view = sow("sow", "-topic", "by_region", "-sowkey", '["A"]', *s)
    assert view.returncode == 0
    assert json.loads(view.stdout) == {"region": "A", "n": 2}

    split = sow("sow_delete", "-topic", "pairs", "-sowkeys", '1,"A"', *s)  # two keys: 1 and "A"
    assert split.returncode == 0
    assert split.stdout.strip() == "deleted 0 records from pairs"
    assert "-sowkey" in split.stderr  # the note says how to name a key with commas
    assert sow("sow_delete", "-topic", "pairs", "-sowkey", '1,"A"', *s).stdout.strip() == "deleted 1 record from pairs"
    assert (
        sow("sow_delete", "-topic", "pairs", "-sowkeys", '["2,\\"B\\""]', *s).stdout.strip()
        == "deleted 1 record from pairs"
    )
    assert ids(sow("sow", "-topic", "pairs", *s)) == [3]
    bad = sow("sow", "-topic", "pairs", "-sowkeys", '["1", 2]', *s)
    assert bad.returncode == 2
    assert "JSON list of strings" in bad.stderr


# --- topics, version, server, help ------------------------------------------------------------


def test_topics_as_a_table_and_as_json(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    assert sow("publish", "-topic", "orders", *s, stdin=ORDERS).returncode == 0
    table = sow("topics", *s)
    assert table.returncode == 0, table.stderr
    rows = {line.split()[1]: line for line in table.stdout.splitlines() if line.startswith("│")}
    assert {"orders", "orders_by_symbol", "orders_5s", "prices", "notes", "quotes"} <= set(rows)
    assert "12" in rows["orders"]
    assert "/symbol" in rows["orders"]
    assert "view" in rows["orders_by_symbol"]
    assert "1d" in rows["prices"]
    listed = {t["name"]: t for t in map(json.loads, sow("topics", "-format", "json", *s).stdout.splitlines())}
    assert listed["orders"]["records"] == 12
    assert listed["orders"]["key"] == ["/orderId"]
    assert listed["orders_5s"]["kind"] == "conflated"
    assert listed["orders_5s"]["underlying"] == "orders"
    assert listed["prices"]["history"] == {"window_s": 86400.0, "granularity_s": 0.0}
    assert listed["quotes"]["durability"] == "transient"


def test_version() -> None:
    run = sow("--version")
    assert run.returncode == 0
    assert run.stdout.strip() == f"sow {version('sowdb')}"


def test_the_server_from_sow_server_a_bare_host_and_global_flags(sowd_process: Process) -> None:
    env = {"SOW_SERVER": sowd_process.target}
    ping = sow("ping", env=env)
    assert ping.returncode == 0
    assert ping.stdout.startswith(f"pong from {sowd_process.target}")
    before = sow("-server", sowd_process.target, "publish", "-topic", "orders", stdin=ORDERS)
    assert before.returncode == 0, before.stderr  # a global flag before the command
    assert len(sow("sow", "-topic", "orders", env=env).stdout.splitlines()) == 12
    # a host without a port means the default port, 9007 (nothing listens on 127.0.0.2)
    for run in (sow("ping", "-server", "127.0.0.2"), sow("ping", env={"SOW_SERVER": "127.0.0.2"})):
        assert run.returncode == 1, run.stderr
        assert "127.0.0.2:9007" in run.stderr, run.stderr


def test_every_flag_has_help_and_every_command_examples() -> None:
    from sowdb_client.cli.args import parser

    top = parser()
    assert top._subparsers is not None
    subcommands = top._subparsers._group_actions[0]
    assert isinstance(subcommands, argparse._SubParsersAction)
    commands = subcommands.choices
    assert {"ping", "publish", "sow", "sow_delete", "subscribe", "sow_and_subscribe", "topics"} <= set(commands)
    for name, p in commands.items():
        assert p.epilog, name
        assert f"sow {name}" in p.epilog, name
        for action in p._actions:
            assert action.help, (name, action.option_strings)
    for action in top._actions:
        assert action.help or not action.option_strings, action.option_strings
    helped = sow("sow", "--help")
    assert helped.returncode == 0
    assert "examples:" in helped.stdout
    assert "-sowkey" in helped.stdout


# --- live options, -count, pipes, notes --------------------------------------------------------


def test_subscribe_with_conflation_and_noempties(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    conflated = live("subscribe", "-topic", "orders", "-conflation", "1", "-format", "full", "-timeout", "4", *s)
    deltas = live("subscribe", "-topic", "orders", "-delta", "-noempties", "-format", "full", "-timeout", "4", *s)
    with Client(sowd_process.target) as c:
        c.publish("orders", [{"orderId": 1, "v": v} for v in range(30)])
        c.publish("orders", [{"orderId": 5, "p": 1}])
        c.publish("orders", [{"orderId": 5, "p": 1}])  # nothing changed: no delivery with -noempties
        c.publish("orders", [{"orderId": 5, "p": 2}])
    events, err = finish(conflated)
    assert conflated.returncode == 0, err
    ones = [e["data"]["v"] for e in events if e["command"] == "publish" and e["sow_key"] == "1"]
    assert len(ones) <= 2  # one delivery per key per second, the latest state
    assert ones[-1] == 29
    events, err = finish(deltas)
    assert deltas.returncode == 0, err
    fives = [e["data"] for e in events if e["command"] == "publish" and e["sow_key"] == "5"]
    assert fives == [{"orderId": 5, "p": 1}, {"orderId": 5, "p": 2}]
    sas = sow("sow_and_subscribe", "-topic", "orders", "-delta", "-noempties", "-timeout", "0.5", *s)
    assert sas.returncode == 0, sas.stderr


def test_count_counts_records_not_frames(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    assert sow("publish", "-topic", "orders", *s, stdin=ORDERS).returncode == 0
    data = sow("sow_and_subscribe", "-topic", "orders", "-count", "3", *s)
    assert data.returncode == 0
    assert len(data.stdout.splitlines()) == 3  # 12 records arrive in batches of 10
    full = sow("sow_and_subscribe", "-topic", "orders", "-count", "3", "-format", "full", *s)
    commands = [json.loads(line)["command"] for line in full.stdout.splitlines()]
    assert commands == ["subscribed", "group_begin", "sow", "sow", "sow"]


def test_a_closed_pipe_ends_the_output_quietly(sowd_process: Process) -> None:
    with Client(sowd_process.target) as c:
        c.publish("orders", [{"orderId": i, "pad": "x" * 200} for i in range(3000)])  # > a pipe's buffer
    cli = " ".join([*SOW, "sow", "-topic", "orders", "-server", sowd_process.target])
    run = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cli} | head -1"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr
    assert len(run.stdout.splitlines()) == 1


def test_subscribing_to_an_unknown_topic_says_so(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    unknown = sow("subscribe", "-topic", "tick", "-timeout", "0.5", *s)
    assert unknown.returncode == 0
    assert "'tick' is not a configured topic" in unknown.stderr
    regex = sow("subscribe", "-topic", "^tick", "-timeout", "0.5", *s)
    assert regex.returncode == 0
    assert regex.stderr == ""
    known = sow("sow_and_subscribe", "-topic", "orders", "-timeout", "0.5", *s)
    assert known.returncode == 0
    assert known.stderr == ""


def test_oof_needs_the_full_format(sowd_process: Process) -> None:
    for command in ("subscribe", "sow_and_subscribe"):
        run = sow(command, "-topic", "orders", "-oof", "-server", sowd_process.target)
        assert run.returncode == 2
        assert "-oof" in run.stderr
        assert "-format full" in run.stderr


def test_an_empty_result_says_0_records_on_a_terminal(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    assert sow("sow", "-topic", "orders", "-filter", "/orderId = 1", *s).stderr == ""  # not a terminal
    main, terminal = pty.openpty()
    try:
        run = subprocess.run(
            [*SOW, "sow", "-topic", "orders", "-filter", "/orderId = 1", *s],
            stdout=subprocess.PIPE,
            stderr=terminal,
            text=True,
            timeout=60,
        )
        os.close(terminal)
        said = os.read(main, 1000).decode()
    finally:
        os.close(main)
    assert run.returncode == 0
    assert run.stdout == ""
    assert said.strip() == "0 records"
