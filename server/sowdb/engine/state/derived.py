"""Topics derived from other topics: views (V-1) and conflated topics (C-2).

Both are SOW topics in memory whose records follow an *underlying* topic (a SOW topic, a view
or a conflated topic). The writer hands every applied batch of changes to the topics derived
from its topic (:meth:`Derived.apply`), in the same synchronous step, so a derived change takes
the bookmark of the change that caused it and its place in the one total order. They keep no
journal of their own: at start they are recomputed from their underlying topic's state.

A view keeps one :class:`~sowdb.expr.aggregation.Group` per group key, whose accumulators take
a record's contribution in and out (an update retracts the old version first; MIN and MAX keep
sorted multisets, so deletes keep them right). A conflated topic notes the latest state of each
changed key and publishes them all once per interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from sowdb.config import ConflatedTopicConfig, TopicConfig, ViewConfig
from sowdb.engine.changes import OOF_DELETED, Change
from sowdb.engine.records import StoredRecord, document
from sowdb.engine.state.sow_topic import SowTopic
from sowdb.expr import Aggregation, CompiledFilter, compile_filter, parse_aggregation
from sowdb.expr.aggregation import Group
from sowdb.jsonbytes import dumps


class Derived:
    """A derived topic: its records (``topic``) and how it follows ``underlying``."""

    kind = ""

    def __init__(self, name: str, underlying: str, filter: str, sow_keys: frozenset[str] | None = None) -> None:
        self.name = name
        self.underlying = underlying
        self.filter: CompiledFilter | None = compile_filter(filter) if filter.strip() else None
        self.sow_keys = sow_keys  # only these underlying records count (an aggregated subscription's sow_keys)
        self.topic = SowTopic(TopicConfig(name=name, durability="transient"))

    @property
    def sources(self) -> tuple[str, ...]:
        """The topics this one follows: its underlying topic (a joined view: every topic it joins)."""
        return (self.underlying,)

    @property
    def selective(self) -> bool:
        """Whether some underlying records do not count (a filter or a SowKey list)."""
        return self.filter is not None or self.sow_keys is not None

    def reads_olds(self, topic: str) -> bool:
        """Whether :meth:`apply` reads the versions that changes of ``topic`` replaced
        (``Change.old`` of an update): a store that makes them from its own form makes them
        only when something reads them (:meth:`FanOut.olds_wanted
        <sowdb.engine.write.fanout.FanOut.olds_wanted>`). A view retracts the old version."""
        return True

    def _matches(self, rec: StoredRecord | None) -> bool:
        if rec is None or (self.sow_keys is not None and rec.sow_key not in self.sow_keys):
            return False
        return self.filter is None or self.filter.matches(rec.data, rec)

    def apply(self, changes: Sequence[Change], now_us: int) -> list[Change]:
        """Take a batch of underlying changes; returns this topic's changes (to dispatch and
        to pass on to topics derived from it)."""
        raise NotImplementedError

    def load(self, records: Sequence[StoredRecord], now_us: int) -> None:
        """Start from the underlying topic's state (at server start or creation)."""
        self.apply([Change(r.topic, r.sow_key, r.bookmark, r.timestamp_us, None, r) for r in records], now_us)


_STR_ONLY = {str}


