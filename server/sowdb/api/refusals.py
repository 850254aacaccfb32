"""How a call is accounted for: counted per RPC (calls, duration, refusals by code, in the
engine's :class:`~sowdb.engine.counters.Counters`) and, when refused, logged once (SPEC §12).

The error boundary (:func:`sowdb.api.servicer.error_boundary`) is the only caller, plus the one
refusal that does not end a call: a Publish request refused in a stream that goes on.

A refusal's log line names the code, the RPC, the caller (its user when authenticated, its
peer address) and the topic of the request when it has one, with the error's message. It never
holds a token (nothing here reads the metadata) nor record data: the message of an error about a
message's content (field ``data``, ``messages[i]...``) may quote that content, so it is left out
and the field named instead.

Refusals are logged at a bounded rate (issue 37, finding 13: 2,927 refused calls from one client
in 5 s wrote 2,927 lines): each client -- its user and its peer's address without the port, so
that new connections do not make a new client -- has its first :data:`LOG_BURST` refusals of a
:data:`LOG_WINDOW_S` window logged in full; the rest are counted, and one summary line per
client ends the window (``N more refusals ... not logged``). The counters count every one.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import grpc

from sowdb.engine.counters import RpcCounters
from sowdb.errors import PublishError, SowdbError

log = logging.getLogger("sowdb.api")


def topic_of(request: Any) -> str:
    """The topic a request names (``topic``, or ``query.topic`` for SowAndSubscribe), or ""."""
    topic = getattr(request, "topic", None)
    if topic is None:
        query = getattr(request, "query", None)
        topic = getattr(query, "topic", None)
    return topic if isinstance(topic, str) else ""


def _quotes_content(exc: SowdbError) -> bool:
    """Whether the error's message may quote a record's content (a key field's value, ...)."""
    blamed = exc.field or ""
    return isinstance(exc, PublishError) or blamed == "data" or blamed.startswith("messages[")


@dataclass
class Call:
    """One call as the boundary sees it: which RPC, who, and its counters."""

    rpc: str
    peer: str
    counters: RpcCounters
    user: str = ""
    limiter: RefusalLimiter | None = None  # None: every refusal logged
    started: float = field(default_factory=time.perf_counter)

    def ended(self) -> None:
        self.counters.ended(time.perf_counter() - self.started)

    def refused(self, code: grpc.StatusCode, exc: BaseException, topic: str) -> None:
        """Count the refusal and log it, once (at the client's bounded rate): an expected
        refusal (a domain error) at INFO, anything else at ERROR with its traceback."""
        self.counters.refused(code.name)
        if self.limiter is not None and not self.limiter.admit(self.user, self.peer, code.name):
            return
        fields: dict[str, str | int] = {"event": "refused", "rpc": self.rpc, "code": code.name, "user": self.user}
        fields.update(peer=self.peer, topic=topic)
        if not isinstance(exc, SowdbError):
            fields["detail"] = detail = f"internal error: {type(exc).__name__}"
            log.error(_LINE, self.rpc, code.name, self.user, self.peer, topic, detail, extra=fields, exc_info=exc)
            return
        fields["field"] = exc.field or ""
        if _quotes_content(exc):
            detail = f"{exc.field or 'a message'} is refused; not logged, as it may quote the record's content"
            if isinstance(exc, PublishError):
                fields["message_index"] = exc.index
        else:
            detail = exc.message
        fields["detail"] = detail
        log.info(_LINE, self.rpc, code.name, self.user, self.peer, topic, detail, extra=fields)


_LINE = "refused %s: %s user=%r peer=%s topic=%r: %s"


LOG_BURST = 20
"""Refusals of one client logged in full per window."""

LOG_WINDOW_S = 10.0
"""The window after which a client's suppressed refusals are summed up in one line."""

LIMITER_CLIENTS = 4096
"""Clients tracked at once; past that many, every summary is written and tracking starts again."""


@dataclass
class _Window:
    started: float
    logged: int = 0
    suppressed: Counter[str] = field(default_factory=Counter)


class RefusalLimiter:
    """Which refusals are logged: :data:`LOG_BURST` per client per :data:`LOG_WINDOW_S`, and a
    summary of the others when the window ends (at the next refusal of any client after it, or
    on a timer of the event loop when there is one)."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, str], _Window] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    def admit(self, user: str, peer: str, code: str) -> bool:
        """Whether this refusal is logged; when not, it is counted for the client's summary."""
        now = time.monotonic()
        self.flush(now)
        key = (user, peer.rpartition(":")[0] if peer.count(":") > 1 else peer)
        window = self._windows.get(key)
        if window is None:
            if len(self._windows) >= LIMITER_CLIENTS:
                self.flush(None)
            window = self._windows[key] = _Window(now)
        if window.logged < LOG_BURST:
            window.logged += 1
            return True
        window.suppressed[code] += 1
        self._schedule(window.started + LOG_WINDOW_S - now)
        return False

    def flush(self, now: float | None) -> None:
        """Sum up and forget the windows that ended by ``now`` (None: every window)."""
        if not self._windows:
            return
        for key, window in list(self._windows.items()):
            if now is None or now - window.started >= LOG_WINDOW_S:
                del self._windows[key]
                if window.suppressed:
                    codes = ", ".join(f"{c} {n}" for c, n in sorted(window.suppressed.items()))
                    total = sum(window.suppressed.values())
                    log.warning(
                        "%d more refusals of user=%r peer=%s not logged in %.0f s (%s): it is refused over "
                        "%d times a window",
                        total,
                        key[0],
                        key[1],
                        LOG_WINDOW_S,
                        codes,
                        LOG_BURST,
                        extra={"event": "refusals_suppressed", "user": key[0], "peer": key[1], "count": total},
                    )

    def _schedule(self, delay: float) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a thread): the next refusal writes the summary
        if self._timer is not None and self._timer_loop is loop:
            return
        self._timer, self._timer_loop = loop.call_later(max(delay, 0.0), self._fire), loop

    def _fire(self) -> None:
        self._timer = None
        self.flush(time.monotonic())
        if self._windows and any(w.suppressed for w in self._windows.values()):
            earliest = min(w.started for w in self._windows.values() if w.suppressed)
            self._schedule(earliest + LOG_WINDOW_S - time.monotonic())


_LIMITERS: weakref.WeakKeyDictionary[object, RefusalLimiter] = weakref.WeakKeyDictionary()


def limiter_for(server: object) -> RefusalLimiter:
    """The one limiter of a server (by its engine): every service of it shares it, and two
    servers in one process (tests) do not."""
    limiter = _LIMITERS.get(server)
    if limiter is None:
        limiter = _LIMITERS[server] = RefusalLimiter()
    return limiter
