"""The TCP fault proxy of the cluster's tests and soaks: put it between a node and etcd, or
between two nodes, and make the link slow, silent or broken on demand.

It runs its own event loop in a thread, so that it keeps its behaviour whatever the code under
test does with its own loop (a test may even block it), and so that synchronous soaks can use it.

Modes:
    forward: bytes pass both ways, each chunk after ``delay`` seconds (0: at once).
    blackhole: connections are accepted and kept open, and no byte passes, either way — a
        partition as the peers see it: no error, no answer. What was sent meanwhile is held,
        not dropped, and flows once the mode is ``forward`` again, as TCP's retransmissions
        deliver it when a real partition heals.
    cut: open connections are closed and new ones are closed as soon as they are accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from typing import Literal

Mode = Literal["forward", "blackhole", "cut"]


class FaultProxy:
    """``127.0.0.1:port`` forwarding to ``target_host:target_port``, with faults on demand."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.mode: Mode = "forward"
        self.delay = 0.0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="faultproxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._flowing: asyncio.Event | None = None  # set unless blackholed; made in the thread

    def start(self) -> int:
        """Listen on a free port of 127.0.0.1; returns it."""
        self._thread.start()
        self._flowing = asyncio.run_coroutine_threadsafe(self._make_flowing(), self._loop).result()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._accept, "127.0.0.1", 0), self._loop
        ).result()
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def set(self, mode: Mode, delay: float = 0.0) -> None:
        """Switch to ``mode`` (``cut`` also closes every open connection), in effect on return: a
        test may then take the moment as the fault's start."""
        self.mode, self.delay = mode, delay
        asyncio.run_coroutine_threadsafe(self._applied(), self._loop).result(timeout=5)

    async def _applied(self) -> None:
        self._apply()

    def _apply(self) -> None:
        assert self._flowing is not None
        if self.mode == "blackhole":
            self._flowing.clear()
        else:
            self._flowing.set()
        if self.mode == "cut":
            self._close_all()

    @staticmethod
    async def _make_flowing() -> asyncio.Event:
        flowing = asyncio.Event()
        flowing.set()
        return flowing

    def stop(self) -> None:
        """Close everything and end the thread."""

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            self._close_all()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def _close_all(self) -> None:
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "cut":
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                assert self._flowing is not None
                await self._flowing.wait()  # held while blackholed
                if self.delay:
                    await asyncio.sleep(self.delay)
                if writer.is_closing():
                    break
                writer.write(chunk)
                await writer.drain()
        writer.close()


@contextlib.contextmanager
def fault_proxy(target_host: str, target_port: int) -> Iterator[FaultProxy]:
    """A started :class:`FaultProxy`, stopped on exit."""
    proxy = FaultProxy(target_host, target_port)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


def main(argv: list[str]) -> int:
    """``python -m sowdb.testing.faultproxy --target HOST:PORT``: the proxy for another
    language's tests (the Node, Go and Java SDKs'), so that every test of the project injects a
    network fault one way. Prints ``proxy listening on 127.0.0.1:PORT``; each stdin line sets the
    mode (``forward [DELAY_S]``, ``blackhole``, ``cut``) and is answered ``ok MODE`` once applied;
    the proxy stops when stdin closes or on SIGTERM."""
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(prog="python -m sowdb.testing.faultproxy", description=main.__doc__)
    parser.add_argument("--target", required=True, help="HOST:PORT to forward to")
    args = parser.parse_args(argv)
    host, _, port = args.target.rpartition(":")
    proxy = FaultProxy(host or "127.0.0.1", int(port))
    proxy.start()
    signal.signal(signal.SIGTERM, lambda *_: sys.stdin.close())
    print(f"proxy listening on 127.0.0.1:{proxy.port}", flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if not words or words[0] not in ("forward", "blackhole", "cut"):
                print(f"error: expected forward [DELAY_S], blackhole or cut, got {line.strip()!r}", flush=True)
                continue
            mode: Mode = words[0]  # type: ignore[assignment]
            proxy.set(mode, float(words[1]) if len(words) > 1 else 0.0)
            print(f"ok {mode}", flush=True)
    except ValueError:  # stdin closed under the loop by SIGTERM
        pass
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
