"""The options of the sowdb data sources, checked when Spark plans the query: a missing
``topic``, an unknown option or a value that is not what it should be is a
:class:`~sowdb_spark.rpc.SowdbSparkError` naming the option, before any task runs. (A bad
``filter`` is the server's to judge: it is refused, with its column, when the snapshot is
opened at planning.)

Options are strings, as Spark passes them, and their names are case-insensitive. ``server``
defaults to ``$SOW_SERVER``, else ``127.0.0.1:9007``, and ``token`` to ``$SOW_TOKEN``, as for the
``sow`` CLI; a cluster's servers are a list (``h1:9007,h2:9007``): its primary, found where Spark
plans, is where the tasks read and write (a failover during a job fails the job, which may be run
again). Every source and sink takes SPEC §11's connection options: ``token``, ``tls``
(``true``: TLS with the system's CAs), ``cacert`` (TLS trusting that CA), ``cert`` and ``key``
(a client certificate, for mutual TLS) and ``servername`` (the name the server's certificate
is checked against). The certificate files are read where Spark plans the query, on the driver,
and travel to the executors as bytes with the partitions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sowdb_client.cli.args import TOKEN_ENV, default_server, server_address
from sowdb_client.client import Client
from sowdb_client.errors import SowdbError
from sowdb_client.types import Tls
from sowdb_spark.rpc import Server, SowdbSparkError, explain

OPERATIONS = {"publish": 1, "delete": 2, "expire": 3}

CONNECTION = {"server", "token", "tls", "cacert", "cert", "key", "servername"}
"""How to reach the server (SPEC §11), taken by every source and sink."""
READ = CONNECTION | {"topic", "filter", "bookmark", "partitions", "lease", "batch_size"}
WRITE = CONNECTION | {"topic", "batch_size"}
JOURNAL_READ = CONNECTION | {
    "topic",
    "filter",
    "from_bookmark",
    "to_bookmark",
    "operations",
    "partitions",
    "batch_size",
}
STREAM_READ = CONNECTION | {"topic", "filter", "from_bookmark", "operations", "partitions", "max_entries_per_batch"}
SPARK_OPTIONS = {"checkpointlocation", "path", "queryname"}
"""Options Spark itself takes (a streaming sink's checkpoint) and passes on; not ours to refuse."""
USES = {
    "read": READ,
    "write": WRITE,
    "journal read": JOURNAL_READ,
    "stream read": STREAM_READ,
    "journal stream read": STREAM_READ,
    "stream write": WRITE,
}


@dataclass(frozen=True)
class Options:
    """Every option of every use, checked for the use at hand (unset ones at their defaults)."""

    server: Server = field(default_factory=lambda: Server(default_server()))
    topic: str = ""
    filter: str = ""
    bookmark: str = ""
    from_bookmark: str = "0"
    to_bookmark: int = 0
    operations: tuple[int, ...] = ()
    partitions: int = 2
    lease: float = 600.0
    batch_size: int = 10_000
    max_entries_per_batch: int = 0


def _int(name: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise SowdbSparkError(f"option {name} must be a whole number, got {text!r}") from None
    if not low <= value <= high:
        raise SowdbSparkError(f"option {name} must be between {low} and {high}, got {value}")
    return value


def _flag(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value not in ("true", "false", "1", "0", ""):
        raise SowdbSparkError(f"option {name} must be true or false, got {text!r}")
    return value in ("true", "1")


def _pem(name: str, path: str) -> bytes:
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise SowdbSparkError(f"option {name}: cannot read {path!r}: {exc.strerror}") from None


def _server(given: Mapping[str, str]) -> Server:
    """The server of the options: address, token (else ``$SOW_TOKEN``) and TLS.

    Raises:
        SowdbSparkError: a ``cert`` without its ``key`` (or the reverse), an unreadable file, a
            ``tls`` that is not a boolean.
    """
    address = server_address(given["server"]) if "server" in given else default_server()
    token = given.get("token", os.environ.get(TOKEN_ENV, "")).strip()
    if ("cert" in given) != ("key" in given):
        raise SowdbSparkError("options cert and key go together: the client certificate and its private key")
    files = {n: _pem(n, given[n]) for n in ("cacert", "cert", "key") if given.get(n, "").strip()}
    secure = _flag("tls", given.get("tls", "")) or bool(files) or bool(given.get("servername", "").strip())
    tls = None
    if secure:
        tls = Tls(ca=files.get("cacert"), cert=files.get("cert"), key=files.get("key"),
                  server_name=given.get("servername", "").strip() or None)  # fmt: skip
    if "," in address:  # a cluster's servers (SPEC §13, HA-5): the tasks read and write at its primary
        try:
            with Client(address, token=token or None, tls=tls) as c:
                address = c.find_primary()
        except SowdbError as exc:
            raise explain(exc, f"sowdb: no primary among {address}") from None
    return Server(address, token, tls)


def check_names(options: Mapping[str, str], uses: tuple[str, ...], source: str) -> None:
    """Refuse an option no use of the source knows, when the DataFrame is loaded.

    Raises:
        SowdbSparkError: naming the option and the known ones.
    """
    known = set().union(*(USES[u] for u in uses))
    unknown = sorted({k.lower() for k in options} - known - SPARK_OPTIONS)
    if unknown:
        raise SowdbSparkError(
            f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for format {source!r}; "
            f"the options are {', '.join(sorted(known))}"
        )


def parse(options: Mapping[str, str], use: str, *, topic_required: bool = True) -> Options:
    """The options of one use of a source (``read``, ``write``, ``journal read``, ...).

    Raises:
        SowdbSparkError: an unknown option, a missing ``topic``, a bad value; naming the option.
    """
    given = {k.lower(): str(v) for k, v in options.items() if k.lower() not in SPARK_OPTIONS}
    allowed = USES[use]
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise SowdbSparkError(
            f"unknown option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for a sowdb {use}; "
            f"the options are {', '.join(sorted(allowed))}"
        )
    topic = given.get("topic", "").strip()
    if topic_required and not topic:
        raise SowdbSparkError(f"option topic is required for a sowdb {use}, e.g. .option('topic', 'orders')")
    # like the CLI: $SOW_SERVER, else 127.0.0.1:9007 (resolved where Spark plans, on the driver)
    out: dict[str, object] = {"topic": topic, "server": _server(given)}
    for name in ("filter", "bookmark"):
        if name in given:
            out[name] = given[name]
    if "from_bookmark" in given:
        text = given["from_bookmark"].strip().lower()
        if text != "now" and not (text.isascii() and text.isdigit()):
            raise SowdbSparkError(f"option from_bookmark must be a bookmark number, 0 or now, got {text!r}")
        out["from_bookmark"] = text
    if "to_bookmark" in given:
        out["to_bookmark"] = _int("to_bookmark", given["to_bookmark"], 0, 2**63 - 1)
    if "operations" in given:
        names = [n.strip().lower() for n in given["operations"].split(",") if n.strip()]
        bad = [n for n in names if n not in OPERATIONS]
        if bad or not names:
            raise SowdbSparkError(
                f"option operations is a comma-separated list of publish, delete, expire; got {given['operations']!r}"
            )
        out["operations"] = tuple(OPERATIONS[n] for n in names)
    if "partitions" in given:
        out["partitions"] = _int("partitions", given["partitions"], 1, 10_000)
    elif use.startswith("stream") or use.startswith("journal stream"):
        out["partitions"] = 1
    if "lease" in given:
        out["lease"] = float(_int("lease", given["lease"], 1, 86_400))
    if "batch_size" in given:
        out["batch_size"] = _int("batch_size", given["batch_size"], 1, 100_000)
    if "max_entries_per_batch" in given:
        out["max_entries_per_batch"] = _int("max_entries_per_batch", given["max_entries_per_batch"], 1, 2**62)
    return Options(**out)  # type: ignore[arg-type]
