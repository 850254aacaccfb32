"""Prometheus metrics on ``[server] metrics_listen`` (SPEC §12): the engine's figures, read at
scrape time.

Nothing is updated on the hot path for Prometheus: a custom collector takes the engine's
:class:`~sowdb.engine.stats.StatsSnapshot` — the same figures the Stats RPC answers — when
``/metrics`` is scraped, and turns it into metric families. prometheus_client serves HTTP on a
thread of its own; the snapshot itself is taken on the event loop (the engine is not
thread-safe), in one step, so a scrape sees one point of the total order. With TLS on the gRPC
port (SPEC §11), ``/metrics`` is served over TLS with the same certificate (and asks for client
certificates when ``client_ca`` is set). The process's CPU and memory come from
prometheus_client's own process collector (``process_*``). On a node of a cluster (SPEC §13) the
``sowdb_cluster_*`` families say its role, epoch, applied bookmark, the replication lag (each
follower's on a primary, its own on a replica) and how often ``sync`` fell back to acknowledging
alone, from the same rows ``ClusterStatus`` answers; a server alone has role ``none``.
With ``sowd --workers`` the figures are the group's (the readers report theirs to the writer,
which serves ``/metrics``), and ``sowdb_process_*`` break its subscriptions down by process.
``sowdb_ready`` is 0 while the server loads its state at start-up (``sowdb_start_records_loaded``
of ``sowdb_start_records_total``); the topics', subscriptions' and calls' families come once loaded.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from operator import attrgetter
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from sowdb.config import SecurityConfig, parse_listen
from sowdb.engine.counters import LATENCY_BUCKETS
from sowdb.engine.starting import StartProgress
from sowdb.engine.stats import ServerFigures, StatsSnapshot

log = logging.getLogger("sowdb.metrics")

WSGIApp = Callable[[dict[str, Any], Any], Iterable[bytes]]

SCRAPE_TIMEOUT_S = 10.0
"""How long a scrape waits for the event loop to take the snapshot (a busy loop answers late)."""


ROLES = ("primary", "replica", "none")
"""The values of ``sowdb_cluster_role``'s ``role`` label (``none``: a server alone)."""


@dataclass(frozen=True)
class ClusterFigures:
    """A node's place in its cluster, as the metrics show it.

    Attributes:
        role: ``primary`` or ``replica``.
        epoch: the epoch it leads or follows (0 while none is known).
        applied: its last applied bookmark.
        lag: bookmarks behind, by node: every follower's on a primary, its own on a replica.
        sync_fallbacks: times ``ack = "sync"`` fell back to acknowledging alone.
        refused: peers refused, by reason (issue 40: a primary without the certificate of the
            node its leader key names, a frame of another epoch, a follower with another
            node's certificate, a token on the replication service of a node with certificates).
    """

    role: str
    epoch: int
    applied: int
    lag: Mapping[str, int]
    sync_fallbacks: int
    refused: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(
        cls, rows: Sequence[Mapping[str, object]], sync_fallbacks: int, refused: Mapping[str, int] | None = None
    ) -> ClusterFigures:
        """From ``ClusterStatus``'s rows (the node first, then the followers a primary knows), so
        that the metrics and ``sow cluster`` can never disagree."""
        me, *followers = rows
        lag = {str(f["node"]): _int(f["lag"]) for f in followers} if me["role"] == "primary" else {}
        if me["role"] != "primary":
            lag[str(me["node"])] = _int(me["lag"])
        me_ = (str(me["role"]), _int(me["epoch"]), _int(me["applied_bookmark"]))
        return cls(*me_, lag, sync_fallbacks, dict(refused or {}))


def _int(value: object) -> int:
    assert isinstance(value, int)
    return value


class EngineCollector(Collector):
    """The engine's figures as metric families, taken fresh at each scrape by ``take`` (with the
    node's cluster figures, None for a server alone; no snapshot while the state loads), and the
    start-up's readiness from ``progress``."""

    def __init__(
        self,
        take: Callable[[], tuple[StatsSnapshot | None, ClusterFigures | None]],
        progress: StartProgress | None = None,
    ) -> None:
        self.take = take
        self.progress = progress

    def collect(self) -> Iterator[Metric]:
        if self.progress is not None:
            yield from _start_families(self.progress)
        snap, cluster = self.take()
        yield from _cluster_families(cluster)
        if snap is None:
            return
        yield from _topic_families(snap)
        yield from _subscription_families(snap)
        if snap.server is not None:
            yield from _server_families(snap.server)
            yield from _rpc_families(snap.server)


def _start_families(progress: StartProgress) -> Iterator[Metric]:
    """Whether the server serves, and how far the load has come while it does not (issue 36:
    an alert on ``sowdb_ready == 0`` tells a slow start from a dead server)."""
    yield GaugeMetricFamily(
        "sowdb_ready", "1 once the state is loaded and calls are served; 0 while starting", value=progress.ready
    )
    yield GaugeMetricFamily(
        "sowdb_start_records_loaded", "Records loaded at start-up so far (all, once ready)", value=progress.loaded
    )
    yield GaugeMetricFamily("sowdb_start_records_total", "Records the store held at start-up", value=progress.total)


