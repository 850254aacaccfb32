"""Records as Arrow batches of a declared schema, and rows as JSON documents.

Reading, each field of the schema is one of:

- a record's metadata: ``topic``, ``sow_key``, ``bookmark``, ``timestamp``, ``data`` (the JSON
  text) and, for journal entries, ``operation`` (``publish``, ``delete``, ``expire``) — named
  so in the default schemas, and with a leading underscore (``_sow_key``, ``_bookmark``, ...)
  in a user's schema, where every other name is a field of the JSON document;
- a top-level field of the document, converted to the field's type: a JSON value of another
  type, or a missing field, is null (strictly: ``5.0`` is not a long, ``"5"`` is not a number,
  ``true`` is not a number); a string column takes any JSON value, non-strings as their JSON
  text. A null in a non-nullable field is an error naming the record.

The batch's Arrow schema is Spark's own conversion of the declared schema
(``to_arrow_schema(schema, timezone="UTC")``), so it matches exactly, nullability included.

Writing, a row becomes a JSON object of its columns (``null`` for nulls; timestamps and dates
as ISO-8601 text; decimals as numbers), except a ``_sow_key`` column, which is the message's
SowKey (topics whose publishers supply it); a DataFrame of a single string column named
``data`` is sent as it is, one JSON document per row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from sowdb_api.v1 import data_pb2 as dpb
from sowdb_spark.rpc import SowdbSparkError

RECORD_SCHEMA = StructType(
    [
        StructField("topic", StringType(), False),
        StructField("sow_key", StringType(), False),
        StructField("bookmark", LongType(), False),
        StructField("timestamp", TimestampType(), False),
        StructField("data", StringType(), False),
    ]
)
"""The default columns of a ``sowdb`` read: one row per record, its document as JSON text."""

JOURNAL_SCHEMA = StructType(
    [
        StructField("bookmark", LongType(), False),
        StructField("timestamp", TimestampType(), False),
        StructField("topic", StringType(), False),
        StructField("sow_key", StringType(), False),
        StructField("operation", StringType(), False),
        StructField("data", StringType(), False),
    ]
)
"""The default columns of a ``sowdb.journal`` read: one row per journal entry."""

METADATA = ("topic", "sow_key", "bookmark", "timestamp", "data", "operation")
OPERATION_NAMES = {1: "publish", 2: "delete", 3: "expire"}
_INTEGRAL = {ByteType: (-(2**7), 2**7), ShortType: (-(2**15), 2**15), IntegerType: (-(2**31), 2**31)}
_LONG = (-(2**63), 2**63)
_dumps = orjson.dumps


def metadata_of(schema: StructType) -> dict[str, str]:
    """Field name → metadata column, for the fields of ``schema`` that are metadata."""
    default = schema.fieldNames() in (RECORD_SCHEMA.fieldNames(), JOURNAL_SCHEMA.fieldNames())
    out = {}
    for name in schema.fieldNames():
        if default and name in METADATA:
            out[name] = name
        elif name.startswith("_") and name[1:] in METADATA:
            out[name] = name[1:]
    return out


def _json_text(v: Any) -> str | None:
    if v is None:
        return None
    return v if type(v) is str else _dumps(v).decode()


def _timestamp(v: Any) -> dt.datetime | None:
    if type(v) is not str:
        return None
    try:
        t = dt.datetime.fromisoformat(v)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


def _date(v: Any) -> dt.date | None:
    if type(v) is not str:
        return None
    try:
        return dt.date.fromisoformat(v)
    except ValueError:
        return None


def _values(values: list[Any], spark_type: DataType, arrow_type: pa.DataType) -> pa.Array:
    """One column of JSON values converted to a Spark type (a mismatch is null)."""
    t = type(spark_type)
    if t is LongType or t in _INTEGRAL:
        low, high = _INTEGRAL.get(t, _LONG)
        ints = [v if type(v) is int and low <= v < high else None for v in values]
        return pa.array(ints, arrow_type)
    if t is DoubleType or t is FloatType:
        return pa.array([v if type(v) is float or type(v) is int else None for v in values], arrow_type)
    if t is StringType:
        return pa.array([v if type(v) is str else _json_text(v) for v in values], arrow_type)
    if t is BooleanType:
        return pa.array([v if type(v) is bool else None for v in values], arrow_type)
    if t is TimestampType:
        return pa.array([_timestamp(v) for v in values], arrow_type)
    if t is DateType:
        return pa.array([_date(v) for v in values], arrow_type)
    return _generic(values, arrow_type)


def _generic(values: list[Any], arrow_type: pa.DataType) -> pa.Array:
    """Decimals, binaries, nested types: Arrow's own conversion, a value it refuses is null."""
    if pa.types.is_decimal(arrow_type):
        values = [Decimal(str(v)) if type(v) in (int, float) else None for v in values]
    try:
        return pa.array(values, arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        out = []
        for v in values:
            try:
                pa.array([v], arrow_type)
                out.append(v)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                out.append(None)
        return pa.array(out, arrow_type)


class BatchMaker:
    """Arrow record batches of a declared schema from the server's record columns."""

    def __init__(self, schema: StructType) -> None:
        self.schema = schema
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.metadata = metadata_of(schema)
        self.json_fields = [f for f in schema.fields if f.name not in self.metadata]

    def __call__(self, cols: dpb.RecordColumns) -> pa.RecordBatch:
        docs = [orjson.loads(d) for d in cols.data] if self.json_fields else []
        arrays = []
        for field, arrow_field in zip(self.schema.fields, self.arrow_schema, strict=True):
            meta = self.metadata.get(field.name)
            if meta is None:
                array = _values(
                    [d.get(field.name) if type(d) is dict else None for d in docs], field.dataType, arrow_field.type
                )
            else:
                array = self._metadata(meta, cols, field, arrow_field.type)
            if not field.nullable and array.null_count:
                self._refuse_null(field, array, cols)
            arrays.append(array)
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    @staticmethod
    def _metadata(meta: str, cols: dpb.RecordColumns, field: StructField, arrow_type: pa.DataType) -> pa.Array:
        if meta == "topic":
            return pa.array(list(cols.topics), arrow_type)
        if meta == "sow_key":
            return pa.array(list(cols.sow_keys), arrow_type)
        if meta == "bookmark":
            return pa.array(list(cols.bookmarks), arrow_type)
        if meta == "timestamp":
            return pa.array(list(cols.timestamps_us), pa.int64()).cast(arrow_type)
        if meta == "operation":
            return pa.array(
                [OPERATION_NAMES.get(o, "publish") for o in cols.operations] or ["publish"] * len(cols.sow_keys),
                arrow_type,
            )
        return pa.array(list(cols.data), pa.binary()).cast(arrow_type)

    @staticmethod
    def _refuse_null(field: StructField, array: pa.Array, cols: dpb.RecordColumns) -> None:
        i = array.is_null().to_pylist().index(True)
        raise SowdbSparkError(
            f"column {field.name} is not nullable, but record {cols.sow_keys[i]!r} of topic {cols.topics[i]!r} "
            f"(bookmark {cols.bookmarks[i]}) has no {field.dataType.simpleString()} value for it; declare the "
            "column nullable or filter such records out"
        )


def _default(v: Any) -> Any:
    if isinstance(v, Decimal):
        return float(v)
    raise TypeError(f"a {type(v).__name__} value")


def documents(batch: pa.RecordBatch, first_row: int) -> Iterator[tuple[bytes, str]]:
    """(JSON document, SowKey) of each row of a batch; ``first_row`` numbers the rows in errors.

    Raises:
        SowdbSparkError: a row that cannot be written as JSON, naming it.
    """
    names = batch.schema.names
    if names == ["data"] and pa.types.is_string(batch.schema.field(0).type):
        for i, text in enumerate(batch.column(0).to_pylist()):
            if text is None:
                raise SowdbSparkError(f"row {first_row + i}: column data is null; each row must be a JSON document")
            yield text.encode(), ""
        return
    has_key = "_sow_key" in names
    dumps, option = orjson.dumps, orjson.OPT_NAIVE_UTC
    for i, row in enumerate(batch.to_pylist()):
        key = row.pop("_sow_key", None) if has_key else None
        try:
            yield dumps(row, default=_default, option=option), key or ""
        except TypeError as exc:
            raise SowdbSparkError(f"row {first_row + i}: cannot be written as JSON ({exc}): {_excerpt(row)}") from None


def _excerpt(row: dict[str, Any]) -> str:
    text = repr(row)
    return text if len(text) <= 300 else text[:300] + "…"


Converter = Callable[[dpb.RecordColumns], pa.RecordBatch]
