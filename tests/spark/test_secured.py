"""Spark against a secured server (SPEC §9 with §11): every source and sink takes ``token``,
``tls``/``cacert``, ``cert``/``key`` (mutual TLS); a wrong token is ``UNAUTHENTICATED`` and a
missing right ``PERMISSION_DENIED`` in the Spark error, and nothing is written by a refused job."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from sowdb.auth import hash_token
from sowdb.testing.pki import Certs
from sowdb_client import Client, Tls
from sowdb_spark import SowdbSparkError
from sowdb_spark.export import main as export
from tests.support import Process, start_sowd

TOKENS = {name: secrets.token_urlsafe(16) for name in ("writer", "reader")}


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[str]:
    """A sowd with TLS that wants a client certificate signed by the test CA, and two users:
    ``writer`` may read and write ``vault``, ``reader`` may only read it."""
    root: Path = tmp_path_factory.mktemp("secured-sowd")
    users = "".join(
        f'[[user]]\nname = "{n}"\ntoken_sha256 = "{hash_token(t)}"\nroles = ["{n}"]\n' for n, t in TOKENS.items()
    )
    (root / "users.toml").write_text(users)
    (root / "sowd.toml").write_text(
        f'[security]\ntls_cert = "{certs["server.pem"]}"\ntls_key = "{certs["server.key"]}"\n'
        f'client_ca = "{certs["ca.pem"]}"\nusers_file = "{root / "users.toml"}"\n\n'
        '[[role]]\nname = "writer"\nread = ["vault"]\nwrite = ["vault"]\n\n'
        '[[role]]\nname = "reader"\nread = ["vault"]\n\n'
        '[[topic]]\nname = "vault"\nkey = ["/id"]\n'
    )
    p: Process = start_sowd(root / "data", "--config", str(root / "sowd.toml"))
    try:
        yield p.target
    finally:
        p.stop()


def connection(server: str, certs: Certs, user: str) -> dict[str, str]:
    """The options that reach :func:`vault` as ``user``."""
    return {
        "server": server,
        "token": TOKENS[user],
        "cacert": certs["ca.pem"],
        "cert": certs["client.pem"],
        "key": certs["client.key"],
    }


def client(server: str, certs: Certs) -> Client:
    tls = Tls(ca=certs["ca.pem"], cert=certs["client.pem"], key=certs["client.key"])
    return Client(server, token=TOKENS["writer"], tls=tls)


def test_every_source_and_sink_works_with_a_token_over_mutual_tls(
    spark: SparkSession, vault: str, certs: Certs, tmp_path: Path
) -> None:
    writer, reader = connection(vault, certs, "writer"), connection(vault, certs, "reader")
    df = spark.createDataFrame([(i, f"n{i}") for i in range(20)], "id long, name string")
    df.repartition(2).write.format("sowdb").options(topic="vault", **writer).mode("append").save()
    with client(vault, certs) as c:
        assert sorted(r.json()["id"] for r in c.sow("vault")) == list(range(20))

    rows = spark.read.format("sowdb").options(topic="vault", partitions="2", **reader).schema("id long").load()
    assert sorted(r.id for r in rows.collect()) == list(range(20))
    journal = spark.read.format("sowdb.journal").options(topic="vault", **reader).load()
    assert journal.count() == 20
    out = tmp_path / "out"
    query = (
        spark.readStream.format("sowdb")
        .options(topic="vault", **reader)
        .load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert spark.read.parquet(str(out)).count() == 20

    flags = [f"--{name}={value}" for name, value in reader.items()]
    assert export([*flags, "--topic", "vault", "--out", str(tmp_path / "export")], spark=spark) == 0
    assert spark.read.parquet(str(tmp_path / "export")).count() == 20


def _error(run: object) -> str:
    with pytest.raises((PySparkException, SowdbSparkError)) as failed:
        run()  # type: ignore[operator]
    return str(failed.value)


def test_a_wrong_token_is_unauthenticated_and_a_reader_cannot_write(
    spark: SparkSession, vault: str, certs: Certs
) -> None:
    wrong = {**connection(vault, certs, "reader"), "token": "not-a-token"}
    read = spark.read.format("sowdb").options(topic="vault", **wrong)
    assert "UNAUTHENTICATED" in _error(lambda: read.load().collect())
    journal = spark.read.format("sowdb.journal").options(topic="vault", **wrong)
    assert "UNAUTHENTICATED" in _error(lambda: journal.load().collect())

    with client(vault, certs) as c:
        before = sorted((r.sow_key, r.bookmark) for r in c.sow("vault"))
    df = spark.createDataFrame([(1000, "x")], "id long, name string")
    write = df.write.format("sowdb").options(topic="vault", **connection(vault, certs, "reader")).mode("append")
    message = _error(write.save)
    assert "PERMISSION_DENIED" in message
    assert "write" in message
    with client(vault, certs) as c:
        assert sorted((r.sow_key, r.bookmark) for r in c.sow("vault")) == before


def test_a_bad_connection_fails_the_query_saying_what_to_fix(spark: SparkSession, vault: str, certs: Certs) -> None:
    plaintext = {"server": vault, "token": TOKENS["reader"]}  # the server speaks TLS only
    assert "UNAVAILABLE" in _error(
        lambda: spark.read.format("sowdb").options(topic="vault", **plaintext).load().collect()
    )
    no_cert = {**connection(vault, certs, "reader")}
    del no_cert["cert"], no_cert["key"]  # the server wants a client certificate
    assert "UNAVAILABLE" in _error(
        lambda: spark.read.format("sowdb").options(topic="vault", **no_cert).load().collect()
    )
    elsewhere = {**connection(vault, certs, "reader"), "servername": "elsewhere.example"}  # not the cert's name
    assert "UNAVAILABLE" in _error(
        lambda: spark.read.format("sowdb").options(topic="vault", **elsewhere).load().collect()
    )
    named = {**connection(vault, certs, "reader"), "servername": "localhost"}  # a name the certificate has
    assert spark.read.format("sowdb").options(topic="vault", **named).load().count() >= 0
    half = {**connection(vault, certs, "reader")}
    del half["key"]
    assert "options cert and key go together" in _error(
        lambda: spark.read.format("sowdb").options(topic="vault", **half).load().collect()
    )
    missing = {**connection(vault, certs, "reader"), "cacert": "/nowhere/ca.pem"}
    assert "option cacert: cannot read '/nowhere/ca.pem'" in _error(
        lambda: spark.read.format("sowdb").options(topic="vault", **missing).load().collect()
    )
    assert "option tls must be true or false" in _error(
        lambda: spark.read.format("sowdb").options(topic="vault", server=vault, tls="yes please").load().collect()
    )
