"""``sow publish``: one JSON document a line, in atomic requests, with an honest summary.

The SDK stops at the first refused request (nothing after it is stored), and the summary says
what got in: ``stored 100 messages (bookmarks 1..100) before the error at input line 151``.
Line numbers are those of the input file — blank lines are skipped but counted — so that a
person can fix the line and publish the rest from there. Ctrl-C prints the acknowledged count
the same way, warning that requests already sent may also have been stored.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from array import array
from collections.abc import Iterator
from typing import IO, Any

from sowdb_client.cli.args import UsageError
from sowdb_client.cli.output import describe, full, note, plural, stored_text, unconfigured
from sowdb_client.client import Client
from sowdb_client.errors import PublishError, SowdbError
from sowdb_client.types import Message, PublishItem

_REQUEST_INDEX = re.compile(r"^message \d+: ")


NEWLINE = 10
"""The default ``-delimiter``: one message a line."""
CHUNK = 1 << 20


def numbered_lines(stream: IO[bytes], delimiter: int = NEWLINE) -> Iterator[tuple[int, bytes]]:
    """(number, bytes) of each non-blank message of the input, the messages ending at
    ``delimiter`` (a newline: the lines); blank ones count. Bytes, decoded by :func:`_items`:
    a message that is not UTF-8 is then refused by its number, where decoding the whole
    stream failed in gRPC's thread as ``UNKNOWN: Exception iterating requests!``."""
    pieces = iter(stream) if delimiter == NEWLINE else _pieces(stream, bytes([delimiter]))
    for number, piece in enumerate(pieces, 1):
        if piece.strip():
            yield number, piece


def _pieces(stream: IO[bytes], delimiter: bytes) -> Iterator[bytes]:
    """The input cut at ``delimiter`` (AMPS spark's ``-delimiter``), read a chunk at a time."""
    rest = b""
    for chunk in iter(lambda: stream.read(CHUNK), b""):
        *done, rest = (rest + chunk).split(delimiter)
        yield from done
    if rest:
        yield rest


def paced(items: Iterator[tuple[int, bytes]], rate: float | None) -> Iterator[tuple[int, bytes]]:
    """The items at most ``rate`` a second."""
    if not rate:
        yield from items
        return
    start = time.perf_counter()
    for i, item in enumerate(items):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        yield item


class _Progress:
    """What the acknowledgements have covered so far: messages, bookmarks and input lines."""

    def __init__(self, unit: str) -> None:
        self.unit = unit  # what the input's numbers count: "line", or "message" with -delimiter
        self.lines = array("Q")  # the input line of each message sent, by message index
        self.input_error = ""  # what is wrong with the input at the number ``bad_line``
        self.bad_line = 0
        self.stored = 0
        self.requests = 0
        self.duplicates = 0  # J-4: acknowledged as applied before (-producer)
        self.first = 0
        self.last = 0

    def line_of(self, index: int) -> int:
        return self.lines[index]

    def stored_text(self) -> str:
        return stored_text(self.stored, self.first, self.last)


PROGRESS_AFTER_S = 0.5
"""A publish that takes longer than this shows a progress line (on a terminal): a short one
stays a single summary line, a long one (a million orders take ~15 s) is not silent."""


