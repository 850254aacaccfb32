"""Domain errors of the engine.

The engine never imports grpc: it raises these, and the protocol layer maps each class to a
gRPC status code through one table (``sowdb.api.status``). Every error carries a message a
person can act on, plus the request field it is about, so that the protocol layer can attach a
``google.rpc.BadRequest`` naming that field.
"""

from __future__ import annotations


class SowdbError(Exception):
    """Base of every refusal the engine reports to a client."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidArgument(SowdbError):
    """The request itself is malformed (bad filter, bad option, bad JSON)."""


class ExpressionError(InvalidArgument):
    """A filter, order_by, projection, grouping or select text does not parse or compile.

    Attributes:
        column: 1-based column of the offending token in the expression text.
        token: the offending token as written (empty at end of input).
    """

    def __init__(self, message: str, *, column: int, token: str, field: str | None = None) -> None:
        where = f"at column {column}" + (f" near {token!r}" if token else " (end of input)")
        super().__init__(f"{message} {where}", field=field)
        self.reason = message
        self.column = column
        self.token = token

    def for_field(self, field: str) -> ExpressionError:
        """Return the same error attributed to a request field (the parser does not know it)."""
        return ExpressionError(self.reason, column=self.column, token=self.token, field=field)


class NotFound(SowdbError):
    """The request names something that does not exist (an unknown sub_id)."""


class FailedPrecondition(SowdbError):
    """The request is well formed but the topic cannot serve it (sow on a non-SOW topic,
    publish to a view)."""


class JournalForked(FailedPrecondition):
    """A follower's journal is not a prefix of the primary's (HA-4): it holds entries the
    primary never had. Its ErrorInfo reason, ``JOURNAL_FORKED``, is what the follower acts on
    (it finds the fork point and cuts its journal there), never the message's words."""


class NotPrimary(FailedPrecondition):
    """A write sent to a replica of a cluster (SPEC §13): only the primary accepts writes.

    Attributes:
        primary: the primary's address (its ``[cluster] advertise``; empty while none is known),
            for the client to send the write to.
    """

    def __init__(self, message: str, *, primary: str) -> None:
        super().__init__(message)
        self.primary = primary


class OutOfRange(SowdbError):
    """A bookmark outside the retained history or journal.

    Attributes:
        oldest_bookmark: the oldest bookmark still available, for the client to retry from.
    """

    def __init__(self, message: str, *, oldest_bookmark: int, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.oldest_bookmark = oldest_bookmark


class ResourceExhausted(SowdbError):
    """A limit was passed (document size, a slow consumer's queue)."""


class Unauthenticated(SowdbError):
    """The call carries no valid credentials, and the server admits no anonymous calls (A-1)."""


class PermissionDenied(SowdbError):
    """The caller's rights do not cover this call: the message names the topic and the right
    missing (A-1)."""


class DataLoss(SowdbError):
    """Stored data cannot be read back whole (a damaged file): never reported as less data."""


class Unavailable(SowdbError):
    """The server cannot do this now but may soon (its storage cannot be written): retry later."""


class Unimplemented(SowdbError):
    """A part of the API that this version does not provide yet."""


class PublishError(SowdbError):
    """A publish batch was refused because of one of its messages.

    Wraps the error of that message and names it, so that the client knows which of its
    messages to fix; nothing of the batch was stored (K-3).

    Attributes:
        index: 0-based index of the message in the request.
        cause: the error of that message.
    """

    def __init__(self, index: int, cause: SowdbError) -> None:
        sub = cause.field or "data"
        super().__init__(f"message {index}: {cause.message}", field=f"messages[{index}].{sub}")
        self.index = index
        self.cause = cause
