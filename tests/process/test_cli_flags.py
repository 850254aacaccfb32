"""The ``sow`` CLI's flags as a new user types them (issue 36, the first hour, round 4): every
numeric flag refused out of its range in one line, AMPS spark's habits (``-format`` templates,
a ``tcp://`` server URI), and an empty ``-sowkeys`` refused alike by ``sow`` and ``sow_delete``.
"""

from __future__ import annotations

import argparse
import json

import pytest

from sowdb_client.cli import main
from sowdb_client.cli.args import parser
from tests.support import Process, sow

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
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"sow {command}: error: argument {flag}/-{flag}: "), err
    assert span in err


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
    assert len(run.stderr.strip().splitlines()) == 1 or "usage:" in run.stderr
    assert args[1] in run.stderr.strip().splitlines()[-1]


def test_in_range_values_still_work(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    pub = sow("publish", *TOPIC, "-batchsize", "1", "-rate", "1000", *s, stdin='{"orderId":1}\n{"orderId":2}\n')
    assert pub.returncode == 0, pub.stderr
    q = sow("sow", *TOPIC, "-topn", "1", "-skipn", "1", "-orderby", "/orderId", "-batchsize", "10000", *s)
    assert q.returncode == 0, q.stderr
    assert [json.loads(line) for line in q.stdout.splitlines()] == [{"orderId": 2}]
    live = sow("subscribe", *TOPIC, "-count", "0", "-timeout", "0.5", *s)
    assert live.returncode == 0, live.stderr
