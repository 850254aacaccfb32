#!/usr/bin/env python3
"""What security costs (issue 19): ``make bench``'s publish and query figures and the
subscription latency with security off, and on — TLS on the port, a Bearer token on every call
and a row entitlement (a role ``filter``) ANDed into every read — in alternating rounds, each on
a fresh ``sowd`` process, so that the machine's drift between runs hits both the same.

The entitlement (``/price >= 0``) lets every order through, so that both modes read and send the
same records and the difference is the work of security alone: the handshake, the token check,
the encryption, and the filter evaluated on each record.

Usage: ``python tools/bench/bench_security.py [--orders 200000] [--rounds 3] [--latency-only]
[--baseline DIR]`` (``DIR``: another checkout, e.g. the previous commit exported with ``git
archive``, whose ``server/`` runs as modes ``base-off`` and ``base-on``)
(``make bench-security``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from sowdb.auth import hash_token
from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client import Client, Tls

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternating import alternate, fresh_sowd, print_medians  # sibling scripts, not a package
from bench_server import BENCH_CONFIG_TOML, _orders, _settle
from bench_subscriptions import paced_messages

_SPAWN = multiprocessing.get_context("spawn")
TOKEN = "bench-token-0123456789"
ENTITLEMENT = "/price >= 0"
READER_ROWS = "/side = 'B'"
"""What the ``--attacks`` reader may see: the buy side; the sell side's rows are hidden to it."""
ATTACK_TOKENS = {"reader": "bench-reader-0123456789", "admin": "bench-admin-0123456789"}
SECURITY_TOML = f"""
[security]
tls_cert = "server.pem"
tls_key = "server.key"
users_file = "users.toml"

[[role]]
name = "bench"
read = [".*"]
write = [".*"]
filter = "{ENTITLEMENT}"

[[role]]
name = "reader"
read = ["orders"]
filter = "{READER_ROWS}"

[[role]]
name = "admin"
read = [".*"]
write = [".*"]
admin = true
"""


def _pki(directory: Path) -> None:
    """A self-signed certificate for 127.0.0.1 and a users file with one token user."""
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", "server.key", "-out", "server.pem"],
        cwd=directory, check=True, capture_output=True,
    )  # fmt: skip
    users = {"bench": TOKEN, **ATTACK_TOKENS}
    (directory / "users.toml").write_text(
        "".join(
            f'[[user]]\nname = "{u}"\ntoken_sha256 = "{hash_token(t)}"\nroles = ["{u}"]\n' for u, t in users.items()
        )
    )


class Mode:
    """One way of running the server and connecting to it: plain, or secured."""

    def __init__(self, secure: bool, pki: Path, baseline: str | None = None) -> None:
        self.secure = secure
        self.pki = pki
        self.name = ("base-" if baseline else "") + ("on" if secure else "off")
        self.env = {"PYTHONPATH": str(Path(baseline) / "server")} if baseline else None

    def config(self, directory: Path) -> Path:
        path = directory / "sowd.toml"
        text = BENCH_CONFIG_TOML
        if self.secure:
            for name in ("server.pem", "server.key", "users.toml"):
                (directory / name).write_bytes((self.pki / name).read_bytes())
            text += SECURITY_TOML
        path.write_text(text)
        return path

    def client(self, target: str, user: str = "bench") -> Client:
        if not self.secure:
            return Client(target)
        token = ATTACK_TOKENS.get(user, TOKEN)
        return Client(target, token=token, tls=Tls(ca=str(self.pki / "server.pem")))

    def channel(self, target: str) -> grpc.aio.Channel:
        if not self.secure:
            return grpc.aio.insecure_channel(target)
        ca = (self.pki / "server.pem").read_bytes()
        return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(ca))

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {TOKEN}"),) if self.secure else ()


