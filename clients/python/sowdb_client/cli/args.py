"""The ``sow`` command line: every command, flag, help text and example (SPEC §7).

Flags take one dash like AMPS's ``spark`` (``-topic``) or two (``--topic``). ``-server`` is a
global flag: it may come before the command (``sow -server H:P sow -topic T``) or after it, and
defaults to ``$SOW_SERVER``, else 127.0.0.1:9007; a host without a port means port 9007.
"""

from __future__ import annotations

import argparse
import json
import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from sowdb_address import parse_address
from sowdb_client.cli import numbers as n
from sowdb_client.cli.formats import PLACEHOLDERS, record_format, server_uri
from sowdb_client.cli.typos import CommandParser, ValueErrors

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 9007
SERVER_ENV = "SOW_SERVER"
TOKEN_ENV = "SOW_TOKEN"


class UsageError(Exception):
    """The flags are well-formed for argparse but do not make sense together (exit status 2)."""


def server_address(text: str) -> str:
    """HOST:PORT from what a person typed: a bare host (``db1``, ``[::1]``) means port 9007. A
    cluster's servers are a comma-separated list (``h1,h2:9100,h3``, SPEC §13 HA-5), each
    read the same way and given back joined by commas.

    gRPC would take a bare host as port 443, which no sowd listens on by default. An AMPS-style
    ``tcp://HOST:PORT/amps/json`` is taken as HOST:PORT; other URIs are refused with what to
    write (:func:`~sowdb_client.cli.formats.server_uri`).

    Raises:
        argparse.ArgumentTypeError: not an address, or a port out of 1..65535 (the message
            names ``$SOW_SERVER`` when the text came from there).
    """
    try:
        parts = [server_uri(part.strip()) for part in text.split(",") if part.strip()]
        addresses = [parse_address(part, default_port=DEFAULT_PORT) for part in parts]
        if not addresses:
            parse_address(text, default_port=DEFAULT_PORT)  # says what is wrong with it
    except ValueError as exc:
        origin = f" (from ${SERVER_ENV})" if text == os.environ.get(SERVER_ENV) else ""
        raise argparse.ArgumentTypeError(f"{exc}{origin}") from None
    return ",".join(f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in addresses)


def default_server_text() -> str:
    """``$SOW_SERVER`` as set, else 127.0.0.1:9007: argparse checks a flag's default text with
    the flag's type when the flag is not given, so a bad ``$SOW_SERVER`` is a usage error."""
    return os.environ.get(SERVER_ENV) or f"{DEFAULT_HOST}:{DEFAULT_PORT}"


def default_server() -> str:
    """The checked default server address (see :func:`server_address`)."""
    return server_address(default_server_text())


def package_version() -> str:
    try:
        return version("sowdb")
    except PackageNotFoundError:
        return "unknown"


def _flag(p: argparse.ArgumentParser | Any, name: str, **kw: Any) -> None:
    p.add_argument(f"-{name}", f"--{name}", **kw)


SERVER_HELP = (
    f"the server, HOST[:PORT], or a cluster's servers HOST[:PORT],HOST[:PORT],... (default ${SERVER_ENV}, "
    f"else {DEFAULT_HOST}:{DEFAULT_PORT}; a host alone means port {DEFAULT_PORT}); may also come before the command"
)
FILTER_HELP = "a filter expression, e.g. \"/symbol = 'SYM1' AND /price > 150\" (default: every record)"
TOPIC_HELP = "a topic name, or a regular expression over topic names, e.g. '^(orders|markers)$'"
SOWKEYS_HELP = (
    'SowKeys, comma-separated (42,43) or a JSON list of strings (\'["1,\\"A\\"", "2,\\"B\\""]\') '
    "for keys that contain commas"
)
SOWKEY_HELP = (
    "one SowKey, taken as written; repeat for more. For composite keys (-sowkey '1,\"A\"') and view "
    "keys, which are the JSON list of the group values (-sowkey '[\"SYM1\"]')"
)
FORMAT_HELP = (
    "data: each record's JSON document a line (default); full: one JSON object a line with the "
    "frame's command, topic, sow_key, bookmark, timestamp and data; or a template, as AMPS spark's, of "
    f"the placeholders {', '.join('{' + p + '}' for p in PLACEHOLDERS)}, "
    "e.g. -format '{bookmark} {sow_key} {data}'"
)

