"""E-1, E-2 under hostile input: every malformed or extreme value gets a clear status (never
INTERNAL or UNKNOWN) and changes nothing — each case through the real server, then the raw
API driven with arbitrary strings and numbers in every field (Hypothesis)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from tests.support import Process, Running, make_config, serving

if TYPE_CHECKING:  # the asyncio stub's type exists in the generated stubs only
    from sowdb_api.v1.sow_pb2_grpc import SowServiceAsyncStub

BAD = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}


async def _state(s: Running) -> list[tuple[str, int]]:
    return sorted((r.sow_key, r.bookmark) for r in await s.client.sow("orders", batch_size=1000).records())


async def _sow_status(stub: SowServiceAsyncStub, req: pb.SowRequest) -> tuple[grpc.StatusCode, str]:
    try:
        async for _ in stub.Sow(req):
            pass
    except grpc.aio.AioRpcError as err:
        return err.code(), err.details() or ""
    return grpc.StatusCode.OK, ""


async def _publish_status(stub: SowServiceAsyncStub, req: pb.PublishRequest) -> tuple[int, str]:
    responses = [r async for r in stub.Publish(iter([req]))]
    (resp,) = responses
    return resp.error.code, resp.error.message


@pytest.mark.parametrize(
    ("request_fields", "code", "words"),
    [
        ({"bookmark": "\u00b2"}, grpc.StatusCode.INVALID_ARGUMENT, "not a sequence number"),
        ({"bookmark": "1" * 30}, grpc.StatusCode.INVALID_ARGUMENT, "bookmark"),
        ({"topic": "(" * 10_000}, grpc.StatusCode.INVALID_ARGUMENT, "topic"),
        ({"topic": "^(a|" + "b" * 3000 + ")$", "filter": "/x LIKE '" + "(" * 3000 + "'"}, None, None),
        ({"filter": "/x = " + "9" * 5000}, grpc.StatusCode.INVALID_ARGUMENT, "column"),
    ],
)
async def test_bad_query_values_are_clear_errors(
    sowd: Running, request_fields: dict[str, Any], code: grpc.StatusCode | None, words: str | None
) -> None:
    fields = {"topic": "book", **request_fields}  # book keeps history: bookmarks are read
    async with grpc.aio.insecure_channel(sowd.target) as channel:
        got, details = await _sow_status(sow_pb2_grpc.SowServiceStub(channel), pb.SowRequest(**fields))
    assert got not in BAD, details
    if code is not None:
        assert got == code
        assert words is not None
        assert words in details
    assert len(details) <= 2048  # an echoed value is cut: the client's metadata limit is 8 KB


async def test_a_key_field_value_of_70k_characters_is_refused(tmp_path: Path) -> None:
    async with (
        serving(make_config(tmp_path / "data")) as server,  # the default limits let a 70 KB document in
        grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel,
    ):
        stub = sow_pb2_grpc.SowServiceStub(channel)
        doc = json.dumps({"orderId": "k" * 70_000}).encode()
        request = pb.PublishRequest(topic="orders", messages=[pb.PublishMessage(data=doc)])
        code, message = await _publish_status(stub, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "SowKey of 70002 characters" in message


async def test_an_expiration_of_2_to_the_62_seconds_is_refused(sowd: Running) -> None:
    msg = pb.PublishMessage(data=b'{"orderId": 1}')
    msg.expiration.seconds = 2**62
    async with grpc.aio.insecure_channel(sowd.target) as channel:
        code, message = await _publish_status(
            sow_pb2_grpc.SowServiceStub(channel), pb.PublishRequest(topic="orders", messages=[msg])
        )
    assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "expiration" in message
    assert await _state(sowd) == []


async def test_integer_keys_beyond_the_exact_range_are_refused_not_collapsed(sowd: Running) -> None:
    """10^29 and 10^29 + 1 decode to the same float: as keys they would be one record, the
    second silently replacing the first. Keys must be exact, or refused."""
    async with grpc.aio.insecure_channel(sowd.target) as channel:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        for value in (10**29, 10**29 + 1, 2**64, -(2**63) - 5):  # beyond 64 bits: JSON decoding gives floats
            doc = b'{"orderId": %d}' % value
            code, message = await _publish_status(
                stub, pb.PublishRequest(topic="orders", messages=[pb.PublishMessage(data=doc)])
            )
            assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0], value
            assert "/orderId" in message
            assert "string" in message
    exact = [2**53 + 1, 2**64 - 1, -(2**63), str(10**29), str(10**29 + 1)]  # 64-bit integers and strings are exact
    await sowd.client.publish("orders", [{"orderId": v} for v in exact])
    assert len(await _state(sowd)) == 5


async def test_invalid_utf8_in_a_string_field_is_invalid_argument(sowd: Running) -> None:
    """A protobuf string field must be UTF-8; a request that is not is refused as malformed."""
    bad_topic = b"\x0a\x02\xff\xfe"  # SowRequest / PublishRequest field 1 (topic): 2 bytes, not UTF-8
    async with grpc.aio.insecure_channel(sowd.target) as channel:
        raw_sow: Any = channel.unary_stream("/sowdb.v1.SowService/Sow")  # bytes in and out: no (de)serializer
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in raw_sow(bad_topic):
                pass
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "UTF-8" in (err.value.details() or "")
        raw_publish: Any = channel.stream_stream("/sowdb.v1.SowService/Publish")
        good = pb.PublishRequest(topic="orders", messages=[pb.PublishMessage(data=b'{"orderId": 5}')])
        responses = [
            pb.PublishResponse.FromString(r) async for r in raw_publish(iter([bad_topic, good.SerializeToString()]))
        ]
    assert [r.error.code for r in responses] == [grpc.StatusCode.INVALID_ARGUMENT.value[0], 0]  # the stream goes on
    assert await _state(sowd) == [("5", 1)]


_TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)  # protobuf strings are UTF-8
_NAMES = st.one_of(
    st.sampled_from(["orders", "prices", "notes", "quotes", "orders_by_symbol", "orders_5s", "^(orders|prices)$"]),
    _TEXT,
)
_U32 = st.one_of(st.none(), st.integers(0, 2**32 - 1))
_EXPR = st.one_of(_TEXT, st.sampled_from(["/price > 1", "/a = 'x' AND /b IN (1, 2)", "UPPER(/s) LIKE '^A'", "/x"]))
_BOOKMARK = st.one_of(_TEXT, st.sampled_from(["0", "now", "1", "20261121T143000Z", str(2**64), "-1"]))


def _duration(draw: st.DrawFn) -> Any:
    from google.protobuf import duration_pb2

    return duration_pb2.Duration(
        seconds=draw(st.integers(-(2**62), 2**62)), nanos=draw(st.integers(-999_999_999, 999_999_999))
    )


@st.composite
def _query(draw: st.DrawFn) -> pb.SowRequest:
    req = pb.SowRequest(
        topic=draw(_NAMES),
        filter=draw(_EXPR),
        sow_keys=draw(st.lists(_TEXT, max_size=3)),
        query_id=draw(_TEXT),
        order_by=draw(st.one_of(_TEXT, st.sampled_from(["/price DESC", "/a, /b DESC"]))),
        bookmark=draw(st.one_of(st.just(""), _BOOKMARK)),
        grouping=draw(st.lists(_EXPR, max_size=2)),
        projection=draw(st.lists(_EXPR, max_size=2)),
        select=draw(st.one_of(_TEXT, st.just("[-/,+/a]"))),
    )
    for name in ("top_n", "skip_n", "batch_size"):
        value = draw(_U32)
        if value is not None:
            setattr(req, name, value)
    return req


@st.composite
def _options(draw: st.DrawFn) -> pb.SubscriptionOptions:
    opts = pb.SubscriptionOptions(
        oof=draw(st.booleans()), delta=draw(st.booleans()), no_empties=draw(st.booleans()),
        conflation_key=draw(st.lists(_TEXT, max_size=2)),
    )  # fmt: skip
    if draw(st.booleans()):
        opts.conflation.CopyFrom(_duration(draw))
    return opts


@st.composite
def _publish(draw: st.DrawFn) -> pb.PublishRequest:
    docs = st.one_of(
        st.binary(max_size=60),
        st.dictionaries(
            st.sampled_from(["orderId", "id", "symbol", "x"]), st.one_of(st.integers(), st.floats(), _TEXT)
        ).map(lambda d: json.dumps(d).encode()),
    )
    messages = []
    for _ in range(draw(st.integers(0, 3))):
        msg = pb.PublishMessage(data=draw(docs), sow_key=draw(st.one_of(st.just(""), _TEXT)))
        if draw(st.booleans()):
            msg.expiration.CopyFrom(_duration(draw))
        messages.append(msg)
    return pb.PublishRequest(
        topic=draw(_NAMES), messages=messages, delta=draw(st.booleans()), correlation_id=draw(_TEXT)
    )


_REQUESTS = st.one_of(
    _query(),
    _publish(),
    st.builds(
        pb.SowDeleteRequest,
        topic=_NAMES,
        filter=_EXPR,
        sow_keys=st.lists(_TEXT, max_size=2),
        data=st.binary(max_size=40),
    ),
    st.builds(pb.SubscribeRequest, topic=_NAMES, filter=_EXPR, bookmark=_BOOKMARK, options=_options(), sub_id=_TEXT),
    st.builds(pb.SowAndSubscribeRequest, query=_query(), options=_options(), sub_id=_TEXT),
    st.builds(pb.ReplaceSubscriptionRequest, sub_id=_TEXT, filter=_EXPR, options=_options(), order_by=_TEXT),
)


def _latest_bookmark(stub: sow_pb2_grpc.SowServiceStub) -> int:
    first = next(iter(stub.Sow(pb.SowRequest(topic="prices", top_n=0), timeout=10)))
    return int(first.group_begin.bookmark)


def _send(stub: sow_pb2_grpc.SowServiceStub, req: Any) -> grpc.StatusCode:
    """Send one request; the status it ended with (a stream is read until its first live event)."""
    try:
        if isinstance(req, pb.PublishRequest):
            (resp,) = list(stub.Publish(iter([req]), timeout=10))
            return grpc.StatusCode.OK if not resp.HasField("error") else _CODES[resp.error.code]
        if isinstance(req, pb.SowDeleteRequest):
            stub.SowDelete(req, timeout=10)
        elif isinstance(req, pb.ReplaceSubscriptionRequest):
            stub.ReplaceSubscription(req, timeout=10)
        else:
            if isinstance(req, pb.SowRequest):
                stream: Any = stub.Sow(req, timeout=10)
            elif isinstance(req, pb.SubscribeRequest):
                stream = stub.Subscribe(req, timeout=10)
            else:
                stream = stub.SowAndSubscribe(req, timeout=10)
            for resp in stream:
                if (
                    resp.WhichOneof("event") in ("group_end", "completed", "heartbeat", "subscribed")
                    and type(req) is not pb.SowRequest
                ):
                    stream.cancel()
                    break
    except grpc.RpcError as err:
        code: grpc.StatusCode = err.code()
        return code
    return grpc.StatusCode.OK


_CODES = {c.value[0]: c for c in grpc.StatusCode}


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])  # one server for all
@given(requests=st.lists(_REQUESTS, min_size=1, max_size=3))
def test_the_raw_api_never_answers_internal_or_unknown_and_refusals_change_nothing(
    sowd_process: Process, requests: list[Any]
) -> None:
    with grpc.insecure_channel(sowd_process.target) as channel:
        stub = sow_pb2_grpc.SowServiceStub(channel)
        for req in requests:
            before = _latest_bookmark(stub)
            code = _send(stub, req)
            assert code not in BAD, req
            if code not in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED):
                assert _latest_bookmark(stub) == before, req  # a refused request changed nothing
    assert sowd_process.proc.poll() is None  # and the server is still up