# The families read from the snapshot's figures, a row each: type, name, the figure (an attribute
# path of TopicFigures, SubscriptionFigures or ServerFigures), help text.
_TOPIC_METRICS = """
gauge   sowdb_topic_stored_bytes       bytes_stored     Size of the documents of the topic's current records
counter sowdb_topic_publishes          publishes        Messages applied to the topic (for a view: its changes)
counter sowdb_topic_published_bytes    bytes_published  Size of the messages applied
counter sowdb_topic_deletes            deletes          Records deleted by sow_delete
counter sowdb_topic_expirations        expirations      Records expired (X-1)
gauge   sowdb_topic_subscriptions      subscriptions    Live subscriptions that follow the topic, by name or regex
"""
_SUBSCRIPTION_METRICS = """
gauge   sowdb_subscription_queued_events       queued_events      Events queued for the subscriber
gauge   sowdb_subscription_queued_bytes        queued_bytes       Size of the events queued
gauge   sowdb_subscription_queue_limit_events  max_queued_events  Queued events past which it is cut off (SL-1)
"""
_SERVER_METRICS = """
gauge   sowdb_subscriptions                     subscriptions                 Live subscriptions
gauge   sowdb_queued_events                     queued_events                 Events queued for all subscribers
counter sowdb_slow_consumer_cutoffs             slow_consumer_cutoffs         Subscriptions cut off as slow consumers
gauge   sowdb_journal_bytes                     journal.bytes                 The journal's size on disk
gauge   sowdb_journal_entries                   journal.entries               Entries the journal holds
gauge   sowdb_journal_oldest_bookmark           journal.oldest_bookmark       The oldest bookmark it holds
gauge   sowdb_journal_oldest_timestamp_seconds  journal.oldest_timestamp_s    When its oldest entry was written
gauge   sowdb_journal_last_bookmark             journal.last_bookmark         The latest bookmark
gauge   sowdb_disk_bytes                        disk_bytes                    The RocksDB data directory's files
gauge   sowdb_uptime_seconds                    uptime_s                      Since the server started serving
counter sowdb_unconfigured_publishes            unconfigured_publishes        Messages to topics without a SOW
counter sowdb_unconfigured_published_bytes      unconfigured_bytes_published  Their size
"""

_KIND = {"gauge": GaugeMetricFamily, "counter": CounterMetricFamily}


def _families(table: str) -> list[tuple[type[GaugeMetricFamily | CounterMetricFamily], str, attrgetter[Any], str]]:
    """The rows of one of the tables above: (family class, name, figure getter, help)."""
    rows = (line.split(None, 3) for line in table.strip().splitlines())
    return [(_KIND[kind], name, attrgetter(figure), doc) for kind, name, figure, doc in rows]


def _cluster_families(cluster: ClusterFigures | None) -> Iterator[Metric]:
    role = GaugeMetricFamily("sowdb_cluster_role", "1 for the node's role in its cluster (SPEC 13)", labels=["role"])
    for name in ROLES:
        role.add_metric([name], float(name == (cluster.role if cluster is not None else "none")))
    yield role
    if cluster is None:
        return
    yield GaugeMetricFamily("sowdb_cluster_epoch", "The epoch the node leads or follows", value=cluster.epoch)
    yield GaugeMetricFamily("sowdb_cluster_applied_bookmark", "The node's last applied bookmark", value=cluster.applied)
    lag = GaugeMetricFamily(
        "sowdb_cluster_replication_lag_bookmarks",
        "Bookmarks a replica is behind its primary: each follower on a primary, its own on a replica",
        labels=["node"],
    )
    for node, behind in sorted(cluster.lag.items()):
        lag.add_metric([node], behind)
    yield lag
    yield CounterMetricFamily(
        "sowdb_cluster_sync_fallbacks",
        'Times ack = "sync" fell back to acknowledging alone',
        value=cluster.sync_fallbacks,
    )
    refused = CounterMetricFamily(
        "sowdb_cluster_refused",
        "Peers refused (their certificate, name or epoch), never followed nor counted, by reason",
        labels=["reason"],
    )
    for reason, count in sorted(cluster.refused.items()):
        refused.add_metric([reason], count)
    yield refused


def _topic_families(snap: StatsSnapshot) -> Iterator[Metric]:
    records = GaugeMetricFamily("sowdb_topic_records", "Records in the topic's current state", labels=["topic", "kind"])
    for t in snap.topics:
        records.add_metric([t.name, t.kind], t.records)
    yield records
    for cls, name, value, doc in _families(_TOPIC_METRICS):
        family = cls(name, doc, labels=["topic"])
        for t in snap.topics:
            family.add_metric([t.name], value(t))
        yield family


def _subscription_families(snap: StatsSnapshot) -> Iterator[Metric]:
    """Per subscription, by sub_id and topic: never by user (issue 26: whoever reads /metrics
    would learn who is connected; the Stats RPC tells an admin)."""
    for cls, name, value, doc in _families(_SUBSCRIPTION_METRICS):
        family = cls(name, doc, labels=["sub_id", "topic"])
        for s in snap.subscriptions:
            family.add_metric([s.sub_id, s.topic], value(s))
        yield family


