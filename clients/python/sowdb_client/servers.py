"""Server lists (SPEC §13, HA-5): the one failover core of the sync and the asyncio client.

A client given several servers (``Client("h1:9007,h2:9007,h3:9007")`` or a list) keeps a
connection to each, opened on first use, and decides here — without doing any I/O itself, so
that both clients drive the same decisions, one by calling and one by awaiting:

- **where a call goes** (:class:`Failover`): a write to the primary, a read to the primary or,
  with ``read_from="any"``, to the servers in turn;
- **what a failure means**: a replica's ``FAILED_PRECONDITION`` names the primary (ErrorInfo
  metadata ``primary``): go there at once; ``UNAVAILABLE`` (a dead node, a lost or blackholed
  connection, a fenced primary, no primary elected yet) or a deadline: try the next server, a
  round of them at most every :data:`ROUND_PAUSE` s; anything else is the caller's error, raised
  as it is. Past ``failover_timeout`` s of failing, a clear :class:`SowdbError` ends the call;
- **a publish sent again** (:class:`Outbox`, :class:`Producers`): the requests not yet
  acknowledged, with the same J-4 producer id and sequences, so that what a lost primary had
  applied is acknowledged as a duplicate instead of applied twice;
- **a subscription resumed** (:class:`Resume`): from the last bookmark it delivered, on a node
  that has applied it (its ``subscribed`` bookmark says so), dropping what it delivered before.

A single address keeps none of this: a call goes to it and its failure is raised at once, as
before server lists existed.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import grpc

from sowdb_address import dial_target, dial_targets
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client.errors import DataLossError, SowdbError, UnavailableError
from sowdb_client.events import Event

ReadFrom = Literal["primary", "any"]
DEFAULT_FAILOVER_TIMEOUT = 30.0
"""Seconds a call keeps looking for a server before it fails (a failover takes the lease
``lease_ttl``, 5 s by default, plus a loop)."""
ROUND_PAUSE = 0.2
"""Seconds between two rounds over every server, so that a cluster electing is not hammered."""
PROBE_TIMEOUT = 2.0
"""Seconds a probe of a server (health, cluster status) may take: a blackholed node answers
nothing, and a call without a deadline would wait on it for gRPC's connect timeout (20 s)."""
READ_FROM_KEY = "sowdb-read-from"
"""Call metadata of a read that must be served by the primary: a replica refuses it naming the
primary (FAILED_PRECONDITION), as it refuses a write, so a read never trusts a stale idea of
which node leads (an old primary back as a replica answers nothing)."""
_RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
"""A server's absence. A call a stopping server dropped arrives as UNAVAILABLE too
(:data:`sowdb_client.errors.SHUT_DOWN_UNDER_THE_CALL`); a CANCELLED is this client's own doing."""


def server_list(target: str | Sequence[str]) -> list[str]:
    """The servers of a target: ``h1:9007,h2:9007`` or a list of addresses (see
    :func:`sowdb_address.dial_targets`).

    Raises:
        ValueError: no address, or one that is not HOST:PORT with a port in 1..65535.
    """
    if isinstance(target, str):
        return dial_targets(target)
    found = [dial_target(p) for p in target if p.strip()]
    if not found:
        raise ValueError(f"no server address in {list(target)!r}")
    return found


def is_primary_redirect(exc: SowdbError) -> bool:
    """A replica's refusal of a write, naming the primary (HA-2)."""
    return exc.code == grpc.StatusCode.FAILED_PRECONDITION and bool(exc.metadata.get("primary"))


