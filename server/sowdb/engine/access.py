"""What a caller may do (SPEC §11): read or write which topics, see which rows, administer.

The engine takes an :class:`Access` with every call and enforces it at each read and write path
(A-1, A-2, A-3); who the caller is, and so which ``Access`` applies, is decided before, by the
server's authentication (:mod:`sowdb.security`). With security off every call gets
:data:`EVERYONE`, which allows everything and filters nothing, at no cost on the hot paths.

A user's rights are the union of its roles': a topic is readable when a role's ``read`` names
it (a name, or a regular expression searched in the name, like regex topics), writable likewise
with ``write``. Its row entitlement on a topic is the OR of the ``filter`` of each role that
grants the read — no filter on one of them means every row (A-2).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sowdb.config import RoleConfig, is_regex_topic
from sowdb.config.security import QUOTAS
from sowdb.engine.filters import request_filter
from sowdb.engine.records import StoredRecord
from sowdb.errors import PermissionDenied, PublishError, ResourceExhausted
from sowdb.expr import CompiledFilter, compile_filter
from sowdb.expr.nodes import Logical


def _grants(patterns: tuple[str, ...], topic: str) -> bool:
    return any(re.search(p, topic) if is_regex_topic(p) else p == topic for p in patterns)


K = TypeVar("K")
V = TypeVar("V")

MEMO_LIMIT = 4096
"""Per-topic answers an :class:`Access` or a subscription keeps. Past that many it forgets them
all and starts again: asking about ever new names (made-up topics a client sends, the private
views of aggregated subscriptions that come and go) must not grow a server-lifetime cache."""


def remember(memo: dict[K, V], key: K, value: V) -> V:
    """``memo[key] = value``, first emptying ``memo`` when it holds :data:`MEMO_LIMIT` answers."""
    if len(memo) >= MEMO_LIMIT:
        memo.clear()
    memo[key] = value
    return value


@dataclass
class Access:
    """One caller's rights; its per-topic answers are cached (an ``Access`` lives as long as
    the rights it was made from: a reload makes new ones)."""

    user: str
    roles: tuple[RoleConfig, ...] = ()
    everything: bool = False  # security off: every right, every row
    views: Mapping[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    """Each aggregated view of the config (and each conflated copy of one), by name: the topics
    its groups are computed from, several for a joined view, the one it follows for a topic
    derived from a joined view (see :meth:`can_read`, :meth:`joined_root`)."""
    _readable: dict[str, bool] = field(default_factory=dict, repr=False)
    _entitlement: dict[str, CompiledFilter | None] = field(default_factory=dict, repr=False)

    @property
    def admin(self) -> bool:
        return self.everything or any(r.admin for r in self.roles)

    @property
    def unrestricted(self) -> bool:
        """No row entitlement anywhere: reads need no per-row check."""
        return self.everything or all(not r.filter.strip() for r in self.roles)

    def has_any(self, right: str) -> bool:
        """Whether some topic may be read (``right`` "read"), written ("write"), or the server
        administered ("admin") by this caller: what the console's gateway checks on a request's
        headers, so that a caller without any such right is refused before its body is read."""
        if self.everything:
            return True
        if right == "admin":
            return self.admin
        return any(r.read if right == "read" else r.write for r in self.roles)

    def can_read(self, topic: str) -> bool:
        if self.everything:
            return True
        known = self._readable.get(topic)
        if known is None:
            known = remember(self._readable, topic, self._may_read(topic))
        return known

    def by_pattern(self, topic: str) -> bool:
        """Whether a topic pattern (a regex topic) reaches ``topic`` for this caller: one it may
        read, but no joined view (nor a topic derived from one) it reads under row filters
        (those it reads by name, through a copy of its own: :meth:`join_filters`)."""
        return self.can_read(topic) and self.join_filters(topic) is None

    def _may_read(self, topic: str) -> bool:
        """A role grants the read; and for a view whose underlying topic this caller reads under
        a row filter, a role names the view itself (issue 37, finding 10): a view's groups are
        computed over every row -- ``COUNT`` and ``MIN(/desk)`` of desk B's included -- and no
        row filter can be applied to an aggregate, so a pattern such as ``.*`` that happens to
        match the view is not enough.

        A joined view (V-2) is read with read on every topic it joins, and only so: its rows
        hold those topics' fields, so a right on the view alone must not open them. A topic
        derived from a joined view (a view of it, a conflated copy of it, and chains of these)
        is read with read on it and on the topic it follows, down to the joined view and so
        to every topic that one joins. A caller under row filters on those topics reads any of
        them through a copy of its own, computed from the rows it may see (:meth:`join_filters`),
        so no role needs to name it."""
        if not any(_grants(r.read, topic) for r in self.roles):
            return False
        sources = self.views.get(topic)
        if sources is None:
            return True
        if len(sources) > 1:  # joined: the row filters of its topics apply to the join's sides
            return all(self.can_read(s) for s in sources)
        if self.joined_root(topic) is not None:  # derived from a joined view: copied per reader too
            return self.can_read(sources[0])
        if all(self.sees_all(s) for s in sources):
            return True
        return any(topic in r.read for r in self.roles)

    def joined_root(self, topic: str) -> str | None:
        """The joined view (V-2) ``topic`` is, or is derived from through views and conflated
        topics (each following one topic); None for any other topic."""
        for _ in range(len(self.views) + 1):  # the config's derived topics form no cycle
            sources = self.views.get(topic)
            if sources is None:
                return None
            if len(sources) > 1:
                return topic
            topic = sources[0]
        return None

    def can_write(self, topic: str) -> bool:
        return self.everything or any(_grants(r.write, topic) for r in self.roles)

    @property
    def known(self) -> Callable[[str], bool] | None:
        """Which topic names a refusal may tell this caller about: those it may read or write
        (None: every name, for an admin). Issue 26: no list of every topic to any caller."""
        if self.admin:
            return None
        return lambda topic: self.can_read(topic) or self.can_write(topic)

    def require_read(self, topic: str, what: str = "read") -> None:
        """Raises:
        PermissionDenied: the topic is not readable by this caller (``what``: the act refused,
            "read" or "delete by filter from").
        """
        if not self.can_read(topic):
            raise PermissionDenied(f"user {self.user!r} may not {what} topic {topic!r} (no read right)", field="topic")

    def require_write(self, topic: str) -> None:
        """Raises:
        PermissionDenied: the topic is not writable by this caller.
        """
        if not self.can_write(topic):
            raise PermissionDenied(
                f"user {self.user!r} may not write to topic {topic!r} (no write right)", field="topic"
            )

    def require_admin(self, what: str) -> None:
        """Raises:
        PermissionDenied: the caller has no admin role.
        """
        if not self.admin:
            raise PermissionDenied(f"user {self.user!r} may not {what} (it needs an admin role)")

    def quota(self, name: str) -> int | None:
        """What this caller may hold of ``name`` (a :data:`sowdb.config.security.QUOTAS` key): the
        largest of its roles' limits; None for no limit (security off, or an admin role's
        default). A user without roles gets the defaults."""
        if self.everything:
            return None
        limits = [r.quota(name) for r in self.roles] or [QUOTAS[name]]
        return None if None in limits else max(x for x in limits if x is not None)

    def join_filters(self, topic: str) -> tuple[CompiledFilter | None, ...] | None:
        """For a joined view (V-2) of whose topics this caller reads some under a row filter, or
        a topic derived from such a view: that filter per joined topic, in the view's order
        (None: every row of that one). The caller reads the join of those rows only, and what
        is derived from it, copies kept for that entitlement
        (:mod:`sowdb.engine.state.restricted_joins`). None: not such a topic, or no filter."""
        root = None if self.everything else self.joined_root(topic)
        if root is None:
            return None
        filters = tuple(self.entitlement(s) for s in self.views[root])
        return None if all(f is None for f in filters) else filters

    def sees_all(self, topic: str) -> bool:
        """Whether every row of ``topic`` is this caller's to count (``ListTopics``' and
        ``sow stats``' figures): no row filter, on it or on a topic it joins."""
        return self.entitlement(topic) is None and self.join_filters(topic) is None

    def entitlement(self, topic: str) -> CompiledFilter | None:
        """The rows of ``topic`` this caller may see (A-2): None for every row. A joined view's
        rows, and those of a topic derived from one, are filtered on the joined topics instead
        (:meth:`join_filters`), never as a whole: such a row holds no field a role's filter of
        one topic would read."""
        if self.everything:
            return None
        if topic in self._entitlement:
            return self._entitlement[topic]
        if self.joined_root(topic) is not None:
            return remember(self._entitlement, topic, None)
        filters = [r.filter.strip() for r in self.roles if _grants(r.read, topic)]
        if not filters or "" in filters:
            return remember(self._entitlement, topic, None)
        return remember(self._entitlement, topic, combined("OR", [compile_filter(f) for f in dict.fromkeys(filters)]))

    def entitlement_text(self, topic: str) -> str:
        """The entitlement as filter text ("" for every row), to compare two sets of rights."""
        flt = self.entitlement(topic)
        joined = self.join_filters(topic)
        if joined is not None:  # a joined view, or a topic derived from one: the filters of its sides
            return "\x00".join("" if f is None else f.text for f in joined)
        return "" if flt is None else flt.text

    def entitled(self, topic: str, data: object, record: object) -> bool:
        """Whether the caller may see a version of a record of ``topic``."""
        flt = self.entitlement(topic)
        return flt is None or bool(flt.matches(data, record))

    def require_rows(self, topic: str, writes: Sequence[tuple[StoredRecord | None, StoredRecord]]) -> None:
        """A-2 for writes: a role with a row entitlement writes only records inside it, before
        and after the write (each ``(old, new)`` of a request). Otherwise its delta would merge
        into a row it may not see and bring that row's other fields into view, and its publish
        would replace such a row (issue 26). A refusal tells the caller that a key it named is
        held outside its rows: the one thing it may learn, and only of keys it names.

        Raises:
            PublishError: a message names a record outside the entitlement, or makes one (its
                cause PermissionDenied).
        """
        for i, (old, new) in enumerate(writes):
            if (old is not None and not self.entitled(topic, old.data, old)) or not self.entitled(topic, new.data, new):
                denied = PermissionDenied(
                    f"user {self.user!r} may not write this record to topic {topic!r}: a role with a row filter "
                    "writes only records inside its rows, before and after the write; nothing was stored"
                )
                raise PublishError(i, denied)

    def readable(self, topics: Sequence[str]) -> list[str]:
        return [t for t in topics if self.can_read(t)]


