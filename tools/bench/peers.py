#!/usr/bin/env python3
"""sowdb beside its peers in one run (SPEC §10, issue 20): PostgreSQL 15, Redis and NATS.

The dataset is ``tools/demo/make_orders.py`` (N orders, ~150 JSON bytes each). sowd runs as
``make bench`` starts it (``bench_server.py``: topic ``orders`` keyed by ``/orderId``, a
``/symbol`` hash index); PostgreSQL holds ``orders (key text primary key, data jsonb)`` with an
expression index on ``data->>'symbol'`` (``peers_pg.py``: a temporary cluster unless
``--pg-dsn`` names a server). Both clients are Python and receive every row:

- upsert N (PostgreSQL: ``INSERT … ON CONFLICT DO UPDATE``, 100 rows per statement, pipelined;
  sowdb: publish, 100 per request) and update 20 % of them; COPY into an empty table for reference;
- the queries ``/price > 190 AND /side = 'B'`` (3 %), ``/symbol = 'SYM42'`` (indexed),
  ``/trader = 't42'`` (no index), ``/orderId = 777`` (PostgreSQL: by primary key);
- memory: sowd's RSS growth over the load beside PostgreSQL's table + index size, per record
  and against the JSON bytes stored;
- with ``redis-server`` / ``nats-server`` on PATH: publish rate and publish -> subscriber latency
  beside sowdb's (``peers_pubsub.py``).

The systems alternate (sowdb, PostgreSQL, PostgreSQL, sowdb, …) for ``--rounds`` rounds, figures
are medians, and the ratios (sowdb / PostgreSQL) are printed as a Markdown table.

Usage: ``python tools/bench/peers.py [--records 1000000] [--rounds 3] [--store arena]`` (``make bench-peers``).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import orjson

from sowdb.config.model import DEFAULT_RECORD_STORE, RECORD_STORES
from sowdb_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _orders, _rss_mb, _settle, _start  # sibling scripts, not a package
from peers_pg import Postgres, find_bindir, temporary_cluster

SOWDB, PG = "sowdb", "PostgreSQL"

# (name, sowdb filter, PostgreSQL WHERE, its parameters, repetitions per round)
QUERIES: list[tuple[str, str, str, tuple[object, ...], int]] = [
    (
        "3 % range filter `/price > 190 AND /side = 'B'`",
        "/price > 190 AND /side = 'B'",
        "(data->>'price')::numeric > 190 AND data->>'side' = 'B'",
        (),
        1,
    ),
    ("indexed equality `/symbol = 'SYM42'`", "/symbol = 'SYM42'", "data->>'symbol' = %s", ("SYM42",), 5),
    ("unindexed scan `/trader = 't42'`", "/trader = 't42'", "data->>'trader' = %s", ("t42",), 1),
    ("one record by its key field `/orderId = 777`", "/orderId = 777", "key = %s", ("777",), 50),
]


def _updates(orders: list[bytes], count: int, generation: int) -> list[bytes]:
    """New versions of the first ``count`` orders (a different price and quantity each round)."""
    out = []
    for raw in orders[:count]:
        d = orjson.loads(raw)
        d["price"] += generation
        d["qty"] += 1
        out.append(orjson.dumps(d))
    return out


class Run:
    """The figures of one run: per workload and system, every measurement."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.rows: dict[str, int] = {}

    def add(self, workload: str, system: str, value: float) -> None:
        self.values[workload][system].append(value)

    def median(self, workload: str, system: str) -> float | None:
        v = self.values[workload].get(system)
        return statistics.median(v) if v else None


def _order(round_no: int) -> tuple[str, str]:
    return (SOWDB, PG) if round_no % 2 == 0 else (PG, SOWDB)


def _sowdb_query(c: Client, flt: str, batch_size: int) -> tuple[float, int]:
    start = time.perf_counter()
    n = sum(1 for _ in c.sow("orders", filter=flt, batch_size=batch_size))
    return time.perf_counter() - start, n


def run_sowdb_and_postgres(args: argparse.Namespace, orders: list[bytes], run: Run, dsn: str | None) -> None:
    keys = [str(orjson.loads(o)["orderId"]) for o in orders]
    texts = [o.decode() for o in orders]
    n_upd = len(orders) // 5
    with tempfile.TemporaryDirectory(prefix="sowdb-peers-") as tmp:
        proc, target = _start(tmp, store=args.store)
        pg = Postgres(dsn) if dsn else None
        try:
            with Client(target) as c:
                rss_empty = _rss_mb(proc.pid)
                systems = (SOWDB, PG) if pg else (SOWDB,)
                for system in systems:
                    if system == SOWDB:
                        start = time.perf_counter()
                        assert c.publish("orders", orders, batch_size=100).count == len(orders)
                        run.add("upsert", SOWDB, len(orders) / (time.perf_counter() - start))
                    else:
                        assert pg is not None
                        pg.create()
                        run.add("upsert", PG, len(orders) / pg.upsert(keys, texts))
                _settle(proc.pid)
                rss_loaded = _rss_mb(proc.pid)
                if pg:
                    pg.analyze()
                    if args.copy:
                        run.add("copy", PG, len(orders) / pg.copy_load(keys, texts))
                for r in range(args.rounds):
                    docs = _updates(orders, n_upd, r + 1)
                    for system in _order(r) if pg else (SOWDB,):
                        if system == SOWDB:
                            start = time.perf_counter()
                            c.publish("orders", docs, batch_size=100)
                            run.add("update", SOWDB, n_upd / (time.perf_counter() - start))
                        else:
                            assert pg is not None
                            run.add("update", PG, n_upd / pg.upsert(keys[:n_upd], [d.decode() for d in docs]))
                _settle(proc.pid)
                if pg:
                    pg.analyze()
                _sowdb_query(c, "/orderId = 1", 1)  # warm the connection
                for r in range(args.rounds):
                    for name, flt, where, params, reps in QUERIES:
                        for system in _order(r) if pg else (SOWDB,):
                            for _ in range(reps):
                                if system == SOWDB:
                                    took, rows = _sowdb_query(c, flt, args.batch_size)
                                else:
                                    assert pg is not None
                                    took, rows = pg.query(where, params)
                                run.add(name, system, took)
                                prev = run.rows.setdefault(name, rows)
                                assert prev == rows, f"{name}: {system} returned {rows} rows, the other {prev}"
                _settle(proc.pid)
                run.rows["rss-queried"] = int((_rss_mb(proc.pid) - rss_loaded) * 2**20)  # updates, columns, wire cache
                run.add("memory", SOWDB, (rss_loaded - rss_empty) * 2**20)
                if pg:
                    table, index = pg.sizes()
                    run.add("memory", PG, table + index)
                    run.rows["pg-table"], run.rows["pg-index"] = table, index
                run.rows["rss-loaded"] = int(rss_loaded * 2**20)
        finally:
            if pg:
                pg.close()
            proc.terminate()
            proc.wait(timeout=30)