class Servers:
    """The servers of one client and what it knows of them: the primary (once found), and
    where the next ``read_from="any"`` read goes."""

    def __init__(
        self,
        target: str | Sequence[str],
        *,
        read_from: ReadFrom = "primary",
        failover_timeout: float = DEFAULT_FAILOVER_TIMEOUT,
    ) -> None:
        """Raises:
        ValueError: no address, a bad one, or a ``read_from`` other than primary or any.
        """
        if read_from not in ("primary", "any"):
            raise ValueError(f"read_from must be 'primary' or 'any', got {read_from!r}")
        self.addresses = server_list(target)
        self.read_from: ReadFrom = read_from
        self.failover_timeout = failover_timeout
        self.primary = self.addresses[0] if len(self.addresses) == 1 else ""
        self._turn = itertools.count()
        self.producers = Producers()

    @property
    def many(self) -> bool:
        """Whether failover applies (more than one server)."""
        return len(self.addresses) > 1

    def failover(self, *, write: bool) -> Failover:
        """The attempts of one call (a write, or a read)."""
        return Failover(self, write=write or self.read_from == "primary")

    def read_metadata(self, metadata: tuple[tuple[str, str], ...] | None) -> tuple[tuple[str, str], ...] | None:
        """A read's call metadata: with ``read_from="primary"`` over a server list, it asks the
        server to refuse the read unless it is the primary (:data:`READ_FROM_KEY`)."""
        if not (self.many and self.read_from == "primary"):
            return metadata
        return (*(metadata or ()), (READ_FROM_KEY, "primary"))

    def next_any(self) -> str:
        """The server of the next ``read_from="any"`` read: each in turn."""
        return self.addresses[next(self._turn) % len(self.addresses)]

    @contextmanager
    def producing(self, options: Mapping[str, Any], sizes: list[int]) -> Iterator[Mapping[str, Any]]:
        """A publish call's options with a J-4 producer of this client's, when the caller named
        none (HA-5: a request sent again after a failover is then applied once); the producer's
        sequence moves past the call's requests (``sizes``: one entry per request made)."""
        if options.get("producer_id"):
            yield options
            return
        with self.producers.take() as producer:
            try:
                yield {**options, "producer_id": producer.id, "producer_seq": producer.seq}
            finally:
                producer.seq += len(sizes)

    def found_primary(self, address: str) -> None:
        if address not in self.addresses:
            self.addresses.append(address)  # the primary advertises an address not in the list
        self.primary = address


class NotThePrimary(SowdbError):
    """A server asked for its role says it is a replica (or has no primary yet)."""

    def __init__(self, address: str, role: str) -> None:
        super().__init__(grpc.StatusCode.UNAVAILABLE, f"{address} is not the primary ({role})")


class Failover:
    """One call's attempts: which server to try next, and whether to go on after a failure.

    ``to_primary``: the call must reach the primary (a write, or a read with
    ``read_from="primary"``); a candidate not known to be it is asked its role first
    (:meth:`needs_confirm`). A server that cannot say (no admin role) is taken at its word
    for a write: a replica refuses one naming the primary, and the call goes there.
    """

    def __init__(self, servers: Servers, *, write: bool) -> None:
        self.servers = servers
        self.to_primary = write
        self._deadline = 0.0
        self._failures = 0
        self._last: SowdbError | None = None
        self._redirected = ""
        self._next = servers.addresses.index(servers.next_any()) if not write else 0

    def address(self) -> str:
        """The server to try now: the primary a replica named, else the primary known, else
        the next server after the last one tried."""
        addresses = self.servers.addresses
        if self._redirected:
            chosen, self._redirected = self._redirected, ""
        elif self.to_primary and self.servers.primary:
            chosen = self.servers.primary
        else:
            chosen = addresses[self._next % len(addresses)]
        if chosen in addresses:
            self._next = addresses.index(chosen) + 1
        return chosen

    def needs_confirm(self, address: str) -> bool:
        """Whether to ask ``address`` its role before a read that must reach the primary."""
        return self.to_primary and self.servers.many and address != self.servers.primary

    def confirmed(self, address: str, role: str) -> None:
        """``address`` says it is ``role`` ("" when it cannot say: no cluster, or not allowed).

        Raises:
            NotThePrimary: it is a replica; try another.
        """
        if role not in ("primary", ""):
            raise NotThePrimary(address, role)
        self.servers.found_primary(address)

    def succeeded(self) -> None:
        """The call got through: its next failure starts a new ``failover_timeout``."""
        self._deadline, self._failures, self._last = 0.0, 0, None

    def failed(self, address: str, exc: SowdbError) -> float:
        """Note a failure at ``address``; returns the seconds to wait before the next attempt.

        Raises:
            SowdbError: ``exc`` itself when it is not a server's absence (a bad request, a
                refusal), or an :class:`UnavailableError` once ``failover_timeout`` s have passed
                without a server taking the call.
        """
        servers = self.servers
        now = time.monotonic()
        if not self._deadline:
            self._deadline = now + servers.failover_timeout
        self._last = exc
        if is_primary_redirect(exc):
            primary = exc.metadata["primary"]
            if servers.primary == address:
                servers.primary = ""
            servers.found_primary(primary)
            self._redirected = primary if primary != address else ""
        elif exc.code in _RETRYABLE:
            if servers.primary == address:
                servers.primary = ""  # a failover: find it again
        else:
            raise exc
        if now >= self._deadline:
            raise UnavailableError(
                grpc.StatusCode.UNAVAILABLE,
                f"no server of {','.join(servers.addresses)} took the call within "
                f"{servers.failover_timeout:g} s (failover_timeout); last: {exc}",
            ) from exc
        self._failures += 1  # a round of them, redirections included, then a pause
        pause = ROUND_PAUSE if self._failures % len(servers.addresses) == 0 else 0.0
        return min(pause, max(0.0, self._deadline - now))


