"""Spark filters pushed to the server as filter-language expressions (``pushFilters``).

The filter language and Spark do not agree on every value: in the filter language a string
compares with a number by converting it (``'5' = 5``), ``""`` and ``[]`` are NULL, ``true``
is 1, and a comparison with an array is true when any element satisfies it; Spark compares the
values this source converted (:mod:`sowdb_spark.arrow`: ``"5"`` in a long column is null).

So a Spark filter is translated only into an expression that keeps **every** record the Spark
filter keeps (it may keep more: ``/qty = 5`` keeps ``"5"`` too), and every filter is still
returned to Spark, which evaluates it on the rows the server sent. The result is the same rows
as without pushdown, by construction, on any data; the server only sends fewer. A filter with
no such translation is not pushed. Translated:

- on a long/int/short/byte/double/float column: ``=``, ``<=>`` with a non-null literal, ``<``,
  ``<=``, ``>``, ``>=``, ``IN``, ``NOT =``, ``NOT IN`` with numeric literals, and ``IS NOT
  NULL`` (a non-null number is a JSON number, never NULL there);
- on a boolean column: ``=`` and ``NOT =`` with a boolean literal;
- on a string column: ``=`` and ``IN`` with strings that the JSON text of a non-string could
  not spell in a way the filter language reads differently (not empty, not ``true``/``false``/
  ``null``, not starting with ``[`` or ``{``), and ``LIKE 'abc%'`` / ``LIKE '%abc'`` as
  ``BEGINS WITH`` / ``ENDS WITH`` under similar conditions;
- the metadata columns ``_bookmark``, ``_sow_key`` and ``_topic`` (``BOOKMARK()``,
  ``SOW_KEY()``, ``TOPIC_NAME()``): comparisons that are exact.

Nested columns, ``IS NULL``, string ranges and ``LIKE '%abc%'`` are not pushed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from sowdb_spark.arrow import metadata_of

_NUMERIC = (LongType, IntegerType, ShortType, ByteType, DoubleType, FloatType)
_COMPARISONS = {
    EqualTo: "=",
    EqualNullSafe: "=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
}
_WORDS = ("true", "false", "null")
_METADATA_FUNCTIONS = {"bookmark": "BOOKMARK()", "sow_key": "SOW_KEY()", "topic": "TOPIC_NAME()"}


def _number(v: object) -> str | None:
    if type(v) is int and -(2**63) <= v < 2**64:
        return str(v)
    if type(v) is float and math.isfinite(v):
        return repr(v)
    return None


def _string(s: str) -> str:
    """A filter-language string literal."""
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _safe_equal_string(v: object) -> bool:
    """A string literal whose equality the filter language keeps for every record Spark keeps."""
    return type(v) is str and v != "" and v not in _WORDS and v[0] not in "[{"


def _path(name: str) -> str:
    return "/" + name if name.replace("_", "a").isalnum() and not name[0].isdigit() else f"[/{name}]"


def translate(f: Filter, schema: StructType) -> str | None:
    """The filter-language expression for one Spark filter, or None when it is not pushed."""
    if isinstance(f, Not):
        inner = f.child
        if isinstance(inner, EqualTo | In):
            field = _field(inner.attribute, schema)
            if field is not None and isinstance(field[1], (*_NUMERIC, BooleanType)) and field[0] is not None:
                text = translate(inner, schema)
                return None if text is None else f"NOT ({text})"
        return None
    if not hasattr(f, "attribute"):
        return None
    found = _field(f.attribute, schema)
    if found is None:
        return None
    path, data_type, meta = found
    if meta is not None:
        return _metadata(f, meta)
    assert path is not None
    if isinstance(f, IsNotNull):
        return f"{path} IS NOT NULL" if isinstance(data_type, (*_NUMERIC, BooleanType)) else None
    if isinstance(data_type, _NUMERIC):
        if type(f) in _COMPARISONS:
            value = _number(f.value)  # type: ignore[attr-defined]
            return None if value is None else f"{path} {_COMPARISONS[type(f)]} {value}"
        if isinstance(f, In):
            values = [_number(v) for v in f.value]
            return None if not values or None in values else f"{path} IN ({', '.join(values)})"  # type: ignore[arg-type]
        return None
    if isinstance(data_type, BooleanType):
        if isinstance(f, EqualTo | EqualNullSafe) and type(f.value) is bool:
            return f"{path} = {'TRUE' if f.value else 'FALSE'}"
        return None
    if isinstance(data_type, StringType):
        if isinstance(f, EqualTo | EqualNullSafe) and _safe_equal_string(f.value):
            return f"{path} = {_string(f.value)}"
        if isinstance(f, In) and f.value and all(_safe_equal_string(v) for v in f.value):
            return f"{path} IN ({', '.join(_string(v) for v in f.value)})"
        if isinstance(f, StringStartsWith) and _safe_prefix(f.value):
            return f"{path} BEGINS WITH ({_string(f.value)})"
        if isinstance(f, StringEndsWith) and _safe_suffix(f.value):
            return f"{path} ENDS WITH ({_string(f.value)})"
    return None


def _safe_prefix(s: str) -> bool:
    """No JSON text of a number, boolean, null, array or object starts with ``s``."""
    return bool(s) and s[0] not in "0123456789-[{" and not any(w.startswith(s) for w in _WORDS)


def _safe_suffix(s: str) -> bool:
    return bool(s) and s[-1] not in "0123456789]}." and not any(w.endswith(s) for w in _WORDS)


def _field(attribute: tuple[str, ...], schema: StructType) -> tuple[str | None, DataType, str | None] | None:
    """(path, type, metadata name) of a top-level column, or None (nested, unknown)."""
    if len(attribute) != 1 or attribute[0] not in schema.fieldNames():
        return None
    name = attribute[0]
    meta = metadata_of(schema).get(name)
    data_type = schema[name].dataType
    return (None, data_type, meta) if meta is not None else (_path(name), data_type, None)


def _metadata(f: Filter, meta: str) -> str | None:
    function = _METADATA_FUNCTIONS.get(meta)
    if function is None or type(f) not in _COMPARISONS:
        return None
    value = f.value  # type: ignore[attr-defined]
    if meta == "bookmark":
        number = _number(value)
        return None if number is None or type(value) is not int else f"{function} {_COMPARISONS[type(f)]} {number}"
    if type(value) is str and isinstance(f, EqualTo | EqualNullSafe) and value:
        return f"{function} = {_string(value)}"
    return None


def server_filter(filters: Sequence[Filter], schema: StructType, given: str = "") -> str:
    """The ``filter`` option AND every translatable Spark filter, as one expression."""
    parts = [f"({given})"] if given.strip() else []
    for f in filters:
        text = translate(f, schema)
        if text is not None:
            parts.append(f"({text})")
    return " AND ".join(parts)
