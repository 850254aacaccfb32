"""``sow stats``: the server's figures (SPEC §12) as tables for a person, or one JSON object.

Tables: the topics, the live subscriptions with their queues, the server (uptime, CPU, memory,
disk, journal, subscribers), and the calls per RPC with their errors by code. ``-format json``
prints the whole StatsResponse as one JSON object a line, numbers as numbers, durations in
seconds and times as ISO-8601, for scripts. On a node of a cluster (SPEC §13) a header line says
its role, epoch, applied bookmark and lag (a primary: each follower's lag too), and the JSON
object has a ``cluster`` key with ``sow cluster``'s rows (both from the Stats answer's
``cluster``: no second call, so a server alone logs no refusal); a server alone prints what it
always did.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from typing import IO, Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from rich.console import Console
from rich.table import Table

from sowdb_api.v1 import admin_pb2 as pb
from sowdb_client.cli.output import terminal
from sowdb_client.cli.query import TOPIC_KINDS, duration_text, seconds_of
from sowdb_client.client import Client


def run_stats(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    resp = c.stats(a.topic, topics_only=a.topicsonly)
    cluster = list(resp.cluster)
    if a.format == "json":
        figures = plain(resp)
        if not cluster:  # a server alone: the object it always printed
            del figures["cluster"]
        print(json.dumps(figures, separators=(",", ":")), file=out)
        return 0
    # not a terminal: wide enough never to wrap a row
    console = Console(file=out, width=None if terminal(out) else 240, highlight=False)
    if cluster:
        console.print(cluster_line(cluster), markup=False)
    console.print(_topics(resp))
    if resp.subscriptions:
        console.print(_subscriptions(resp))
    if resp.HasField("server"):
        console.print(_server(resp.server, resp.bookmark))
        if resp.server.rpcs:
            console.print(_rpcs(resp.server))
    return 0


def run_cluster(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    """``sow cluster``: the server's view of its cluster, a node a line (SPEC §13)."""
    nodes = c.cluster_status()
    if a.format == "json":
        for node in nodes:
            print(json.dumps(plain(node), separators=(",", ":")), file=out)
        return 0
    table = Table("node", "address", "role", "epoch", "applied bookmark", "lag", box=None)
    for n in nodes:
        table.add_row(n.node, n.address, n.role, str(n.epoch), str(n.applied_bookmark), _lag(n))
    Console(file=out, width=None if terminal(out) else 240, highlight=False).print(table)
    return 0


def _lag(n: pb.ClusterNode) -> str:
    """The lag, or on a replica that does not follow its primary, that (its lag is not known)."""
    if n.role == "replica" and not n.following:
        return f"not following ({n.follow_error})" if n.follow_error else "not following"
    return str(n.lag)


def cluster_line(nodes: list[pb.ClusterNode]) -> str:
    """``node n1: primary, epoch 7, applied bookmark 51, lag 0; followers: n2 lag 0, n3 lag 2``."""
    me, *followers = nodes
    line = f"node {me.node}: {me.role}, epoch {me.epoch}, applied bookmark {me.applied_bookmark}, lag {_lag(me)}"
    if me.role == "primary":
        line += "; followers: " + (", ".join(f"{f.node} lag {f.lag}" for f in followers) or "none")
    return line


def plain(msg: Message) -> dict[str, Any]:
    """A message as JSON-ready values: every field (zeros too), durations in seconds, times as
    ISO-8601, enums by name, maps as objects, and 64-bit integers as numbers (protobuf's own
    JSON mapping writes them as strings)."""
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = dict(value)
        elif field.is_repeated:
            out[field.name] = [_value(field, v) for v in value]
        elif field.message_type is not None and not msg.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _value(field, value)
    return out


def _value(field: Any, value: Any) -> Any:
    if isinstance(value, Duration):
        return seconds_of(value)
    if isinstance(value, Timestamp):
        return value.ToDatetime().isoformat() + "Z"
    if isinstance(value, Message):
        return plain(value)
    if field.enum_type is not None:  # TOPIC_KIND_VIEW of TopicKind: "view", as `sow topics` writes it
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", field.enum_type.name).upper() + "_"
        return str(field.enum_type.values_by_number[value].name).removeprefix(prefix).lower()
    return value