class Producer:
    """A J-4 producer id and the sequence its next request takes."""

    def __init__(self) -> None:
        self.id = f"sdk-{uuid.uuid4().hex}"
        self.seq = 1


class Producers:
    """J-4 producer ids for a client's publishes to a server list, when the caller names none.

    A producer's sequence must rise from one request to the next as the server applies them, so
    a producer serves one publish call at a time: a call takes a free one (or a new one) and
    gives it back with its next sequence. A client thus uses as many ids as it has publishes at
    once, and keeps them (the server keeps one entry per producer: few, long-lived).
    """

    def __init__(self) -> None:
        self._free: list[Producer] = []
        self._lock = threading.Lock()

    @contextmanager
    def take(self) -> Iterator[Producer]:
        """A free producer for one call, which advances its ``seq`` past the requests it made."""
        with self._lock:
            producer = self._free.pop() if self._free else Producer()
        try:
            yield producer
        finally:
            with self._lock:
                self._free.append(producer)


class Outbox:
    """A publish call's requests as sent, kept until acknowledged, so that an attempt after a
    failover sends again exactly those not acknowledged (same content, same producer sequence)
    and then goes on with the rest.

    The requests are drawn from ``source`` under a lock: gRPC's sync client draws them on its
    own thread, and the thread of an abandoned attempt may still be drawing when the next
    attempt starts; whatever it drew is kept here and sent by the next attempt.
    """

    def __init__(self, source: Iterator[pb.PublishRequest]) -> None:
        self._source = source
        self._pending: deque[pb.PublishRequest] = deque()
        self._acked = 0
        self._attempt = 0
        self._lock = threading.Lock()

    def attempt(self) -> Iterator[pb.PublishRequest]:
        """The requests of a new attempt (the previous attempt's iterator stops drawing)."""
        with self._lock:
            self._attempt += 1
            return self._requests(self._attempt)

    def _requests(self, attempt: int) -> Iterator[pb.PublishRequest]:
        n = self._acked
        while True:
            with self._lock:
                if attempt != self._attempt:
                    return
                index = n - self._acked
                if index < 0:
                    index, n = 0, self._acked
                if index < len(self._pending):
                    req = self._pending[index]
                else:
                    found = next(self._source, None)
                    if found is None:
                        return
                    self._pending.append(found)
                    req = found
            n += 1
            yield req

    def acknowledged(self) -> None:
        """The oldest request sent is acknowledged: never sent again."""
        with self._lock:
            self._pending.popleft()
            self._acked += 1


