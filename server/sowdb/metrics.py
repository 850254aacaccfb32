"""Prometheus metrics on ``[server] metrics_listen`` (SPEC §12): the engine's figures, read at
scrape time.

Nothing is updated on the hot path for Prometheus: a custom collector takes the engine's
:class:`~sowdb.engine.stats.StatsSnapshot` — the same figures the Stats RPC answers — when
``/metrics`` is scraped, and turns it into metric families. prometheus_client serves HTTP on a
thread of its own; the snapshot itself is taken on the event loop (the engine is not
thread-safe), in one step, so a scrape sees one point of the total order. With TLS on the gRPC
port (SPEC §11), ``/metrics`` is served over TLS with the same certificate (and asks for client
certificates when ``client_ca`` is set). The process's CPU and memory come from
prometheus_client's own process collector (``process_*``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from itertools import accumulate
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector, CollectorRegistry

from sowdb.config import SecurityConfig, parse_listen
from sowdb.engine.counters import LATENCY_BUCKETS
from sowdb.engine.stats import StatsSnapshot

log = logging.getLogger("sowdb.metrics")

SCRAPE_TIMEOUT_S = 10.0
"""How long a scrape waits for the event loop to take the snapshot (a busy loop answers late)."""


class EngineCollector(Collector):
    """The engine's figures as metric families, taken fresh at each scrape by ``take``."""

    def __init__(self, take: Callable[[], StatsSnapshot]) -> None:
        self.take = take

    def collect(self) -> Iterator[Metric]:
        snap = self.take()
        yield from _topic_families(snap)
        yield from _subscription_families(snap)
        if snap.server is not None:
            yield from _server_families(snap)


def _topic_families(snap: StatsSnapshot) -> Iterator[Metric]:
    records = GaugeMetricFamily("sowdb_topic_records", "Records in the topic's current state", labels=["topic", "kind"])
    stored = GaugeMetricFamily("sowdb_topic_stored_bytes", "Size of the topic's current records", labels=["topic"])
    publishes = CounterMetricFamily(
        "sowdb_topic_publishes", "Messages applied to the topic (for a view: its changes)", labels=["topic"]
    )
    published = CounterMetricFamily("sowdb_topic_published_bytes", "Size of the messages applied", labels=["topic"])
    deletes = CounterMetricFamily("sowdb_topic_deletes", "Records deleted by sow_delete", labels=["topic"])
    expirations = CounterMetricFamily("sowdb_topic_expirations", "Records expired (X-1)", labels=["topic"])
    subs = GaugeMetricFamily("sowdb_topic_subscriptions", "Live subscriptions following the topic", labels=["topic"])
    for t in snap.topics:
        records.add_metric([t.name, t.kind], t.records)
        stored.add_metric([t.name], t.bytes_stored)
        publishes.add_metric([t.name], t.publishes)
        published.add_metric([t.name], t.bytes_published)
        deletes.add_metric([t.name], t.deletes)
        expirations.add_metric([t.name], t.expirations)
        subs.add_metric([t.name], t.subscriptions)
    yield from (records, stored, publishes, published, deletes, expirations, subs)


def _subscription_families(snap: StatsSnapshot) -> Iterator[Metric]:
    labels = ["sub_id", "topic", "user"]
    events = GaugeMetricFamily("sowdb_subscription_queued_events", "Events queued for the subscriber", labels=labels)
    size = GaugeMetricFamily("sowdb_subscription_queued_bytes", "Size of the events queued", labels=labels)
    limit = GaugeMetricFamily(
        "sowdb_subscription_queue_limit_events", "Queued events past which it is cut off (SL-1)", labels=labels
    )
    for s in snap.subscriptions:
        values = [s.sub_id, s.topic, s.user]
        events.add_metric(values, s.queued_events)
        size.add_metric(values, s.queued_bytes)
        limit.add_metric(values, s.max_queued_events)
    yield from (events, size, limit)


def _server_families(snap: StatsSnapshot) -> Iterator[Metric]:
    server = snap.server
    assert server is not None
    j = server.journal
    yield GaugeMetricFamily("sowdb_subscriptions", "Live subscriptions", value=server.subscriptions)
    yield GaugeMetricFamily("sowdb_queued_events", "Events queued for all subscribers", value=server.queued_events)
    yield CounterMetricFamily(
        "sowdb_slow_consumer_cutoffs",
        "Subscriptions cut off as slow consumers (SL-1)",
        value=server.slow_consumer_cutoffs,
    )
    yield GaugeMetricFamily("sowdb_journal_bytes", "The journal's size on disk", value=j.bytes)
    yield GaugeMetricFamily("sowdb_journal_entries", "Entries the journal holds", value=j.entries)
    yield GaugeMetricFamily("sowdb_journal_oldest_bookmark", "The oldest bookmark retained", value=j.oldest_bookmark)
    yield GaugeMetricFamily(
        "sowdb_journal_oldest_timestamp_seconds",
        "When the oldest retained entry was written (Unix time; 0: empty)",
        value=j.oldest_timestamp_us / 1e6,
    )
    yield GaugeMetricFamily("sowdb_journal_last_bookmark", "The latest bookmark", value=j.last_bookmark)
    yield GaugeMetricFamily("sowdb_disk_bytes", "The RocksDB data directory's files", value=server.disk_bytes)
    yield GaugeMetricFamily("sowdb_uptime_seconds", "Since the server started serving", value=server.uptime_s)
    yield CounterMetricFamily(
        "sowdb_unconfigured_publishes",
        "Messages published to topics without a SOW",
        value=server.unconfigured_publishes,
    )
    yield CounterMetricFamily(
        "sowdb_unconfigured_published_bytes",
        "Size of the messages published to topics without a SOW",
        value=server.unconfigured_bytes_published,
    )
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


def serve_metrics(
    listen: str, snapshot: Callable[[], StatsSnapshot], security: SecurityConfig | None = None
) -> MetricsServer:
    """Serve the metrics on ``listen``; ``snapshot`` is called on this event loop at each scrape.

    Raises:
        OSError: the address cannot be bound, in one line.
    """
    host, port = parse_listen(listen)
    loop = asyncio.get_running_loop()

    async def on_loop() -> StatsSnapshot:
        return snapshot()

    def take() -> StatsSnapshot:  # on the HTTP thread
        return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(SCRAPE_TIMEOUT_S)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(take))
    ProcessCollector(registry=registry)
    tls: dict[str, object] = {}
    if security is not None and security.tls_cert:
        tls = {"certfile": security.tls_cert, "keyfile": security.tls_key}
        if security.client_ca:
            tls.update(client_cafile=security.client_ca, client_auth_required=True)
    try:
        httpd, thread = start_http_server(port, host, registry, **tls)  # type: ignore[arg-type]
    except OSError as exc:
        raise OSError(f"cannot serve metrics on {listen}: {exc.strerror or exc}") from None
    served = MetricsServer(httpd, thread)
    log.info("metrics on %s://%s:%d/metrics", "https" if tls else "http", host, served.port)
    return served