def _median_query(c: Client, rounds: int, flt: str) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in c.sow("orders", filter=flt, batch_size=100):
            pass
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def server_figures(mode: Mode, orders: list[bytes], rounds: int) -> dict[str, float]:
    """``make bench``'s figures: publish msg/s, query-range and query-eq ms."""
    with fresh_sowd(mode.config, mode.env) as (proc, target), mode.client(target) as c:
        start = time.perf_counter()
        c.publish("orders", orders, batch_size=100)
        publish = len(orders) / (time.perf_counter() - start)
        _settle(proc.pid)
        c.sow("orders", filter="/orderId = 1", batch_size=1)  # warm the connection
        return {
            "publish msg/s": publish,
            "query-range ms": _median_query(c, rounds, "/price > 190 AND /side = 'B'") * 1000,
            "query-eq ms": _median_query(c, rounds * 4, "/symbol = 'SYM42'") * 1000,
        }


def _publish_paced(secure: bool, pki: str, target: str, rate: float, seconds: float) -> None:
    with Mode(secure, Path(pki)).client(target) as c:
        c.publish("orders", paced_messages(rate, seconds), batch_size=1)


async def _latency(mode: Mode, target: str, seconds: float) -> tuple[float, float]:
    """10 subscribers, one publisher at 2,000 msg/s: publish -> receive p50, p99 (ms)."""
    lat: list[float] = []

    async def subscriber(ready: asyncio.Event) -> None:
        async with mode.channel(target) as channel:
            call = channel.unary_stream("/sowdb.v1.SowService/Subscribe", response_deserializer=lambda b: b)(
                pb.SubscribeRequest(topic="orders").SerializeToString(), metadata=mode.metadata()
            )
            await call.read()  # subscribed
            ready.set()
            while (data := await call.read()) is not grpc.aio.EOF:
                now = time.monotonic_ns()
                for r in pb.SubscribeResponse.FromString(data).publish.records:
                    lat.append((now - json.loads(r.data)["t"]) / 1e6)

    readies = [asyncio.Event() for _ in range(10)]
    tasks = [asyncio.create_task(subscriber(r)) for r in readies]
    await asyncio.gather(*(r.wait() for r in readies))
    proc = _SPAWN.Process(target=_publish_paced, args=(mode.secure, str(mode.pki), target, 2000, seconds))
    proc.start()
    while proc.is_alive():
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.5)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    lat = lat[len(lat) // 10 :]  # the first tenth: connection warm-up
    q = statistics.quantiles(lat, n=100)
    return q[49], q[98]


def latency_figures(mode: Mode, seconds: float) -> dict[str, float]:
    with fresh_sowd(mode.config, mode.env) as (_, target):
        p50, p99 = asyncio.run(_latency(mode, target, seconds))
        return {"latency p50 ms": p50, "latency p99 ms": p99}


LIKES = " OR ".join(f"/symbol LIKE '%{i}x%'" for i in range(200))
"""Issue 37, finding 7: 200 ``LIKE`` patterns in one query (none matches)."""


def _likes_forever(pki: str, target: str) -> None:
    """The reader's costly queries, one after another, until terminated."""
    with Mode(True, Path(pki)).client(target, "reader") as c:
        while True:
            for _ in c.sow("orders", filter=f"/side = 'B' AND ({LIKES})"):
                pass


def _point_p50(c: Client, flt: str, seconds: float) -> float:
    """The median time of one query of ``flt`` (ms), repeated for ``seconds``."""
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        for _ in c.sow("orders", filter=flt, batch_size=1):
            pass
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def attack_figures(mode: Mode, orders: list[bytes], seconds: float) -> dict[str, float]:
    """Issue 37's attacks by the restricted ``reader`` (it sees ``/side = 'B'``) and what they
    cost the ``admin``: its point query alone and beside the reader's 200-``LIKE`` queries; its
    publish of 1,000 orders without and with 256 idle subscriptions of the reader; and the
    reader's point query with a costly term of a hidden key and of an absent one (equal: the
    term never runs on a row the reader may not see)."""
    figures: dict[str, float] = {}
    with fresh_sowd(mode.config, mode.env) as (proc, target), mode.client(target, "admin") as admin:
        admin.publish("orders", orders, batch_size=100)
        _settle(proc.pid)
        hidden = next(d["orderId"] for o in orders if (d := json.loads(o))["side"] != "B")
        figures["admin point ms"] = _point_p50(admin, "/orderId = 7", seconds)
        likes = _SPAWN.Process(target=_likes_forever, args=(str(mode.pki), target), daemon=True)
        likes.start()
        time.sleep(1.0)
        figures["admin point, LIKEs ms"] = _point_p50(admin, "/orderId = 7", seconds)
        likes.terminate()
        likes.join()
        batch = [json.dumps({**json.loads(o), "orderId": 10_000_000 + i}).encode() for i, o in enumerate(orders[:1000])]

        def publish_ms() -> float:
            start = time.perf_counter()
            admin.publish("orders", batch, batch_size=100)
            return (time.perf_counter() - start) * 1000

        figures["publish 1k ms"] = statistics.median(publish_ms() for _ in range(5))
        with mode.client(target, "reader") as reader:
            streams = [reader.subscribe("orders", filter=f"/orderId = {-1 - i}") for i in range(256)]
            for stream in streams:
                next(iter(stream))  # subscribed
            figures["publish 1k, 256 subs ms"] = statistics.median(publish_ms() for _ in range(5))
            for stream in streams:
                stream.cancel()
            costly = "LENGTH(REPLACE(/symbol, 'S', 'SSSSSSSSSS')) > 0 AND " + LIKES.replace(" OR ", " AND ")
            figures["hidden key ms"] = _point_p50(reader, f"/orderId = {hidden} AND {costly}", seconds / 2)
            figures["absent key ms"] = _point_p50(reader, f"/orderId = -5 AND {costly}", seconds / 2)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3, help="alternating off/on rounds")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--baseline", help="another checkout whose server/ runs as modes base-off and base-on")
    parser.add_argument("--latency-only", action="store_true", help="only the subscription latency")
    parser.add_argument(
        "--attacks", action="store_true", help="issue 37's attacks, secured only (beside --baseline's build)"
    )
    parser.add_argument("--attack-seconds", type=float, default=5.0)
    args = parser.parse_args()
    if args.attacks:
        attacks(args)
        return
    orders = [] if args.latency_only else _orders(args.orders)
    with tempfile.TemporaryDirectory(prefix="sowdb-pki-") as pki_dir:
        pki = Path(pki_dir)
        _pki(pki)
        builds = [None, args.baseline] if args.baseline else [None]
        modes = {m.name: m for m in (Mode(secure, pki, b) for secure in (False, True) for b in builds)}

        def measure(name: str) -> dict[str, float]:
            server = {} if args.latency_only else server_figures(modes[name], orders, 5)
            return server | latency_figures(modes[name], args.latency_seconds)

        runs = alternate(list(modes), args.rounds, measure, label="security ")
    print_medians(
        runs, f"medians of {args.rounds} alternating rounds, {args.orders:,} orders (on: TLS + token + {ENTITLEMENT!r})"
    )


def attacks(args: argparse.Namespace) -> None:
    orders = _orders(min(args.orders, 20_000))
    with tempfile.TemporaryDirectory(prefix="sowdb-pki-") as pki_dir:
        pki = Path(pki_dir)
        _pki(pki)
        builds = [None, args.baseline] if args.baseline else [None]
        modes = {m.name: m for m in (Mode(True, pki, b) for b in builds)}
        runs = alternate(
            list(modes), args.rounds, lambda name: attack_figures(modes[name], orders, args.attack_seconds), "attacks "
        )
    print_medians(runs, f"issue 37's attacks: medians of {args.rounds} alternating rounds, {len(orders):,} orders")


if __name__ == "__main__":
    main()
