"""Typed exceptions carrying the server's rich error details.

Every refusal of the server arrives as a gRPC status with ``google.rpc.BadRequest`` (the field
at fault) and ``google.rpc.ErrorInfo`` (a reason and metadata such as a filter's ``column``).
:func:`from_rpc_error` turns it into the subclass of :class:`SowdbError` for its code, so that
callers can ``except InvalidArgumentError as e: print(e.field, e.column)``.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2


class SowdbError(Exception):
    """A refusal or failure reported by the server (or the transport).

    Attributes:
        code: the gRPC status code.
        message: the server's message, meant for a person.
        field_violations: (field, description) pairs from ``google.rpc.BadRequest``.
        reason: ``google.rpc.ErrorInfo.reason`` (e.g. ``EXPRESSION_ERROR``), or "".
        metadata: ``google.rpc.ErrorInfo.metadata`` (e.g. ``{"column": "7"}``).
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        field_violations: list[tuple[str, str]] | None = None,
        reason: str = "",
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.field_violations = field_violations or []
        self.reason = reason
        self.metadata = metadata or {}

    @property
    def field(self) -> str | None:
        """The first request field the server named, if any."""
        return self.field_violations[0][0] if self.field_violations else None

    @property
    def column(self) -> int | None:
        """For expression errors: the 1-based column of the offending token."""
        return self._number("column")

    def _number(self, key: str) -> int | None:
        """A number the server put in the error's metadata (metadata values are strings)."""
        value = self.metadata.get(key)
        return int(value) if value else None


class InvalidArgumentError(SowdbError):
    """The request was malformed (bad filter, option or JSON)."""


class NotFoundError(SowdbError):
    """Something named by the request does not exist (an unknown sub_id)."""


class FailedPreconditionError(SowdbError):
    """The topic cannot serve the request (sow on a non-SOW topic, publish to a view)."""


class OutOfRangeError(SowdbError):
    """A bookmark outside the retained history or journal."""

    @property
    def oldest_bookmark(self) -> int | None:
        """The oldest bookmark the server still has."""
        return self._number("oldest_bookmark")


class ResourceExhaustedError(SowdbError):
    """A limit was passed (message size, slow consumer)."""


class UnimplementedError(SowdbError):
    """The server does not provide this call (yet)."""


class UnavailableError(SowdbError):
    """The server could not be reached."""


class DataLossError(SowdbError):
    """Data cannot be read as it was: a damaged store, or (``reason`` ``SUBSCRIPTION_FORKED``)
    a subscription whose last delivered record the cluster no longer holds after a failover."""


class PermissionDeniedError(SowdbError):
    """Not entitled."""


class UnauthenticatedError(SowdbError):
    """Not authenticated."""


class PublishError(SowdbError):
    """A publish request was refused; nothing of it, and nothing sent after it, was stored.

    The requests acknowledged before the refusal are stored; the attributes say how much that
    was, so that a caller can report it or resume after the bad message.

    Attributes:
        message_index: index of the offending message in the whole ``publish`` call, if known.
        stored: how many messages of the call were acknowledged (stored) before the refusal.
        first_bookmark: the bookmark of the first of those messages (0 when none).
        last_bookmark: the bookmark of the last of those messages (0 when none).
    """

    def __init__(
        self,
        base: SowdbError,
        message_index: int | None,
        *,
        stored: int = 0,
        first_bookmark: int = 0,
        last_bookmark: int = 0,
    ) -> None:
        super().__init__(
            base.code,
            base.message,
            field_violations=base.field_violations,
            reason=base.reason,
            metadata=base.metadata,
        )
        self.message_index = message_index
        self.stored = stored
        self.first_bookmark = first_bookmark
        self.last_bookmark = last_bookmark


_BY_CODE: dict[grpc.StatusCode, type[SowdbError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRangeError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNIMPLEMENTED: UnimplementedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DATA_LOSS: DataLossError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
}
_CODE_BY_VALUE = {c.value[0]: c for c in grpc.StatusCode}
_CONNECTION_HINTS = (
    (
        "Socket closed",
        "the server closed the connection as it was being set up: it may want TLS (tls=Tls(ca=...), "
        "sow -cacert FILE or -tls) or, with mutual TLS, a client certificate signed by its client CA "
        "(Tls(cert=..., key=...), sow -cert/-key)",
    ),
    (
        "WRONG_VERSION_NUMBER",
        "the server does not speak TLS on this port: connect without tls (sow without -tls/-cacert)",
    ),
    (
        "CERTIFICATE_VERIFY_FAILED",
        "the server's certificate is not signed by a CA this client trusts: give its CA "
        "(Tls(ca=FILE), sow -cacert FILE)",
    ),
    (
        "Hostname Verification",
        "the server's certificate is not made out to this host name: name the one it is made out to "
        "(Tls(server_name=...), sow -servername)",
    ),
)
"""gRPC's words for a connection that failed to set up, and what they mean to a person (a
plain client against a TLS port sees only "Socket closed")."""
_DETAILS_KEY = "grpc-status-details-bin"
_CANCELLED_HERE = frozenset(
    {
        "Locally cancelled by application!",
        "Cancelled upon garbage collection!",
        "Channel closed!",
        "Channel deallocated!",
        "Call cancelled in fork child",
    }
)
"""grpcio's details of a call cancelled on this side (a ``cancel()``, a closed channel): the
only CANCELLED a caller should see, since the server never ends a call with CANCELLED itself."""
SHUT_DOWN_UNDER_THE_CALL = (
    "the server dropped the call as it shut down, before handling it; retry (in a cluster, on another node)"
)
"""What a CANCELLED from the server means. gRPC core ends the calls that reached a server but no
handler yet with CANCELLED when that server stops (grpc/grpc#41785), where UNAVAILABLE is meant:
the caller retries, a server list moves on. Reported as UNAVAILABLE, so that it is retried like
every other failure of a server going away."""


def from_status(status: status_pb2.Status) -> SowdbError:
    """The typed exception for a ``google.rpc.Status`` (as in a PublishResponse)."""
    code = _CODE_BY_VALUE.get(status.code, grpc.StatusCode.UNKNOWN)
    violations: list[tuple[str, str]] = []
    reason, metadata = "", {}
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations.extend((v.field, v.description) for v in bad.field_violations)
        elif detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason, metadata = info.reason, dict(info.metadata)
    cls = _BY_CODE.get(code, SowdbError)
    return cls(code, status.message, field_violations=violations, reason=reason, metadata=metadata)


def from_rpc_error(err: grpc.RpcError) -> SowdbError:
    """The typed exception for a failed call (sync or asyncio)."""
    call: Any = err
    code: grpc.StatusCode = call.code()
    details: str = call.details() or ""
    for key, value in call.trailing_metadata() or ():
        if key == _DETAILS_KEY:
            status = status_pb2.Status.FromString(value)
            if status.code == code.value[0]:
                return from_status(status)
    if code == grpc.StatusCode.CANCELLED and details not in _CANCELLED_HERE:
        return UnavailableError(grpc.StatusCode.UNAVAILABLE, f"{SHUT_DOWN_UNDER_THE_CALL} [{details}]")
    if code == grpc.StatusCode.UNAVAILABLE:
        details = next((f"{hint} [{details}]" for words, hint in _CONNECTION_HINTS if words in details), details)
    return _BY_CODE.get(code, SowdbError)(code, details)