EPILOG_TOP = """\
examples:
  sow ping
  sow sow -topic orders -filter "/price > 150" -orderby "/price DESC" -topn 3
  sow -server db1 topics                 # db1:9007
  SOW_SERVER=db1:9100 sow subscribe -topic orders -timeout 10
  sow -server db1,db2,db3 publish -topic orders -file orders.json   # a cluster: to its primary

'sow COMMAND --help' describes a command's flags. Flags take one dash (-topic) or two (--topic).
Errors print one line on stderr and exit 1; wrong flags exit 2; Ctrl-C exits 130.
"""

EPILOGS = {
    "ping": """\
examples:
  sow ping                               # pong from 127.0.0.1:9007 in 1.2 ms
  sow ping -server db1                   # db1:9007
""",
    "publish": """\
examples:
  sow publish -topic orders -file orders.jsonl
  echo '{"orderId": 42, "price": 1}' | sow publish -topic orders -delta
  echo '{"text": "hello"}' | sow publish -topic notes -sowkey note-1
  B=$(echo '{"symbol": "ABC", "px": 100}' | sow publish -topic prices -format bookmark)
  sow publish -topic orders -file orders.jsonl -producer loader-1    # run it again: nothing stored twice

Each request of -batchsize messages is stored whole or not at all. A refused request stops the
publish: nothing after it is stored, and stderr says what was ("stored 100 messages (bookmarks
1..100) before the error at input line 151"; blank lines count as lines). Ctrl-C prints the same
count of acknowledged messages; requests in flight may also have been stored. Publishing to a
topic that is not configured journals the messages for subscribers but keeps no state (a note
on stderr says so).
""",
    "sow": """\
examples:
  sow sow -topic orders -filter "/symbol = 'SYM42' AND /price > 150" -orderby "/price DESC" -topn 3
  sow sow -topic orders -sowkeys 42,43 -format full
  sow sow -topic pairs -sowkey '1,"EU"' -sowkey '2,"US"'          # composite keys
  sow sow -topic orders_by_symbol -sowkey '["SYM1"]'              # a view's key
  sow sow -topic orders -select "[-/,+/orderId,+/price]" -topn 2
  sow sow -topic orders -grouping /symbol -projection /symbol -projection "COUNT(/orderId) AS /n"
  sow sow -topic prices -bookmark 20260102T150405Z                # as of a time (history topics)

On a terminal, an empty result says "0 records" on stderr.
""",
    "sow_delete": """\
examples:
  sow sow_delete -topic orders -filter "/price < 110"
  sow sow_delete -topic orders -sowkeys 42,43
  sow sow_delete -topic pairs -sowkey '1,"EU"'
  sow sow_delete -topic orders -data '{"orderId": 42}'

Prints what it deleted, e.g. "deleted 3 records from orders".
""",
    "subscribe": """\
examples:
  sow subscribe -topic orders -filter "/symbol = 'SYM1'"
  sow subscribe -topic '^(orders|markers)$' -format full -timeout 10
  sow subscribe -topic prices -bookmark 0 -format full -count 100    # replay the journal, then live
  sow subscribe -topic orders -conflation 0.5 -conflationkey /symbol

Ends after -timeout seconds or -count records (exit 0), or on Ctrl-C (exit 130). The data format
prints the documents published; -format full also shows deletes, oofs and the frames.
""",
    "sow_and_subscribe": """\
examples:
  sow sow_and_subscribe -topic orders -filter "/symbol = 'SYM1'" -oof -format full
  sow sow_and_subscribe -topic orders -orderby "/price DESC" -topn 2 -skipn 1 -oof -format full
  sow sow_and_subscribe -topic orders -grouping /symbol -projection /symbol \\
      -projection "SUM(/qty) AS /qty" -timeout 10
  sow sow_and_subscribe -topic prices -bookmark 0 -format full -count 20

The matching records, then every later change, with no gap and no duplicate between the two.
Ends after -timeout seconds or -count records (exit 0), or on Ctrl-C (exit 130).
""",
    "topics": """\
examples:
  sow topics
  sow topics -format json                # one JSON object a line
""",
    "stats": """\
examples:
  sow stats                              # every topic, the subscriptions, the server, the calls
  sow stats -topic orders                # one topic and the subscriptions that follow it
  sow stats -topic '^ord' -format json   # one JSON object, for scripts
  sow stats -topicsonly                  # a user without an admin role (security on)

With security on, the server-wide figures and other users' subscriptions need an admin role;
-topicsonly asks for the figures of the topics the user may read and its own subscriptions.
""",
    "cluster": """\
examples:
  sow cluster                            # the nodes: role, epoch, applied bookmark, lag
  sow cluster -format json               # one JSON object a line, a node each

Ask the primary for the whole cluster; a replica answers for itself.
""",
}