EVERYONE = Access(user="", everything=True)
"""The rights of every call when security is off."""


def check_quota(access: Access, name: str, held: float, adding: float = 1) -> None:
    """Refuse what would take ``access``'s user past its quota ``name`` (issue 26: one user must
    not take what the others need).

    Args:
        held: what the user holds now (count, or bytes).
        adding: what the call would add.

    Raises:
        ResourceExhausted: over the quota; the message names it and what to do.
    """
    limit = access.quota(name)
    if limit is not None and held + adding > limit:
        raise ResourceExhausted(
            f"user {access.user!r} holds {held:.0f} of its {name} quota of {limit}; release some (close, "
            f"commit or abort them) or ask an operator for a role with a larger {name}"
        )


@dataclass
class ViewerAccess(Access):
    """The rights of an aggregated subscription (Q-8 live): its caller's, plus reading the
    private view it follows, whose rows are already only those the caller may see (A-2).

    Why not :data:`EVERYONE`: the subscription must stay its caller's, so that a reload that
    takes the right away ends it (A-4) and the figures name its user."""

    view: str = ""

    @classmethod
    def of(cls, access: Access, view: str) -> ViewerAccess:
        return cls(access.user, access.roles, access.everything, access.views, view=view)

    def can_read(self, topic: str) -> bool:
        return topic == self.view or super().can_read(topic)

    def entitlement(self, topic: str) -> CompiledFilter | None:
        return None if topic == self.view else super().entitlement(topic)


