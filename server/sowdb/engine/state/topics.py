"""The topic registry: every SOW topic of the config, the derived topics that follow them, and
how a request's topic name (or pattern) is resolved.

Derived topics (views V-1, conflated topics C-2, and the private views of aggregated
subscriptions) are SOW topics in memory whose records follow an underlying topic; the registry
keeps the graph (``downstream``) that the writer's fan-out walks.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from sowdb.config import Config, TopicConfig, ViewConfig, is_regex_topic
from sowdb.engine.state.arena_topic import ArenaTopic, new_arena_root
from sowdb.engine.state.derived import ConflatedTopic, Derived, View, derived_order
from sowdb.engine.state.heap import map_large_allocations, release_free_memory
from sowdb.engine.state.joins import JoinedView
from sowdb.engine.state.sow_topic import SowTopic
from sowdb.errors import FailedPrecondition, InvalidArgument
from sowdb.expr.matching import Pattern, compile_pattern

MAX_TOPIC_LENGTH = 1024


@dataclass(frozen=True)
class TopicSummary:
    """What ListTopics reports about one topic."""

    name: str
    kind: str  # "sow", "view" or "conflated"
    key: tuple[str, ...]
    durability: str
    history: tuple[float, float] | None
    record_count: int
    indexes: tuple[str, ...]
    underlying: str
    expiration_s: float


class Topics:
    """Every SOW and derived topic, by name."""

    def __init__(self, config: Config, arena_root: Path | None = None) -> None:
        """Args:
        arena_root: where the topics' arenas go with ``[server] record_store = "arena"`` (a
            directory of their own each); default a new directory on the RAM file system,
            removed by :meth:`close`.
        """
        map_large_allocations()  # the topics' columns and scans free large blocks (state.heap)
        self.config = config
        self.arena_root: Path | None = None
        self.sow: dict[str, SowTopic]
        if config.server.record_store == "arena":
            fallback = Path(config.server.data_dir) / "arena"
            root = self.arena_root = arena_root if arena_root is not None else new_arena_root(fallback)
            self.sow = {t.name: ArenaTopic(t, root / f"{i:04d}") for i, t in enumerate(config.topics)}
        else:
            self.sow = {t.name: SowTopic(t) for t in config.topics}
        self.derived: dict[str, Derived] = {}
        self.downstream: dict[str, list[Derived]] = {}  # underlying topic -> topics derived from it
        self._configured = {v.name: "view" for v in config.views} | {
            c.name: "conflated" for c in config.conflated_topics
        }
        self.key_fields = key_fields_of(config.topics)

    def load_derived(self, now_us: int) -> None:
        """Create the configured views and conflated topics from their underlying topics' state."""
        for c in derived_order(self.config.views, self.config.conflated_topics):
            d: Derived
            if isinstance(c, ViewConfig) and c.join:
                d = JoinedView.from_config(c)
                d.load_from(self.sow, now_us)
            else:
                d = View.from_config(c) if isinstance(c, ViewConfig) else ConflatedTopic.from_config(c)
                d.load(list(self.sow[d.underlying].records.values()), now_us)
            self.attach(d)

    def attach(self, d: Derived, *, public: bool = True) -> None:
        """Start a derived topic following its underlying topic (each topic a joined view joins);
        a public one (configured) is readable by name, a private one (an aggregated
        subscription's view) only by its owner."""
        self.derived[d.name] = d
        for source in d.sources:
            self.downstream.setdefault(source, []).append(d)
        if public:
            self.sow[d.name] = d.topic

    def detach(self, d: Derived) -> None:
        del self.derived[d.name]
        for source in d.sources:
            self.downstream[source].remove(d)
        self.sow.pop(d.name, None)

    def close(self) -> None:
        """Remove the topics' arenas (the records' durable copy is RocksDB's)."""
        for topic in self.sow.values():
            topic.close()
        if self.arena_root is not None:
            shutil.rmtree(self.arena_root, ignore_errors=True)

    def compact(self) -> int:
        """The upkeep's compaction of the arenas that hold enough dead versions; slots freed."""
        return sum(t.store.compact() for t in self.sow.values() if isinstance(t, ArenaTopic))

    def arenas(self) -> dict[str, str]:
        """The directory of each topic's arena, for reader processes to map (issue 41)."""
        return {n: str(t.store.arena.directory) for n, t in self.sow.items() if isinstance(t, ArenaTopic)}

    def release_pins(self, reader: int) -> None:
        """Reader process ``reader`` (its slot in the arenas' shared pins) is gone: so are its pins."""
        for t in self.sow.values():
            if isinstance(t, ArenaTopic):
                t.store.arena.pins.values[reader] = 0

    def conflated(self) -> list[ConflatedTopic]:
        """The configured conflated topics (their restricted copies refresh with them)."""
        return [d for d in self.derived.values() if isinstance(d, ConflatedTopic) and d.name in self._configured]

    def build_columns(self) -> bool:
        """A step of building the columns queries wanted (:mod:`sowdb.engine.state.columns`), one
        topic's worth; True while more steps remain. When the last step is done, the memory
        the build and the scans before it freed goes back to the system (:mod:`.heap`)."""
        building = any(t.columns is not None and t.columns.building for t in self.sow.values())
        more = any(topic.build_columns() for topic in self.sow.values())
        if building and not more:
            release_free_memory()
        return more

    def get(self, name: str) -> SowTopic | None:
        return self.sow.get(name)

    def resolve(
        self,
        pattern: str,
        readable: Callable[[str], bool] | None = None,
        known: Callable[[str], bool] | None = None,
    ) -> list[SowTopic]:
        """The SOW topics a query's topic names (Q-3): a name, or every topic a regex matches.

        Args:
            pattern: a topic name or regex.
            readable: for a regex, the topics its caller may read (A-3): only those are matched,
                so a caller's pattern costs nothing on the topics it cannot see (issue 26).
            known: for a name, the topics an unknown name's refusal may list (None: all).

        Raises:
            InvalidArgument: a bad name or regex.
            FailedPrecondition: a name that is not a SOW topic (Q-4); see :meth:`sow_topic`.
        """
        if is_regex_topic(pattern):
            rx = compile_topic_pattern(pattern)
            names = sorted(n for n in self.sow if readable is None or readable(n))
            return [self.sow[name] for name in names if rx.search(name)]
        return [self.sow_topic(pattern, known)]

    def sow_topic(self, name: str, known: Callable[[str], bool] | None = None) -> SowTopic:
        """The SOW topic ``name``.

        Raises:
            InvalidArgument: a bad name.
            FailedPrecondition: not a SOW topic (Q-4); the refusal lists the SOW topics, those
                ``known`` allows only (the caller's rights: issue 26, a caller is not told the
                names of topics it has no right on).
        """
        check_topic_name(name)
        topic = self.sow.get(name)
        if topic is not None:
            return topic
        names = [n for n in sorted(self.sow) if known is None or known(n)]
        which = "configured SOW topics" if known is None else "SOW topics you may use"
        raise FailedPrecondition(
            f"topic {name!r} is not a SOW topic ({which}: {', '.join(names) or 'none'})",
            field="topic",
        )

    def check_writable(self, name: str, action: str) -> None:
        """K-4: views and conflated topics follow their underlying topic and take no changes.

        Raises:
            FailedPrecondition: ``name`` is one of them; ``action`` says what to do instead
                (``publish to``, ``delete from``) its underlying topic.
        """
        kind = self._configured.get(name)
        if kind is not None:
            raise FailedPrecondition(
                f"{name!r} is a {kind} topic, which is read-only; {action} its underlying topic", field="topic"
            )

    def derived_kind(self, name: str) -> str | None:
        """``view`` or ``conflated`` for a configured derived topic, else None."""
        return self._configured.get(name)

    def summaries(self) -> list[TopicSummary]:
        """ListTopics: every configured topic with its figures, by name."""
        out = []
        for t in self.config.topics:
            h = t.history
            out.append(
                TopicSummary(
                    t.name,
                    "sow",
                    t.key,
                    t.durability,
                    (h.window_s, h.granularity_s) if h else None,
                    len(self.sow[t.name].records),
                    t.indexes,
                    "",
                    t.expiration_s,
                )
            )
        for d in self.derived.values():
            if d.name in self._configured:  # not the private views of aggregated subscriptions
                count = len(d.topic.records)
                out.append(TopicSummary(d.name, d.kind, (), "transient", None, count, (), d.underlying, 0.0))
        return sorted(out, key=lambda s: s.name)