CONNECTION_FLAGS: list[tuple[str, dict[str, Any]]] = [
    ("token", {"metavar": "TOKEN", "help": f"the user's token, sent with every call (default ${TOKEN_ENV})"}),
    (
        "tokenfile",
        {
            "metavar": "FILE",
            "help": "read the user's token from this file (its first line), which only you should read "
            "(chmod 600: sow warns otherwise); keeps the token out of the command line",
        },
    ),
    ("tls", {"action": "store_true", "help": "connect over TLS, trusting the system's CAs"}),
    ("cacert", {"metavar": "FILE", "help": "connect over TLS, trusting this CA certificate (PEM)"}),
    ("cert", {"metavar": "FILE", "help": "with TLS: this client certificate (PEM), for a server that asks for one"}),
    ("key", {"metavar": "FILE", "help": "with -cert: its private key (PEM)"}),
    ("servername", {"metavar": "NAME", "help": "with TLS: the name the server's certificate holds, if not the host"}),
]
"""Flags of the connection, global like -server (before or after the command)."""


def _connection_flags(p: argparse.ArgumentParser, *, top: bool) -> None:
    _flag(p, "server", default=default_server_text() if top else argparse.SUPPRESS, type=server_address,
          metavar="HOST[:PORT][,...]", help=SERVER_HELP)  # fmt: skip
    for name, kw in CONNECTION_FLAGS:
        default: Any = (os.environ.get(TOKEN_ENV) if name == "token" else None) if top else argparse.SUPPRESS
        if kw.get("action") == "store_true":
            default = False if top else argparse.SUPPRESS
        _flag(p, name, default=default, **kw)


