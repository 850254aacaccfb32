"""The one table from domain errors to gRPC codes, and the rich status built from it."""

from __future__ import annotations

import grpc
import pytest
from google.rpc import error_details_pb2

from sowdb import errors
from sowdb.api.status import STATUS_CODES, rich_status, status_code


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (errors.InvalidArgument("x", field="filter"), grpc.StatusCode.INVALID_ARGUMENT),
        (errors.ExpressionError("bad", column=3, token="=", field="filter"), grpc.StatusCode.INVALID_ARGUMENT),
        (errors.NotFound("x"), grpc.StatusCode.NOT_FOUND),
        (errors.FailedPrecondition("x"), grpc.StatusCode.FAILED_PRECONDITION),
        (errors.OutOfRange("x", oldest_bookmark=7), grpc.StatusCode.OUT_OF_RANGE),
        (errors.ResourceExhausted("x"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (errors.Unimplemented("x"), grpc.StatusCode.UNIMPLEMENTED),
        (errors.Unavailable("x"), grpc.StatusCode.UNAVAILABLE),
        (errors.DataLoss("x"), grpc.StatusCode.DATA_LOSS),
        (errors.PublishError(2, errors.ResourceExhausted("big", field="data")), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ],
)
def test_every_domain_error_has_its_code(exc: errors.SowdbError, code: grpc.StatusCode) -> None:
    assert status_code(exc) == code
    assert rich_status(exc).code == code.value[0]


def test_the_table_covers_every_error_class() -> None:
    def subclasses(cls: type[errors.SowdbError]) -> set[type[errors.SowdbError]]:
        return {cls} | {s for c in cls.__subclasses__() for s in subclasses(c)}

    unmapped = {
        c for c in subclasses(errors.SowdbError) if c is not errors.SowdbError and c is not errors.PublishError
    } - {c for c in subclasses(errors.SowdbError) if any(issubclass(c, m) for m in STATUS_CODES)}
    assert not unmapped


def test_details_carry_field_position_and_index() -> None:
    exc = errors.PublishError(4, errors.InvalidArgument("not valid JSON", field="data"))
    status = rich_status(exc)
    bad, info = error_details_pb2.BadRequest(), error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(bad)
    assert status.details[1].Unpack(info)
    assert bad.field_violations[0].field == "messages[4].data"
    assert info.reason == "INVALID_ARGUMENT"
    assert info.metadata["message_index"] == "4"
    expr = rich_status(errors.ExpressionError("unexpected", column=9, token="AND", field="filter"))
    assert expr.details[1].Unpack(info)
    assert (info.metadata["column"], info.metadata["token"]) == ("9", "AND")
    oor = rich_status(errors.OutOfRange("too old", oldest_bookmark=42))
    assert oor.details[0].Unpack(info)
    assert info.metadata["oldest_bookmark"] == "42"
