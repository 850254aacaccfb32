"""Authentication (SPEC §11, A-1): which user a call is, and so which :class:`Access` it has.

A call carries ``authorization: Bearer TOKEN`` metadata; the token's SHA-256 is compared with
each user's, in constant time (``hmac.compare_digest``), and the user's rights are the union of
its roles'. Tokens are never stored or logged in clear. A reload (SIGHUP, A-4) swaps the users
and roles at once: the next call gets the new rights, and the engine ends live subscriptions
that lost theirs (``Engine.reauthorize``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Mapping

from sowdb.config import Config, SecurityConfig
from sowdb.engine.access import EVERYONE, Access
from sowdb.errors import PermissionDenied, Unauthenticated

SCHEME = "bearer "


def hash_token(token: str) -> str:
    """The SHA-256 of a token, in hex: what the users file holds (``sowd hash-token``)."""
    return hashlib.sha256(token.encode()).hexdigest()


def view_sources(config: Config) -> dict[str, tuple[str, ...]]:
    """Each aggregated view of ``config``, and each conflated copy of one, by name: the topics
    its groups are computed from, one or, for a joined view (V-2), each it joins (what
    :meth:`Access.can_read` checks a view's readers on). A topic derived from a joined view (a
    view of it, a conflated copy of it, and chains of these) maps to the one topic it follows:
    its readers need read on that one, and those under row filters on the joined topics read
    the whole chain through copies of their own (:meth:`Access.join_filters`)."""
    sources = {v.name: v.sources for v in config.views}
    conflated = {c.name: c.underlying for c in config.conflated_topics}

    def joined(name: str, depth: int = 0) -> bool:  # derived from a joined view, or one itself
        found = sources.get(name)
        if found is not None and len(found) > 1:
            return True
        under = found[0] if found is not None else conflated.get(name)
        return under is not None and depth <= len(conflated) + len(sources) and joined(under, depth + 1)

    for c in config.conflated_topics:
        if joined(c.underlying):  # it follows a joined view, or a topic derived from one
            sources[c.name] = (c.underlying,)
        elif c.underlying in sources:  # a copy of a plain view counts as the view
            sources[c.name] = sources[c.underlying]
    return sources


class Authenticator:
    """Users and their rights; :meth:`access` answers for one call."""

    def __init__(self, security: SecurityConfig | None, views: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.views: Mapping[str, tuple[str, ...]] = {}
        self.load(security, views)

    def load(self, security: SecurityConfig | None, views: Mapping[str, tuple[str, ...]] | None = None) -> None:
        """Take (new) users and roles; rights made from the old ones are no longer handed out.

        Args:
            views: each aggregated view by name, the topics it is computed from
                (:func:`view_sources`); None keeps those known.
        """
        self.security = security
        if views is not None:
            self.views = dict(views)
        self._users: list[tuple[bytes, Access]] = []
        self._by_name: dict[str, Access] = {}
        if security is None or not security.authenticates:
            return
        roles = {r.name: r for r in security.roles}
        for user in security.users:
            access = Access(user.name, tuple(roles[r] for r in user.roles), views=self.views)
            self._users.append((bytes.fromhex(user.token_sha256), access))
            self._by_name[user.name] = access
        self._anonymous = self._by_name.get(security.anonymous)

    @property
    def enabled(self) -> bool:
        return bool(self.security is not None and self.security.authenticates)

    def access(self, authorization: str | None) -> Access:
        """The rights of a call with this ``authorization`` metadata (None: absent).

        Raises:
            Unauthenticated: no token and no anonymous user, or a token of no user.
        """
        if not self.enabled:
            return EVERYONE
        if not authorization:
            if self._anonymous is not None:
                return self._anonymous
            raise Unauthenticated(
                "this server needs a token: send the metadata `authorization: Bearer TOKEN` "
                "(the SDKs' token=..., the CLI's -token or $SOW_TOKEN)"
            )
        if authorization[: len(SCHEME)].lower() != SCHEME:
            raise Unauthenticated("the authorization metadata must be `Bearer TOKEN`")
        digest = hashlib.sha256(authorization[len(SCHEME) :].strip().encode()).digest()
        found = None
        for known, access in self._users:  # every user compared, in constant time each
            if hmac.compare_digest(digest, known):
                found = access
        if found is None:
            raise Unauthenticated("the token is not valid (unknown, or revoked)")
        return found

    def metrics_guard(self) -> Callable[[str | None], bool] | None:
        """What ``/metrics`` asks of a scrape's ``Authorization`` header: the token of
        ``[security] metrics_user`` (None: nothing), checked against the current users, so that
        a reload that changes or removes the user's token takes effect at once."""
        name = self.security.metrics_user if self.security is not None else ""
        if not name:
            return None

        def allowed(authorization: str | None) -> bool:
            try:
                return self.access(authorization).user == name
            except Unauthenticated:
                return False

        return allowed

    def rights(self, user: str) -> Access | None:
        """A user's current rights (None: no such user any more), for a reload."""
        if not self.enabled:
            return EVERYONE
        return self._by_name.get(user)

    def current(self, authorization: str | None, access: Access) -> Access:
        """The rights, now, of a call that started with ``access`` (A-4): a stream is re-checked
        at each of its requests, so that a reload holds for streams already open. Until a reload
        this is ``access`` itself (one dict look-up); after one, the call's token is
        authenticated again and its user's new rights apply.

        Raises:
            PermissionDenied: the user no longer exists, or its token was revoked.
        """
        if not self.enabled:
            return EVERYONE
        if self._by_name.get(access.user) is access:
            return access
        try:
            new = self.access(authorization)
        except Unauthenticated:
            new = None
        if new is None or new.user != access.user:
            raise PermissionDenied(f"rights changed: user {access.user!r} no longer exists or its token was revoked")
        return new
