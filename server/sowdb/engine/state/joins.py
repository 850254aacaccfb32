"""Joined views (V-2): the grouping/projection of the join of two or more SOW topics.

A joined view follows every topic it joins (the registry attaches it downstream of each). Its
rows are built per record of the first topic, its *anchor*: the anchor's joined rows are the
anchor with each combination of matching records of the other topics (see
:mod:`sowdb.expr.joins` for the tree the join entries form and the two join kinds). A joined
row is one dict holding each topic's record under ``[topic]``, which is what the paths
``[topic]./field`` of the projection, grouping and filter read.

Why per anchor: a change on any topic touches exactly the anchors whose rows held the old
version or would hold the new one, found by walking the join tree up from the changed topic
through hash indexes on the join fields (one lookup per edge). Those anchors' rows are
retracted from their groups (the contributions each anchor added are kept, so a retraction
removes exactly what was added, MIN/MAX included) and built again; every other row stays as it
is. Rebuilding an anchor's rows handles both join kinds alike: an inner join's anchor loses its
rows when a match goes, a LEFT join's keeps one row without the missing side.

A batch (every change of one topic) first updates the indexes for all its changes, then rebuilds
each touched anchor once, so a batch of n changes to one customer costs its orders once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import orjson

from sowdb.config import ViewConfig
from sowdb.engine.changes import Change
from sowdb.engine.records import StoredRecord
from sowdb.engine.state.derived import View
from sowdb.engine.state.sow_topic import SowTopic
from sowdb.expr import Aggregation, CompiledFilter, parse_aggregation
from sowdb.expr.joins import JoinEdge, join_plan

Index = dict[Any, dict[str, Any]]
"""Join value -> the records holding it, by SowKey; an index of the anchor topic holds True for
its records (only their SowKeys are read: the walk up the join tree ends there), so that an
order updated in place leaves it as it is."""
Row = list[Any]
"""One joined row of an anchor: [its group's SowKey, the documents of the row's other topics (by
slot; the anchor's own is not kept: see :meth:`JoinedView._update_in_place`), what it added to
its group (:meth:`Aggregation.contribution`), the anchor's join values it was built with (a
tuple, one per edge from the anchor topic)]; a list, so that an update replaces its contribution
without a new object."""


class JoinedView(View):
    """V-2: a view over the join of ``underlying`` (the anchor topic) and the topics its
    ``joins`` bring in, kept up to date incrementally from changes on any of them."""

    def __init__(
        self,
        name: str,
        underlying: str,
        joins: Sequence[str],
        aggregation: Aggregation,
        filter: str = "",
    ) -> None:
        super().__init__(name, underlying, aggregation, filter)
        self.joins = tuple(joins)
        self.edges: list[JoinEdge] = join_plan(underlying, joins)
        self.topics: tuple[str, ...] = (underlying, *(e.child for e in self.edges))
        self.slots = {t: f"[{t}]" for t in self.topics}  # where a joined row holds each topic's record
        self.anchor_slot = self.slots[underlying]
        grouping = aggregation.grouping_text
        # whether a row's group can change with its anchor's fields (else only with a join)
        self._group_reads_anchor = any(
            f"{self.anchor_slot}." in g for g in ([grouping] if isinstance(grouping, str) else grouping)
        )
        self.up: dict[str, JoinEdge] = {e.child: e for e in self.edges}  # a topic's edge to its parent
        self.indexes: dict[tuple[str, tuple[str | int, ...]], Index] = {}
        for e in self.edges:
            self.indexes.setdefault((e.parent, e.parent_steps), {})
            self.indexes.setdefault((e.child, e.child_steps), {})
        self.sides: dict[str, CompiledFilter] = {}  # a restricted copy's row filter per topic
        # the records of the first topic by SowKey, each with its joined rows: [record, *rows]
        # (one entry for both, so that an update of an order finds them in one lookup); the
        # record is None between a delete and the rebuild that removes the entry
        self.anchors: dict[str, list[Any]] = {}
        self._anchor_values = [e.parent_value for e in self.edges if e.parent == underlying]
        self._evaluate = aggregation.evaluator()

    @classmethod
    def from_config(cls, c: ViewConfig) -> JoinedView:
        aggregation = parse_aggregation(list(c.grouping), list(c.projection))
        return cls(c.name, c.underlying, c.join, aggregation, c.filter)

    @property
    def sources(self) -> tuple[str, ...]:
        return self.topics

    @property
    def selective(self) -> bool:
        return True  # never View's in-place batch: a joined row is not an underlying record

    def reads_olds(self, topic: str) -> bool:
        """Not for the anchor topic: :attr:`anchors` holds each anchor's current version, which
        stands for a change's ``old`` where the store did not make it (a copy under row
        filters, :attr:`sides`, sees an anchor's versions through its filter: it reads them)."""
        return topic != self.topics[0] or bool(self.sides)

    def load_from(self, topics: Mapping[str, SowTopic], now_us: int) -> None:
        """Start from the state of every joined topic: the others first, then the anchors, so
        that each anchor's rows are built once."""
        for t in (*self.topics[1:], self.topics[0]):
            records = list(topics[t].records.values())
            self.apply([Change(t, r.sow_key, r.bookmark, r.timestamp_us, None, r) for r in records], now_us)

    def apply(self, changes: Sequence[Change], now_us: int) -> list[Change]:
        if not changes:
            return []
        topic = changes[0].topic
        if topic not in self.slots:
            return []
        side = self.sides.get(topic)
        if side is not None:
            changes = _seen(changes, side)
            if not changes:
                return []
        touched: dict[str, Change] = {}  # anchor SowKey -> the last change that touched it
        keyed = [(e, self.indexes[(e.parent, e.parent_steps)]) for e in self.edges if e.parent == topic]
        if topic in self.up:
            e = self.up[topic]
            keyed.append((e, self.indexes[(e.child, e.child_steps)]))
        is_anchor = topic == self.topics[0]
        groups: dict[str, Change] = {}  # group SowKey -> the last change that touched it
        if is_anchor:  # the usual batch: updates of orders in place, in one loop (stops at the first other)
            done = self._update_in_place(changes, groups)
            if done == len(changes):
                return self._publish_groups(groups)
            changes = changes[done:]
        for c in changes:
            old, new = c.old, c.new
            if is_anchor:
                if old is None and (current := self.anchors.get(c.sow_key)) is not None:
                    old = current[0]  # the version it replaced, not made by the store (reads_olds)
                if (
                    old is not None
                    and new is not None
                    and c.sow_key not in touched
                    and self._update_in_place((c,), groups)
                ):
                    continue
                touched[c.sow_key] = c
                entry = self.anchors.get(c.sow_key)
                if entry is not None:
                    entry[0] = new  # its rows stay until the rebuild retracts them
                elif new is not None:
                    self.anchors[c.sow_key] = [new]
            else:
                for rec in (old, new):
                    if rec is not None:
                        for anchor in self._anchors_of(topic, rec):
                            touched[anchor] = c
            for e, index in keyed:
                get = e.parent_value if e.parent == topic else e.child_value
                if old is not None:
                    value = get(old.data)
                    held = index.get(value)
                    if held is not None and held.pop(c.sow_key, None) is not None and not held:
                        del index[value]
                if new is not None:
                    value = get(new.data)
                    if value is not None:
                        index.setdefault(value, {})[c.sow_key] = True if is_anchor else new
        for anchor, c in touched.items():
            self._rebuild(anchor, c, groups)
        return self._publish_groups(groups)

    def restricted(self, name: str, filters: Sequence[CompiledFilter | None]) -> JoinedView:
        """A copy of this view over only the rows ``filters`` (one per topic of :attr:`topics`,
        None for every row) let through, empty: the join a reader under those row filters
        reads (A-2), whose records carry this view's name. Load it with :meth:`load_from`."""
        copy = JoinedView(name, self.underlying, self.joins, self.aggregation, "")
        copy.filter, copy.shown = self.filter, self.name
        copy.sides = {t: f for t, f in zip(self.topics, filters, strict=True) if f is not None}
        return copy

    def _update_in_place(self, changes: Sequence[Change], groups: dict[str, Change]) -> int:
        """The usual changes, updates of anchors that keep their join values, their one joined
        row and that row's group, from the first of ``changes`` on: the row's contribution is
        replaced, without rebuilding the row. This is the joined view's upkeep per order update
        (issue 42: >= 100k updates/s), so it reads and makes as little as it can: the old
        version is never read (the row keeps the join values it was built with and what it
        added to its group, not the anchor's document, which would also keep every order
        decoded); one loop for the run, one dict to evaluate the rows in, the row's list
        updated in place; the group's accumulators take the run's updates an aggregate at a
        time (:meth:`Group.replace_contributions`). Objects made per update were the cost: each
        is memory to touch and counts towards the garbage collector's next pass.

        Returns:
            How many changes, from the first, were such updates (and applied); the first other
            one and those after it were not looked at.
        """
        entry_of = self.anchors.get
        slot = self.anchor_slot
        flt = self.filter
        reads_anchor = self._group_reads_anchor
        evaluate = self._evaluate
        getters = self._anchor_values
        get0 = getters[0] if len(getters) == 1 else None  # the usual join: one edge from the anchor topic
        outs: dict[str, list[list[Any]]] = {}  # per group, the contributions taken out, in order
        ins: dict[str, list[list[Any]]] = {}  # ... and those put in
        joined: dict[str, Any] = {}  # the joined row being evaluated, one dict for the run
        done = 0
        for c in changes:
            new = c.new
            if new is None:
                break
            entry = entry_of(c.sow_key)  # entry[0]: the current version (c.old, made or not)
            if entry is None or len(entry) != 2 or entry[0] is None:
                break
            row = entry[1]
            gkey, others, added, values = row
            new_data = new.kept
            if new_data is None:
                new_data = new.data
            if get0 is not None:
                value = get0(new_data)
                if value != values[0]:
                    break  # it joins other records now
            elif [get(new_data) for get in getters] != list(values):
                break
            joined.clear()
            joined.update(others)
            joined[slot] = new_data
            if flt is not None and not flt.matches(joined, new):
                break
            if reads_anchor and self._joined_group(joined, new) != gkey:
                break
            adding = evaluate(joined, new)
            taken = outs.get(gkey)
            if taken is None:
                outs[gkey] = [added]
                ins[gkey] = [adding]
            else:
                taken.append(added)
                ins[gkey].append(adding)
            row[2] = adding
            entry[0] = new  # its indexes hold True, not the version: nothing to change there
            groups[gkey] = c
            done += 1
        all_groups = self.groups
        for gkey, taken in outs.items():  # each group's updates, an aggregate at a time
            last = groups[gkey]
            new = last.new
            assert new is not None
            others = entry_of(last.sow_key)[1][1]  # type: ignore[index]
            all_groups[gkey].replace_contributions(taken, ins[gkey], {**others, slot: new.data}, new)
        return done

    def _anchors_of(self, topic: str, rec: StoredRecord) -> list[str]:
        """The anchors whose joined rows hold (or would hold) ``rec`` of ``topic``: walk up the
        join tree, each step the parents whose join field equals the child's."""
        level: list[StoredRecord] = [rec]
        found: list[str] = []
        while topic in self.up:
            e = self.up[topic]
            index = self.indexes[(e.parent, e.parent_steps)]
            parents: dict[str, Any] = {}
            for r in level:
                held = index.get(e.child_value(r.data))
                if held:
                    parents.update(held)
            if not parents:
                return []
            found, level, topic = list(parents), list(parents.values()), e.parent  # the anchor's index: True
        return found

    def _joined(self, anchor: StoredRecord) -> list[dict[str, Any]]:
        """The joined rows of one anchor, each edge in turn (parents before children)."""
        slots = self.slots
        rows: list[dict[str, Any]] = [{slots[self.topics[0]]: anchor.data}]
        for e in self.edges:
            index = self.indexes[(e.child, e.child_steps)]
            parent_slot, child_slot = slots[e.parent], slots[e.child]
            out: list[dict[str, Any]] = []
            for row in rows:
                parent = row.get(parent_slot)
                held = index.get(e.parent_value(parent)) if parent is not None else None
                if held:
                    for r in held.values():
                        out.append({**row, child_slot: r.data})
                elif e.outer:
                    out.append(row)
            rows = out
            if not rows:
                break
        flt = self.filter
        if flt is not None:
            rows = [r for r in rows if flt.matches(r, anchor)]
        return rows

    def _rebuild(self, key: str, c: Change, touched: dict[str, Change]) -> None:
        """Retract an anchor's rows from their groups and add its rows as they are now."""
        entry = self.anchors.get(key)
        if entry is None:
            return
        anchor: StoredRecord | None = entry[0]
        before: list[Row] = entry[1:]
        after: list[Row] = []
        joined: list[dict[str, Any]] = []
        if anchor is not None:
            group_key, contribution, slot = self._joined_group, self.aggregation.contribution, self.anchor_slot
            joined = self._joined(anchor)
            values = tuple([get(anchor.data) for get in self._anchor_values])
            after = [
                [group_key(row, anchor), {k: v for k, v in row.items() if k != slot}, contribution(row, anchor), values]
                for row in joined
            ]
        groups = self.groups
        if len(before) == 1 and len(after) == 1 and before[0][0] == after[0][0]:  # the usual update
            gkey, _, added, _ = before[0]
            adding = after[0][2]
            groups[gkey].replace_contribution(added, adding, joined[0], anchor)
            touched[gkey] = c
        else:
            for gkey, _, added, _ in before:
                groups[gkey].remove_contribution(added)  # exactly what its row added
                touched[gkey] = c
            for (gkey, _, adding, _), row in zip(after, joined, strict=True):
                group = groups.get(gkey)
                if group is None:
                    group = groups[gkey] = self.aggregation.new_group()
                group.add_contribution(adding, row, anchor)
                touched[gkey] = c
        if anchor is None:
            del self.anchors[key]
        else:
            self.anchors[key] = [anchor, *after]

    def _joined_group(self, row: dict[str, Any], anchor: StoredRecord) -> str:
        key = self.aggregation.group_key(row, anchor)
        text = self._key_text.get(key)
        if text is None:
            text = self._key_text[key] = orjson.dumps(list(key)).decode()
        return text


def _seen(changes: Sequence[Change], side: CompiledFilter) -> list[Change]:
    """The changes of one side as a reader under its row filter ``side`` sees them: a version
    outside the filter is no version (a record moving out of it is deleted, one moving in is
    inserted), and a change neither of whose versions it sees is dropped."""
    out: list[Change] = []
    for c in changes:
        old = c.old if c.old is not None and side.matches(c.old.data, c.old) else None
        new = c.new if c.new is not None and side.matches(c.new.data, c.new) else None
        if old is not None or new is not None:
            out.append(c if old is c.old and new is c.new else replace(c, old=old, new=new, event=None))
    return out