class Resume:
    """What a subscription has delivered, to resume it elsewhere with no gap and no duplicate.

    The resume point is the bookmark of the last record delivered (the placement point until
    one is). A resumed stream is checked and trimmed here: its node must have applied the resume
    point (``subscribed`` at or after it), and records at or before it are dropped; its own
    ``subscribed`` (and its ``completed``, once the first replay's has come) are not shown again.

    Once a record was delivered, the new stream starts one bookmark earlier, and its first
    record must be that record again (same bookmark and timestamp): a primary that died may have
    shown its subscribers entries no replica had (``async``, or ``sync`` fallen back to it), which
    the new primary then replaced with its own writes at the same bookmarks. Resuming after the
    old bookmark would silently skip those acknowledged writes, so such a subscription ends with
    :class:`DataLossError` (reason ``SUBSCRIPTION_FORKED``) instead: subscribe again (a query
    and its live changes) for the cluster's state. The Node, Go and Java SDKs do the same.
    """

    def __init__(self, request: pb.SubscribeRequest, *, deadline: bool = False) -> None:
        """``deadline``: the caller gave the subscription a timeout, which ends it (not resumed)."""
        self.request = request
        self.deadline = deadline
        self.bookmark = 0
        self.delivered = 0  # the bookmark of the last record delivered (0: none yet)
        self.timestamp_us = 0  # and its timestamp
        self.address = ""
        self._verify = False  # the resumed stream's first record must be the last delivered again
        self._resumed = False
        self._subscribed = False
        self._completed = not request.bookmark

    def resumed_request(self) -> pb.SubscribeRequest:
        """The request of the next attempt: from the resume point once there is one."""
        if not self._subscribed:
            return self.request
        self._resumed = True
        self._verify = self.delivered != 0 and self.delivered == self.bookmark
        again = pb.SubscribeRequest()
        again.CopyFrom(self.request)
        again.bookmark = str(self.bookmark - 1 if self._verify else self.bookmark)
        return again

    def judged(self, exc: SowdbError) -> SowdbError:
        """A stream's failure as the failover sees it: refused because its node has not applied
        the resume point yet (the bookmark "is after the latest"), it is a server to try again,
        not the caller's error.

        Raises:
            SowdbError: ``exc``, the caller's own timeout having ended the subscription.
        """
        if self.deadline and exc.code == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise exc
        if self._resumed and exc.code == grpc.StatusCode.INVALID_ARGUMENT and exc.field == "bookmark":
            return UnavailableError(grpc.StatusCode.UNAVAILABLE, f"{self.address} is behind: {exc.message}")
        return exc

    def admit(self, event: Event) -> Event | None:
        """The event to deliver (perhaps trimmed), or None to skip it.

        Raises:
            UnavailableError: the node of a resumed stream has not applied the resume point yet.
        """
        if event.kind == "subscribed":
            if not self._subscribed:
                self._subscribed = True
                self.bookmark = event.bookmark
                return event
            if event.bookmark < self.bookmark:
                raise UnavailableError(
                    grpc.StatusCode.UNAVAILABLE,
                    f"{self.address} has applied bookmark {event.bookmark}, before {self.bookmark}",
                )
            return None
        if event.kind == "completed":
            if self._completed:
                return None
            self._completed = True
            return event
        if event.kind in ("publish", "deleted", "oof") and self._verify:
            self._verify = False
            again = event.records[0] if event.records else None
            if again is None or (again.bookmark, again.timestamp_us) != (self.bookmark, self.timestamp_us):
                raise DataLossError(
                    grpc.StatusCode.DATA_LOSS,
                    f"this subscription delivered bookmark {self.bookmark} from a node that then failed, and the "
                    f"cluster holds another entry there ({'none' if again is None else f'bookmark {again.bookmark}'}"
                    " comes first): what it delivered last was never replicated nor acknowledged to its publisher; "
                    "subscribe again for the cluster's state",
                    reason="SUBSCRIPTION_FORKED",
                )
        if event.kind in ("publish", "deleted", "oof") and self._resumed:
            records = tuple(r for r in event.records if r.bookmark > self.bookmark)
            if not records:
                return None
            event = event._replace(records=records)
        if event.kind in ("publish", "deleted") and event.records:
            last = max(event.records, key=lambda r: r.bookmark)
            if last.bookmark >= self.bookmark:  # (the placement point may be a record's)
                self.bookmark, self.delivered, self.timestamp_us = last.bookmark, last.bookmark, last.timestamp_us
        return event
