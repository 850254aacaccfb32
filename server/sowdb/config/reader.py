"""Reading a TOML config into :mod:`sowdb.config.model`, refusing anything invalid with a
message that names the file, the entry and the problem."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from sowdb.config import model as m
from sowdb.config.cluster import read_cluster
from sowdb.config.security import read_security
from sowdb.config.server_table import read_server
from sowdb.errors import ExpressionError
from sowdb.expr import compile_filter, parse_aggregation
from sowdb.expr.joins import join_plan
from sowdb.expr.rewrite import compile_rewrite


def _cycle(reads: dict[str, tuple[str, ...]], name: str) -> list[str]:
    """A path of derived topics from ``name`` back to itself through what each reads (joined
    views read several), or [] for none."""
    stack: list[tuple[str, list[str]]] = [(name, [name])]
    seen: set[str] = set()
    while stack:
        at, path = stack.pop()
        for source in reads.get(at, ()):
            if source == name:
                return [*path, source]
            if source not in seen:
                seen.add(source)
                stack.append((source, [*path, source]))
    return []


def load_config(path: str | Path) -> m.Config:
    """Read and validate a TOML config file.

    Raises:
        ConfigError: unreadable file, bad TOML or an invalid entry.
    """
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise m.ConfigError(f"{p}: cannot read: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise m.ConfigError(f"{p}: not valid TOML: {exc}") from None
    return config_from_dict(raw, source=str(p), base=p.resolve().parent)


def demo_config() -> m.Config:
    """The built-in demo configuration (SPEC §3)."""
    return config_from_dict(tomllib.loads(m.DEMO_CONFIG_TOML), source="<built-in demo config>")


def config_from_dict(raw: dict[str, Any], *, source: str, base: Path | None = None) -> m.Config:
    """Validate a parsed TOML document (``base``: the directory its file names are relative to).

    Raises:
        ConfigError: an invalid entry.
    """
    return _Reader(source, base or Path.cwd()).read(raw)


class _Reader:
    def __init__(self, source: str, base: Path) -> None:
        self.source = source
        self.base = base

    def fail(self, entry: str, problem: str) -> m.ConfigError:
        return m.ConfigError(f"{self.source}: {entry}: {problem}")

    def read(self, raw: dict[str, Any]) -> m.Config:
        self._only(raw, "the file", {"server", "topic", "conflated_topic", "view", "security", "role", "cluster"})
        security = read_security(raw, self.base, self.fail)
        server = self._server(raw.get("server", {}))
        topics = tuple(self._topic(i, t) for i, t in enumerate(self._tables(raw, "topic"), 1))
        conflated = tuple(self._conflated(i, t) for i, t in enumerate(self._tables(raw, "conflated_topic"), 1))
        views = tuple(self._view(i, t) for i, t in enumerate(self._tables(raw, "view"), 1))
        seen: set[str] = set()
        named: list[tuple[str, int, m.TopicConfig | m.ViewConfig | m.ConflatedTopicConfig]] = [
            *(("topic", i, t) for i, t in enumerate(topics, 1)),
            *(("view", i, v) for i, v in enumerate(views, 1)),
            *(("conflated_topic", i, c) for i, c in enumerate(conflated, 1)),
        ]
        for kind, i, e in named:
            if e.name in seen:
                raise self.fail(f'[[{kind}]] #{i} "{e.name}"', "name: another topic, view or conflated topic has it")
            seen.add(e.name)
        for kind, i, e in named:
            if not isinstance(e, m.ViewConfig | m.ConflatedTopicConfig):
                continue
            for source in e.sources if isinstance(e, m.ViewConfig) else (e.underlying,):
                if source not in seen or source == e.name:
                    where = "underlying" if source == e.underlying else "join"
                    raise self.fail(f'[[{kind}]] #{i} "{e.name}"', f"{where}: {source!r} is not a configured topic")
        reads = {
            e.name: e.sources if isinstance(e, m.ViewConfig) else (e.underlying,)
            for _, _, e in named
            if isinstance(e, m.ViewConfig | m.ConflatedTopicConfig)
        }
        for kind, i, e in named:
            cycle = _cycle(reads, e.name)
            if cycle:
                raise self.fail(f'[[{kind}]] #{i} "{e.name}"', f"underlying: a cycle {' -> '.join(cycle)}")
        cluster = read_cluster(raw, self.fail, self.base)
        return m.Config(server, topics, conflated, views, self.source, security, cluster)

    def _tables(self, raw: dict[str, Any], key: str) -> list[dict[str, Any]]:
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
            raise self.fail(key, f"use [[{key}]] tables")
        return value

    def _only(self, table: dict[str, Any], entry: str, allowed: set[str]) -> None:
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise self.fail(entry, f"unknown setting {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})")

    def _get(self, table: dict[str, Any], entry: str, key: str, kind: type, default: Any) -> Any:
        value = table.get(key, default)
        if kind is int and isinstance(value, bool):
            raise self.fail(entry, f"{key}: expected an integer, got {value!r}")
        if not isinstance(value, kind):
            raise self.fail(entry, f"{key}: expected {kind.__name__}, got {value!r}")
        return value

    def _address(self, table: dict[str, Any], entry: str, key: str, default: str) -> str:
        """A HOST:PORT to listen on ("" where the default is off and the key is absent)."""
        value: str = self._get(table, entry, key, str, default)
        if value == default == "":
            return value
        try:
            m.parse_listen(value)
        except ValueError as exc:
            raise self.fail(entry, f"{key}: {exc}") from None
        return value

    def _duration(self, table: dict[str, Any], entry: str, key: str, default: str) -> float:
        try:
            return m.parse_duration(table.get(key, default))
        except ValueError as exc:
            raise self.fail(entry, f"{key}: {exc}") from None

    def _name(self, table: dict[str, Any], entry: str) -> str:
        name = table.get("name")
        if not isinstance(name, str) or not name.strip():
            raise self.fail(entry, "name: required, a non-empty string")
        bad = sorted({c for c in name if c in m.REGEX_METACHARACTERS or c == "\x00"})
        if bad:
            raise self.fail(entry, f"name: {name!r} contains {''.join(bad)!r}, which would make it a regex")
        return name

    def _paths(self, table: dict[str, Any], entry: str, key: str) -> tuple[str, ...]:
        value = table.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(entry, f"{key}: expected a list of field paths such as ['/orderId']")
        for v in value:
            try:
                m.field_path_steps(v)
            except ValueError as exc:
                raise self.fail(entry, f"{key}: {exc}") from None
        return tuple(value)

    def _filter(self, table: dict[str, Any], entry: str) -> str:
        text = self._get(table, entry, "filter", str, "")
        if text.strip():
            try:
                compile_filter(text)
            except ExpressionError as exc:
                raise self.fail(entry, f"filter: {exc.message}") from None
        return str(text)

    def _server(self, t: Any) -> m.ServerConfig:
        return read_server(self, t)

    def _topic(self, i: int, t: dict[str, Any]) -> m.TopicConfig:
        entry = f"[[topic]] #{i}"
        name = self._name(t, entry)
        entry = f'{entry} "{name}"'
        self._only(
            t,
            entry,
            {
                "name",
                "key",
                "durability",
                "history",
                "expiration",
                "indexes",
                "recovery_point",
                "preprocessing",
                "enrichment",
            },
        )
        durability = self._get(t, entry, "durability", str, "persistent")
        if durability not in ("persistent", "transient"):
            raise self.fail(entry, f"durability: {durability!r} is neither 'persistent' nor 'transient'")
        history = None
        if "history" in t:
            h = t["history"]
            if not isinstance(h, dict):
                raise self.fail(entry, 'history: expected { window = "1d", granularity = "0s" }')
            self._only(h, f"{entry} history", {"window", "granularity"})
            if "window" not in h:
                raise self.fail(entry, "history: window is required")
            window = self._duration(h, f"{entry} history", "window", "0")
            if window <= 0:
                raise self.fail(entry, "history: window must be longer than 0")
            history = m.HistoryConfig(window, self._duration(h, f"{entry} history", "granularity", "0s"))
        recovery_bookmark: int | None = None
        recovery_window: float | None = None
        if "recovery_point" in t:
            point = t["recovery_point"]
            if durability != "transient":
                raise self.fail(entry, "recovery_point: only transient topics are rebuilt from the journal")
            if isinstance(point, int) and not isinstance(point, bool) and point >= 0:
                recovery_bookmark = point
            elif isinstance(point, str) and point.strip().isdigit():
                recovery_bookmark = int(point)
            else:
                try:
                    recovery_window = m.parse_duration(point)
                except ValueError:
                    raise self.fail(
                        entry, f"recovery_point: {point!r} is neither a bookmark (a sequence number) nor a duration"
                    ) from None
        key = self._paths(t, entry, "key")
        return m.TopicConfig(
            recovery_bookmark=recovery_bookmark,
            recovery_window_s=recovery_window,
            name=name,
            key=key,
            preprocessing=self._rewrite(t, entry, "preprocessing", key),
            enrichment=self._rewrite(t, entry, "enrichment", key),
            durability=durability,
            history=history,
            expiration_s=self._duration(t, entry, "expiration", "0s"),
            indexes=self._paths(t, entry, "indexes"),
        )

    def _rewrite(self, t: dict[str, Any], entry: str, name: str, key: tuple[str, ...]) -> tuple[str, ...]:
        """EN-1 / EN-2: a list of ``EXPR AS /field``, compiled here so that a bad one stops the
        start with its position. Preprocessing may compute the SowKey, which K-1 makes a
        function of the message alone: it may neither read the clock nor (no record is known
        yet) ``OF PREVIOUS``. Enrichment runs once the SowKey is known: it may not set a key field."""
        items = t.get(name, [])
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise self.fail(entry, f'{name}: expected a list of strings such as ["/a * 2 AS /b"]')
        try:
            rewrite = compile_rewrite(items, previous=name == "enrichment")
        except ExpressionError as exc:
            raise self.fail(entry, f"{name}{exc.field}: {exc.message}") from None
        if name == "preprocessing" and rewrite.nondeterministic:
            raise self.fail(
                entry,
                "preprocessing: UNIX_TIMESTAMP() is not allowed: preprocessing may compute the SowKey, which must "
                "depend on the message alone (put it in enrichment)",
            )
        keys = {m.field_path_steps(k) for k in key}
        for item, out in zip(items, rewrite.outputs, strict=True):
            if name == "enrichment" and out in keys:
                raise self.fail(
                    entry,
                    f"enrichment: {item!r} sets a key field, but the SowKey is computed before enrichment "
                    "(set it in preprocessing)",
                )
        return tuple(items)

    def _conflated(self, i: int, t: dict[str, Any]) -> m.ConflatedTopicConfig:
        entry = f"[[conflated_topic]] #{i}"
        name = self._name(t, entry)
        entry = f'{entry} "{name}"'
        self._only(t, entry, {"name", "underlying", "interval", "filter"})
        if "interval" not in t:
            raise self.fail(entry, "interval: required (e.g. '5s')")
        interval = self._duration(t, entry, "interval", "0")
        if interval < m.MIN_CONFLATION_INTERVAL_S:
            raise self.fail(entry, f"interval: at least 100ms, got {t['interval']!r}")
        return m.ConflatedTopicConfig(
            name=name,
            underlying=self._get(t, entry, "underlying", str, ""),
            interval_s=interval,
            filter=self._filter(t, entry),
        )

    def _view(self, i: int, t: dict[str, Any]) -> m.ViewConfig:
        entry = f"[[view]] #{i}"
        name = self._name(t, entry)
        entry = f'{entry} "{name}"'
        self._only(t, entry, {"name", "underlying", "grouping", "projection", "filter", "join"})
        lists = {}
        for key in ("grouping", "projection"):
            value = t.get(key)
            if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
                raise self.fail(entry, f"{key}: required, a non-empty list of expressions")
            lists[key] = tuple(value)
        join = t.get("join", [])
        if not isinstance(join, list) or not all(isinstance(j, str) for j in join):
            raise self.fail(entry, 'join: a list of "[topic]./field = [topic]./field" entries')
        underlying = self._get(t, entry, "underlying", str, "")
        try:
            parse_aggregation(lists["grouping"], lists["projection"])
            join_plan(underlying, join)
        except ExpressionError as exc:
            raise self.fail(entry, f"{exc.field}: {exc.message}") from None
        return m.ViewConfig(
            name=name,
            underlying=underlying,
            grouping=lists["grouping"],
            projection=lists["projection"],
            filter=self._filter(t, entry),
            join=tuple(join),
        )
