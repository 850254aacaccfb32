"""A request's filter text, compiled once with its errors attributed to the request's ``filter``.

Shared by every reader and writer that takes a filter (queries, placement, sow_delete, the
journal reads, row entitlements), so it sits beside the shared types rather than in one of them.
"""

from __future__ import annotations

from sowdb.errors import ExpressionError
from sowdb.expr import CompiledFilter, compile_filter


def request_filter(text: str) -> CompiledFilter | None:
    """The compiled filter of a request (None when empty), its errors attributed to ``filter``."""
    if not text.strip():
        return None
    try:
        return compile_filter(text)
    except ExpressionError as exc:
        raise exc.for_field("filter") from None
