"""``sow``: the command-line client, after AMPS's ``spark`` (SPEC §7).

    sow ping       -server HOST:PORT
    sow publish    -topic T [-file F] [-delta] [-rate N] [-batchsize N] [-sowkey K] [-expiration S]
    sow sow        -topic T [-filter F] [-orderby O] [-topn N] [-skipn N] [-batchsize N]
                   [-bookmark B] [-sowkeys K,...] [-queryid Q] [-grouping G -projection P]
                   [-select S] [-format data|full]
    sow sow_delete -topic T (-filter F | -sowkeys K,... | -data JSON)
    sow subscribe  -topic T [-filter F] [-bookmark B] [-oof] [-delta] [-timeout S] [-count N]
                   [-format data|full]
    sow sow_and_subscribe -topic T [query flags] [-bookmark B] [-oof] [-delta] [-timeout S]
                   [-count N] [-format ...] [-topn N -skipn N -orderby O] [-grouping G -projection P]

A bookmark is a sequence number, a timestamp (20260102T150405Z or ISO-8601), 0 or now.

Flags take one dash (``-topic``) like spark, or two. Records print as one JSON document a
line; ``-format full`` prints one JSON object a line with the frame's command and metadata.
Errors print one line on stderr and exit non-zero.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import IO, Any

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client.client import Client, SubscriptionStream
from sowdb_client.errors import PublishError, SowdbError
from sowdb_client.events import Event
from sowdb_client.types import DEFAULT_TARGET, Message, Record, records_from_pb


def _flag(p: argparse.ArgumentParser, name: str, **kw: Any) -> None:
    p.add_argument(f"-{name}", f"--{name}", **kw)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sow", description="sowdb command-line client", allow_abbrev=False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, allow_abbrev=False)
        _flag(
            p, "server", default=DEFAULT_TARGET, metavar="HOST:PORT", help=f"server address (default {DEFAULT_TARGET})"
        )
        return p

    command("ping", "check that the server answers")

    p = command("publish", "publish JSON documents, one a line, from a file or stdin")
    _flag(p, "topic", required=True)
    _flag(p, "file", help="read from this file instead of stdin")
    _flag(p, "delta", action="store_true", help="merge into existing records (delta publish)")
    _flag(p, "rate", type=float, help="messages per second (default: as fast as possible)")
    _flag(p, "batchsize", type=int, default=100, help="messages per atomic request (default 100)")
    _flag(p, "expiration", type=float, help="time to live of every message, in seconds (X-1)")
    _flag(p, "sowkey", help="SowKey for a single message to a topic whose publishers supply keys")

    def query_flags(p: argparse.ArgumentParser, *, bookmark: str, skipn: str | None, grouping: str) -> None:
        _flag(p, "topic", required=True, help="topic name or regular expression")
        _flag(p, "filter", default="")
        _flag(p, "orderby", default="", help="e.g. '/price DESC, /orderId'")
        _flag(p, "topn", type=int)
        _flag(p, "skipn", type=int, help=skipn)
        _flag(p, "batchsize", type=int, default=10, help="records per response, 1..10000 (default 10)")
        _flag(p, "bookmark", default="", help=bookmark)
        _flag(p, "sowkeys", default="", help="comma-separated SowKeys")
        _flag(p, "queryid", default="")
        _flag(p, "grouping", action="append", default=[], help=grouping)
        _flag(p, "projection", action="append", default=[], help="projection expression (repeatable)")
        _flag(p, "select", default="", help="e.g. '[-/,+/orderId,+/price]'")
        _flag(p, "format", choices=["data", "full"], default="data")

    p = command("sow", "query the state of a topic")
    query_flags(
        p,
        bookmark="the state as of this point (history topics)",
        skipn=None,
        grouping="grouping expression (repeatable)",
    )

    def live_flags(p: argparse.ArgumentParser) -> None:
        _flag(p, "oof", action="store_true", help="tell when a received record leaves the result (oof)")
        _flag(p, "delta", action="store_true", help="receive only the key fields and changed fields")
        _flag(p, "timeout", type=float, help="stop after this many seconds (exit 0)")
        _flag(p, "count", type=int, help="stop after this many events (exit 0)")
        _flag(p, "subid", default="", help="a subscription id of your choice")

    p = command("subscribe", "print every later message of a topic")
    _flag(p, "topic", required=True, help="topic name or regular expression")
    _flag(p, "filter", default="")
    _flag(p, "bookmark", default="", help="replay the journal after this point first, then 'completed'")
    _flag(p, "format", choices=["data", "full"], default="data")
    live_flags(p)

    p = command("sow_and_subscribe", "print the matching records, then every later change")
    query_flags(
        p,
        bookmark="the state as of this point, then every change since (history topics)",
        skipn="with -topn: a live page [skipn, skipn+topn) of the ordered result",
        grouping="grouping expression (repeatable): live groups",
    )
    _flag(p, "conflation", type=float, help="at most one delivery per key per this many seconds")
    _flag(p, "conflationkey", default="", help="comma-separated conflation key paths (default: the SowKey)")
    live_flags(p)

    p = command("sow_delete", "delete records by filter, SowKeys or data; prints the count")
    _flag(p, "topic", required=True)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("-filter", "--filter")
    group.add_argument("-sowkeys", "--sowkeys", help="comma-separated SowKeys")
    group.add_argument("-data", "--data", help="a JSON document whose key fields name the record")
    return parser


def _lines(stream: IO[str]) -> Iterator[str]:
    for line in stream:
        line = line.strip()
        if line:
            yield line


def _paced(items: Iterator[str], rate: float | None) -> Iterator[str]:
    if not rate:
        yield from items
        return
    start = time.perf_counter()
    for i, item in enumerate(items):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        yield item


def _publish(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    stream = open(a.file, encoding="utf-8") if a.file else sys.stdin  # noqa: SIM115 (closed below)
    start = time.perf_counter()
    try:
        lines = _paced(_lines(stream), a.rate)
        if a.sowkey:
            items: list[Message] = [Message(line, sow_key=a.sowkey, expiration=a.expiration) for line in lines]
            if len(items) != 1:
                raise SystemExit("sow: -sowkey publishes exactly one message; the input has " + str(len(items)))
            ack = c.publish(a.topic, items, delta=a.delta, batch_size=a.batchsize)
        elif a.expiration is not None:
            expiring = (Message(line, expiration=a.expiration) for line in lines)
            ack = c.publish(a.topic, expiring, delta=a.delta, batch_size=a.batchsize)
        else:
            ack = c.publish(a.topic, lines, delta=a.delta, batch_size=a.batchsize)
    finally:
        if a.file:
            stream.close()
    took = time.perf_counter() - start
    rate = f", {ack.count / took:,.0f} msg/s" if took > 0 and ack.count else ""
    bookmarks = f" (bookmarks {ack.first_bookmark}..{ack.last_bookmark})" if ack.count else ""
    print(f"published {ack.count} messages to {a.topic}{bookmarks} in {took:.2f}s{rate}", file=out)
    return 0


def _full(command: str, **fields: Any) -> str:
    return json.dumps({"command": command, **fields}, separators=(",", ":"), ensure_ascii=False)


def _record_line(rec: Record, fmt: str, command: str) -> str:
    if fmt == "data":
        return rec.data.decode()
    return _full(
        command,
        topic=rec.topic,
        sow_key=rec.sow_key,
        bookmark=rec.bookmark,
        timestamp=rec.timestamp.isoformat().replace("+00:00", "Z"),
        data=rec.json(),
    )


def _query(a: argparse.Namespace) -> dict[str, Any]:
    """The query options of ``sow`` and ``sow_and_subscribe`` (the same flags)."""
    return {
        "filter": a.filter,
        "order_by": a.orderby,
        "top_n": a.topn,
        "skip_n": a.skipn,
        "batch_size": a.batchsize,
        "sow_keys": [k for k in a.sowkeys.split(",") if k],
        "query_id": a.queryid,
        "bookmark": a.bookmark,
        "grouping": a.grouping,
        "projection": a.projection,
        "select": a.select,
    }


def _sow(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    result = c.sow(a.topic, **_query(a))
    for resp in result.events():
        kind = resp.WhichOneof("event")
        if kind == "records":
            for rec in records_from_pb(resp.records.records):
                print(_record_line(rec, a.format, "sow"), file=out)
        elif a.format == "full" and kind == "group_begin":
            gb = resp.group_begin
            print(_full("group_begin", query_id=gb.query_id, bookmark=gb.bookmark), file=out)
        elif a.format == "full" and kind == "group_end":
            print(_full("group_end", **_group_end(resp.group_end)), file=out)
    return 0


def _group_end(ge: pb.GroupEnd) -> dict[str, Any]:
    return {
        "query_id": ge.query_id,
        "records_returned": ge.records_returned,
        "records_matched": ge.records_matched,
        "records_scanned": ge.records_scanned,
    }


def _live(stream: SubscriptionStream, a: argparse.Namespace, out: IO[str]) -> int:
    """Print events until -count events, -timeout seconds or Ctrl-C (all a normal exit)."""
    timer = threading.Timer(a.timeout, stream.cancel) if a.timeout else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    seen = 0
    try:
        for event in stream:
            if event.kind in ("subscribed", "heartbeat") and a.format == "data":
                continue
            if a.format == "full" and event.kind in (
                "subscribed",
                "group_begin",
                "group_end",
                "completed",
                "heartbeat",
            ):
                print(_full(event.kind, **_frame_fields(event)), file=out, flush=True)
            for rec in event.records:
                if a.format == "data" and event.kind in ("oof", "deleted"):
                    continue  # data format prints documents; -format full shows removals
                line = _record_line(rec, a.format, event.kind)
                if a.format == "full" and event.reason:
                    line = line[:-1] + f',"reason":"{event.reason}"}}'
                print(line, file=out, flush=True)
            if event.kind not in ("subscribed", "heartbeat"):
                seen += 1
            if a.count and seen >= a.count:
                stream.cancel()
                break
    finally:
        if timer is not None:
            timer.cancel()
    return 0


def _frame_fields(event: Event) -> dict[str, Any]:
    if event.kind == "group_end" and event.group_end is not None:
        return _group_end(event.group_end)
    fields: dict[str, Any] = {"bookmark": event.bookmark}
    if event.sub_id:
        fields["sub_id"] = event.sub_id
    if event.kind == "group_begin":
        fields["query_id"] = event.query_id
    return fields


def _subscribe(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    stream = c.subscribe(a.topic, filter=a.filter, oof=a.oof, delta=a.delta, bookmark=a.bookmark, sub_id=a.subid)
    return _live(stream, a, out)


def _sow_and_subscribe(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    stream = c.sow_and_subscribe(
        a.topic,
        **_query(a),
        oof=a.oof,
        delta=a.delta,
        conflation=a.conflation,
        conflation_key=[k for k in a.conflationkey.split(",") if k],
        sub_id=a.subid,
    )
    return _live(stream, a, out)


def _sow_delete(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    keys = [k for k in (a.sowkeys or "").split(",") if k]
    count = c.sow_delete(a.topic, filter=a.filter or "", sow_keys=keys, data=a.data)
    print(count, file=out)
    return 0


def _describe(exc: SowdbError) -> str:
    parts = [f"{exc.code.name}: {exc.message}"]
    if isinstance(exc, PublishError) and exc.message_index is not None:
        parts.append(f"(input message {exc.message_index + 1})")
    elif exc.field:
        parts.append(f"(field {exc.field})")
    return " ".join(parts)


def main(argv: Sequence[str] | None = None, *, out: IO[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    stdout = out or sys.stdout
    try:
        with Client(args.server) as c:
            if args.command == "ping":
                took = c.ping()
                print(f"pong from {args.server} in {took * 1000:.1f} ms", file=stdout)
                return 0
            handlers = {
                "publish": _publish,
                "sow": _sow,
                "sow_delete": _sow_delete,
                "subscribe": _subscribe,
                "sow_and_subscribe": _sow_and_subscribe,
            }
            return handlers[args.command](c, args, stdout)
    except SowdbError as exc:
        print(f"sow: {_describe(exc)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"sow: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