def size_text(n: int) -> str:
    """``512 B``, ``1.5 KiB``, ``20.0 MiB``: a byte count for a person."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _age_text(seconds: float) -> str:
    return duration_text(round(seconds)) if seconds >= 1 else f"{seconds * 1000:.0f}ms"


def _topics(resp: pb.StatsResponse) -> Table:
    table = Table("topic", "kind", title="topics", title_justify="left")
    for column in ("records", "stored", "publishes", "published", "deletes", "expirations", "subscriptions"):
        table.add_column(column, justify="right")
    for t in resp.topics:
        table.add_row(
            t.name,
            TOPIC_KINDS.get(t.kind, "?"),
            f"{t.records:,}",
            size_text(t.bytes_stored),
            f"{t.publishes:,}",
            size_text(t.bytes_published),
            f"{t.deletes:,}",
            f"{t.expirations:,}",
            f"{t.subscriptions:,}",
        )
    return table


def _subscriptions(resp: pb.StatsResponse) -> Table:
    table = Table("sub_id", "topic", "filter", "user", "peer", title="subscriptions", title_justify="left")
    for column in ("queued", "queue limit", "queued bytes", "sent", "age"):
        table.add_column(column, justify="right")
    table.add_column("state")
    for s in resp.subscriptions:
        table.add_row(
            s.sub_id,
            s.topic,
            s.filter,
            s.user,
            s.peer,
            f"{s.queued_events:,}",
            f"{s.max_queued_events:,}",
            f"{size_text(s.queued_bytes)} / {size_text(s.max_queued_bytes)}",
            f"{s.sent_events:,}",
            _age_text(seconds_of(s.age)),
            "catching up" if s.catching_up else "live",
        )
    return table


def _server(s: pb.ServerStats, bookmark: int) -> Table:
    table = Table("server", "", title="server", title_justify="left", show_header=False)
    j = s.journal
    entries = f"{j.entries:,} {'entry' if j.entries == 1 else 'entries'}"
    journal = f"{entries}, {size_text(j.bytes)}, bookmarks {j.oldest_bookmark}..{j.last_bookmark}"
    if j.HasField("oldest_timestamp"):
        journal += f" (the oldest {_age_text(max(0.0, time.time() - j.oldest_timestamp.ToNanoseconds() / 1e9))} old)"
    rows = [
        ("uptime", _age_text(seconds_of(s.uptime))),
        ("bookmark", f"{bookmark}"),
        ("CPU", f"{s.cpu_seconds:.1f} s"),
        ("memory (resident)", size_text(s.resident_bytes)),
        ("RocksDB on disk", size_text(s.disk_bytes)),
        ("journal", journal),
        ("subscriptions", f"{s.subscriptions:,}, {s.queued_events:,} events queued"),
        ("slow consumers cut off", f"{s.slow_consumer_cutoffs:,}"),
        ("topics without a SOW", f"{s.unconfigured_publishes:,} messages, {size_text(s.unconfigured_bytes_published)}"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


STREAMS = frozenset(
    {"SowService/Publish", "SowService/Subscribe", "SowService/SowAndSubscribe", "DataService/StageWrite"}
)
"""The RPCs whose calls last as long as their client keeps them open (a subscription, a publish
or staging stream): their mean time is how long a stream lived, not how long a call took, so it
has a column of its own."""


def _rpcs(s: pb.ServerStats) -> Table:
    table = Table("rpc", title="calls", title_justify="left")
    for column in ("calls", "errors", "mean", "mean stream life"):
        table.add_column(column, justify="right")
    table.add_column("errors by code")
    for r in s.rpcs:
        errors = sum(r.errors.values())
        mean = f"{r.seconds / max(r.calls, 1) * 1000:.1f} ms"
        by_code = ", ".join(f"{code} {n:,}" for code, n in sorted(r.errors.items()))
        call, life = ("", mean) if r.rpc in STREAMS else (mean, "")
        table.add_row(r.rpc, f"{r.calls:,}", f"{errors:,}", call, life, by_code)
    return table
