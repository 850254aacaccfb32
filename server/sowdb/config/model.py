"""The configuration's model: frozen dataclasses of SPEC §3, their defaults, the demo config,
and the value types a config is made of (durations, field paths, regex topic names)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sowdb.errors import ExpressionError
from sowdb.expr import nodes as n
from sowdb.expr.joins import joined_topics
from sowdb.expr.parser import parse
from sowdb_address import parse_address

if TYPE_CHECKING:  # the security and cluster parts read this module's types
    from sowdb.config.cluster import ClusterConfig
    from sowdb.config.security import SecurityConfig

DEFAULT_LISTEN = "127.0.0.1:9007"
DEFAULT_DATA_DIR = "./data"
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_DOCUMENT_BYTES = 1024 * 1024
DEFAULT_SUBSCRIBER_QUEUE_RECORDS = 100_000
DEFAULT_SUBSCRIBER_QUEUE_BYTES = 64 * 1024 * 1024
DEFAULT_HEARTBEAT_S = 5.0
DEFAULT_MEMTABLE_BYTES = 32 * 1024 * 1024
DEFAULT_BLOCK_CACHE_BYTES = 8 * 1024 * 1024
RECORD_STORES = ("objects", "arena")
DEFAULT_RECORD_STORE = "arena"
MIN_CONFLATION_INTERVAL_S = 0.1

# Characters that make a topic name a regular expression. "." is left out on purpose so
# that dotted names such as "orders.eu" stay plain names.
REGEX_METACHARACTERS = frozenset("^$*+?()[]{}|\\")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class ConfigError(Exception):
    """The configuration is invalid; the message names file, entry and problem."""


def available_cores() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one), 1 to
    :data:`MAX_WORKERS`: what ``workers = "auto"`` starts."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform (macOS)
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


MAX_WORKERS = 256
"""The most processes ``workers`` may name."""


@dataclass(frozen=True)
class HistoryConfig:
    """History of past versions (H-1)."""

    window_s: float
    granularity_s: float = 0.0


@dataclass(frozen=True)
class TopicConfig:
    """A SOW topic."""

    name: str
    key: tuple[str, ...] = ()
    durability: str = "persistent"
    history: HistoryConfig | None = None
    expiration_s: float = 0.0
    indexes: tuple[str, ...] = ()
    # J-3: where a transient topic's rebuild starts (one of them; neither = the whole journal)
    recovery_bookmark: int | None = None
    recovery_window_s: float | None = None
    # EN-1 / EN-2: ``EXPR AS /field`` items that rewrite each published message, before its
    # SowKey is computed (preprocessing) and after it, reading the previous version (enrichment)
    preprocessing: tuple[str, ...] = ()
    enrichment: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConflatedTopicConfig:
    """A conflated copy of another topic (C-2)."""

    name: str
    underlying: str
    interval_s: float
    filter: str = ""


@dataclass(frozen=True)
class ViewConfig:
    """An aggregated view of another topic (V-1), or of the join of several (V-2: ``join``)."""

    name: str
    underlying: str
    grouping: tuple[str, ...]
    projection: tuple[str, ...]
    filter: str = ""
    join: tuple[str, ...] = ()  # V-2: "[LEFT] [a]./x = [b]./y" entries; underlying is the first topic

    @property
    def sources(self) -> tuple[str, ...]:
        """Every topic the view reads: ``underlying``, then each topic its joins bring in."""
        return joined_topics(self.underlying, self.join)


@dataclass(frozen=True)
class ServerConfig:
    """Process-level settings: the ``[server]`` table (SPEC §3), every one with a default so
    that ``sowd`` with no config at all starts the embedded demo."""

    listen: str = DEFAULT_LISTEN
    # the console (SPEC §12): its page and the Connect / gRPC-web gateway on HTTP; "" = off
    http_listen: str = ""
    data_dir: str = DEFAULT_DATA_DIR
    fsync: bool = False
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    subscriber_queue_records: int = DEFAULT_SUBSCRIBER_QUEUE_RECORDS
    subscriber_queue_bytes: int = DEFAULT_SUBSCRIBER_QUEUE_BYTES
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    # journal retention (H-4): 0 = keep forever
    journal_max_age_s: float = 0.0
    journal_max_entries: int = 0
    journal_max_bytes: int = 0
    # how long start-up may spend reading the journal back against its checksums (0: not at all)
    verify_budget_s: float = 10.0
    # Prometheus metrics (SPEC §12) on this HOST:PORT, path /metrics; "" = off
    metrics_listen: str = ""
    # how long a new connection (gRPC and console) may take to finish its TLS / HTTP/2 handshake
    # before it is dropped: a client that connects and says nothing must not hold a descriptor
    handshake_timeout_s: float = 10.0
    # connections the gRPC port holds at once; 0 = half the process's open-files limit
    max_connections: int = 0
    # a gRPC connection with no call for this long is closed (its client reconnects on its next
    # call): a client that connects and never calls must not hold a slot of max_connections; 0 = never
    idle_timeout_s: float = 30.0
    # RocksDB's memory (issue 30): its write buffers (memtables) of all column families together,
    # and one block cache they share. RocksDB's defaults (64 MB of memtable and a 32 MB cache per
    # family) held ~86 MB after loading a million orders and 64 MB after a restart's scans
    memtable_bytes: int = DEFAULT_MEMTABLE_BYTES
    block_cache_bytes: int = DEFAULT_BLOCK_CACHE_BYTES
    # how the SOW topics hold their current records (issue 39): "arena" (the default: JSON and
    # metadata in shared memory, ~2x its JSON; what a group's readers query) or "objects" (a
    # Python object per record, ~3.9x; an update that a view follows ~1.2x faster)
    record_store: str = field(default_factory=lambda: DEFAULT_RECORD_STORE)
    # processes serving the port (issue 41, SPEC §14): 1 = this process alone; N > 1 = one writer
    # and N - 1 readers that serve live subscriptions from the writer's ordered feed; 0 (written
    # "auto", the default) = the cores this process may run on (:attr:`processes`)
    workers: int = 0

    @property
    def processes(self) -> int:
        """How many processes serve the port: ``workers``, or the cores available where it is
        ``"auto"`` (the CPUs this process may run on, as ``taskset`` or a container's cpuset
        leave it, not the machine's count)."""
        return self.workers or available_cores()

    @property
    def frame_bytes(self) -> int:
        """Bytes of records in one response: half the message limit, so that a response plus
        its framing always fits (a single larger record goes alone; it is at most
        ``max_document_bytes``)."""
        return self.max_message_bytes // 2


@dataclass(frozen=True)
class Config:
    """A whole, validated configuration."""

    server: ServerConfig = field(default_factory=ServerConfig)
    topics: tuple[TopicConfig, ...] = ()
    conflated_topics: tuple[ConflatedTopicConfig, ...] = ()
    views: tuple[ViewConfig, ...] = ()
    source: str = "<built-in demo config>"
    security: SecurityConfig | None = None  # SPEC §11; None: off (every call has every right)
    cluster: ClusterConfig | None = None  # SPEC §13; None: a lone server


DEMO_CONFIG_TOML = """
# The built-in demo configuration, used when sowd starts without --config.
[[topic]]
name = "orders"
key = ["/orderId"]
indexes = ["/symbol"]

[[topic]]
name = "notes"           # publishers supply the SowKey (sow publish -sowkey K)

[[topic]]
name = "quotes"
key = ["/symbol"]
durability = "transient"

[[topic]]
name = "prices"          # keeps past versions: query it as of a bookmark or a time
key = ["/symbol"]
history = { window = "1d" }

[[topic]]
name = "positions"       # rewritten as published: preprocessing makes the key, enrichment reads the previous version
key = ["/position_key"]
preprocessing = ["CONCAT(/account, '-', /symbol) AS /position_key"]
enrichment = ["IF(/qty < 0, /qty OF PREVIOUS, /qty) AS /qty", "/qty * /px AS /notional"]

[[view]]
name = "orders_by_symbol" # live totals per symbol, kept in step with orders
underlying = "orders"
grouping = ["/symbol"]
projection = ["/symbol AS /symbol", "SUM(/qty) AS /total_qty", "COUNT(/orderId) AS /orders"]

[[view]]
name = "orders_value"     # a joined view: each symbol's orders priced by the prices topic
underlying = "orders"
join = ["[orders]./symbol = [prices]./symbol"]
grouping = ["[orders]./symbol"]
projection = ["[orders]./symbol AS /symbol", "[prices]./px AS /px", "SUM([orders]./qty * [prices]./px) AS /value"]

[[conflated_topic]]
name = "orders_5s"        # orders, refreshed every 5 s with the latest state of each changed order
underlying = "orders"
interval = "5s"
"""


def parse_duration(text: object) -> float:
    """Parse ``500ms``, ``5s``, ``2m``, ``1h``, ``1d`` (or ``0``) into seconds.

    Raises:
        ValueError: the text is not a duration.
    """
    if text == "0" or text == 0:
        return 0.0
    m = _DURATION.match(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"{text!r} is not a duration (use a number with ms, s, m, h or d, e.g. '5s')")
    return float(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def parse_listen(text: str) -> tuple[str, int]:
    """(host, port) of ``HOST:PORT`` to listen on (``[::1]:9107`` for IPv6; port 0: any free port).

    Raises:
        ValueError: not HOST:PORT with a port of 0..65535.
    """
    return parse_address(text, listen=True)


def is_regex_topic(name: str) -> bool:
    """True when a topic in a request is a regular expression rather than a name (Q-3)."""
    return any(c in REGEX_METACHARACTERS for c in name)


def field_path_steps(text: str) -> tuple[str | int, ...]:
    """The steps of a plain field path such as ``/orderId`` or ``/a/b``.

    Raises:
        ValueError: the text is not a single field path.
    """
    try:
        node = parse(text)
    except ExpressionError as exc:
        raise ValueError(f"{text!r} is not a field path: {exc.message}") from None
    if not isinstance(node, n.Path):
        raise ValueError(f"{text!r} is not a field path (expected e.g. '/orderId')")
    return node.steps
