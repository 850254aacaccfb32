"""How ``sow`` prints: records and frames on stdout, notes on stderr, and ``-count``.

stdout carries only results (one JSON document a line, or ``-format full`` objects), so that it
can be piped; everything said to the person — notes about what silently happened, errors,
summaries — goes to stderr.
"""

from __future__ import annotations

import json
import re
import sys
from typing import IO, Any

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client.cli.args import DEFAULT_PORT
from sowdb_client.cli.formats import render
from sowdb_client.client import Client
from sowdb_client.errors import FailedPreconditionError, SowdbError
from sowdb_client.types import Record

REGEX_METACHARACTERS = frozenset("^$*+?()[]{}|\\")
"""Characters that make a topic name a regular expression (the server's rule: ``.`` is not one)."""


NOT_GRPC = re.compile(
    r"Received http2 header with status: (\d+)|Failed parsing HTTP/2|Trying to connect an http1\.x server"
)
"""What gRPC says when the port it reached answers HTTP, not gRPC: the console's port answers
a call it does not forward with 404, the /metrics port does not speak HTTP/2 at all."""


def describe(exc: SowdbError, server: str, *, field: bool = True) -> str:
    """``CODE: message (field F)``: one line, naming the request field the server blamed; or,
    when ``server`` answered as an HTTP server, a sentence saying so (issue 36: "Received
    http2 header with status: 404" told a person nothing)."""
    if NOT_GRPC.search(exc.message):
        return (
            f"{server} answered as an HTTP server, not as sowdb's gRPC port (default {DEFAULT_PORT}): is it "
            f"the console's or the /metrics port? Give sowd's gRPC address (its banner says 'sowd listening on ...')"
        )
    return f"{exc.code.name}: {exc.message}" + (f" (field {exc.field})" if field and exc.field else "")


def note(text: str) -> None:
    """Tell the person something that would otherwise pass silently (stderr, never stdout)."""
    print(f"sow: note: {text}", file=sys.stderr, flush=True)


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def stored_text(count: int, first: int, last: int) -> str:
    """``stored 100 messages (bookmarks 1..100)``, the bookmarks left out when nothing was stored."""
    bookmarks = f" (bookmarks {first}..{last})" if count else ""
    return f"stored {plural(count, 'message')}{bookmarks}"


def terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except ValueError:  # closed
        return False


def full(command: str, **fields: Any) -> str:
    """One ``-format full`` line: a JSON object with the frame's command first."""
    return json.dumps({"command": command, **fields}, separators=(",", ":"), ensure_ascii=False)


def record_line(rec: Record, fmt: str, command: str, reason: str = "") -> str:
    """A record as ``fmt`` prints it: ``data``, ``full``, or a template (:mod:`.formats`)."""
    if fmt == "data":
        return rec.data.decode()
    if fmt != "full":
        data = rec.data.decode()
        placed = {"bookmark": rec.bookmark, "command": command, "data": data, "length": len(rec.data),
                  "reason": reason, "sow_key": rec.sow_key, "sowkey": rec.sow_key, "topic": rec.topic,
                  "timestamp": rec.timestamp.isoformat().replace("+00:00", "Z")}  # fmt: skip
        return render(fmt, placed)
    fields: dict[str, Any] = {
        "topic": rec.topic,
        "sow_key": rec.sow_key,
        "bookmark": rec.bookmark,
        "timestamp": rec.timestamp.isoformat().replace("+00:00", "Z"),
        "data": rec.json(),
    }
    if reason:
        fields["reason"] = reason
    return full(command, **fields)


def group_end_fields(ge: pb.GroupEnd) -> dict[str, Any]:
    """The counts a query's group_end prints (Q-1), by their protobuf names."""
    names = ("query_id", "records_returned", "records_matched", "records_scanned")
    return {name: getattr(ge, name) for name in names}


class Printer:
    """Prints records and frames, and counts the records for ``-count``.

    ``-count N`` counts records printed — query results, updates and, with ``-format full``,
    oofs and deletes — not the frames around them, so ``-count 3`` prints three records
    however the server batched them.
    """

    def __init__(self, out: IO[str], fmt: str, *, count: int | None = None, live: bool = False) -> None:
        self.out = out
        self.fmt = fmt
        self.limit = count
        self.live = live  # flush every line: a person or a pipe is waiting for it
        self.printed = 0

    @property
    def done(self) -> bool:
        """True once ``-count`` records have been printed."""
        return self.limit is not None and self.printed >= self.limit

    def record(self, rec: Record, command: str, reason: str = "") -> None:
        print(record_line(rec, self.fmt, command, reason), file=self.out, flush=self.live)
        self.printed += 1

    def frame(self, command: str, **fields: Any) -> None:
        """A frame (group_begin, group_end, subscribed, ...): shown by ``-format full`` only."""
        if self.fmt == "full":
            print(full(command, **fields), file=self.out, flush=self.live)


def is_regex(topic: str) -> bool:
    return any(ch in REGEX_METACHARACTERS for ch in topic)


def unconfigured(c: Client, topic: str) -> bool:
    """True when ``topic`` is a plain name that the server says is not a SOW topic (K-5, S-2:
    it keeps no records).

    The server is asked for none of its records (``top_n`` 0), not for its topic list: the list
    holds only the topics the caller may read, so a write-only user's topic was missing from it
    and the note was false (issue 36). A query that is refused for any other reason (no read
    right, no connection) says nothing either way: no note.
    """
    if is_regex(topic):
        return False
    try:
        for _ in c.sow(topic, top_n=0, timeout=5):
            pass
    except FailedPreconditionError as exc:
        return exc.field == "topic"
    except SowdbError:
        return False
    return False
