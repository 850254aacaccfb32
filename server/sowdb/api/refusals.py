"""How a call is accounted for: counted per RPC (calls, duration, refusals by code, in the
engine's :class:`~sowdb.engine.counters.Counters`) and, when refused, logged once (SPEC §12).

The error boundary (:func:`sowdb.api.servicer.error_boundary`) is the only caller, plus the one
refusal that does not end a call: a Publish request refused in a stream that goes on.

A refusal's log line names the code, the RPC, the caller (its user when authenticated, its
peer address) and the topic of the request when it has one, with the error's message. It never
holds a token (nothing here reads the metadata) nor record data: the message of an error about a
message's content (field ``data``, ``messages[i]...``) may quote that content, so it is left out
and the field named instead.
"""

from __future__ import annotations

import logging
import time
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
    started: float = field(default_factory=time.perf_counter)

    def ended(self) -> None:
        self.counters.ended(time.perf_counter() - self.started)

    def refused(self, code: grpc.StatusCode, exc: BaseException, topic: str) -> None:
        """Count the refusal and log it, once: an expected refusal (a domain error) at INFO,
        anything else at ERROR with its traceback."""
        self.counters.refused(code.name)
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
