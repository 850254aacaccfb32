"""The ``sow`` CLI's flags as a new user types them (issue 36, the first hour, round 4): every
numeric flag refused out of its range in one line, AMPS spark's habits (``-format`` templates,
a ``tcp://`` server URI), and an empty ``-sowkeys`` refused alike by ``sow`` and ``sow_delete``.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from sowdb_client import Client
from sowdb_client.cli import main
from sowdb_client.cli.args import parser
from tests.support import Process, sow, start_sowd

NOWHERE = "127.0.0.1:1"
"""A server no test reaches: a flag that got past its check fails to connect (exit 1), not 2."""

TOPIC = ("-topic", "orders")
QUERY = ("sow", "sow_and_subscribe")
LIVE = ("subscribe", "sow_and_subscribe")

BAD_NUMBERS: list[tuple[str, str, str, str]] = [
    # (command, flag, a value it must refuse, what the message says it takes)
    *[(c, "-topn", v, "from 0 to 4294967295") for c in QUERY for v in ("-1", "99999999999999999999", "x")],
    *[(c, "-skipn", v, "from 0 to 4294967295") for c in QUERY for v in ("-1", "4294967296")],
    *[(c, "-batchsize", v, "from 1 to 10000") for c in QUERY for v in ("-1", "0", "10001")],
    ("publish", "-batchsize", "-1", "from 1 to 1000000"),
    ("publish", "-batchsize", "0", "from 1 to 1000000"),
    ("publish", "-rate", "-1", "above 0"),
    ("publish", "-rate", "0", "above 0"),
    ("publish", "-rate", "nan", "above 0"),
    ("publish", "-expiration", "-1", "above 0"),
    ("publish", "-producerseq", "-1", "from 0 to 18446744073709551615"),
    ("publish", "-producerseq", str(2**64), "from 0 to 18446744073709551615"),
    ("publish", "-delimiter", "256", "byte value from 0 to 255"),
    ("publish", "-delimiter", "-1", "byte value from 0 to 255"),
    ("publish", "-delimiter", "ab", "byte value from 0 to 255"),
    *[(c, "-timeout", v, "above 0") for c in LIVE for v in ("-1", "0", "inf")],
    *[(c, "-count", v, "from 0 to 4294967295") for c in LIVE for v in ("-1", "1.5")],
    *[(c, "-conflation", v, "above 0") for c in LIVE for v in ("-1", "0")],
]


def numeric_flags() -> set[tuple[str, str]]:
    """(command, flag) of every flag of every command whose value is a number (by its type)."""
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    found = set()
    for name, p in sub.choices.items():
        for action in p._actions:
            if getattr(action.type, "__name__", "") in ("whole number", "number", "delimiter", "int", "float"):
                found.add((name, action.option_strings[0]))
    return found


def test_the_table_covers_every_numeric_flag() -> None:
    assert numeric_flags() == {(c, f) for c, f, _, _ in BAD_NUMBERS}


@pytest.mark.parametrize(("command", "flag", "value", "span"), BAD_NUMBERS)
def test_a_numeric_flag_out_of_range_is_one_line_naming_the_flag_and_its_range(
    command: str, flag: str, value: str, span: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["-server", NOWHERE, command, *TOPIC, flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # no usage above it: the line says all
    assert err[0].startswith(f"sow {command}: error: argument {flag}/-{flag}: "), err
    assert span in err[0]


@pytest.mark.parametrize(
    "args",
    [
        ("sow", "-topn", "99999999999999999999"),
        ("sow", "-skipn", "-1", "-topn", "2"),
        ("sow", "-batchsize", "-1"),
        ("subscribe", "-timeout", "-1"),
    ],
)
def test_no_traceback_against_a_server(sowd_process: Process, args: tuple[str, ...]) -> None:
    run = sow(args[0], *TOPIC, *args[1:], "-server", sowd_process.target)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert args[1] in run.stderr


def test_in_range_values_still_work(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    pub = sow("publish", *TOPIC, "-batchsize", "1", "-rate", "1000", *s, stdin='{"orderId":1}\n{"orderId":2}\n')
    assert pub.returncode == 0, pub.stderr
    q = sow("sow", *TOPIC, "-topn", "1", "-skipn", "1", "-orderby", "/orderId", "-batchsize", "10000", *s)
    assert q.returncode == 0, q.stderr
    assert [json.loads(line) for line in q.stdout.splitlines()] == [{"orderId": 2}]
    live = sow("subscribe", *TOPIC, "-count", "0", "-timeout", "0.5", *s)
    assert live.returncode == 0, live.stderr


def test_the_console_or_metrics_port_is_named_for_what_it_is(tmp_path: Path) -> None:
    with start_sowd(tmp_path / "data", "--http-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0") as p:
        console = re.search(r"console on http://([\d.]+:\d+)/", p.output)
        metrics = re.search(r"metrics on http://([\d.]+:\d+)/metrics", p.output)
        assert console, p.output
        assert metrics, p.output
        for port, args in (
            (console[1], ("ping",)),
            (metrics[1], ("ping",)),
            (metrics[1], ("sow", "-topic", "orders")),
            (metrics[1], ("publish", "-topic", "orders")),
        ):
            run = sow("-server", port, *args, stdin='{"orderId": 1}\n')
            assert run.returncode == 1
            line = (
                f"sow: {port} answered as an HTTP server, not as sowdb's gRPC port (default 9007): is it the console's"
            )
            assert run.stderr.startswith(line), run.stderr
            assert len(run.stderr.splitlines()) == 1


def test_an_empty_key_list_is_refused_alike_by_sow_and_sow_delete(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    assert sow("publish", *TOPIC, *s, stdin='{"orderId":1}\n{"orderId":2}\n').returncode == 0
    for command in ("sow", "sow_delete", "sow_and_subscribe"):
        for empty in ("", "[]", " , "):
            live = ("-timeout", "5") if command == "sow_and_subscribe" else ()
            run = sow(command, *TOPIC, "-sowkeys", empty, *live, *s)
            assert run.returncode == 2, (command, empty, run.stdout, run.stderr)
            assert run.stdout == ""
            assert f"sow {command}: error: -sowkeys {empty!r} names no SowKey; leave -sowkeys out" in run.stderr
    with Client(sowd_process.target) as c:
        with pytest.raises(ValueError, match="sow_keys is empty: it names no record"):
            c.sow("orders", sow_keys=[])
        with pytest.raises(ValueError, match="sow_keys is empty: it names no record"):
            c.sow_delete("orders", sow_keys=[])
        assert sorted(r.json()["orderId"] for r in c.sow("orders")) == [1, 2]


def test_format_templates_fill_their_placeholders(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    assert sow("publish", *TOPIC, *s, stdin='{"orderId":1}\n{"orderId":2}\n').returncode == 0
    q = sow("sow", *TOPIC, "-orderby", "/orderId", "-format", "{bookmark} {sow_key} {data}", *s)
    assert q.returncode == 0, q.stderr
    assert q.stdout.splitlines() == ['1 1 {"orderId":1}', '2 2 {"orderId":2}']
    spark = sow("sow", *TOPIC, "-sowkeys", "2", "-format", "[{command}] {topic} {sowkey} {length}{{}}", *s)
    assert spark.stdout == "[sow] orders 2 13{}\n"
    live = sow("subscribe", *TOPIC, "-bookmark", "0", "-count", "2", "-format", "{command}:{bookmark}", *s)
    assert live.stdout.splitlines() == ["publish:1", "publish:2"]
    for bad, says in (("{bookmrk}", "'{bookmrk}': unknown placeholder {bookmrk}; the placeholders are {bookmark}, "),
                      ("json", "'json' is not a format: give data, full, or a template")):  # fmt: skip
        run = sow("sow", *TOPIC, "-format", bad, *s)
        assert run.returncode == 2
        assert f"sow sow: error: argument -format/--format: {says}" in run.stderr


def test_sow_delete_says_what_it_deleted(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    assert sow("publish", *TOPIC, *s, stdin='{"orderId":1}\n{"orderId":2}\n{"orderId":3}\n').returncode == 0
    assert sow("sow_delete", *TOPIC, "-filter", "/orderId > 1", *s).stdout == "deleted 2 records from orders\n"
    assert sow("sow_delete", *TOPIC, "-sowkeys", "1", *s).stdout == "deleted 1 record from orders\n"


def test_an_amps_server_uri_is_taken_when_it_is_plainly_host_and_port(sowd_process: Process) -> None:
    uri = f"tcp://{sowd_process.target}/amps/json"
    assert sow("-server", uri, "ping").returncode == 0
    assert sow("ping", "-server", f"tcp://{sowd_process.target}").returncode == 0
    for given, says in (
        (f"tcps://{sowd_process.target}/amps/json", f"write -server {sowd_process.target} with -tls"),
        (f"http://{sowd_process.target}/", f"not a http:// URI: write -server {sowd_process.target}"),
        (f"tcp://alice@{sowd_process.target}/amps/json", "give the user's token with -token"),
    ):
        run = sow("-server", given, "ping")
        assert run.returncode == 2
        assert says in run.stderr, run.stderr
        assert "Traceback" not in run.stderr


def test_a_token_file_others_may_read_is_warned_about(sowd_process: Process, tmp_path: Path) -> None:
    token = tmp_path / "alice.token"
    token.write_text("a-token\n")
    token.chmod(0o644)
    run = sow("-server", sowd_process.target, "-tokenfile", str(token), "ping")
    assert run.returncode == 0, run.stderr
    assert run.stderr == (
        f"sow: warning: token file {token} may be read by its group or others (mode 644): chmod 600 {token}\n"
    )
    token.chmod(0o600)
    quiet = sow("ping", "-server", sowd_process.target, "-tokenfile", str(token))
    assert (quiet.returncode, quiet.stderr) == (0, "")
    token.write_text("\n")
    empty = sow("ping", "-server", sowd_process.target, "-tokenfile", str(token))
    assert empty.returncode == 2
    assert "holds no token" in empty.stderr