def combined(op: str, filters: Sequence[CompiledFilter]) -> CompiledFilter:
    """``op`` (AND / OR) of filters, each parsed on its own: the trees are joined, never the texts,
    so no operand can reach into another (issue 26: a request filter ``1=1) OR (1=1`` glued to
    an entitlement's text read every row). The result's text, each operand in parentheses, is
    for display and as a key (shared pages): as every operand is a whole filter by itself, and
    the language has no comments, it parses back to this same tree."""
    if len(filters) == 1:
        return filters[0]
    return CompiledFilter(
        f" {op} ".join(f"({f.text})" for f in filters), Logical(0, op, tuple(f.node for f in filters))
    )


def restricted(request: str, entitlement: CompiledFilter | None) -> str:
    """An entitlement (None: every row) ANDed with a request's filter, as the text of the joined
    trees (:func:`combined`); prefer passing the entitlement apart where the reader takes one.

    Raises:
        ExpressionError: the request's filter is not a filter by itself.
    """
    flt = request_filter(request)
    if entitlement is None:
        return "" if flt is None else flt.text
    # The entitlement first: AND evaluates left to right and stops at the first operand not
    # TRUE, so no part of the caller's filter runs on a row it may not see (issue 37, finding
    # 9: a costly term after ``/pin > X`` timed a hidden row's field).
    return (entitlement if flt is None else combined("AND", [entitlement, flt])).text
