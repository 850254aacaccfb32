"""The ``sow`` CLI's commands against a ``sowd`` process: the tour of its commands, one-line
errors, subscriptions that end on ``-count`` and ``-timeout``, pages and groups (P-1), and
``-bookmark`` (H-2, H-3, H-4, X-1)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests import support
from tests.support import Process, sow

ORDERS = "\n".join(
    json.dumps({"orderId": i, "symbol": f"SYM{i % 3}", "price": 100 + i, "side": "B" if i % 2 else "S"})
    for i in range(12)
)


def test_cli_tour(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    ping = sow("ping", *s)
    assert ping.returncode == 0
    assert ping.stdout.startswith("pong from")

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
    assert lines[1]["sow_key"] == "3"
    assert lines[1]["bookmark"] == 4
    assert lines[1]["data"]["orderId"] == 3
    assert lines[1]["timestamp"].endswith("Z")
    assert lines[0]["query_id"] == lines[-1]["query_id"] == "Q"
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
    assert deleted.returncode == 0
    assert deleted.stdout.strip() == "deleted 6 records from orders"
    assert (
        sow("sow_delete", "-topic", "orders", "-data", '{"orderId": 0}', *s).stdout.strip()
        == "deleted 1 record from orders"
    )
    assert (
        sow("sow_delete", "-topic", "orders", "-sowkeys", "2,3", *s).stdout.strip() == "deleted 2 records from orders"
    )
    assert len(sow("sow", "-topic", "orders", *s).stdout.splitlines()) == 3


def test_cli_errors_are_one_line_and_non_zero(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)
    bad = sow("sow", "-topic", "orders", "-filter", "/price >", *s)
    assert bad.returncode == 1
    assert bad.stdout == ""
    assert bad.stderr.count("\n") == 1
    assert "INVALID_ARGUMENT" in bad.stderr
    assert "column" in bad.stderr
    pub = sow("publish", "-topic", "orders", *s, stdin='{"orderId": 1}\n{"symbol": 2}\n')
    assert pub.returncode == 1
    assert "at input line 2" in pub.stderr
    assert "/orderId" in pub.stderr
    assert sow("sow", "-topic", "ticks", *s).returncode == 1
    down = sow("ping", "-server", "127.0.0.1:1")
    assert down.returncode == 1
    assert "UNAVAILABLE" in down.stderr


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The rest of a process's output after lines were read with readline (``communicate``
    would read the pipes' descriptors directly and lose what the file objects had buffered)."""
    assert proc.stdout is not None
    assert proc.stderr is not None
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
        [sys.executable, "-m", "sowdb_client.cli", "subscribe", "-topic", "orders", "-timeout", "8", "-format", "full",
         *s],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    for proc in (sas, sub):  # wait until both subscriptions are placed
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["command"] == "subscribed"
    assert sow("publish", "-topic", "orders", *s, stdin='{"orderId": 0, "price": 900}\n').returncode == 0
    assert sow("sow_delete", "-topic", "orders", "-sowkeys", "1", *s).returncode == 0
    out, err = finish(sas)
    assert sas.returncode == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [x["command"] for x in lines] == ["group_begin", "sow", "sow", "group_end", "oof", "oof"]
    assert [(x["sow_key"], x["reason"]) for x in lines[4:]] == [("0", "match"), ("1", "deleted")]
    out, err = finish(sub)  # ends after its 8 s timeout, exit 0 (the publish and the delete, two processes, come first)
    assert sub.returncode == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert [(x["command"], x["data"]) for x in events if x["command"] != "heartbeat"] == [
        ("publish", {"orderId": 0, "price": 900}),
        ("deleted", {"orderId": 1, "symbol": "SYM1", "price": 101, "side": "B"}),
    ]
    conflated = sow("sow_and_subscribe", "-topic", "orders", "-conflation", "0.5", "-count", "3", *s)
    assert conflated.returncode == 0, conflated.stderr
    bad = sow("sow_and_subscribe", "-topic", "orders", "-conflationkey", "/a b", "-conflation", "1", *s)
    assert bad.returncode == 1
    assert "conflation_key" in bad.stderr


