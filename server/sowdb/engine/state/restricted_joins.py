"""Joined views as readers under row filters see them (V-2, A-2): one copy per entitlement.

A joined view's rows are built from the rows of every topic it joins, and a reader that sees
only some rows of one of them must get the view as if the join were computed over the rows it
sees: an order of a customer it may not read joins nothing for it (an inner join drops the row,
a LEFT join keeps it without the customer), and its aggregates count only what is left.
Filtering the shared view's rows cannot give that: a grouped row mixes visible and hidden
members, and its fields hold no part of a topic's row filter.

So such a reader reads a *restricted copy* of the view (:meth:`JoinedView.restricted`): the same
join, fed the same changes by the same fan-out, each side first passed through the reader's row
filter for that topic. Copies are shared by every reader with the same filters (the key is the
view and each topic's filter text, what :meth:`Access.join_filters` gives), built on the first
read from the joined topics' state, and attached as private derived topics (no pattern or name
of a client reaches them; their records carry the view's own name). The unrestricted path is
untouched: a view without copies costs what it did, and one with copies costs each copy's own
upkeep on each change (measured in ``docs/views.md``).

Live subscriptions hold their copy; one no subscription holds is kept for the next query while
few are idle (:data:`IDLE`), and then dropped, oldest first, so a copy lives no longer than it
is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sowdb.engine.clock import Clock
from sowdb.engine.state.joins import JoinedView
from sowdb.engine.state.sow_topic import SowTopic
from sowdb.engine.state.topics import Topics
from sowdb.expr import CompiledFilter

IDLE = 16
"""Copies no live subscription holds that are kept (for the next query of the same readers)."""

Key = tuple[str, tuple[str, ...]]  # the view, and each joined topic's row filter text ("" for every row)


class RestrictedJoins:
    """The restricted copies of the joined views, by entitlement."""

    def __init__(self, topics: Topics, clock: Clock, name: Callable[[], str]) -> None:
        self.topics, self.clock, self._name = topics, clock, name
        self.copies: dict[Key, JoinedView] = {}
        self.keys: dict[str, Key] = {}  # a copy's private name -> its key
        self.holders: dict[str, int] = {}  # a copy's private name -> the live subscriptions on it

    def __len__(self) -> int:
        return len(self.copies)

    def route(self, topic: SowTopic, filters: Sequence[CompiledFilter | None] | None) -> SowTopic:
        """What a reader under ``filters`` (:meth:`Access.join_filters` of ``topic``) reads for
        ``topic``: the topic itself where there are none, else its restricted copy."""
        if filters is None:
            return topic
        return self.copy(topic.name, filters).topic

    def copy(self, view: str, filters: Sequence[CompiledFilter | None]) -> JoinedView:
        """The restricted copy of joined view ``view`` for ``filters``, built if there is none."""
        key = (view, tuple("" if f is None else f.text for f in filters))
        found = self.copies.get(key)
        if found is not None:
            return found
        shared = self.topics.derived[view]
        assert isinstance(shared, JoinedView)
        made = shared.restricted(self._name(), filters)
        made.load_from(self.topics.sow, self.clock())
        self.topics.attach(made, public=False)
        self.copies[key], self.keys[made.name], self.holders[made.name] = made, key, 0
        self._trim()
        return made

    def state_of(self, name: str) -> list[SowTopic]:
        """A copy's state, by its private name, in a list ([] for any other name)."""
        return [self.topics.derived[name].topic] if name in self.keys else []

    def shown(self, name: str) -> str:
        """The view a copy is of, by the copy's private name (any other name as it is)."""
        key = self.keys.get(name)
        return name if key is None else key[0]

    def hold(self, name: str) -> None:
        """A live subscription follows ``name`` (a copy, or any other topic: then nothing)."""
        if name in self.holders:
            self.holders[name] += 1

    def release(self, name: str) -> None:
        """A live subscription that followed ``name`` ended."""
        if name in self.holders:
            self.holders[name] -= 1
            self._trim()

    def _trim(self) -> None:
        idle = [n for n, held in self.holders.items() if held <= 0]
        for name in idle[: max(0, len(idle) - IDLE)]:
            made = self.copies.pop(self.keys.pop(name))
            del self.holders[name]
            self.topics.detach(made)
