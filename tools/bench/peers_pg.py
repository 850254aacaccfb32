"""PostgreSQL for the peer benchmark (``peers.py``): a temporary cluster and the workloads as a
Python user of psycopg 3 would write them.

The cluster is PostgreSQL 15 from the Debian package, started with ``initdb`` / ``pg_ctl`` in a
temporary directory on a free port (as a non-root user: the ``postgres`` account, or one made
for it), or an existing server given by ``--pg-dsn``. Durability is set to match sowd's
default (``fsync = false``: the WAL is written before the acknowledgement but not synced):
``synchronous_commit = off``, which is slightly weaker still, so it errs in PostgreSQL's favour.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

PG_BIN_CANDIDATES = ("/usr/lib/postgresql/15/bin",)
BATCH = 100
"""Rows per upsert statement, as sowdb's 100 messages per publish request."""


def find_bindir() -> Path | None:
    """PostgreSQL's programs (``initdb``, ``pg_ctl``), or None when it is not installed."""
    for d in PG_BIN_CANDIDATES:
        if (Path(d) / "initdb").exists():
            return Path(d)
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if out and (Path(out) / "initdb").exists():
            return Path(out)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_user() -> str | None:
    """The account to run PostgreSQL as when we are root (it refuses to run as root)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
        return "postgres"
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "sowdb-pg"], check=True)
        return "sowdb-pg"


@contextmanager
def temporary_cluster(bindir: Path, base: Path) -> Iterator[str]:
    """A PostgreSQL server in ``base`` for the duration of the block; yields its DSN."""
    user = _server_user()
    as_user = ["runuser", "-u", user, "--"] if user else []
    data, sock = base / "pgdata", base / "sock"
    sock.mkdir(parents=True)
    if user:
        entry = pwd.getpwnam(user)
        for d in (base, sock):
            os.chown(d, entry.pw_uid, entry.pw_gid)
        base.chmod(0o755)
    port = free_port()
    run = {"check": True, "stdout": subprocess.DEVNULL, "stderr": subprocess.PIPE}
    subprocess.run([*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"], **run)
    opts = f"-p {port} -k {sock} -c listen_addresses='' -c synchronous_commit=off"
    log = base / "postgres.log"
    subprocess.run(
        [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(log), "-w", "start"], **run
    )
    try:
        yield f"host={sock} port={port} user=postgres dbname=postgres"
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], **run)


class Postgres:
    """The benchmark's table (``key text primary key, data jsonb``, an expression index on
    ``data->>'symbol'``) and its workloads."""

    def __init__(self, dsn: str) -> None:
        import psycopg  # imported here: only this peer needs it

        self.conn = psycopg.connect(dsn, autocommit=True)
        self._upsert = (
            "INSERT INTO orders (key, data) VALUES "
            + ", ".join(["(%s, %s::jsonb)"] * BATCH)
            + " ON CONFLICT (key) DO UPDATE SET data = EXCLUDED.data"
        )
        self._upsert_one = (
            "INSERT INTO orders (key, data) VALUES (%s, %s::jsonb) ON CONFLICT (key) DO UPDATE SET data = EXCLUDED.data"
        )

    def create(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS orders")
            cur.execute("CREATE TABLE orders (key text PRIMARY KEY, data jsonb NOT NULL)")
            cur.execute("CREATE INDEX orders_symbol ON orders ((data->>'symbol'))")

    def upsert(self, keys: Sequence[str], docs: Sequence[str]) -> float:
        """Upsert every row, 100 per statement, each its own transaction (as sowdb commits each
        request), pipelined (as sowdb's publish stream is); returns the seconds taken."""
        start = time.perf_counter()
        with self.conn.pipeline(), self.conn.cursor() as cur:
            for i in range(0, len(keys), BATCH):
                chunk_keys, chunk_docs = keys[i : i + BATCH], docs[i : i + BATCH]
                if len(chunk_keys) == BATCH:
                    params = [v for pair in zip(chunk_keys, chunk_docs, strict=True) for v in pair]
                    cur.execute(self._upsert, params)
                else:
                    cur.executemany(self._upsert_one, list(zip(chunk_keys, chunk_docs, strict=True)))
        return time.perf_counter() - start

    def copy_load(self, keys: Sequence[str], docs: Sequence[str]) -> float:
        """Bulk load into an empty copy of the table with COPY (no upsert: for reference)."""
        with self.conn.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS orders_copy")
            cur.execute("CREATE TABLE orders_copy (key text PRIMARY KEY, data jsonb NOT NULL)")
            cur.execute("CREATE INDEX orders_copy_symbol ON orders_copy ((data->>'symbol'))")
            start = time.perf_counter()
            with cur.copy("COPY orders_copy (key, data) FROM STDIN") as copy:
                for k, d in zip(keys, docs, strict=True):
                    copy.write_row((k, d))
            took = time.perf_counter() - start
            cur.execute("DROP TABLE orders_copy")
        return took

    def analyze(self) -> None:
        with self.conn.cursor() as cur:
            cur.execute("VACUUM ANALYZE orders")

    def query(self, where: str, params: Sequence[object] = ()) -> tuple[float, int]:
        """Every matching row to the client, its JSON as text (as sowdb sends JSON bytes,
        which its client does not decode either); (seconds, rows)."""
        start = time.perf_counter()
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT key, data::text FROM orders WHERE {where}", params)  # type: ignore[call-overload]
            n = len(cur.fetchall())
        return time.perf_counter() - start, n

    def sizes(self) -> tuple[int, int]:
        """(table bytes with TOAST, index bytes)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_table_size('orders'), pg_indexes_size('orders')")
            row = cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def close(self) -> None:
        self.conn.close()