def parser() -> argparse.ArgumentParser:
    """The whole command line of ``sow``."""
    top = ValueErrors(
        prog="sow",
        description="sowdb command-line client: publish, query and subscribe to a sowdb server",
        epilog=EPILOG_TOP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    _connection_flags(top, top=True)
    _flag(top, "version", action="version", version=f"sow {package_version()}", help="print the version and exit")
    sub = top.add_subparsers(
        dest="command", required=True, metavar="COMMAND", title="commands", parser_class=CommandParser
    )

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=EPILOGS[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=False,
        )
        # SUPPRESS: given after the command it overrides the global flag; not given, it leaves it
        _connection_flags(p, top=False)
        return p

    command("ping", "check that the server answers, and how fast")
    _publish_flags(command("publish", "publish JSON documents, one a line, from a file or stdin"))
    p = command("sow", "query the state of a topic")
    _query_flags(p, bookmark="the state as of this point: a bookmark, a time (20260102T150405Z, ISO-8601), 0 or now")
    _flag(p, "format", type=record_format, default="data", metavar="FORMAT", help=FORMAT_HELP)
    _delete_flags(command("sow_delete", "delete records by filter, SowKeys or data; says how many"))

    p = command("subscribe", "print every later message of a topic")
    _flag(p, "topic", required=True, metavar="TOPIC", help=TOPIC_HELP)
    _flag(p, "filter", default="", metavar="FILTER", help=FILTER_HELP)
    _flag(
        p,
        "bookmark",
        default="",
        metavar="B",
        help="first replay the journal after this point (a bookmark, a time, or 0 for all of it), "
        "then 'completed', then live",
    )
    _flag(p, "format", type=record_format, default="data", metavar="FORMAT", help=FORMAT_HELP)
    _live_flags(p)

    p = command("sow_and_subscribe", "print the matching records, then every later change")
    _query_flags(p, bookmark="the state as of this point, then every change since, then live (history topics)")
    _flag(p, "format", type=record_format, default="data", metavar="FORMAT", help=FORMAT_HELP)
    _live_flags(p)

    p = command("topics", "list the configured topics with their kind, key and record count")
    _flag(p, "format", choices=["table", "json"], default="table", help="table (default) or json: one object a line")

    p = command("stats", "the server's figures: topics, subscriptions and their queues, journal, calls")
    _flag(p, "topic", default="", metavar="TOPIC", help=f"only this topic, or the topics of a regex: {TOPIC_HELP}")
    _flag(
        p,
        "topicsonly",
        action="store_true",
        help="only the topics' figures and your own subscriptions (what a user without an admin role may see)",
    )
    _flag(p, "format", choices=["table", "json"], default="table", help="table (default) or json: one object")

    p = command("cluster", "the cluster as the server sees it: each node's role, epoch, applied bookmark, lag")
    _flag(p, "format", choices=["table", "json"], default="table", help="table (default) or json: one object a line")
    return top


def _publish_flags(p: argparse.ArgumentParser) -> None:
    _flag(p, "topic", required=True, metavar="TOPIC", help="the topic to publish to, e.g. orders")
    _flag(p, "file", metavar="FILE", help="read the documents from this file (default: stdin)")
    _flag(
        p,
        "delimiter",
        type=n.delimiter,
        default=10,
        metavar="BYTE",
        help="the byte that ends each message of the input, as AMPS spark's: a byte value or one character "
        "(default 10, a newline), e.g. -delimiter 0 or -delimiter '|'",
    )
    _flag(p, "delta", action="store_true", help="merge each document into the stored record (delta publish)")
    _flag(p, "rate", type=n.POSITIVE, metavar="N", help="at most N messages a second (default: as fast as possible)")
    _flag(
        p,
        "batchsize",
        type=n.PUBLISH_BATCH,
        default=100,
        metavar="N",
        help="messages per request, 1..1000000; each request is stored whole or not at all (default 100; a "
        "request is also cut short where the next message would take it over the gRPC message limit)",
    )
    _flag(p, "expiration", type=n.POSITIVE, metavar="SECONDS", help="time to live of every message, e.g. 60")
    _flag(
        p,
        "producer",
        default="",
        metavar="ID",
        help="publish as this idempotent producer (J-4): each request is applied once however often it is sent, "
        "so the same publish run again stores nothing twice, e.g. -producer loader-1",
    )
    _flag(
        p,
        "producerseq",
        type=n.PRODUCER_SEQ,
        default=1,
        metavar="N",
        help="with -producer: the sequence number of the first request (default 1); request i carries N+i, "
        "and the summary prints the next one to use",
    )
    _flag(
        p,
        "sowkey",
        metavar="KEY",
        help="the SowKey of the one message published, for topics whose publishers supply keys, e.g. note-1",
    )
    _flag(
        p,
        "format",
        choices=["summary", "full", "bookmark"],
        default="summary",
        help="summary: one line with the count, bookmarks and rate (default); full: the same as a JSON "
        "object; bookmark: only the last bookmark, for B=$(... | sow publish ... -format bookmark)",
    )


def _keys_flags(p: argparse.ArgumentParser | Any) -> None:
    _flag(p, "sowkeys", metavar="KEYS", help=SOWKEYS_HELP)
    _flag(p, "sowkey", action="append", default=[], metavar="KEY", help=SOWKEY_HELP)


def _query_flags(p: argparse.ArgumentParser, *, bookmark: str) -> None:
    _flag(p, "topic", required=True, metavar="TOPIC", help=TOPIC_HELP)
    _flag(p, "filter", default="", metavar="FILTER", help=FILTER_HELP)
    _flag(p, "orderby", default="", metavar="ORDER", help="sort order, e.g. '/price DESC, /orderId' (ASC by default)")
    _flag(p, "topn", type=n.TOP_N, metavar="N", help="at most N records, e.g. -topn 10")
    _flag(p, "skipn", type=n.SKIP_N, metavar="N", help="skip the first N records (needs -topn): a page of the order")
    _flag(
        p, "batchsize", type=n.QUERY_BATCH, default=10, metavar="N", help="records per response, 1..10000 (default 10)"
    )
    _flag(p, "bookmark", default="", metavar="B", help=bookmark)
    _keys_flags(p)
    _flag(p, "queryid", default="", metavar="ID", help="an id of your choice, echoed in group_begin and group_end")
    _flag(
        p,
        "grouping",
        action="append",
        default=[],
        metavar="EXPR",
        help="group by this expression (repeatable; needs -projection), e.g. -grouping /symbol",
    )
    _flag(
        p,
        "projection",
        action="append",
        default=[],
        metavar="EXPR",
        help="a field of each group (repeatable), e.g. -projection /symbol -projection 'SUM(/qty) AS /qty'",
    )
    _flag(
        p,
        "select",
        default="",
        metavar="FIELDS",
        help="only these fields of each record, e.g. '[-/,+/orderId,+/price]'",
    )


def _live_flags(p: argparse.ArgumentParser) -> None:
    _flag(
        p,
        "oof",
        action="store_true",
        help="also tell when a received record leaves the result (oof, with its reason); needs -format full",
    )
    _flag(p, "delta", action="store_true", help="updates carry only the key fields and the fields that changed")
    _flag(p, "noempties", action="store_true", help="with -delta: skip updates in which no field changed")
    _flag(
        p,
        "conflation",
        type=n.POSITIVE,
        metavar="SECONDS",
        help="at most one update per record (or per -conflationkey) per interval, the latest, e.g. 0.5",
    )
    _flag(
        p,
        "conflationkey",
        default="",
        metavar="PATHS",
        help="with -conflation: conflate per these comma-separated paths instead of per record, e.g. /symbol",
    )
    _flag(p, "timeout", type=n.POSITIVE, metavar="SECONDS", help="stop after this many seconds (exit 0), e.g. 10")
    _flag(
        p,
        "count",
        type=n.COUNT,
        metavar="N",
        help="stop after N records printed (query results and updates; not frames) (exit 0)",
    )
    _flag(p, "subid", default="", metavar="ID", help="a subscription id of your choice (default: the server's)")


def _delete_flags(p: argparse.ArgumentParser) -> None:
    _flag(p, "topic", required=True, metavar="TOPIC", help="the topic to delete from, e.g. orders")
    group = p.add_mutually_exclusive_group(required=True)
    _flag(group, "filter", metavar="FILTER", help='delete the records that match, e.g. "/price < 110"')
    _keys_flags(group)
    _flag(group, "data", metavar="JSON", help="delete the record whose key fields these are, e.g. '{\"orderId\": 42}'")


def sow_keys(args: argparse.Namespace) -> list[str]:
    """The SowKeys named by ``-sowkey`` (each as written) and ``-sowkeys`` (a JSON list of strings
    when it starts with ``[``, else comma-separated).

    Raises:
        UsageError: ``-sowkeys`` starts with ``[`` but is not a JSON list of strings, or names
            no key (``-sowkeys ""``, ``'[]'``): ``sow`` would take every record where
            ``sow_delete`` refused, so both refuse it (issue 36).
    """
    keys = list(args.sowkey or ())
    text = (args.sowkeys or "").strip()
    if text.startswith("["):
        try:
            listed = json.loads(text)
        except json.JSONDecodeError as exc:
            problem = f"-sowkeys {text}: not a JSON list ({exc.msg}); name a key as written with -sowkey"
            raise UsageError(problem) from None
        if not isinstance(listed, list) or not all(isinstance(k, str) for k in listed):
            raise UsageError(
                f'-sowkeys {text}: expected a JSON list of strings, e.g. \'["1,\\"A\\""]\'; '
                "a view's key, itself a JSON list, goes in -sowkey '[\"SYM1\"]'"
            )
        keys.extend(listed)
    elif text:
        keys.extend(k.strip() for k in text.split(",") if k.strip())
    if args.sowkeys is not None and not keys:
        raise UsageError(
            f"-sowkeys {args.sowkeys!r} names no SowKey; leave -sowkeys out to take every record (sow and "
            "sow_delete refuse an empty key list alike)"
        )
    return keys


def check(args: argparse.Namespace) -> None:
    """Refuse flag combinations that would silently do less than asked.

    Raises:
        UsageError: e.g. ``-oof`` with the data format, which prints documents only and so
            could never show an oof.
    """
    if getattr(args, "oof", False) and args.format == "data":
        raise UsageError(
            "-oof needs -format full (or a template): the data format prints documents only, so the oofs would not show"
        )
