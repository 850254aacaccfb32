"""The console's HTTP side without a browser: the config key, the page and its assets, and the
Connect / gRPC-web gateway spoken by hand — the server's answers, its rich errors and its
authentication arriving unchanged, live events streaming, and a browser that goes taking its
subscription with it."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from sowdb.config import ConfigError, config_from_dict
from sowdb.testing.pki import Certs
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import SowdbError
from tests.console.conftest import TOKEN
from tests.console.wire import Stream, WireError, connect_error, unary
from tests.support import Running, make_config, serving, sowd_command, start_sowd

LIST_TOPICS = "/sowdb.v1.SowService/ListTopics"
SOW_AND_SUBSCRIBE = "/sowdb.v1.SowService/SowAndSubscribe"


def _get(url: str, context: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10, context=context) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.mark.parametrize("value", ["9080", "localhost", "127.0.0.1:99999", ":x", 9080])
def test_a_bad_http_listen_is_a_config_error_naming_the_entry(value: object) -> None:
    with pytest.raises(ConfigError, match=r"\[server\].*http_listen"):
        config_from_dict({"server": {"http_listen": value}}, source="sowd.toml")


def test_http_listen_is_off_unless_set() -> None:
    assert config_from_dict({}, source="sowd.toml").server.http_listen == ""
    cfg = config_from_dict({"server": {"http_listen": "127.0.0.1:9080"}}, source="sowd.toml")
    assert cfg.server.http_listen == "127.0.0.1:9080"


async def test_an_http_port_in_use_is_refused_before_the_store_is_opened(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        in_use = rf"cannot listen on {address} \(http_listen\): the address is already in use"
        # serving() stops nothing when the start fails: the server lets go of what it took itself
        with pytest.raises(OSError, match=in_use):
            async with serving(make_config(tmp_path / "data", http_listen=address)):
                pass
    # nothing was kept: the data directory opens, and the port is free again
    async with serving(make_config(tmp_path / "data", http_listen=address)):
        pass


async def test_the_page_and_its_assets_are_served_with_a_strict_policy(console: Running) -> None:
    status, headers, body = await asyncio.to_thread(_get, console.console_url)
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    assert b'<script type="module" src="console.js">' in body
    assert "default-src 'self'" in headers["content-security-policy"]
    for asset, kind in (("console.js", "text/javascript"), ("console.css", "text/css")):
        status, headers, body = await asyncio.to_thread(_get, console.console_url + asset)
        assert (status, headers["content-type"].split(";")[0]) == (200, kind)
        assert body
    status, _, _ = await asyncio.to_thread(_get, console.console_url + "nothing-here")
    assert status == 404


async def test_list_topics_over_connect_is_the_servers_answer(console: Running) -> None:
    await console.client.publish("orders", [{"orderId": i} for i in range(7)])
    status, body = await asyncio.to_thread(unary, console.console_url, LIST_TOPICS, pb.ListTopicsRequest())
    assert status == 200
    topics = {t.name: t.record_count for t in pb.ListTopicsResponse.FromString(body).topics}
    assert topics == {t.name: t.record_count for t in await console.client.list_topics()}
    assert topics["orders"] == 7


@pytest.mark.parametrize("protocol", ["connect", "grpc-web"])
async def test_a_bad_filter_arrives_with_its_status_and_details(console: Running, protocol: str) -> None:
    request = pb.SowAndSubscribeRequest(query=pb.SowRequest(topic="orders", filter="/qty >"))
    stream = await asyncio.to_thread(Stream, console.console_url, SOW_AND_SUBSCRIBE, request, protocol=protocol)
    try:
        error = await asyncio.to_thread(stream.next)
    finally:
        stream.close()
    assert isinstance(error, WireError)
    with pytest.raises(SowdbError) as direct:  # the same call on the gRPC port
        async for _ in console.client.sow("orders", filter="/qty >"):
            pass
    assert error.code in ("invalid_argument", "3")
    assert error.message == direct.value.message
    assert error.bad_request.field_violations[0].field == "filter"
    assert error.error_info.metadata["column"] == str(direct.value.column)


async def test_a_live_page_streams_over_connect_and_ends_with_the_browser(console: Running) -> None:
    await console.client.publish("orders", [{"orderId": i} for i in (1, 2, 5, 7)])
    query = pb.SowRequest(topic="orders", order_by="/orderId", top_n=2, skip_n=1)
    request = pb.SowAndSubscribeRequest(query=query, options=pb.SubscriptionOptions(oof=True))
    stream = await asyncio.to_thread(Stream, console.console_url, SOW_AND_SUBSCRIBE, request)
    try:
        events: list[pb.SowAndSubscribeResponse] = []
        while not events or events[-1].WhichOneof("event") != "group_end":
            frame = await asyncio.to_thread(stream.next)
            assert isinstance(frame, bytes), frame
            events.append(pb.SowAndSubscribeResponse.FromString(frame))
        window = [json.loads(r.data)["orderId"] for e in events if e.HasField("records") for r in e.records.records]
        assert window == [2, 5]  # P-1's seed example
        engine = console.server.engine
        assert engine is not None
        assert len(engine.hub.subs) == 1
        await console.client.publish("orders", [{"orderId": 4}])
        live: list[tuple[str, int]] = []
        while len(live) < 2:
            frame = await asyncio.to_thread(stream.next)
            assert isinstance(frame, bytes), frame
            event = pb.SowAndSubscribeResponse.FromString(frame)
            if event.HasField("publish"):
                live += [("publish", json.loads(r.data)["orderId"]) for r in event.publish.records]
            elif event.HasField("oof"):
                live.append(("oof", json.loads(event.oof.record.data)["orderId"]))
        assert sorted(live) == [("oof", 5), ("publish", 4)]
    finally:
        stream.close()
    async with asyncio.timeout(5):  # the browser went: its subscription goes too
        while engine.hub.subs:  # noqa: ASYNC110  # the hub has no event for its last subscription leaving
            await asyncio.sleep(0.02)


async def test_the_token_goes_through_to_the_servers_own_check(secured: Running) -> None:
    url = secured.console_url
    status, body = await asyncio.to_thread(unary, url, LIST_TOPICS, pb.ListTopicsRequest())
    error = connect_error(json.loads(body))
    assert (status, error.code) == (401, "unauthenticated")
    assert "needs a token" in error.message
    status, body = await asyncio.to_thread(unary, url, LIST_TOPICS, pb.ListTopicsRequest(), "wrong")
    assert connect_error(json.loads(body)).code == "unauthenticated"
    status, body = await asyncio.to_thread(unary, url, LIST_TOPICS, pb.ListTopicsRequest(), TOKEN)
    assert status == 200
    assert [t.name for t in pb.ListTopicsResponse.FromString(body).topics] == ["orders"]
    request = pb.SowAndSubscribeRequest(query=pb.SowRequest(topic="secrets"))
    stream = await asyncio.to_thread(Stream, url, SOW_AND_SUBSCRIBE, request, token=TOKEN)
    denied = await asyncio.to_thread(stream.next)
    stream.close()
    assert isinstance(denied, WireError)
    assert denied.code == "permission_denied"
    assert "secrets" in denied.message


@pytest.mark.parametrize("mutual", [False, True])
async def test_the_console_takes_the_grpc_ports_tls(tmp_path: Path, certs: Certs, mutual: bool) -> None:
    """With ``tls_cert`` the page is served over HTTPS with the same certificate; with
    ``client_ca`` a browser without a certificate signed by it is turned away."""
    security = {"tls_cert": certs["server.pem"], "tls_key": certs["server.key"]}
    if mutual:
        security["client_ca"] = certs["ca.pem"]
    raw = {
        "topic": [{"name": "orders", "key": ["/id"]}],
        "server": {"listen": "127.0.0.1:0", "http_listen": "127.0.0.1:0", "data_dir": str(tmp_path / "data")},
        "security": security,
    }
    async with serving(config_from_dict(raw, source="sowd.toml")) as server:
        assert server.console is not None
        url = server.console.url
        assert url.startswith("https://127.0.0.1:")
        trusting = ssl.create_default_context(cafile=certs["ca.pem"])
        if mutual:
            # refused in the handshake, or (TLS 1.3) the connection closed right after it
            with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionResetError)):
                await asyncio.to_thread(_get, url, trusting)
            trusting.load_cert_chain(certs["client.pem"], certs["client.key"])
        status, _, body = await asyncio.to_thread(_get, url, trusting)
        assert status == 200
        assert b"console.js" in body


def test_sowd_serves_the_console_at_the_address_it_prints(tmp_path: Path) -> None:
    sowd = start_sowd(tmp_path / "data", "--http-listen", "127.0.0.1:0")
    try:
        assert "; console http://127.0.0.1:" in sowd.banner
        url = sowd.banner.rsplit("console ", 1)[1]
        status, _, body = _get(url)
        assert status == 200
        assert b"sowdb console" in body
    finally:
        code, _ = sowd.stop()
    assert code == 0


def test_a_bad_http_listen_flag_stops_sowd_in_one_line(tmp_path: Path) -> None:
    run = sowd_command("--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0", "--http-listen", "9080")
    assert run.returncode == 2
    assert (
        run.stderr.strip().splitlines()[-1]
        == "sowd: invalid config: --http-listen: '9080' is not HOST:PORT (e.g. '127.0.0.1:9007')"
    )