def _fmt_rate(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f}/s"


def _fmt_ms(v: float | None) -> str:
    return "—" if v is None else (f"{v * 1000:.2f} ms" if v < 0.01 else f"{v * 1000:.0f} ms")


def _ratio(a: float | None, b: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if a is None or b is None or not b else fmt.format(a / b)


def table(run: Run, n: int, json_bytes: float, pubsub_rows: list[str]) -> str:
    """The Markdown table: one row a workload, ratio = sowdb / PostgreSQL."""
    m = run.median
    lines = [
        f"{n:,} orders ({json_bytes:.0f} JSON bytes each); medians; ratio = sowdb / PostgreSQL "
        "(queries and memory: lower is better; throughput: higher is better)",
        "",
        "| workload | sowdb | PostgreSQL | ratio |",
        "|---|---|---|---|",
    ]
    for key, label in (("upsert", f"upsert {n:,} (100 per request)"), ("update", f"update {n // 5:,}")):
        a, b = m(key, SOWDB), m(key, PG)
        lines.append(f"| {label} | {_fmt_rate(a)} | {_fmt_rate(b)} | {_ratio(a, b, '{:.2f}x')} |")
    if m("copy", PG) is not None:
        lines.append(f"| (PostgreSQL COPY into an empty table, no upsert) | | {_fmt_rate(m('copy', PG))} | |")
    for name, *_ in QUERIES:
        a, b = m(name, SOWDB), m(name, PG)
        first = run.values[name].get(SOWDB, [None])[0]  # the first query, before the columns it asks for
        shown = f"{_fmt_ms(a)} (first {_fmt_ms(first)})"
        lines.append(f"| {name}: {run.rows.get(name, 0):,} rows | {shown} | {_fmt_ms(b)} | {_ratio(a, b)} |")
    a, b = m("memory", SOWDB), m("memory", PG)
    mem_a = (
        "—" if a is None else f"{a / 2**20:,.0f} MB RSS growth ({a / n:,.0f} B/record, {a / n / json_bytes:.1f}x JSON)"
    )
    mem_b = (
        "—"
        if b is None
        else f"{b / 2**20:,.0f} MB table + indexes ({b / n:,.0f} B/record, {b / n / json_bytes:.1f}x JSON)"
    )
    lines.append(f"| memory | {mem_a} | {mem_b} | {_ratio(a, b)} |")
    if "rss-queried" in run.rows:
        q = run.rows["rss-queried"]
        label = "sowdb's RSS growth over the updates and the queries (versions, columns, wire cache)"
        lines.append(f"| {label} | {q / n:,.0f} B/record | | |")
    lines.extend(pubsub_rows)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000, help="sowdb query batch_size (records per response)")
    parser.add_argument("--pg-dsn", default="", help="an existing PostgreSQL server (default: a temporary cluster)")
    parser.add_argument("--no-copy", dest="copy", action="store_false", help="skip the PostgreSQL COPY reference")
    parser.add_argument("--no-pubsub", dest="pubsub", action="store_false", help="skip the Redis / NATS rows")
    parser.add_argument("--store", choices=RECORD_STORES, default=DEFAULT_RECORD_STORE, help="sowd's record_store")
    args = parser.parse_args()
    orders = _orders(args.records)
    json_bytes = sum(map(len, orders)) / len(orders)
    run = Run()
    bindir = find_bindir()
    if args.pg_dsn:
        run_sowdb_and_postgres(args, orders, run, args.pg_dsn)
    elif bindir is None:
        print("PostgreSQL is not installed (no initdb; apt-get install postgresql-15): sowdb alone", file=sys.stderr)
        run_sowdb_and_postgres(args, orders, run, None)
    elif importlib.util.find_spec("psycopg") is None:
        print("psycopg, PostgreSQL's client, is not installed (`make bench-peers` does): sowdb alone", file=sys.stderr)
        run_sowdb_and_postgres(args, orders, run, None)
    else:
        with (
            tempfile.TemporaryDirectory(prefix="sowdb-peers-pg-") as base,
            temporary_cluster(bindir, Path(base)) as dsn,
        ):
            run_sowdb_and_postgres(args, orders, run, dsn)
    pubsub_rows: list[str] = []
    if args.pubsub:
        from peers_pubsub import pubsub_rows as rows  # imported here: redis and nats are optional

        pubsub_rows = rows(args.records)
    print(table(run, len(orders), json_bytes, pubsub_rows))


if __name__ == "__main__":
    main()
