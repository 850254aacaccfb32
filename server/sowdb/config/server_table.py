"""The ``[server]`` table of a config: addresses, limits, retention, RocksDB's memory and the
record store, each checked with a message that names the entry and the problem."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sowdb.config import model as m

if TYPE_CHECKING:
    from sowdb.config.reader import _Reader


def read_server(r: _Reader, t: Any) -> m.ServerConfig:
    entry = "[server]"
    if not isinstance(t, dict):
        raise r.fail(entry, "expected a table")
    r._only(
        t,
        entry,
        {
            "listen",
            "http_listen",
            "data_dir",
            "fsync",
            "max_message_bytes",
            "max_document_bytes",
            "subscriber_queue_records",
            "subscriber_queue_bytes",
            "heartbeat",
            "journal_max_age",
            "journal_max_entries",
            "journal_max_bytes",
            "verify_budget",
            "metrics_listen",
            "handshake_timeout",
            "max_connections",
            "idle_timeout",
            "memtable_bytes",
            "block_cache_bytes",
            "record_store",
            "workers",
        },
    )
    listen = r._address(t, entry, "listen", m.DEFAULT_LISTEN)
    http_listen = r._address(t, entry, "http_listen", "")
    sizes = {}
    for key, default in (
        ("max_message_bytes", m.DEFAULT_MAX_MESSAGE_BYTES),
        ("max_document_bytes", m.DEFAULT_MAX_DOCUMENT_BYTES),
        ("subscriber_queue_bytes", m.DEFAULT_SUBSCRIBER_QUEUE_BYTES),
    ):
        sizes[key] = r._get(t, entry, key, int, default)
        if sizes[key] < 1024:
            raise r.fail(entry, f"{key}: at least 1024, got {sizes[key]}")
    records = r._get(t, entry, "subscriber_queue_records", int, m.DEFAULT_SUBSCRIBER_QUEUE_RECORDS)
    if records < 1:
        raise r.fail(entry, f"subscriber_queue_records: at least 1, got {records}")
    heartbeat = r._duration(t, entry, "heartbeat", "5s")
    if heartbeat < 0.01:
        raise r.fail(entry, "heartbeat: at least 10ms")
    max_entries = r._get(t, entry, "journal_max_entries", int, 0)
    max_journal_bytes = r._get(t, entry, "journal_max_bytes", int, 0)
    for key, value in (("journal_max_entries", max_entries), ("journal_max_bytes", max_journal_bytes)):
        if value < 0:
            raise r.fail(entry, f"{key}: 0 (no limit) or more, got {value}")
    metrics_listen = r._address(t, entry, "metrics_listen", "")
    handshake = r._duration(t, entry, "handshake_timeout", "10s")
    if handshake < 0.01:
        raise r.fail(entry, "handshake_timeout: at least 10ms")
    idle = r._duration(t, entry, "idle_timeout", "30s")
    if 0 < idle < 0.01:
        raise r.fail(entry, "idle_timeout: 0s (never) or at least 10ms")
    max_connections = r._get(t, entry, "max_connections", int, 0)
    if max_connections < 0:
        raise r.fail(entry, f"max_connections: 0 (half the open-files limit) or more, got {max_connections}")
    memtable = r._get(t, entry, "memtable_bytes", int, m.DEFAULT_MEMTABLE_BYTES)
    if memtable < 1 << 20:
        raise r.fail(entry, f"memtable_bytes: at least 1048576 (1 MiB), got {memtable}")
    block_cache = r._get(t, entry, "block_cache_bytes", int, m.DEFAULT_BLOCK_CACHE_BYTES)
    if block_cache < 0:
        raise r.fail(entry, f"block_cache_bytes: 0 (no cache) or more, got {block_cache}")
    record_store = r._get(t, entry, "record_store", str, m.DEFAULT_RECORD_STORE)
    if record_store not in m.RECORD_STORES:
        raise r.fail(entry, f"record_store: {' or '.join(map(repr, m.RECORD_STORES))}, got {record_store!r}")
    workers = _workers(t.get("workers", "auto"))
    if workers is None:
        allowed = f'"auto" (the cores available) or 1 (one process) to {m.MAX_WORKERS}'
        raise r.fail(entry, f"workers: {allowed}, got {t['workers']!r}")
    return m.ServerConfig(
        workers=workers,
        record_store=record_store,
        memtable_bytes=memtable,
        block_cache_bytes=block_cache,
        handshake_timeout_s=handshake,
        max_connections=max_connections,
        idle_timeout_s=idle,
        metrics_listen=metrics_listen,
        verify_budget_s=r._duration(t, entry, "verify_budget", "10s"),
        journal_max_bytes=max_journal_bytes,
        journal_max_age_s=r._duration(t, entry, "journal_max_age", "0s"),
        journal_max_entries=max_entries,
        subscriber_queue_records=records,
        heartbeat_s=heartbeat,
        listen=listen,
        http_listen=http_listen,
        data_dir=r._get(t, entry, "data_dir", str, m.DEFAULT_DATA_DIR),
        fsync=r._get(t, entry, "fsync", bool, False),
        **sizes,
    )


def _workers(value: object) -> int | None:
    """``workers`` as the config keeps it (0 for ``"auto"``), or None where it is neither
    ``"auto"`` nor 1 to :data:`m.MAX_WORKERS` (a flag's text is read as a number too)."""
    if value == "auto":
        return 0
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= m.MAX_WORKERS:
        return value
    return None


def with_overrides(
    config: m.Config,
    *,
    listen: str | None,
    data_dir: str | None,
    http_listen: str | None = None,
    metrics_listen: str | None = None,
    workers: str | None = None,
) -> m.Config:
    """The config with the command-line flags applied, their addresses checked as a config
    file's are.

    Raises:
        m.ConfigError: a flag's address is not HOST:PORT with a port of 0..65535.
    """
    addresses = {"listen": listen, "http_listen": http_listen, "metrics_listen": metrics_listen}
    changes: dict[str, Any] = {}
    for key, value in addresses.items():
        if value:
            try:
                m.parse_listen(value)
            except ValueError as exc:
                raise m.ConfigError(f"--{key.replace('_', '-')}: {exc}") from None
            changes[key] = value
    if data_dir:
        changes["data_dir"] = data_dir
    if workers is not None:
        count = _workers(workers)
        if count is None:
            allowed = f"auto (the cores available) or 1 (one process) to {m.MAX_WORKERS}"
            raise m.ConfigError(f"--workers: {allowed}, got {workers}")
        changes["workers"] = count
    return replace(config, server=replace(config.server, **changes))