def check_topic_name(name: str) -> None:
    """Raises:
    InvalidArgument: an empty name, one over 1024 characters or one holding NUL.
    """
    if not name:
        raise InvalidArgument("topic is required", field="topic")
    if "\x00" in name or len(name) > MAX_TOPIC_LENGTH:
        raise InvalidArgument(f"topic must be at most {MAX_TOPIC_LENGTH} characters without NUL", field="topic")


def compile_topic_pattern(pattern: str) -> Pattern:
    """A regex topic (Q-3), compiled to run in linear time where it can (:mod:`sowdb.expr.matching`):
    a client's pattern such as ``((.*)*)*x`` must not freeze the server (issue 26, item 5).

    Raises:
        InvalidArgument: not a valid regular expression.
    """
    check_topic_name(pattern)
    try:
        return compile_pattern(pattern)
    except ValueError as exc:
        raise InvalidArgument(
            f"topic {pattern[:100]!r} is not a valid regular expression: {exc}", field="topic"
        ) from None


def key_fields_of(topics: Iterable[TopicConfig]) -> dict[str, tuple[str, ...]]:
    """The top-level key field names per topic, which delta subscriptions always send (D-2)."""
    return {t.name: tuple(p.lstrip("/") for p in t.key if p.count("/") == 1) for t in topics}