class View(Derived):
    """V-1: the grouping/projection of the underlying topic, kept up to date incrementally."""

    kind = "view"

    def __init__(
        self,
        name: str,
        underlying: str,
        aggregation: Aggregation,
        filter: str = "",
        *,
        sow_keys: frozenset[str] | None = None,
    ) -> None:
        super().__init__(name, underlying, filter, sow_keys)
        self.aggregation = aggregation
        self.shown = name  # the topic its records carry (a restricted joined view: the view's own)
        self.groups: dict[str, Group] = {}
        self._key_text: dict[tuple[Any, ...], str] = {}  # group key -> its SowKey, made once

    @classmethod
    def from_config(cls, c: ViewConfig) -> View:
        return cls(c.name, c.underlying, parse_aggregation(list(c.grouping), list(c.projection)), c.filter)

    def _group_of(self, rec: StoredRecord) -> str:
        assert rec.data is not None
        field = self.aggregation.group_field
        if field is not None:  # one top-level field, the usual grouping: its string values are cached
            value = rec.data.get(field)
            if type(value) is str:
                text = self._key_text.get((value,))
                if text is not None:
                    return text
        key = self.aggregation.group_key(rec.data, rec)
        text = self._key_text.get(key)
        if text is None:
            text = self._key_text[key] = orjson.dumps(list(key)).decode()
        return text

    def apply(self, changes: Sequence[Change], now_us: int) -> list[Change]:
        touched = None if self.selective else self._apply_updates(changes)
        if touched is None:
            touched = self._apply_each(changes)
        return self._publish_groups(touched)

    def _apply_updates(self, changes: Sequence[Change]) -> dict[str, Change] | None:
        """The usual batch, where every change updates a record that stays in its group (grouped
        by a top-level string field), applied a step per aggregate over the whole batch (see
        :meth:`Aggregation.replace_many`) instead of a retract-and-add per change.

        Returns:
            The touched groups (SowKey -> the last change that touched it), or None, having
            changed nothing, when the batch is not of that kind.
        """
        field = self.aggregation.group_field
        if field is None or not self.aggregation.in_place:
            return None
        olds: list[Any] = [c.old for c in changes]  # records of a SOW topic: each has its data
        news: list[Any] = [c.new for c in changes]
        if None in olds or None in news:
            return None
        # the replaced versions are read once, here: decoded without joining the recent ones,
        # where each would push out a version that is still read (issue 42)
        old_docs: list[Any] = list(map(document, olds))
        new_docs: list[Any] = [r.data for r in news]
        values = [d.get(field) for d in old_docs]
        if set(map(type, values)) != _STR_ONLY or values != [d.get(field) for d in new_docs]:
            return None
        get = self._key_text.get
        keys: list[Any] = [get((v,)) for v in values]
        groups = self.groups
        if None in keys or not all(map(groups.__contains__, keys)):
            return None
        if not self.aggregation.replace_many([groups[k] for k in keys], old_docs, new_docs, news):
            return None
        return dict(zip(keys, changes, strict=True))

    def _apply_each(self, changes: Sequence[Change]) -> dict[str, Change]:
        """Retract each change's old version from its group and add the new one."""
        touched: dict[str, Change] = {}  # group SowKey -> the last change that touched it
        groups = self.groups
        unfiltered = not self.selective
        for c in changes:
            old, new = c.old, c.new
            if not unfiltered:
                old = old if self._matches(old) else None
                new = new if self._matches(new) else None
            old_key = self._group_of(old) if old is not None else None
            new_key = self._group_of(new) if new is not None else None
            if old_key is not None:
                assert old is not None and old.data is not None
                group = groups.get(old_key)
                if group is not None:
                    touched[old_key] = c
                    if old_key == new_key:  # an update within its group: one step per aggregate
                        assert new is not None and new.data is not None
                        group.replace(old.data, old, new.data, new)
                        continue
                    group.remove(old.data, old)
            if new_key is not None:
                assert new is not None and new.data is not None
                group = groups.get(new_key)
                if group is None:
                    group = groups[new_key] = self.aggregation.new_group()
                group.add(new.data, new)
                touched[new_key] = c
        return touched

    def _publish_groups(self, touched: dict[str, Change]) -> list[Change]:
        """The new version of each touched group (or its removal when it emptied)."""
        groups = self.groups
        out: list[Change] = []
        topic, shown = self.topic, self.shown
        for key, c in touched.items():
            group = groups[key]
            if group.members <= 0:
                del groups[key]
                if len(self._key_text) > 2 * len(groups) + 1000:  # forget emptied groups' keys, now and then
                    self._key_text = {k: t for k, t in self._key_text.items() if t in groups}
                gone = topic.remove(key)
                if gone is not None:
                    out.append(Change(shown, key, c.bookmark, c.timestamp_us, gone, None, OOF_DELETED))
                continue
            data = group.result()
            rec = StoredRecord(shown, key, data, dumps(data), c.bookmark, c.timestamp_us)  # kept: its own size
            out.append(Change(shown, key, c.bookmark, c.timestamp_us, topic.put(rec), rec))
        return out


class ConflatedTopic(Derived):
    """C-2: a copy of the underlying topic refreshed once per interval with the latest state of
    each key that changed (and matches the optional filter)."""

    kind = "conflated"

    def reads_olds(self, topic: str) -> bool:
        return False  # it keeps the latest version of each key

    def __init__(self, name: str, underlying: str, interval_s: float, filter: str = "") -> None:
        super().__init__(name, underlying, filter)
        self.interval_us = int(interval_s * 1_000_000)
        self.pending: dict[str, Change] = {}
        self.next_flush_us = 0
        self.shown = name  # the topic its records carry (a restricted copy: this one's own)
        self.copies: list[ConflatedTopic] = []  # its restricted copies, refreshed at its instants

    @classmethod
    def from_config(cls, c: ConflatedTopicConfig) -> ConflatedTopic:
        return cls(c.name, c.underlying, c.interval_s, c.filter)

    def load(self, records: Sequence[StoredRecord], now_us: int) -> None:
        super().load(records, now_us)
        self.flush(now_us, force=True)

    def apply(self, changes: Sequence[Change], now_us: int) -> list[Change]:
        for c in changes:
            self.pending[c.sow_key] = c
        return []

    def flush(self, now_us: int, *, force: bool = False) -> list[Change]:
        """Publish the latest state of every key changed since the last flush, if the interval
        has passed (or ``force``)."""
        if not force and now_us < self.next_flush_us:
            return []
        self.next_flush_us = now_us + self.interval_us
        if not self.pending:
            return []
        pending, self.pending = self.pending, {}
        out: list[Change] = []
        topic, shown = self.topic, self.shown
        for key, c in pending.items():
            if self._matches(c.new):
                assert c.new is not None
                src = c.new
                rec = StoredRecord(shown, key, src.data, src.raw, src.bookmark, src.timestamp_us, src.expiry_us)
                out.append(Change(shown, key, src.bookmark, src.timestamp_us, topic.put(rec), rec))
            else:
                gone = topic.remove(key)
                if gone is not None:
                    out.append(Change(shown, key, c.bookmark, c.timestamp_us, gone, None, c.reason))
        out.sort(key=lambda ch: ch.bookmark)
        return out


def derived_order(views: Sequence[ViewConfig], conflated: Sequence[ConflatedTopicConfig]) -> list[Any]:
    """The derived topics' configs, each after the derived topic it reads from."""
    every: list[ViewConfig | ConflatedTopicConfig] = [*views, *conflated]
    configs: dict[str, Any] = {c.name: c for c in every}
    ordered: list[Any] = []
    placed: set[str] = set()

    def place(name: str, path: tuple[str, ...]) -> None:
        if name in placed or name not in configs:
            return
        if name in path:
            raise ValueError(" -> ".join((*path, name)))
        c = configs[name]
        for source in c.sources if isinstance(c, ViewConfig) else (c.underlying,):
            place(source, (*path, name))
        placed.add(name)
        ordered.append(configs[name])

    for name in configs:
        place(name, ())
    return ordered