class _Bar:
    """A rich progress line on stderr for a publish that runs long, when stderr is a terminal;
    erased at the end (the summary follows). ``total``: the input's lines, when it is a file."""

    def __init__(self, topic: str, total: int | None) -> None:
        self.topic, self.total = topic, total
        self.on = sys.stderr.isatty()
        self.started = time.perf_counter()
        self._bar: Any = None
        self._task: Any = None

    def update(self, stored: int) -> None:
        if not self.on or (self._bar is None and time.perf_counter() - self.started < PROGRESS_AFTER_S):
            return
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            columns = (
                TextColumn("publishing to {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
            )
            self._bar = Progress(*columns, console=Console(stderr=True), transient=True)
            self._task = self._bar.add_task(self.topic, total=self.total, rate="")
            self._bar.start()
        rate = stored / (time.perf_counter() - self.started)
        self._bar.update(self._task, completed=stored, rate=f"{rate:>9,.0f} msg/s")

    def close(self) -> None:
        """Erase the line (before any other output on stderr); idempotent."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
            self.on = False


def _line_count(path: str) -> int | None:
    """The lines of the input file, for the progress line's total (None where it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None


def run_publish(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    progress = _Progress("line" if a.delimiter == NEWLINE else "message")
    # stdin through a reader of its own, not sys.stdin.buffer: gRPC's thread may be blocked in a
    # read of it at Ctrl-C, and the interpreter's exit would wait for sys.stdin's lock (abort)
    source = a.file or sys.stdin.fileno()
    stream = open(source, "rb", closefd=bool(a.file))  # noqa: SIM115 (closed below)
    start = time.perf_counter()
    bar = _Bar(a.topic, _line_count(a.file) if a.file and sys.stderr.isatty() else None)
    try:
        lines = paced(numbered_lines(stream, a.delimiter), a.rate)
        if a.sowkey:  # checked here: an error raised while gRPC reads the messages would be lost
            given = list(lines)
            if len(given) != 1:
                raise UsageError(f"-sowkey publishes exactly one message; the input has {len(given)}")
            lines = iter(given)
        producer = {"producer_id": a.producer, "producer_seq": a.producerseq} if a.producer else {}
        acks = c.publish_iter(a.topic, _items(lines, a, progress), delta=a.delta, batch_size=a.batchsize, **producer)
        for ack in acks:
            progress.stored += ack.count
            progress.requests += 1
            progress.duplicates += ack.duplicates
            progress.first = progress.first or ack.first_bookmark
            progress.last = ack.last_bookmark or progress.last
            bar.update(progress.stored)
    except SowdbError as exc:
        bar.close()
        message, where = describe(exc, a.server, field=False), ""
        if isinstance(exc, PublishError) and exc.message_index is not None:
            # the server counts messages within its request; the input line says more here
            message = f"{exc.code.name}: {_REQUEST_INDEX.sub('', exc.message)}"
            where = f" at input {progress.unit} {progress.line_of(exc.message_index)}"
        print(f"sow: {message}; {progress.stored_text()} before the error{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        bar.close()
        through = f", through input {progress.unit} {progress.line_of(progress.stored - 1)}" if progress.stored else ""
        print(
            f"sow: interrupted: {progress.stored_text()}{through}; requests in flight may also have been stored",
            file=sys.stderr,
            flush=True,
        )
        return 130
    finally:
        bar.close()
        if a.file:
            stream.close()
    if progress.input_error:  # the messages before it are stored: publish again from that line
        where = f"input {progress.unit} {progress.bad_line}"
        print(f"sow: {where}: {progress.input_error}; {progress.stored_text()} before the error at {where}",
              file=sys.stderr)  # fmt: skip
        return 1
    _summary(a, progress, time.perf_counter() - start, out)
    if unconfigured(c, a.topic):  # after the publish: a refusal says what went wrong, first and alone
        note(f"'{a.topic}' is not a configured topic: journaled only, no SOW (subscribers get the messages)")
    return 0


def _items(lines: Iterator[tuple[int, bytes]], a: argparse.Namespace, progress: _Progress) -> Iterator[PublishItem]:
    """The messages to send, noting each one's input line (gRPC sends them from its own thread;
    a message's line is noted before it is sent, so before any response can name it).

    A message that is not UTF-8 text ends the input there (noted in ``progress``): the messages
    before it are sent and stored, so that the summary can say to publish again from its line.
    """
    for number, raw in lines:
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            progress.input_error = (
                f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the {progress.unit})"
            )
            progress.bad_line = number
            return
        progress.lines.append(number)
        if a.sowkey or a.expiration is not None:
            yield Message(text, sow_key=a.sowkey or "", expiration=a.expiration)
        else:
            yield text


def _summary(a: argparse.Namespace, progress: _Progress, took: float, out: IO[str]) -> None:
    if a.format == "bookmark":
        if progress.stored:
            print(progress.last, file=out)
        return
    producer = {}
    if a.producer:
        producer = {"duplicates": progress.duplicates, "next_producer_seq": a.producerseq + progress.requests}
    if a.format == "full":
        print(
            full(
                "published",
                topic=a.topic,
                count=progress.stored,
                first_bookmark=progress.first,
                last_bookmark=progress.last,
                seconds=round(took, 6),
                **producer,
            ),
            file=out,
        )
        return
    rate = f", {progress.stored / took:,.0f} msg/s" if took > 0 and progress.stored else ""
    bookmarks = f" (bookmarks {progress.first}..{progress.last})" if progress.last else ""
    print(f"published {plural(progress.stored, 'message')} to {a.topic}{bookmarks} in {took:.2f}s{rate}", file=out)
    if a.producer:
        print(
            f"producer {a.producer}: {plural(progress.duplicates, 'message')} acknowledged as duplicates (applied "
            f"before); its next -producerseq is {a.producerseq + progress.requests}",
            file=out,
        )
