"""The live registry: every live subscription, the private views they follow, and the writer's
fan-out point for them.

:class:`SubscriptionHub` is the one owner of what is live: placement adds and removes
subscriptions here (and the private view of an aggregated one, Q-8), a change of rights ends
the ones that lost them here (:meth:`SubscriptionHub.reauthorize`, A-4), and the operators'
figures read them here.

The writer calls :meth:`SubscriptionHub.dispatch` after every applied batch, synchronously and
in bookmark order, so every subscriber sees changes in the instance's one total order (S-3).
Dispatch only offers changes to subscriptions, which queue what they take: a publisher never
waits for a subscriber. Subscriptions whose filters share an ``expression = literal`` conjunct
are indexed by it, so a change is matched against each distinct literal once rather than
against every subscriber's filter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sowdb.engine.access import Access
from sowdb.engine.changes import Change
from sowdb.engine.live.gate import DeliveryGate
from sowdb.engine.live.private import is_private
from sowdb.engine.live.subscription import SlowConsumer, Subscription
from sowdb.engine.state import View, index_terms
from sowdb.errors import InvalidArgument
from sowdb.expr import CompiledFilter
from sowdb.expr.compiled import EqualityConjunct


@dataclass
class HubStats:
    """Counters for tests and operators."""

    subscriptions: int = 0
    queued_events: int = 0
    dropped_slow: int = 0
    placement: dict[str, int] = field(default_factory=dict)


class _EqualityGroup:
    """Subscriptions whose filters share an ``expression = literal`` conjunct, by literal term.

    The expression is evaluated once per change for the whole group, and only subscriptions
    whose literal can equal its value are looked at (AMPS-style filter indexing). The hub
    then checks the conjunct exactly, once per distinct literal, and a subscription evaluates
    only the rest of its filter: 100 subscribers to ``/qty % 10 = k AND …`` cost one
    evaluation of ``/qty % 10`` and ten rests per message instead of a hundred filters.

    Subscriptions whose callers see only some rows (a role's ``filter``, A-2) are grouped by
    topic and entitlement as well: the entitlement is evaluated once per change for the group,
    first, and the conjunct only on the changes it lets through (issue 37, findings 7 and 9:
    256 idle restricted subscriptions of one reader cost one entitlement and one look-up per
    change, and no part of a caller's filter runs on a row it may not see).

    ``literals`` holds one :class:`_Literal` per distinct literal (or IN list) of the group's
    subscriptions; ``table`` maps each term of a literal (:func:`~sowdb.engine.state.sow_topic.index_terms`)
    to the literals filed under it.
    """

    __slots__ = ("entitlement", "fn", "literals", "table", "topic")

    def __init__(self, fn: Any, topic: str = "", entitlement: CompiledFilter | None = None) -> None:
        self.fn = fn
        self.topic = topic  # with an entitlement: the one topic it is the rows of ("" any)
        self.entitlement = entitlement  # the rows the group's subscribers may see (None: all)
        self.literals: dict[tuple[Any, ...], _Literal] = {}
        self.table: dict[Any, dict[tuple[Any, ...], _Literal]] = {}


class _Literal:
    """The subscriptions of a group with the same literal: a change that satisfies the conjunct
    goes to all of them, so the hub collects changes per literal, not per subscription."""

    __slots__ = ("conjunct", "subs", "terms")

    def __init__(self, conjunct: EqualityConjunct, terms: list[Any]) -> None:
        self.conjunct = conjunct
        self.terms = terms
        self.subs: dict[str, Subscription] = {}


class SubscriptionHub:
    """Every live subscription and the private views they follow; the writer's fan-out point."""

    def __init__(self) -> None:
        self.subs: dict[str, Subscription] = {}
        self.private: dict[str, View] = {}  # sub_id -> the private view of an aggregated subscription
        self.shown: Callable[[str], str] = str  # a restricted joined view's name -> its view's (V-2)
        self.dropped_slow = 0  # subscriptions cut off as slow consumers (SL-1)
        self.elsewhere: Callable[[str], int] = lambda user: 0  # a user's subscriptions in other processes
        self.followed_elsewhere: Callable[[], bool] = lambda: False  # other processes want every change
        self._scan: dict[str, Subscription] = {}  # offered every change
        self._indexed: dict[str, tuple[str, tuple[Any, ...]]] = {}  # sub_id -> (group key, literal key)
        self._groups: dict[str, _EqualityGroup] = {}
        self.gate = DeliveryGate()  # shut on a `sync` primary: deliveries wait for the replicas
        self.behind_gate: list[Callable[[str, Sequence[Change]], None]] = []
        """Other live consumers of applied batches (the live pages' upkeep): fed as the
        subscriptions are, behind the same :attr:`gate`, released batches in order."""

    def __bool__(self) -> bool:
        return bool(self.subs)

    def add(self, sub: Subscription, view: View | None = None, *, since: int = 0) -> None:
        """Register a live subscription, and the private view it follows if it is aggregated;
        ``since``: the bookmark it is placed at (what a shut :attr:`gate` releases after it
        reaches it).

        Raises:
            InvalidArgument: its user has a live subscription of that sub_id already.
        """
        if sub.id in self.subs:
            raise InvalidArgument(f"sub_id {sub.name!r} is already in use", field="sub_id")
        self.subs[sub.id] = sub
        self._place(sub)
        if self.gate.shut:
            self.gate.since[sub.id] = since
        if view is not None:
            self.private[sub.id] = view

    def remove(self, sub: Subscription) -> View | None:
        """Unregister a subscription; returns the private view it followed, for the caller to
        detach from the topics."""
        if self.subs.get(sub.id) is sub:
            del self.subs[sub.id]
            self._unplace(sub)
            self.gate.since.pop(sub.id, None)
            if isinstance(sub.failure, SlowConsumer):
                self.dropped_slow += 1
        return self.private.pop(sub.id, None)

    def follows(self, sub: Subscription) -> Callable[[str], bool]:
        """Whether the subscription follows a topic; an aggregated one follows its private
        view's underlying topic."""
        view = self.private.get(sub.id)
        if view is not None:
            return view.underlying.__eq__
        return sub.wants

    def shown_topic(self, sub: Subscription) -> str:
        """The topic operators see a subscription follow (an aggregated one's underlying topic)."""
        view = self.private.get(sub.id)
        return self.shown(sub.topic if view is None else view.underlying)

    def reauthorize(self, rights: Callable[[str], Access | None], sow_topics: Iterable[str]) -> int:
        """A-4: end each live subscription whose caller lost the right to it (the user is gone, a
        topic it follows is no longer readable, its row entitlement changed) with
        PERMISSION_DENIED; returns how many ended. ``rights`` gives a user's new rights (None for
        a user that no longer exists); ``sow_topics`` are the topics a pattern may follow."""
        names = list(sow_topics)
        ended = 0
        for sub in list(self.subs.values()):
            old = sub.access
            if old.everything:
                continue
            new = rights(old.user)
            view = self.private.get(sub.id)  # an aggregated subscription: its view's topic
            topics = [view.underlying] if view else [name for name in names if sub.wants(name)] or [sub.topic]
            topics = [self.shown(t) for t in topics]  # a restricted joined view: its view's rights
            why = ""
            if new is None:
                why = f"user {old.user!r} no longer exists"
            elif any(not new.can_read(t) for t in topics if not is_private(t)):
                why = f"user {old.user!r} may no longer read {self.shown_topic(sub)!r}"
            elif any(new.entitlement_text(t) != old.entitlement_text(t) for t in topics):
                why = f"the rows user {old.user!r} may see in {self.shown_topic(sub)!r} changed; subscribe again"
            if why:
                sub.revoke(f"rights changed: {why}")
                ended += 1
        return ended

    def refilter(self, sub: Subscription) -> None:
        """The subscription's filter or options changed (R-1): file it again."""
        self._unplace(sub)
        self._place(sub)

    def _place(self, sub: Subscription) -> None:
        if not sub.dispatched:
            return
        # Only subscriptions that track nothing may skip a change: one holding records must see
        # every change to them (for oof and replacement).
        conjuncts = sub.filter.equality_conjuncts if sub.filter is not None and sub.focus is None else ()
        if not conjuncts or not conjuncts[0].values:
            self._scan[sub.id] = sub
            return
        c, entitlement, group_key = conjuncts[0], None, conjuncts[0].key
        if not sub.access.unrestricted:
            if sub.regex is not None:  # a pattern: the entitlement depends on each change's topic
                self._scan[sub.id] = sub
                return
            entitlement = sub.access.entitlement(sub.topic)
            if entitlement is not None:
                group_key = f"{sub.topic}\0{entitlement.text}\0{c.key}"
        group = self._groups.get(group_key)
        if group is None:
            group = self._groups[group_key] = _EqualityGroup(c.value, sub.topic, entitlement)
        # 1, 1.0 and True hash alike but do not compare alike: the key keeps the types apart
        key = (c.is_in, *((type(lit), lit) for lit in c.values))
        literal = group.literals.get(key)
        if literal is None:
            literal = group.literals[key] = _Literal(c, [t for lit in c.values for t in index_terms(lit)])
            for t in literal.terms:
                group.table.setdefault(t, {})[key] = literal
        literal.subs[sub.id] = sub
        self._indexed[sub.id] = (group_key, key)

    def _unplace(self, sub: Subscription) -> None:
        if self._scan.pop(sub.id, None) is not None:
            return
        entry = self._indexed.pop(sub.id, None)
        if entry is None:
            return
        group_key, key = entry
        group = self._groups[group_key]
        literal = group.literals[key]
        del literal.subs[sub.id]
        if literal.subs:
            return
        del group.literals[key]
        for t in literal.terms:
            bucket = group.table[t]
            bucket.pop(key, None)
            if not bucket:
                del group.table[t]
        if not group.literals:
            del self._groups[group_key]

    def fan_out(self, topic: str, changes: Sequence[Change]) -> None:
        """The writer's call for one applied batch (all of one topic): offered now, or held
        while the :attr:`gate` is shut."""
        if self.gate.shut:
            self.gate.hold(topic, changes)
        else:
            self._deliver(topic, changes)

    def commit(self, committed: int | None) -> None:
        """Let subscribers see everything up to ``committed`` and hold what comes after it;
        None: hold nothing (and release what was held)."""
        released = self.gate.open() if committed is None else self.gate.shut_at(committed)
        for held in list(released):
            self._deliver(held.topic, held.changes, held.bookmark)

    def _deliver(self, topic: str, changes: Sequence[Change], held: int = 0) -> None:
        """One batch let through the gate: to the subscriptions, then to :attr:`behind_gate`."""
        if self.subs:
            self.dispatch(topic, changes, held)
        for consumer in self.behind_gate:
            consumer(topic, changes)

    def dispatch(self, topic: str, changes: Sequence[Change], held: int = 0) -> None:
        """Hand one applied batch (all of one topic) to every subscription, in order; a batch
        ``held`` by the gate up to that bookmark skips those placed at or after it."""
        since = self.gate.since if held else {}
        for sub in list(self._scan.values()):
            if since.get(sub.id, -1) < held:
                sub.offer(topic, changes)
        if not self._groups:
            return
        if any(c.new is None for c in changes):
            # removals (deletes, expirations, a view's emptied groups): ``deleted`` events need
            # every filter, and a batch is offered whole so that each subscriber sees it in order
            for sub_id in list(self._indexed):
                if since.get(sub_id, -1) < held:
                    self.subs[sub_id].offer(topic, changes)
            return
        matched: dict[_Literal, list[Change]] = {}  # the changes each literal's conjunct holds for
        shown: dict[str, list[Change]] = {}  # per entitlement: the changes it lets through
        for group in list(self._groups.values()):
            fn, table, candidates = group.fn, group.table, changes
            if (entitlement := group.entitlement) is not None:
                if group.topic != topic:
                    continue
                seen = shown.get(entitlement.text)  # the entitlement first, once per change
                if seen is None:
                    visible = entitlement.matches
                    seen = shown[entitlement.text] = [
                        c for c in changes if c.new is not None and visible(c.new.kept or c.new.data, c.new)
                    ]
                candidates = seen
            for c in candidates:
                new = c.new
                if new is None:
                    continue
                value = fn(new.kept or new.data, new)  # kept: a fresh version's, a slot read
                for term in index_terms(value):
                    bucket = table.get(term)
                    if bucket:
                        for literal in bucket.values():
                            got = matched.get(literal)
                            if got is not None and got[-1] is c:
                                continue  # reached through another of its terms
                            if literal.conjunct.holds(value):
                                if got is None:
                                    matched[literal] = [c]
                                else:
                                    got.append(c)
        for literal, subset in matched.items():
            for sub in literal.subs.values():  # offer() never changes the hub
                if since.get(sub.id, -1) < held:
                    sub.offer(topic, subset, placed=True)

    def held_by(self, user: str) -> int:
        """The live subscriptions ``user`` holds, here and in the group's other processes (its
        ``max_subscriptions`` counts them all)."""
        return sum(s.access.user == user for s in self.subs.values()) + self.elsewhere(user)

    def stats(self) -> HubStats:
        return HubStats(
            subscriptions=len(self.subs),
            queued_events=sum(len(s.queue) for s in self.subs.values()),
            dropped_slow=self.dropped_slow,
            placement={"indexed": len(self._indexed), "scanned": len(self._scan)},
        )
