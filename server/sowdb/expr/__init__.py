"""The filter expression language (``docs/filters.md``): parse once, compile to Python.

Entry points:
    compile_filter(text)       -> CompiledFilter      (``.matches(data, ctx=None)``; cached)
    compile_expression(text)   -> CompiledExpression  (``.evaluate(data, ctx=None)``)
    parse_order_by(text)       -> OrderBy
    parse_select(text)         -> Select
    parse_aggregation(g, p)    -> Aggregation

Every refusal is a :class:`sowdb.errors.ExpressionError` carrying column and token.
"""

from __future__ import annotations

from functools import lru_cache

from sowdb.errors import ExpressionError
from sowdb.expr.aggregation import Aggregation, parse_aggregation
from sowdb.expr.compiled import Comparison, CompiledExpression, CompiledFilter, Conjunct
from sowdb.expr.compiler import get_path
from sowdb.expr.ordering import OrderBy, parse_order_by
from sowdb.expr.parser import parse
from sowdb.expr.select import Select, parse_select

FILTER_CACHE_SIZE = 4096


@lru_cache(maxsize=FILTER_CACHE_SIZE)
def compile_filter(text: str) -> CompiledFilter:
    """Compile a filter, or return the one already compiled for the same text.

    Raises:
        ExpressionError: the text is not a valid filter.
    """
    return CompiledFilter(text, parse(text))


def compile_expression(text: str) -> CompiledExpression:
    """Compile a (non-aggregate) expression for its value rather than a match."""
    return CompiledExpression(text, parse(text))


__all__ = [
    "FILTER_CACHE_SIZE",
    "Aggregation",
    "Comparison",
    "CompiledExpression",
    "CompiledFilter",
    "Conjunct",
    "ExpressionError",
    "OrderBy",
    "Select",
    "compile_expression",
    "compile_filter",
    "get_path",
    "parse_aggregation",
    "parse_order_by",
    "parse_select",
]
