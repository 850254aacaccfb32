"""The gateway's Connect JSON (SPEC §12): what ``curl -H 'Content-Type: application/json'`` gets.

Unary calls as ``application/json``, streams as ``application/connect+json``, each the same
call as on the gRPC port: the same answer, the same token check and the same errors (code,
message and the rich details), a field the message does not have refused, and a 415 whose
``Accept-Post`` names only what the gateway takes.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import SowdbError
from tests.console.conftest import TOKEN
from tests.console.wire import connect_error, frames, post, read_frames
from tests.support import Running

LIST_TOPICS = "/sowdb.v1.SowService/ListTopics"
SOW = "/sowdb.v1.SowService/Sow"
PUBLISH = "/sowdb.v1.SowService/Publish"
SOW_DELETE = "/sowdb.v1.SowService/SowDelete"
JSON = "application/json"
STREAM_JSON = "application/connect+json"


async def _post(
    url: str, path: str, body: bytes, content_type: str = JSON, token: str = ""
) -> tuple[int, dict[str, str], bytes]:
    return await asyncio.to_thread(post, url, path, body, content_type, token)


async def test_list_topics_in_json_is_the_servers_answer(console: Running) -> None:
    await console.client.publish("orders", [{"orderId": i} for i in range(3)])
    status, headers, body = await _post(console.console_url, LIST_TOPICS, b"{}")
    assert (status, headers["content-type"]) == (200, JSON)
    topics = {t["name"]: int(t.get("recordCount", "0")) for t in json.loads(body)["topics"]}
    assert topics == {t.name: t.record_count for t in await console.client.list_topics()}
    assert topics["orders"] == 3
    status, _, empty = await _post(console.console_url, LIST_TOPICS, b"")  # no body: the empty message
    assert (status, json.loads(empty)) == (200, json.loads(body))


async def test_publish_and_sow_stream_as_connect_json(console: Running) -> None:
    records = [{"orderId": 1, "symbol": "ABC"}, {"orderId": 2, "symbol": "XYZ"}]
    request = {
        "topic": "orders",
        "messages": [{"data": base64.b64encode(json.dumps(r).encode()).decode()} for r in records],
    }
    status, headers, body = await _post(console.console_url, PUBLISH, frames(request), STREAM_JSON)
    assert (status, headers["content-type"]) == (200, STREAM_JSON)
    acks, end = read_frames(body)
    assert end == {}
    assert [(a["firstBookmark"], a["lastBookmark"]) for a in acks] == [("1", "2")]
    assert [r.json() async for r in console.client.sow("orders")] == records  # stored, as the gRPC port sees it

    query = {"topic": "orders", "filter": "/symbol = 'XYZ'"}
    status, _, body = await _post(console.console_url, SOW, frames(query), STREAM_JSON)
    events, end = read_frames(body)
    assert (status, end) == (200, {})
    assert [next(iter(e)) for e in events] == ["groupBegin", "records", "groupEnd"]
    (record,) = events[1]["records"]["records"]
    assert (record["sowKey"], json.loads(base64.b64decode(record["data"]))) == ("2", records[1])
    assert events[2]["groupEnd"]["recordsReturned"] == "1"


async def test_a_bad_filter_is_the_grpc_error_with_its_details(console: Running) -> None:
    await console.client.publish("orders", [{"orderId": 1, "qty": 5}])
    status, headers, body = await _post(console.console_url, SOW_DELETE, b'{"topic":"orders","filter":"/qty >"}')
    assert (status, headers["content-type"]) == (400, JSON)
    error = connect_error(json.loads(body))
    with pytest.raises(SowdbError) as direct:  # the same call on the gRPC port
        await console.client.sow_delete("orders", filter="/qty >")
    assert (error.code, error.message) == ("invalid_argument", direct.value.message)
    assert error.bad_request.field_violations[0].field == "filter"
    assert error.error_info.metadata["column"] == str(direct.value.column)
    # in a stream, the error is the end frame's
    status, _, body = await _post(
        console.console_url, SOW, frames({"topic": "orders", "filter": "/qty >"}), STREAM_JSON
    )
    events, end = read_frames(body)
    assert (status, events) == (200, [])
    assert connect_error(end["error"]).message == direct.value.message
    assert [r.json() async for r in console.client.sow("orders")] == [{"orderId": 1, "qty": 5}]  # nothing deleted


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"topic":"orders","filtr":"/qty > 1"}', 'no field named "filtr"'),
        (b'{"topic": 7}', "topic"),
        (b"{not json", "unmarshal message"),
    ],
)
async def test_json_that_is_not_the_message_is_refused_and_changes_nothing(
    console: Running, body: bytes, says: str
) -> None:
    await console.client.publish("orders", [{"orderId": 1, "qty": 5}])
    status, _, answer = await _post(console.console_url, SOW_DELETE, body)
    error = connect_error(json.loads(answer))
    assert (status, error.code) == (400, "invalid_argument")
    assert says in error.message
    assert [r.json() async for r in console.client.sow("orders")] == [{"orderId": 1, "qty": 5}]


async def test_accept_post_names_exactly_what_the_gateway_takes(console: Running) -> None:
    status, headers, _ = await _post(console.console_url, LIST_TOPICS, b"{}", "text/plain")
    assert status == 415
    offered = [t.strip() for t in headers["accept-post"].split(",")]
    assert sorted(offered) == ["application/json", "application/proto"]
    for content_type in offered:  # each one it names works
        body = b"{}" if content_type == JSON else pb.ListTopicsRequest().SerializeToString()
        status, headers, _ = await _post(console.console_url, LIST_TOPICS, body, content_type)
        assert (status, headers["content-type"]) == (200, content_type)


async def test_the_token_and_the_rights_hold_for_json(secured: Running) -> None:
    url = secured.console_url
    for token in ("", "wrong"):
        status, _, body = await _post(url, LIST_TOPICS, b"{}", token=token)
        assert (status, connect_error(json.loads(body)).code) == (401, "unauthenticated")
    status, _, body = await _post(url, LIST_TOPICS, b"{}", token=TOKEN)
    assert status == 200
    assert [t["name"] for t in json.loads(body)["topics"]] == ["orders"]  # only what it may read
    status, _, body = await _post(url, SOW, frames({"topic": "secrets"}), STREAM_JSON, token=TOKEN)
    events, end = read_frames(body)
    denied = connect_error(end["error"])
    assert (status, events, denied.code) == (200, [], "permission_denied")
    assert "secrets" in denied.message
    status, _, body = await _post(url, SOW_DELETE, b'{"topic":"orders","filter":"/id = 1"}', token=TOKEN)
    assert (status, connect_error(json.loads(body)).code) == (403, "permission_denied")  # a reader may not delete
