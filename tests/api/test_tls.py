"""TLS and mutual TLS on the gRPC port (SPEC §11) with a real PKI made by ``openssl``: the
round trip with a token over TLS (sync and asyncio SDK), and every way a connection can be
refused — each with an error that tells a person what to change, and nothing stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from sowdb.auth import hash_token
from sowdb.config import config_from_dict
from sowdb.testing.pki import Certs
from sowdb_client import AsyncClient, Client, Tls, UnauthenticatedError, UnavailableError
from tests.support import make_config, serving, take

TOKEN = "s3cret-token-for-tls"


@asynccontextmanager
async def serving_tls(tmp_path: Path, certs: Certs, **security: Any) -> AsyncIterator[str]:
    """A server with TLS (and ``security`` besides) on this PKI; its address."""
    users = tmp_path / "users.toml"
    users.write_text(f'[[user]]\nname = "ops"\ntoken_sha256 = "{hash_token(TOKEN)}"\nroles = ["all"]\n')
    raw = {
        "topic": [{"name": "orders", "key": ["/id"]}],
        "server": {"listen": "127.0.0.1:0", "data_dir": str(tmp_path / "data")},
        "security": {"tls_cert": certs["server.pem"], "tls_key": certs["server.key"], "users_file": str(users)}
        | security,
        "role": [{"name": "all", "read": [".*"], "write": [".*"]}],
    }
    async with serving(config_from_dict(raw, source="sowd.toml")) as server:
        yield f"127.0.0.1:{server.port}"


@pytest.fixture
async def tls_server(tmp_path: Path, certs: Certs) -> AsyncIterator[str]:
    async with serving_tls(tmp_path, certs) as target:
        yield target


@pytest.fixture
async def mtls_server(tmp_path: Path, certs: Certs) -> AsyncIterator[str]:
    async with serving_tls(tmp_path, certs, client_ca=certs["ca.pem"]) as target:
        yield target


async def stored(target: str, tls: Tls) -> int:
    async with AsyncClient(target, token=TOKEN, tls=tls) as c:
        return len(await c.sow("orders").records())


async def test_tls_with_a_token_round_trip(tls_server: str, certs: Certs) -> None:
    tls = Tls(ca=certs["ca.pem"])
    async with AsyncClient(tls_server, token=TOKEN, tls=tls) as c:
        stream = c.subscribe("orders")
        await take(stream, 1)  # subscribed
        await c.publish("orders", [{"id": 1}, {"id": 2}])
        (event,) = await take(stream, 1)
        assert [r.json() for r in event.records] == [{"id": 1}, {"id": 2}]
        stream.cancel()

    def sync_ids() -> list[int]:  # in a thread: the server shares this event loop
        ca_bytes = Path(certs["ca.pem"]).read_bytes()  # PEM bytes work as well as a file name
        with Client(tls_server.replace("127.0.0.1", "localhost"), token=TOKEN, tls=Tls(ca=ca_bytes)) as sync:
            return sorted(r.json()["id"] for r in sync.sow("orders"))

    assert await asyncio.to_thread(sync_ids) == [1, 2]
    async with AsyncClient(tls_server, tls=tls) as anonymous:
        with pytest.raises(UnauthenticatedError):  # TLS is no substitute for the token
            await anonymous.sow("orders").records()


@pytest.mark.parametrize(
    ("tls", "hint"),
    [
        (None, "it may want TLS"),  # a plain client against the TLS port
        (True, "not signed by a CA this client trusts"),  # the system's CAs do not know ours
        ("wrong-name", "not made out to this host name"),
    ],
)
async def test_a_client_that_cannot_set_up_tls_is_told_what_to_change(
    tls_server: str, certs: Certs, tls: Any, hint: str
) -> None:
    if tls == "wrong-name":
        tls = Tls(ca=certs["ca.pem"], server_name="db.example.com")
    async with AsyncClient(tls_server, token=TOKEN, tls=tls) as c:
        with pytest.raises(UnavailableError) as err:
            await c.publish("orders", [{"id": 1}])
    assert hint in err.value.message
    assert await stored(tls_server, Tls(ca=certs["ca.pem"])) == 0


async def test_a_tls_client_against_a_plain_port_is_told_so(tmp_path: Path, certs: Certs) -> None:
    async with serving(make_config(tmp_path / "plain")) as server:
        async with AsyncClient(f"127.0.0.1:{server.port}", tls=Tls(ca=certs["ca.pem"])) as c:
            with pytest.raises(UnavailableError) as err:
                await c.list_topics()
        assert "does not speak TLS on this port" in err.value.message


async def test_mutual_tls_wants_a_client_certificate_signed_by_the_client_ca(mtls_server: str, certs: Certs) -> None:
    trusted = Tls(ca=certs["ca.pem"], cert=certs["client.pem"], key=certs["client.key"])
    for refused in (
        Tls(ca=certs["ca.pem"]),  # no client certificate
        Tls(ca=certs["ca.pem"], cert=certs["rogue.pem"], key=certs["rogue.key"]),  # not signed by the CA
    ):
        async with AsyncClient(mtls_server, token=TOKEN, tls=refused) as c:
            with pytest.raises(UnavailableError) as err:
                await c.publish("orders", [{"id": 9}])
        assert "client certificate signed by its client CA" in err.value.message
    assert await stored(mtls_server, trusted) == 0  # the refused publishes stored nothing
    async with AsyncClient(mtls_server, token=TOKEN, tls=trusted) as c:
        await c.publish("orders", [{"id": 1}])
    assert await stored(mtls_server, trusted) == 1
