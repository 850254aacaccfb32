"""Batch reads through Spark (SPEC §9): one Sow at one point under a publisher, schema mapping
with exact Arrow batches, pushdown that changes nothing but the traffic, options checked at
planning."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, DataFrameReader, Row, SparkSession
from pyspark.sql.datasource import EqualTo, GreaterThan, In, IsNotNull, IsNull, Not, StringStartsWith
from pyspark.sql.types import LongType, StringType, StructField, StructType
from pyspark.testing import assertDataFrameEqual

from sowdb_client import Client, Message
from sowdb_spark.pushdown import server_filter

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"


def records(server: str, topic: str, **query: Any) -> list[Row]:
    with Client(server) as c:
        return [
            Row(topic=r.topic, sow_key=r.sow_key, bookmark=r.bookmark, data=r.data.decode())
            for r in c.sow(topic, batch_size=1000, **query)
        ]


def test_partitions_are_one_sow_at_one_point_while_publishers_write(spark: SparkSession, server: str) -> None:
    with Client(server) as c:
        c.publish("ledger", [{"id": i, "v": 0} for i in range(3000)])
    stop = threading.Event()

    def publish() -> None:
        with Client(server) as c:
            n = 0
            while not stop.is_set():
                c.publish("ledger", [{"id": (n + i) % 3000, "v": n} for i in range(100)])
                n += 100

    writer = threading.Thread(target=publish)
    writer.start()
    try:
        mine = "/id >= 0 AND /id < 3000"  # the topic's records of this test
        df = spark.read.format("sowdb").options(server=server, topic="ledger", partitions="3", filter=mine).load()
        assert df.rdd.getNumPartitions() == 3
        rows = df.select("topic", "sow_key", "bookmark", "data").collect()
    finally:
        stop.set()
        writer.join()
    # no change to the topic lies between its newest row and the snapshot's point, so the
    # historical Sow at the newest row's bookmark is the state the partitions saw
    at = max(r.bookmark for r in rows)
    assert len(rows) == 3000
    assertDataFrameEqual(rows, records(server, "ledger", bookmark=str(at), filter=mine))


def test_a_schema_maps_json_fields_with_exact_types_and_nullability(spark: SparkSession, server: str) -> None:
    docs: list[dict[str, Any]] = [
        {"id": 1, "qty": 5, "price": 1.5, "name": "a", "flag": True, "tags": ["x"]},
        {"id": 2, "qty": "7", "price": 3, "name": 42, "flag": 1},  # mixed types: strict conversion
        {"id": 3, "qty": None, "name": ""},  # nulls and missing fields
        {"id": 4, "qty": 5.0, "price": "x", "name": {"k": [1, None]}, "flag": False},
    ]
    with Client(server) as c:
        c.publish("mixed", docs)
    schema = "id long not null, qty long, price double, name string, flag boolean, _sow_key string not null"
    df = spark.read.format("sowdb").options(server=server, topic="mixed").schema(schema).load()
    expected = [
        Row(id=1, qty=5, price=1.5, name="a", flag=True, _sow_key="1"),
        Row(id=2, qty=None, price=3.0, name="42", flag=None, _sow_key="2"),
        Row(id=3, qty=None, price=None, name="", flag=None, _sow_key="3"),
        Row(id=4, qty=None, price=None, name='{"k":[1,null]}', flag=False, _sow_key="4"),
    ]
    assertDataFrameEqual(df, expected)
    assert df.schema["id"].nullable is False
    default = spark.read.format("sowdb").options(server=server, topic="mixed").load()
    assert [f.nullable for f in default.schema.fields] == [False] * 5
    assert default.where("sow_key = '3'").first().data == '{"id":3,"qty":null,"name":""}'  # type: ignore[union-attr]
    with pytest.raises(PySparkException, match=r"column qty is not nullable, but record '\d' of topic 'mixed'"):
        spark.read.format("sowdb").options(server=server, topic="mixed").schema("qty long not null").load().collect()


def test_a_historical_bookmark_and_a_filter(spark: SparkSession, server: str) -> None:
    with Client(server) as c:
        first = c.publish("ledger", [{"id": 100_000 + i, "v": "old"} for i in range(10)])
        c.publish("ledger", [{"id": 100_000 + i, "v": "new"} for i in range(10)])
    df = (
        spark.read.format("sowdb")
        .options(server=server, topic="ledger", bookmark=str(first.last_bookmark), filter="/id >= 100000")
        .schema("id long, v string")
        .load()
    )
    assertDataFrameEqual(df, [Row(id=100_000 + i, v="old") for i in range(10)])


def test_pushed_and_unpushed_filters_give_the_same_rows(spark: SparkSession, server: str) -> None:
    values: list[Any] = [None, 5, 5.0, "5", "", [5], [], {"a": 5}, True, False, "true", "SYM1", "sym", 7, -3, 1e20]
    docs = [Message({"id": i, "n": v, "s": v, "b": v}) for i, v in enumerate(values)]
    docs.append(Message({"id": len(values)}))  # every field missing
    with Client(server) as c:
        c.publish("books", docs)
    schema = "id long not null, n long, s string, b boolean, _sow_key string not null"
    conditions = [
        "n = 5", "n > 4", "n IN (5, 7)", "n != 5", "n IS NOT NULL", "n IS NULL", "NOT n IN (5)", "s = '5'",
        "s = ''", "s = 'true'", "s IN ('SYM1', '5')", "s LIKE 'SY%'", "s LIKE '%M1'", "s LIKE '%y%'", "s > 'S'",
        "b = true", "b = false", "NOT b", "_sow_key = '3'", "n = 5 AND s = '5'", "n = 5 OR s = 'SYM1'",
    ]  # fmt: skip

    def load() -> DataFrame:
        # a DataFrame per query: Spark 4.3 reuses a loaded DataFrame's first planned read for its
        # later queries, the filters pushed into it included (see docs/spark.md)
        return spark.read.format("sowdb").options(server=server, topic="books").schema(schema).load()

    for condition in conditions:
        spark.conf.set(PUSHDOWN, "false")
        unpushed = load().where(condition).collect()
        spark.conf.set(PUSHDOWN, "true")
        try:
            pushed = load().where(condition).collect()
        finally:
            spark.conf.set(PUSHDOWN, "false")
        assertDataFrameEqual(pushed, unpushed)
    assert len(load().collect()) == len(docs)
    # what is pushed: superset-safe translations only (each filter is evaluated by Spark again)
    s = StructType(
        [StructField("n", LongType()), StructField("s", StringType()), StructField("_sow_key", StringType(), False)]
    )
    assert (
        server_filter([EqualTo(("n",), 5), GreaterThan(("n",), 1.5)], s, "/x = 1")
        == "(/x = 1) AND (/n = 5) AND (/n > 1.5)"
    )
    assert server_filter([IsNull(("n",)), EqualTo(("s",), ""), EqualTo(("s",), "true")], s) == ""
    assert server_filter([In(("s",), ("a", "b'c")), StringStartsWith(("s",), "SY")], s) == (
        "(/s IN ('a', 'b\\'c')) AND (/s BEGINS WITH ('SY'))"
    )
    assert server_filter([Not(EqualTo(("n",), 5)), IsNotNull(("n",)), EqualTo(("_sow_key",), "3")], s) == (
        "(NOT (/n = 5)) AND (/n IS NOT NULL) AND (SOW_KEY() = '3')"
    )


def test_options_are_checked_at_planning(spark: SparkSession, server: str) -> None:
    def read() -> DataFrameReader:  # a reader keeps the options given to it: one per case
        return spark.read.format("sowdb").option("server", server)

    with pytest.raises(PySparkException, match="option topic is required for a sowdb read"):
        read().load().collect()
    with pytest.raises(PySparkException, match="unknown option fliter for format 'sowdb'; the options are"):
        read().options(topic="books", fliter="/id = 1").load()
    with pytest.raises(PySparkException, match="unknown option from_bookmark for a sowdb read"):
        read().options(topic="books", from_bookmark="0").load().collect()
    with pytest.raises(PySparkException, match=r"INVALID_ARGUMENT: expected an operand at column 6.*\(option filter\)"):
        read().options(topic="books", filter="/id >").load().collect()
    with pytest.raises(PySparkException, match="option partitions must be a whole number"):
        read().options(topic="books", partitions="many").load().collect()
    with pytest.raises(PySparkException, match="is not a SOW topic"):
        read().options(topic="nowhere").load().collect()
    with pytest.raises(PySparkException, match=r"unknown option lease for format 'sowdb\.journal'"):
        spark.read.format("sowdb.journal").options(server=server, lease="5").load()
