"""Joined views, and the topics derived from them, as readers under row filters see them (V-2,
A-2): one copy per entitlement.

A joined view's rows are built from the rows of every topic it joins, and a reader that sees
only some rows of one of them must get the view as if the join were computed over the rows it
sees: an order of a customer it may not read joins nothing for it (an inner join drops the row,
a LEFT join keeps it without the customer), and its aggregates count only what is left.
Filtering the shared view's rows cannot give that: a grouped row mixes visible and hidden
members, and its fields hold no part of a topic's row filter.

So such a reader reads a *restricted copy* of the view (:meth:`JoinedView.restricted`): the same
join, fed the same changes by the same fan-out, each side first passed through the reader's row
filter for that topic. A topic derived from a joined view (a view of it, a conflated copy of it,
and chains of these) is copied the same way, whole chain: the copy of a view of the joined view
is that view computed over the reader's copy of the joined view, attached downstream of it, so
the fan-out feeds it as it feeds the shared one, in the same order; a conflated copy refreshes
at the shared one's instants (:mod:`sowdb.engine.write.conflation`). Copies are shared by every
reader with the same filters (the key is the topic and each joined topic's filter text, what
:meth:`Access.join_filters` gives), built on the first read from the state they follow, and
attached as private derived topics (no pattern or name of a client reaches them; their records
carry the shared topic's own name). The unrestricted path is untouched: a topic without copies
costs what it did, and one with copies costs each copy's own upkeep on each change (measured
in ``docs/views.md``).

Live subscriptions hold their copy, and a copy holds the copy it follows; one nothing holds is
kept for the next query while few are idle (:data:`IDLE`), and then dropped, oldest first (then
the copy it followed, if that is left idle), so a copy lives no longer than it is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sowdb.engine.clock import Clock
from sowdb.engine.state.derived import ConflatedTopic, Derived, View
from sowdb.engine.state.joins import JoinedView
from sowdb.engine.state.sow_topic import SowTopic
from sowdb.engine.state.topics import Topics
from sowdb.expr import CompiledFilter

IDLE = 16
"""Copies nothing holds that are kept (for the next query of the same readers)."""

Key = tuple[str, tuple[str, ...]]  # the topic, and each joined topic's row filter text ("" for every row)


class RestrictedJoins:
    """The restricted copies of the joined views and of the topics derived from them, by
    entitlement."""

    def __init__(self, topics: Topics, clock: Clock, name: Callable[[], str]) -> None:
        self.topics, self.clock, self._name = topics, clock, name
        self.copies: dict[Key, Derived] = {}
        self.keys: dict[str, Key] = {}  # a copy's private name -> its key
        self.holders: dict[str, int] = {}  # a copy's private name -> the live subscriptions and copies on it
        self.follows: dict[str, str] = {}  # a derived topic's copy -> the copy it follows

    def __len__(self) -> int:
        return len(self.copies)

    def route(self, topic: SowTopic, filters: Sequence[CompiledFilter | None] | None) -> SowTopic:
        """What a reader under ``filters`` (:meth:`Access.join_filters` of ``topic``) reads for
        ``topic``: the topic itself where there are none, else its restricted copy."""
        if filters is None:
            return topic
        return self.copy(topic.name, filters).topic

    def copy(self, topic: str, filters: Sequence[CompiledFilter | None]) -> Derived:
        """The restricted copy of ``topic`` (a joined view, or a topic derived from one) for
        ``filters``, built (with the copies of the chain below it) if there is none."""
        made = self._copy(topic, filters)
        self._trim(keep=made.name)  # not the copy its reader is about to read or hold
        return made

    def _copy(self, topic: str, filters: Sequence[CompiledFilter | None]) -> Derived:
        key = (topic, tuple("" if f is None else f.text for f in filters))
        found = self.copies.get(key)
        if found is not None:
            return found
        shared = self.topics.derived[topic]
        made: Derived
        if isinstance(shared, JoinedView):
            made = shared.restricted(self._name(), filters)
            made.load_from(self.topics.sow, self.clock())
        else:
            below = self._copy(shared.underlying, filters)
            made = _derived_copy(shared, self._name(), below.name)
            made.load(list(below.topic.records.values()), self.clock())
            self.holders[below.name] += 1
            self.follows[made.name] = below.name
        self.topics.attach(made, public=False)
        self.copies[key], self.keys[made.name], self.holders[made.name] = made, key, 0
        return made

    def state_of(self, name: str) -> list[SowTopic]:
        """A copy's state, by its private name, in a list ([] for any other name)."""
        return [self.topics.derived[name].topic] if name in self.keys else []

    def shown(self, name: str) -> str:
        """The topic a copy is of, by the copy's private name (any other name as it is)."""
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

    def _trim(self, keep: str = "") -> None:
        while True:
            idle = [n for n, held in self.holders.items() if held <= 0 and n != keep]
            if len(idle) <= IDLE:
                return
            for name in idle[: len(idle) - IDLE]:
                self._drop(name)

    def _drop(self, name: str) -> None:
        key = self.keys.pop(name)
        made = self.copies.pop(key)
        del self.holders[name]
        self.topics.detach(made)
        shared = self.topics.derived.get(key[0])
        if isinstance(shared, ConflatedTopic) and isinstance(made, ConflatedTopic):
            shared.copies.remove(made)
        below = self.follows.pop(name, None)
        if below is not None:
            self.holders[below] -= 1  # idle now, perhaps: the next round of the trim sees it


def _derived_copy(shared: Derived, name: str, below: str) -> Derived:
    """``shared`` (a view or a conflated topic) following the copy ``below`` instead of its
    underlying topic, under the private ``name``; its records carry ``shared``'s name. A
    conflated copy is refreshed with ``shared`` (it joins its :attr:`ConflatedTopic.copies`)."""
    text = "" if shared.filter is None else shared.filter.text
    if isinstance(shared, ConflatedTopic):
        conflated = ConflatedTopic(name, below, shared.interval_us / 1_000_000, text)
        conflated.interval_us, conflated.shown = shared.interval_us, shared.name
        shared.copies.append(conflated)
        return conflated
    assert isinstance(shared, View) and not isinstance(shared, JoinedView)
    view = View(name, below, shared.aggregation, text)
    view.shown = shared.name
    return view
