"""``sowd --workers N`` reads as one server in its figures (issue 41): ``sow stats`` (the Stats
RPC), ``/metrics`` and the web console's topics, all answered by the writer, count the
subscriptions every process serves, and a reader killed takes its subscriptions out of them
(its counts stay in the totals).

The subscribers each open a connection of their own, which the kernel spreads over the writer
and the readers (``tests/process/test_workers.py`` says how, and finds which process holds one).
The readers report about once a second, so the figures are polled for, with a deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import grpc
import pytest

from sowdb.testing import Sowd
from tests.console.wire import post
from tests.process.test_operations import metric_samples, sow
from tests.process.test_workers import Subscriber, _on_a_reader, _pids, _spread, group_of

CONFIG = """
[server]
metrics_listen = "127.0.0.1:0"
http_listen = "127.0.0.1:0"

[[topic]]
name = "orders"
key = ["/id"]

[[topic]]
name = "prices"
key = ["/id"]
"""
DEADLINE_S = 30.0
SUBSCRIBE = "SowService/Subscribe"
COUNTS = ("stats", "stats_listed", "stats_orders", "metrics", "metrics_orders", "console_orders")
"""The figures that count the subscriptions of ``orders`` (:func:`_figures`)."""


@pytest.fixture
def group(tmp_path: Path) -> Iterator[Sowd]:
    yield from group_of(tmp_path, CONFIG)


def _stats(sowd: Sowd, *args: str) -> dict[str, Any]:
    done = sow(sowd.target, "", "stats", "-format", "json", *args)
    assert done.returncode == 0, done.stderr
    figures: dict[str, Any] = json.loads(done.stdout)
    return figures


def _metrics(sowd: Sowd) -> dict[str, float]:
    """``/metrics``'s samples without labels but ``topic``, ``rpc`` or ``process`` (by name and
    that label: ``sowdb_process_subscriptions:reader-1``)."""
    port = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", sowd.output)
    assert port, sowd.output
    samples = metric_samples(f"http://127.0.0.1:{port[1]}/metrics")
    out: dict[str, float] = {}
    for (name, labels), value in samples.items():
        named = dict(labels)
        if set(named) <= {"topic", "rpc"} or set(named) == {"process"}:
            out[name + "".join(f":{v}" for v in named.values())] = value
    return out


def _console_topics(sowd: Sowd) -> dict[str, int]:
    """Each topic's subscriptions as the console's topics page reads them (Stats, topics_only,
    as Connect JSON through its gateway)."""
    url = re.search(r"console on (http://127\.0\.0\.1:\d+)", sowd.output)
    assert url, sowd.output
    status, _, body = post(url[1], "/sowdb.v1.AdminService/Stats", b'{"topicsOnly": true}', "application/json")
    assert status == 200, body
    return {t["name"]: int(t.get("subscriptions", 0)) for t in json.loads(body)["topics"]}


def _by_process(sowd: Sowd, subs: list[Subscriber]) -> dict[str, float]:
    """Where the subscribers' connections are, by the process's name in the group (``reader-1``,
    from the prefixes of its output), as ``/metrics`` labels the subscriptions' count (one of
    :func:`_metrics`'s keys each)."""
    named = {int(pid): name for name, pid in re.findall(r"\[(writer|reader-\d+) (\d+)\]", sowd.output)}
    held = Counter(named[s.holder or 0] for s in subs)
    return {f"sowdb_process_subscriptions:{name}": held[name] for name in set(named.values())}


def _figures(sowd: Sowd) -> dict[str, float]:
    """What the test compares: the Stats RPC's, /metrics' and the console's counts of
    subscriptions, and the calls of Subscribe."""
    stats, metrics = _stats(sowd), _metrics(sowd)
    topics = {t["name"]: t.get("subscriptions", 0) for t in stats["topics"]}
    calls = {r["rpc"]: r.get("calls", 0) for r in stats["server"]["rpcs"]}
    return {
        "stats": stats["server"].get("subscriptions", 0),
        "stats_listed": len(stats.get("subscriptions", [])),
        "stats_orders": topics["orders"],
        "stats_prices": topics["prices"],
        "stats_calls": calls.get(SUBSCRIBE, 0),
        "metrics": metrics["sowdb_subscriptions"],
        "metrics_orders": metrics["sowdb_topic_subscriptions:orders"],
        "metrics_calls": metrics.get(f"sowdb_rpc_calls_total:{SUBSCRIBE}", 0),
        "console_orders": _console_topics(sowd)["orders"],
    }


def _until(take: Callable[[], dict[str, float]], expected: Mapping[str, float]) -> dict[str, float]:
    """``take()`` once it holds ``expected`` (its last value when the deadline passed)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        got = take()
        if {k: got[k] for k in expected} == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def test_stats_and_metrics_count_the_subscriptions_of_every_process(group: Sowd) -> None:
    _, readers = _pids(group)
    subs = _spread(group, 6)
    n = len(subs)
    on_readers = sum(s.holder in readers for s in subs)
    assert 0 < on_readers < n
    every = dict.fromkeys(COUNTS, n) | {"stats_prices": 0, "stats_calls": n, "metrics_calls": n}
    got = _until(lambda: _figures(group), every)
    assert got == every, f"{on_readers} of {n} on readers"

    listed = _stats(group, "-topic", "orders")["subscriptions"]  # one topic's: the readers' too
    assert len(listed) == n
    assert {s["topic"] for s in listed} == {"orders"}
    assert _stats(group, "-topic", "prices").get("subscriptions", []) == []
    table = sow(group.target, "", "stats")
    assert table.returncode == 0, table.stderr
    assert re.search(rf"subscriptions\W+{n}, \d+ events queued", table.stdout), table.stdout

    processes = _by_process(group, subs)
    assert {k: v for k, v in _metrics(group).items() if k in processes} == processes

    # a reader killed: its subscriptions leave the figures; the calls it counted stay
    killed = next(s.holder for s in subs if s.holder in readers)
    gone = sum(s.holder == killed for s in subs)
    os.kill(killed or 0, signal.SIGKILL)
    left = dict.fromkeys(COUNTS, n - gone)
    got = _until(lambda: _figures(group), left)
    assert {k: got[k] for k in left} == left, f"{gone} of {n} were on reader {killed}: {got}"
    assert got["stats_calls"] == got["metrics_calls"] == n, got
    alive = _by_process(group, [s for s in subs if s.holder != killed])  # the reader started again: 0

    def by_process() -> dict[str, float]:
        metrics = _metrics(group)
        return {k: metrics.get(k, 0) for k in alive}

    assert _until(by_process, alive) == alive
    for s in subs:
        s.close()


@pytest.mark.parametrize("method", ["Feed", "Claim", "Report"])
def test_the_groups_own_methods_are_refused_to_clients_on_every_process(group: Sowd, method: str) -> None:
    """A reader relays every other call to the writer over the group's socket, where the writer
    takes a call for one of its readers': the feed (every record, unchecked), the claims and the
    reports must not be relayed for a client."""
    for on_reader in (True, False):
        channel = _on_a_reader(group, on_reader)
        call: Any = channel.unary_stream(f"/sowdb.internal.Workers/{method}")
        with pytest.raises(grpc.RpcError) as refused:
            list(call(b"", timeout=30))
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED, (on_reader, refused.value.details())
        channel.close()
