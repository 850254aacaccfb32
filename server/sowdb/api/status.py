"""The one table from domain errors to gRPC status codes, and the rich status built for each.

Every refusal becomes a ``google.rpc.Status`` with the code from :data:`STATUS_CODES`, the
error's message, and details a program can act on (E-1):

- ``google.rpc.BadRequest`` naming the request field (``filter``, ``messages[3].data``, …);
- ``google.rpc.ErrorInfo`` (domain ``sowdb.dev``) whose reason is the error class and whose
  metadata carries the specifics: ``column`` and ``token`` for expression errors,
  ``message_index`` for publish errors, ``oldest_bookmark`` for OUT_OF_RANGE.
"""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from sowdb import errors

ERROR_DOMAIN = "sowdb.dev"

STATUS_CODES: dict[type[errors.SowdbError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.OutOfRange: grpc.StatusCode.OUT_OF_RANGE,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.DataLoss: grpc.StatusCode.DATA_LOSS,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.Unimplemented: grpc.StatusCode.UNIMPLEMENTED,
}


def status_code(exc: errors.SowdbError) -> grpc.StatusCode:
    """The gRPC code of a domain error (a publish error takes its cause's code)."""
    if isinstance(exc, errors.PublishError):
        return status_code(exc.cause)
    for cls in type(exc).__mro__:
        code = STATUS_CODES.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


def _reason(exc: errors.SowdbError) -> str:
    """ErrorInfo.reason: UPPER_SNAKE_CASE of the error class (``EXPRESSION_ERROR``)."""
    name = type(exc.cause if isinstance(exc, errors.PublishError) else exc).__name__
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(name)).upper()


MAX_MESSAGE_CHARS = 1000
"""Longest message (and field description) sent: an error may echo the client's own input (a
3,000-character pattern), and the whole status travels in gRPC metadata, which clients cap at
8 KB — a longer one would turn a clear refusal into a transport error."""


def _cut(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 1] + "…"


def rich_status(exc: errors.SowdbError) -> status_pb2.Status:
    """The ``google.rpc.Status`` for a domain error, with BadRequest and ErrorInfo details."""
    code = status_code(exc)
    metadata: dict[str, str] = {}
    inner = exc.cause if isinstance(exc, errors.PublishError) else exc
    if isinstance(exc, errors.PublishError):
        metadata["message_index"] = str(exc.index)
    if isinstance(inner, errors.ExpressionError):
        metadata["column"] = str(inner.column)
        metadata["token"] = _cut(inner.token)
    if isinstance(inner, errors.OutOfRange):
        metadata["oldest_bookmark"] = str(inner.oldest_bookmark)
    if isinstance(inner, errors.NotPrimary):
        metadata["primary"] = inner.primary
    details = []
    if exc.field:
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=_cut(exc.field), description=_cut(exc.message))
            ]
        )
        details.append(_pack(bad))
    details.append(_pack(error_details_pb2.ErrorInfo(reason=_reason(exc), domain=ERROR_DOMAIN, metadata=metadata)))
    return status_pb2.Status(code=code.value[0], message=_cut(exc.message), details=details)


def internal_status(message: str) -> status_pb2.Status:
    """An INTERNAL status for an unexpected failure (the server logs the traceback)."""
    return status_pb2.Status(code=code_pb2.INTERNAL, message=message)


def _pack(msg: error_details_pb2.BadRequest | error_details_pb2.ErrorInfo) -> any_pb2.Any:
    a = any_pb2.Any()
    a.Pack(msg)
    return a