def _server_families(server: ServerFigures) -> Iterator[Metric]:
    for cls, name, value, doc in _families(_SERVER_METRICS):
        yield cls(name, doc, value=value(server))
    if server.processes:  # a sowd --workers group: the totals above, by process
        subs = GaugeMetricFamily(
            "sowdb_process_subscriptions", "Live subscriptions a process of the group serves", labels=["process"]
        )
        queued = GaugeMetricFamily(
            "sowdb_process_queued_events", "Events queued for a process's subscribers", labels=["process"]
        )
        for p in server.processes:
            subs.add_metric([p.name], p.subscriptions)
            queued.add_metric([p.name], p.queued_events)
        yield from (subs, queued)


def _rpc_families(server: ServerFigures) -> Iterator[Metric]:
    calls = CounterMetricFamily("sowdb_rpc_calls", "Calls started", labels=["rpc"])
    errors = CounterMetricFamily(
        "sowdb_rpc_errors", "Calls refused, by status code (Publish: also requests refused)", labels=["rpc", "code"]
    )
    seconds = HistogramMetricFamily("sowdb_rpc_duration_seconds", "Duration of the calls that ended", labels=["rpc"])
    bounds = [*(str(b) for b in LATENCY_BUCKETS), "+Inf"]
    for r in server.rpcs:
        calls.add_metric([r.rpc], r.calls)
        for code, n in sorted(r.errors.items()):
            errors.add_metric([r.rpc, code], n)
        seconds.add_metric([r.rpc], list(zip(bounds, accumulate(r.buckets), strict=True)), r.seconds)
    yield from (calls, errors, seconds)


class MetricsServer:
    """``/metrics`` over HTTP (HTTPS with TLS on), served by prometheus_client on a thread."""

    def __init__(self, httpd: WSGIServer, thread: threading.Thread) -> None:
        self._httpd = httpd
        self._thread = thread

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    async def stop(self) -> None:
        """Stop serving (the thread's loop notices within half a second, off the event loop:
        a scrape in progress may be waiting for the loop)."""
        await asyncio.to_thread(self._httpd.shutdown)
        self._httpd.server_close()
        self._thread.join()


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


def guarded(app: WSGIApp, allowed: Callable[[str | None], bool]) -> WSGIApp:
    """``app`` for the requests whose ``Authorization`` header ``allowed`` accepts; 401 else."""

    def guard(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if allowed(environ.get("HTTP_AUTHORIZATION")):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")])
        return [b"/metrics needs the metrics user's token: Authorization: Bearer TOKEN\n"]

    return guard


def _http_server(host: str, port: int, app: WSGIApp, security: SecurityConfig | None) -> WSGIServer:
    """prometheus_client's ``start_http_server``, with ``app`` in place before the first request
    (so that a guard is never missing) and TLS as the gRPC port's."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("MetricsHTTPServer", (ThreadingWSGIServer,), {"address_family": family})
    httpd: WSGIServer = make_server(host, port, app, server_class, handler_class=_Quiet)
    if security is not None and security.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(security.tls_cert, security.tls_key)
        if security.client_ca:
            context.load_verify_locations(security.client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    return httpd


def serve_metrics(
    listen: str,
    snapshot: Callable[[], StatsSnapshot | None],
    security: SecurityConfig | None = None,
    allowed: Callable[[str | None], bool] | None = None,
    cluster: Callable[[], ClusterFigures | None] = lambda: None,
    progress: StartProgress | None = None,
) -> MetricsServer:
    """Serve the metrics on ``listen``; ``snapshot`` and ``cluster`` are called on this event
    loop at each scrape (``snapshot`` answers None while the state loads; ``progress`` says how
    far it has come). With ``allowed``, a scrape's ``Authorization`` header must satisfy it
    (``[security] metrics_user``); it is called on the HTTP thread.

    Raises:
        OSError: the address cannot be bound, in one line.
    """
    host, port = parse_listen(listen)
    loop = asyncio.get_running_loop()

    async def on_loop() -> tuple[StatsSnapshot | None, ClusterFigures | None]:
        return snapshot(), cluster()

    def take() -> tuple[StatsSnapshot | None, ClusterFigures | None]:  # on the HTTP thread
        return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(SCRAPE_TIMEOUT_S)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(take, progress))
    ProcessCollector(registry=registry)
    app = make_wsgi_app(registry)
    try:
        httpd = _http_server(host, port, app if allowed is None else guarded(app, allowed), security)
    except OSError as exc:
        raise OSError(f"cannot serve metrics on {listen}: {exc.strerror or exc}") from None
    thread = threading.Thread(target=httpd.serve_forever, name="sowdb-metrics", daemon=True)
    thread.start()
    served = MetricsServer(httpd, thread)
    tls = security is not None and security.tls_cert
    log.info("metrics on %s://%s:%d/metrics", "https" if tls else "http", host, served.port)
    return served
