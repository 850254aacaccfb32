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
