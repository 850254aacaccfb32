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
from collections.abc import Sequence
from dataclasses import dataclass, field

from sowdb.config import RoleConfig, is_regex_topic
from sowdb.config.security import QUOTAS
from sowdb.errors import PermissionDenied, ResourceExhausted
from sowdb.expr import CompiledFilter, compile_filter


def _grants(patterns: tuple[str, ...], topic: str) -> bool:
    return any(re.search(p, topic) if is_regex_topic(p) else p == topic for p in patterns)


@dataclass
class Access:
    """One caller's rights; its per-topic answers are cached (an ``Access`` lives as long as
    the rights it was made from: a reload makes new ones)."""

    user: str
    roles: tuple[RoleConfig, ...] = ()
    everything: bool = False  # security off: every right, every row
    _readable: dict[str, bool] = field(default_factory=dict, repr=False)
    _entitlement: dict[str, CompiledFilter | None] = field(default_factory=dict, repr=False)

    @property
    def admin(self) -> bool:
        return self.everything or any(r.admin for r in self.roles)

    @property
    def unrestricted(self) -> bool:
        """No row entitlement anywhere: reads need no per-row check."""
        return self.everything or all(not r.filter.strip() for r in self.roles)

    def can_read(self, topic: str) -> bool:
        if self.everything:
            return True
        known = self._readable.get(topic)
        if known is None:
            known = self._readable[topic] = any(_grants(r.read, topic) for r in self.roles)
        return known

    def can_write(self, topic: str) -> bool:
        return self.everything or any(_grants(r.write, topic) for r in self.roles)

    def require_read(self, topic: str) -> None:
        """Raises:
        PermissionDenied: the topic is not readable by this caller.
        """
        if not self.can_read(topic):
            raise PermissionDenied(f"user {self.user!r} may not read topic {topic!r} (no read right)", field="topic")

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

    def entitlement(self, topic: str) -> CompiledFilter | None:
        """The rows of ``topic`` this caller may see (A-2): None for every row."""
        if self.everything:
            return None
        if topic not in self._entitlement:
            filters = [r.filter.strip() for r in self.roles if _grants(r.read, topic)]
            if not filters or "" in filters:
                self._entitlement[topic] = None
            else:
                text = filters[0] if len(filters) == 1 else " OR ".join(f"({f})" for f in filters)
                self._entitlement[topic] = compile_filter(text)
        return self._entitlement[topic]

    def entitlement_text(self, topic: str) -> str:
        """The entitlement as filter text ("" for every row), to combine with a request's."""
        flt = self.entitlement(topic)
        return "" if flt is None else flt.text

    def entitled(self, topic: str, data: object, record: object) -> bool:
        """Whether the caller may see a version of a record of ``topic``."""
        flt = self.entitlement(topic)
        return flt is None or bool(flt.matches(data, record))

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


def restricted(request_filter: str, entitlement: str) -> str:
    """A request's filter ANDed with an entitlement (either may be empty)."""
    if not entitlement:
        return request_filter
    if not request_filter.strip():
        return entitlement
    return f"({request_filter}) AND ({entitlement})"
