"""Disk full (E-2, J-1): a write that cannot reach the disk refuses its request with a status
that names the cause and the data directory, the Publish stream stays open, health is
NOT_SERVING until writes can succeed again, writes resume once space is back, and nothing
acknowledged is lost — on a real small filesystem, and with an injected storage fault. The
engine's roll-back of a write reported failed: ``tests/engine/write/test_disk_full.py``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sowdb.storage.database import Database
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_api.v1 import sow_pb2_grpc
from sowdb_client import AsyncClient, ResourceExhaustedError
from tests.support import make_config, serving

if TYPE_CHECKING:  # the asyncio stub's type exists in the generated stubs only
    from sowdb_api.v1.sow_pb2_grpc import SowServiceAsyncStub

SERVICE = "sowdb.v1.SowService"


class Publisher:
    """One Publish stream whose requests are sent one at a time, each answered before the next."""

    def __init__(self, stub: SowServiceAsyncStub) -> None:
        self._requests: asyncio.Queue[pb.PublishRequest | None] = asyncio.Queue()
        self._call = stub.Publish(self._feed())
        self._n = 0

    async def _feed(self) -> AsyncIterator[pb.PublishRequest]:
        while (req := await self._requests.get()) is not None:
            yield req

    async def send(self, docs: list[bytes]) -> pb.PublishResponse:
        self._n += 1
        msgs = [pb.PublishMessage(data=d) for d in docs]
        await self._requests.put(pb.PublishRequest(topic="orders", messages=msgs, correlation_id=str(self._n)))
        resp = await asyncio.wait_for(self._call.read(), 30)
        assert isinstance(resp, pb.PublishResponse), resp  # not the end of the stream
        assert resp.correlation_id == str(self._n)
        return resp

    async def close(self) -> None:
        await self._requests.put(None)
        self._call.cancel()


async def health(target: str) -> int:
    async with grpc.aio.insecure_channel(target) as channel:
        stub: Any = health_pb2_grpc.HealthStub(channel)
        resp = await stub.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=5)
        return int(resp.status)


async def wait_health(target: str, status: int, seconds: float = 20) -> None:
    for _ in range(int(seconds / 0.1)):
        if await health(target) == status:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"health never became {status}")


def doc(i: int) -> bytes:
    return b'{"orderId": %d, "pad": "%s"}' % (i, b"x" * 180)


@contextlib.contextmanager
def small_filesystem(path: Path, megabytes: int) -> Iterator[Path]:
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)], capture_output=True)
    if done.returncode:
        pytest.skip(
            f"cannot mount a small filesystem here ({done.stderr.decode().strip()}); the injected-fault test covers"
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


async def acked_state(target: str) -> set[int]:
    async with AsyncClient(target) as c:
        return {int(r.sow_key) for r in await c.sow("orders", batch_size=10_000).records()}


async def test_a_full_disk_refuses_writes_clearly_and_they_resume_when_space_is_back(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "disk", 24) as disk:
        ballast = disk / "ballast"
        ballast.write_bytes(b"\0" * 12 * 1024 * 1024)
        data_dir = disk / "data"
        async with serving(make_config(data_dir, heartbeat_s=0.2)) as server:
            target = f"127.0.0.1:{server.port}"
            acked: set[int] = set()
            async with grpc.aio.insecure_channel(target) as channel:
                pub = Publisher(sow_pb2_grpc.SowServiceStub(channel))
                i = 0
                while True:  # publish until the disk is full
                    resp = await pub.send([doc(n) for n in range(i, i + 100)])
                    if resp.HasField("error"):
                        break
                    acked.update(range(i, i + 100))
                    i += 100
                    assert i < 1_000_000, "the disk never filled"
                assert resp.error.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
                assert "No space left" in resp.error.message
                assert str(data_dir) in resp.error.message
                again = await pub.send([doc(10**9)])  # the stream is still open: the next request is answered
                assert again.HasField("error")
                assert again.error.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
                assert await health(target) == health_pb2.HealthCheckResponse.NOT_SERVING
                assert await acked_state(target) == acked  # reads go on; memory holds exactly what was acked

                os.remove(ballast)  # space is back
                await wait_health(target, health_pb2.HealthCheckResponse.SERVING)
                resumed = await pub.send([doc(n) for n in range(i, i + 100)])
                assert not resumed.HasField("error")
                assert resumed.last_bookmark == len(acked) + 100
                acked.update(range(i, i + 100))
                await pub.close()
            assert await acked_state(target) == acked

        async with serving(make_config(data_dir)) as again_server:  # and after a restart: nothing acknowledged lost
            assert await acked_state(f"127.0.0.1:{again_server.port}") == acked
            assert again_server.engine is not None
            assert again_server.engine.last_seq == len(acked)


class _FailingDB:
    """A RocksDB handle whose writes fail like a full disk's, while ``full`` is set."""

    def __init__(self, db: Any, state: dict[str, bool]) -> None:
        self._db = db
        self._state = state

    def write(self, *args: Any, **kw: Any) -> None:
        if self._state["full"]:
            raise Exception("IO error: No space left on device: While appending to file: 000004.log")
        self._db.write(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


async def test_an_injected_write_fault_is_refused_and_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same contract without a real small filesystem: the fault is injected under the store."""
    state = {"full": False}
    opened = Database._open

    def open_db(self: Database) -> None:
        if state["full"]:
            raise Exception("IO error: No space left on device: While appending to file: 000008.sst")
        opened(self)
        self._db = _FailingDB(self._db, state)  # type: ignore[assignment]  # a stand-in for the RocksDB handle

    monkeypatch.setattr(Database, "_open", open_db)
    async with serving(make_config(tmp_path / "data", heartbeat_s=0.2)) as server:
        target = f"127.0.0.1:{server.port}"
        async with grpc.aio.insecure_channel(target) as channel:
            pub = Publisher(sow_pb2_grpc.SowServiceStub(channel))
            assert not (await pub.send([doc(1), doc(2)])).HasField("error")
            state["full"] = True
            refused = await pub.send([doc(3)])
            assert refused.error.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
            assert str(tmp_path / "data") in refused.error.message
            await wait_health(target, health_pb2.HealthCheckResponse.NOT_SERVING)
            await pub.close()
        async with AsyncClient(target) as c:
            with pytest.raises(ResourceExhaustedError) as err:  # deletes are writes too
                await c.sow_delete("orders", sow_keys=["1"])
            assert "No space left" in err.value.message
            assert await acked_state(target) == {1, 2}
            await asyncio.sleep(1.5)  # recovery attempts while still full keep failing
            assert await health(target) == health_pb2.HealthCheckResponse.NOT_SERVING
            state["full"] = False
            await wait_health(target, health_pb2.HealthCheckResponse.SERVING)
            ack = await c.publish("orders", [doc(3)])
            assert ack.first_bookmark == 3  # the refused requests used no bookmark
            assert await acked_state(target) == {1, 2, 3}
