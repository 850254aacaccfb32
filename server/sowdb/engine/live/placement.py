"""Placing subscriptions: plain, with a query (S-1), with a bookmark (H-3, H-4), aggregated
(Q-8), paginated (P-1); replacing them (R-1) and removing them.

Each is placed in one synchronous step — no await between the query's snapshot, the replay's
end point and the registration — and the single writer cannot run in between, so the
subscriber's view of the total order has no gap and no duplicate. What happens after placement
(sending the query, the replay, going live) is :mod:`sowdb.engine.live.streams`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import replace
from typing import Any

from sowdb.config import ServerConfig, is_regex_topic
from sowdb.engine.access import EVERYONE, Access, ViewerAccess, restricted
from sowdb.engine.bookmarks import AsOf, Point, historical, parse_bookmark
from sowdb.engine.clock import Clock
from sowdb.engine.events import QueryEvent
from sowdb.engine.filters import request_filter
from sowdb.engine.journal import Journal, Position
from sowdb.engine.live.admission import new_subscription
from sowdb.engine.live.hub import SubscriptionHub
from sowdb.engine.live.options import (
    DEFAULT_OPTIONS,
    Replacement,
    SubscriptionOptions,
)
from sowdb.engine.live.pages import PagedSubscription, PageSets, ResultSet, page_events
from sowdb.engine.live.private import private_view_name
from sowdb.engine.live.subscription import Subscription, subscription_key
from sowdb.engine.read import PreparedQuery, QueryOptions, pin, plan_candidates
from sowdb.engine.records import StoredRecord
from sowdb.engine.state import RestrictedJoins, SowTopic, Topics, View, check_topic_name
from sowdb.errors import FailedPrecondition, InvalidArgument, NotFound
from sowdb.expr import Aggregation, CompiledFilter


class Placement:
    """Places, replaces and removes subscriptions; the hub, the page sets and the private views
    of aggregated subscriptions are kept here in step."""

    def __init__(
        self,
        topics: Topics,
        hub: SubscriptionHub,
        pages: PageSets,
        journal: Journal,
        writer: Position,
        config: ServerConfig,
        clock: Clock,
        joins: RestrictedJoins,
    ) -> None:
        self.topics, self.hub, self.pages = topics, hub, pages  # what is placed, and where
        self.joins = joins  # joined views as readers under row filters see them (V-2, A-2)
        self.journal, self.writer, self.clock = journal, writer, clock  # the point it is placed at
        self.config = config

    def subscribe(
        self,
        topic: str,
        *,
        filter: str = "",
        options: SubscriptionOptions = DEFAULT_OPTIONS,
        sub_id: str = "",
        owner: str = "",
        bookmark: str = "",
        access: Access = EVERYONE,
    ) -> Subscription:
        """Place a subscription without a query. With a bookmark it is placed held, with
        ``replay_from`` set: the journal after the bookmark is replayed first (H-4).

        Raises:
            InvalidArgument: a bad topic pattern, filter, sub_id or bookmark.
            OutOfRange: the journal no longer reaches back to the bookmark.
            PermissionDenied: a topic name the caller may not read (a pattern sees only the
                topics it may read, A-3).
        """
        sub = self._new_subscription(topic, filter, options, sub_id, owner, access=access)
        if not is_regex_topic(topic):
            access.require_read(topic)
        since = self.hub.gate.start_point(self.writer.last_seq)  # the last bookmark, or what a shut gate let through
        if bookmark.strip():
            kind = self.topics.derived_kind(topic)
            if kind is not None:
                raise FailedPrecondition(
                    f"{topic!r} is a {kind} topic, which keeps no journal to replay; subscribe "
                    "without a bookmark, or to its underlying topic",
                    field="bookmark",
                )
            point = parse_bookmark(bookmark)
            after = self.journal.replay_start(point)
            since = since if point.now else max(since, after)
            sub.hold((after, since))
        self._restrict(sub)
        self.hub.add(sub, since=since)
        self.joins.hold(sub.topic)
        return sub

    def sow_and_subscribe(
        self,
        opts: QueryOptions,
        *,
        options: SubscriptionOptions = DEFAULT_OPTIONS,
        sub_id: str = "",
        owner: str = "",
        access: Access = EVERYONE,
    ) -> tuple[Subscription, AsyncIterator[QueryEvent]]:
        """Query and subscribe at one point (S-1): the snapshot is taken and the subscription
        registered in the same synchronous step; changes after that point are held by the
        subscription until :meth:`Subscription.release` (after the query's group_end).

        A topic without a SOW gives an empty result, then live messages (S-2). Only the topics
        and rows ``access`` allows are queried and followed (A-1 … A-3).
        """
        query = PreparedQuery(opts)
        if query.aggregation is not None:
            if opts.skip_n is not None:
                raise InvalidArgument("a subscription is either aggregated or paginated, not both", field="skip_n")
            return self._aggregated_subscription(opts, query.aggregation, options, sub_id, owner, access)
        if opts.skip_n is not None:
            return self._paged_subscription(opts, query, options, sub_id, owner, access)
        if is_regex_topic(opts.topic):  # not a topic read through a restricted copy (V-2, A-2): as live
            topics = self.topics.resolve(opts.topic, access.by_pattern)
        else:
            check_topic_name(opts.topic)
            access.require_read(opts.topic)
            found = self.topics.get(opts.topic)
            topics = [found] if found is not None else []
        sub = self._query_subscription(query, options, sub_id, owner, access, track=True)
        topics = topics if historical(opts.bookmark) else [self._restrict(sub) or t for t in topics]
        p = pin(query, topics, sub.access, self.journal, self.writer)
        if p.as_of is not None:
            # H-3: the state as of the bookmark, the journal after it, then live; the replay
            # must start right after the point, or the state and the replay leave a gap
            after = self.journal.replay_start(Point(seq=p.as_of.seq), whole=True)
            since = max(self.hub.gate.start_point(self.writer.last_seq), after)
            sub.hold((after, since))
        else:
            since = self.writer.last_seq  # the query read every applied record
            sub.hold()
        events = self._run(query, p.sources, p.bookmark, p.as_of, p.entitlements)
        self.hub.add(sub, since=since)
        self.joins.hold(sub.topic)
        return sub, events

    def _aggregated_subscription(
        self,
        opts: QueryOptions,
        aggregation: Aggregation,
        options: SubscriptionOptions,
        sub_id: str,
        owner: str,
        access: Access,
    ) -> tuple[Subscription, AsyncIterator[QueryEvent]]:
        """Q-8 live: a private view of the topic (grouping, projection, filter) is created from
        its current state, and the subscription follows that view: each change to a member
        record updates its group, and an emptied group leaves with an oof ``deleted``. Only
        the rows its caller may see are members (A-2)."""
        underlying = self._followed_topic(opts, "an aggregated", access)
        keys = frozenset(opts.sow_keys) if opts.sow_keys else None
        members = restricted(opts.filter, access.entitlement(opts.topic))
        underlying = self.joins.route(underlying, access.join_filters(opts.topic))  # V-2: the rows it sees
        view = View(private_view_name(), underlying.name, aggregation, members, sow_keys=keys)
        view.load(list(underlying.records.values()), self.clock())
        inner = PreparedQuery(replace(opts, topic=view.name, filter="", grouping=(), projection=(), sow_keys=()))
        viewer = ViewerAccess.of(access, view.name)  # its caller's rights, not EVERYONE's
        sub = self._new_subscription(
            view.name, "", options, sub_id, owner, track=True, check_name=False, select=inner.select, access=viewer
        )
        sub.hold()
        events = self._run(inner, inner.snapshot([view.topic]), self.writer.last_seq)
        self.hub.add(sub, view, since=self.writer.last_seq)
        self.topics.attach(view, public=False)
        self.joins.hold(view.underlying)
        return sub, events

    def _run(
        self,
        query: PreparedQuery,
        sources: Sequence[Sequence[StoredRecord]],
        bookmark: int,
        as_of: AsOf | None = None,
        entitlements: list[CompiledFilter | None] | None = None,
    ) -> AsyncIterator[QueryEvent]:
        frame_bytes = self.config.frame_bytes
        return query.run(
            sources, bookmark, self.clock(), as_of=as_of, frame_bytes=frame_bytes, entitlements=entitlements
        )

    def _paged_subscription(
        self,
        opts: QueryOptions,
        query: PreparedQuery,
        options: SubscriptionOptions,
        sub_id: str,
        owner: str,
        access: Access,
    ) -> tuple[Subscription, AsyncIterator[QueryEvent]]:
        """P-1: the window ``[skip_n, skip_n + top_n)`` of the topic's matching records in
        ``order_by`` order (SowKey order when none), kept live. The first window is the query's
        result, taken in the same step that registers the page. The page ranks only the rows its
        caller may see (A-2): its shared result set is that of the filter ANDed with them."""
        topic = self._followed_topic(opts, "a paginated", access)
        entitled = restricted(opts.filter, access.entitlement(opts.topic))
        ranked = query if entitled == opts.filter else PreparedQuery(replace(opts, filter=entitled))
        sub = self._query_subscription(query, options, sub_id, owner, access, cls=PagedSubscription)
        assert isinstance(sub, PagedSubscription) and opts.top_n is not None
        topic = self._restrict(sub) or topic
        self.hub.add(sub, since=self.writer.last_seq)  # first: a refused sub_id must not leave a result set behind
        self.joins.hold(sub.topic)
        rs = self._result_set(topic, ranked, sub.sow_keys)
        window = sub.bind(rs, opts.skip_n or 0, opts.top_n)
        return sub, page_events(query, window, len(rs.sorted), self.writer.last_seq, self.config.frame_bytes)

    def _followed_topic(self, opts: QueryOptions, kind: str, access: Access) -> SowTopic:
        """The one SOW topic an aggregated or paginated subscription follows, in its current
        state (``kind`` names the subscription in the errors).

        Raises:
            InvalidArgument: a bookmark, or a topic pattern.
            FailedPrecondition: not a SOW topic.
        """
        if opts.bookmark.strip():
            raise InvalidArgument(
                f"{kind} subscription follows the current state; query as of a bookmark with Sow", field="bookmark"
            )
        if is_regex_topic(opts.topic):
            raise InvalidArgument(f"{kind} subscription reads one topic, not a pattern", field="topic")
        access.require_read(opts.topic)
        return self.topics.sow_topic(opts.topic, access.known)

    def _result_set(self, topic: SowTopic, query: PreparedQuery, sow_keys: frozenset[str] | None) -> ResultSet:
        opts = query.opts
        return self.pages.get(topic, opts.filter, query.filter, opts.order_by, query.order, sow_keys)

    def unsubscribe(self, sub: Subscription) -> None:
        view = self.hub.remove(sub)
        if isinstance(sub, PagedSubscription):
            self.pages.release(sub)
        if view is not None:
            self.topics.detach(view)
        self.joins.release(sub.topic if view is None else view.underlying)

    def _restrict(self, sub: Subscription) -> SowTopic | None:
        """A subscription by name to a joined view its caller reads under row filters follows
        the view's restricted copy for those filters instead (V-2, A-2: the join of the rows it
        may see), with its caller's rights plus that copy's; returns the copy's state, or None
        where the subscription is not such."""
        filters = None if sub.regex is not None else sub.access.join_filters(sub.topic)
        if filters is None:
            return None
        copy = self.joins.copy(sub.topic, filters)
        sub.topic, sub.access = copy.name, ViewerAccess.of(sub.access, copy.name)
        return copy.topic

    def replace_subscription(self, sub_id: str, change: Replacement, *, owner: str, user: str = "") -> int:
        """R-1: new filter and options for a live subscription; returns the sequence point at
        which they took effect. Only its user, on the connection that placed it, may replace it:
        the connection alone proves nothing where many users share one (the console's gateway).

        Raises:
            NotFound: no such subscription of this user on this connection.
            FailedPrecondition: its query has not finished yet.
            InvalidArgument: a bad filter or page (the subscription is unchanged).
        """
        sub = self.hub.subs.get(subscription_key(user, sub_id))
        if sub is None or sub.owner != owner:
            raise NotFound(f"no live subscription {sub_id!r} on this connection", field="sub_id")
        if sub.held is not None:
            raise FailedPrecondition("the subscription's query is still being sent; replace it after group_end")
        if sub.id in self.hub.private:
            raise FailedPrecondition(
                "an aggregated subscription cannot be replaced; end it and subscribe again", field="sub_id"
            )
        if isinstance(sub, PagedSubscription):
            self._replace_page(sub, change)
            return self.writer.last_seq
        if change.top_n is not None or change.skip_n is not None or change.order_by.strip():
            raise InvalidArgument("only a paginated subscription takes top_n, skip_n and order_by", field="top_n")
        options = change.options
        options.check()
        if options.oof and sub.focus is None:
            raise InvalidArgument(
                "oof cannot be turned on for this subscription: it was placed without a query, oof or delta, so "
                "the server does not know which records its subscriber holds; subscribe again with oof",
                field="options.oof",
            )
        compiled = request_filter(change.filter)
        options = replace(options, deleted_events=sub.options.deleted_events and not options.oof)
        covered = [t for name, t in sorted(self.topics.sow.items()) if sub.wants(name)]
        covered = covered or self.joins.state_of(sub.topic)  # a restricted joined view's
        candidates: dict[str, Iterable[StoredRecord]] = {}
        if compiled is not None:
            for t in covered:
                found = plan_candidates(t, compiled)
                if found is not None:  # an index or the columns narrow the re-run query
                    candidates[self.joins.shown(t.name)] = found  # by the topic its records carry
        sub.replace(compiled, options, {self.joins.shown(t.name): t.records for t in covered}, candidates)
        self.hub.refilter(sub)
        return self.writer.last_seq

    def _replace_page(self, sub: PagedSubscription, change: Replacement) -> None:
        """R-1 for a page: the page is defined again (top_n, skip_n, order_by); records now in
        the window that the subscriber does not hold are delivered, those that left get an oof."""
        if change.top_n is None:
            raise InvalidArgument(
                "a paginated subscription is replaced with its page: give top_n (and skip_n, order_by) again",
                field="top_n",
            )
        change.options.check()
        request_filter(change.filter)  # its errors name the request's own filter
        entitled = restricted(change.filter, sub.access.entitlement(sub.topic))
        page = QueryOptions(sub.topic, entitled, order_by=change.order_by, top_n=change.top_n, skip_n=change.skip_n)
        query = PreparedQuery(page)
        topic = (self.joins.state_of(sub.topic) or [self.topics.sow_topic(sub.topic)])[0]
        self.pages.release(sub)
        rs = self._result_set(topic, query, sub.sow_keys)  # shared, or built now
        sub.rebind(rs, query.filter, replace(change.options, deleted_events=False), change.skip_n or 0, change.top_n)

    def _query_subscription(
        self,
        query: PreparedQuery,
        options: SubscriptionOptions,
        sub_id: str,
        owner: str,
        access: Access,
        *,
        track: bool = False,
        cls: type[Subscription] = Subscription,
    ) -> Subscription:
        """The subscription half of a sow_and_subscribe: the query's topic, filter, select and
        SowKeys carry over to the live events."""
        opts = query.opts
        return self._new_subscription(
            opts.topic,
            opts.filter,
            options,
            sub_id,
            owner,
            track=track,
            cls=cls,
            select=query.select,
            sow_keys=opts.sow_keys,
            access=access,
        )

    def _new_subscription(
        self, topic: str, filter: str, options: SubscriptionOptions, sub_id: str, owner: str, **kwargs: Any
    ) -> Subscription:
        """A new subscription, not yet placed, with this server's hub, limits and key fields
        (:func:`~sowdb.engine.live.admission.new_subscription`: ``track``, ``check_name``,
        ``cls``, ``select``, ``sow_keys``, ``access``)."""
        return new_subscription(
            self.hub, self.config, self.topics.key_fields, topic, filter, options, sub_id, owner, **kwargs
        )