def test_cli_page_and_groups(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)

    def sow(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return support.sow(*args, *s, stdin=stdin)

    orders = "\n".join(json.dumps({"orderId": i, "symbol": f"S{i % 2}", "qty": i}) for i in (1, 2, 5, 7))
    assert sow("publish", "-topic", "orders", stdin=orders).returncode == 0
    page = sow("sow_and_subscribe", "-topic", "orders", "-topn", "2", "-skipn", "1", "-orderby", "/orderId",
               "-count", "2")  # fmt: skip
    assert page.returncode == 0, page.stderr
    assert [json.loads(line)["orderId"] for line in page.stdout.splitlines()] == [2, 5]
    groups = sow("sow_and_subscribe", "-topic", "orders", "-grouping", "/symbol", "-projection", "/symbol",
                 "-projection", "SUM(/qty) AS /qty", "-orderby", "/symbol", "-count", "2")  # fmt: skip
    assert groups.returncode == 0, groups.stderr
    assert [json.loads(line) for line in groups.stdout.splitlines()] == [
        {"symbol": "S0", "qty": 2},
        {"symbol": "S1", "qty": 13},
    ]


def test_cli_bookmark_flags(sowd_process: Process) -> None:
    s = ("-server", sowd_process.target)

    def sow(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return support.sow(*args, *s, stdin=stdin)

    assert sow("publish", "-topic", "orders", stdin='{"orderId": 1, "v": 1}\n{"orderId": 2, "v": 1}').returncode == 0
    assert sow("publish", "-topic", "orders", stdin='{"orderId": 1, "v": 2}').returncode == 0
    replay = sow("subscribe", "-topic", "orders", "-bookmark", "1", "-format", "full", "-count", "2")
    assert replay.returncode == 0, replay.stderr
    lines = [json.loads(line) for line in replay.stdout.splitlines()]
    assert [(x["command"], x["bookmark"]) for x in lines if x["command"] != "subscribed"] == [
        ("publish", 2),
        ("publish", 3),  # -count counts records, not frames
    ]
    replay = sow("subscribe", "-topic", "orders", "-bookmark", "1", "-format", "full", "-timeout", "1")
    commands = [x["command"] for x in map(json.loads, replay.stdout.splitlines())]
    assert commands == ["subscribed", "publish", "publish", "completed"]
    history = sow("sow_and_subscribe", "-topic", "book", "-bookmark", "0", "-format", "full", "-timeout", "1")
    assert history.returncode == 0, history.stderr
    commands = [x["command"] for x in map(json.loads, history.stdout.splitlines())]
    assert commands == ["subscribed", "group_begin", "group_end", "completed"]
    no_history = sow("sow", "-topic", "orders", "-bookmark", "1")
    assert no_history.returncode == 1
    assert "keeps no history" in no_history.stderr
    # the tour's history (docs/tour.md) on the demo topic "prices"
    for px in (100, 101, 102):
        assert sow("publish", "-topic", "prices", stdin=json.dumps({"symbol": "ABC", "px": px})).returncode == 0
    then = sow("sow", "-topic", "prices", "-bookmark", "4")
    assert then.returncode == 0
    assert json.loads(then.stdout) == {"symbol": "ABC", "px": 100}
    assert json.loads(sow("sow", "-topic", "prices", "-bookmark", "now").stdout)["px"] == 102
    tmp = sow("publish", "-topic", "prices", "-expiration", "2", stdin='{"symbol": "TMP", "px": 1}')
    assert tmp.returncode == 0, tmp.stderr
    gone = sow("sow_and_subscribe", "-topic", "prices", "-filter", "/symbol = 'TMP'", "-oof", "-format", "full",
               "-count", "2", "-timeout", "10")  # fmt: skip
    assert [json.loads(x).get("reason") for x in gone.stdout.splitlines()][-1] == "expired"


def test_cli_publish_as_an_idempotent_producer(sowd_process: Process) -> None:
    """J-4: ``-producer`` numbers the requests from ``-producerseq``; the same publish run again
    stores nothing twice, and the summary says where the producer goes on."""
    s = ("-server", sowd_process.target, "-producer", "loader-1", "-batchsize", "5")
    first = sow("publish", "-topic", "orders", *s, stdin=ORDERS)
    assert first.returncode == 0, first.stderr
    assert "published 12 messages to orders (bookmarks 1..12)" in first.stdout
    assert "0 messages acknowledged as duplicates (applied before); its next -producerseq is 4" in first.stdout
    again = sow("publish", "-topic", "orders", *s, stdin=ORDERS)
    assert "12 messages acknowledged as duplicates" in again.stdout
    more = sow("publish", "-topic", "orders", *s, "-producerseq", "4", "-format", "full", stdin='{"orderId": 99}')
    assert json.loads(more.stdout) | {"seconds": 0} == {
        "command": "published",
        "topic": "orders",
        "count": 1,
        "first_bookmark": 13,
        "last_bookmark": 13,
        "seconds": 0,
        "duplicates": 0,
        "next_producer_seq": 5,
    }
