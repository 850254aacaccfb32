"""``sow sow``, ``sow sow_delete`` and ``sow topics``: the commands that ask once and print."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.table import Table

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client.cli.args import sow_keys
from sowdb_client.cli.output import Printer, group_end_fields, note, plural, terminal
from sowdb_client.client import Client
from sowdb_client.options import DeleteOptions
from sowdb_client.types import records_of


def query_options(a: argparse.Namespace) -> dict[str, Any]:
    """The query options of ``sow`` and ``sow_and_subscribe`` (the same flags)."""
    named = flags(a, "filter", "order_by", "top_n", "skip_n", "batch_size", "query_id", "bookmark")
    keys = sow_keys(a)
    return named | flags(a, "grouping", "projection", "select") | ({"sow_keys": keys} if keys else {})


def flags(a: argparse.Namespace, *options: str) -> dict[str, Any]:
    """SDK options from the flags of the same name: a flag is its option's name without the
    underscores, as AMPS's spark writes them (``-orderby`` for ``order_by``)."""
    return {name: getattr(a, name.replace("_", "")) for name in options}


def run_sow(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    printer = Printer(out, a.format)
    returned = 0
    for resp in c.sow(a.topic, **query_options(a)).events():
        kind = resp.WhichOneof("event")
        if kind == "records":
            for rec in records_of(resp.records):
                printer.record(rec, "sow")
        elif kind == "group_begin":
            printer.frame("group_begin", query_id=resp.group_begin.query_id, bookmark=resp.group_begin.bookmark)
        elif kind == "group_end":
            returned = resp.group_end.records_returned
            printer.frame("group_end", **group_end_fields(resp.group_end))
    if not returned:
        empty_result(a)
    return 0


def empty_result(a: argparse.Namespace) -> None:
    """Say so when a query found nothing: ``0 records`` for a person at a terminal (a script
    reading stderr gets silence), and, whatever stderr is, why ``-sowkeys`` may have missed."""
    if terminal(sys.stderr):
        print("0 records", file=sys.stderr, flush=True)
    keys_hint(a)


def keys_hint(a: argparse.Namespace) -> None:
    """After an empty result: how ``-sowkeys`` was read, when that may not be what was meant.

    ``-sowkeys 1,"A"`` splits at the comma (two keys, ``1`` and ``"A"``), and ``-sowkeys
    '["SYM1"]'`` is a JSON list holding the key ``SYM1`` — not the view key ``["SYM1"]``.
    """
    text = (getattr(a, "sowkeys", "") or "").strip()
    if text.startswith("["):
        note(
            f"-sowkeys read a JSON list of keys ({', '.join(json.loads(text))}); a view's key is itself "
            f"a JSON list: name it with -sowkey, e.g. -sowkey '{text}'"
        )
    elif '"' in text and "," in text:
        note(
            f"-sowkeys splits at commas ({' | '.join(k for k in text.split(',') if k)}); name a key that "
            f"contains commas with -sowkey, e.g. -sowkey '{text}', or a JSON list of strings"
        )


def run_sow_delete(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    keys = sow_keys(a)
    selector: DeleteOptions = {"sow_keys": keys} if keys else {"filter": a.filter or "", "data": a.data}
    count = c.sow_delete(a.topic, **selector)
    print(f"deleted {plural(count, 'record')} from {a.topic}", file=out)
    if not count and keys:
        keys_hint(a)
    return 0


TOPIC_KINDS = {pb.TOPIC_KIND_SOW: "sow", pb.TOPIC_KIND_VIEW: "view", pb.TOPIC_KIND_CONFLATED: "conflated"}
_DURABILITY = {pb.DURABILITY_PERSISTENT: "persistent", pb.DURABILITY_TRANSIENT: "transient"}
_UNITS = (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0), ("ms", 0.001))


def seconds_of(d: Any) -> float:
    return float(d.seconds + d.nanos / 1e9)


def duration_text(seconds: float) -> str:
    """``1d``, ``5s``, ``1.5s``: the largest unit that writes it whole (config style)."""
    for unit, size in _UNITS:
        if seconds >= size and abs(seconds / size - round(seconds / size)) < 1e-9:
            return f"{round(seconds / size)}{unit}"
    return f"{seconds:g}s"


def run_topics(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    topics = c.list_topics()
    if a.format == "json":
        for t in topics:
            print(json.dumps(_topic_json(t), separators=(",", ":")), file=out)
        return 0
    rows = []
    for t in topics:
        history = ""
        if t.HasField("history"):
            history = duration_text(seconds_of(t.history.window))
            if seconds_of(t.history.granularity):
                history += f" per {duration_text(seconds_of(t.history.granularity))}"
        expiration = seconds_of(t.expiration)
        rows.append(
            (
                t.name,
                TOPIC_KINDS.get(t.kind, "?"),
                _key_text(t),
                _DURABILITY.get(t.durability, ""),
                history,
                f"{t.record_count:,}",
                ", ".join(t.indexes),
                t.underlying,
                duration_text(expiration) if expiration else "",
            )
        )
    # not a terminal: wide enough never to wrap a row, so that each topic stays on one line
    console = Console(file=out, width=None if terminal(out) else 240, highlight=False)
    unbounded = console.options.update(max_width=1_000_000)  # a table's own width, not the console's
    table = _topics_table(rows, _TOPIC_COLUMNS)
    if console.measure(table, options=unbounded).maximum > console.width:  # e.g. 80 columns
        columns = [c for i, c in enumerate(_TOPIC_COLUMNS) if any(row[i] for row in rows)]
        left_out = [c for c in _TOPIC_COLUMNS if c not in columns]
        table = _topics_table(rows, columns, compact=True)
        for dropped in _DROPPED_FIRST:  # rather than cutting every header to a stub
            if console.measure(table, options=unbounded).minimum <= console.width:
                break
            if dropped in columns:
                columns.remove(dropped)
                left_out.append(dropped)
                table = _topics_table(rows, columns, compact=True)
        if left_out:
            note(f"left out at this width: {', '.join(left_out)} (sow topics -format json has every field)")
    console.print(table)
    return 0


_TOPIC_COLUMNS = ("name", "kind", "key", "durability", "history", "records", "indexes", "underlying", "expiration")
_DROPPED_FIRST = ("expiration", "history", "indexes", "durability", "underlying")
"""On a terminal too narrow for the table, the columns left out, first to last, until the rest
fits with whole headers; the columns empty in every row go first of all."""


def _topics_table(rows: Sequence[tuple[str, ...]], columns: Sequence[str], *, compact: bool = False) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False) if compact else Table()
    for name in columns:
        table.add_column(name, justify="right" if name == "records" else "left", no_wrap=name == "name")
    for row in rows:
        table.add_row(*(row[_TOPIC_COLUMNS.index(name)] for name in columns))
    return table


def _key_text(t: pb.TopicInfo) -> str:
    """The key paths; for topics without any, where their SowKeys come from."""
    if t.key:
        return ", ".join(t.key)
    if t.kind == pb.TOPIC_KIND_VIEW:
        return "(group values)"
    if t.kind == pb.TOPIC_KIND_CONFLATED:
        return f"(as {t.underlying})"
    return "(set by publisher)"


def _topic_json(t: pb.TopicInfo) -> dict[str, Any]:
    history = None
    if t.HasField("history"):
        history = {"window_s": seconds_of(t.history.window), "granularity_s": seconds_of(t.history.granularity)}
    return {
        "name": t.name,
        "kind": TOPIC_KINDS.get(t.kind, "unspecified"),
        "key": list(t.key),
        "durability": _DURABILITY.get(t.durability, ""),
        "history": history,
        "records": t.record_count,
        "indexes": list(t.indexes),
        "underlying": t.underlying,
        "expiration_s": seconds_of(t.expiration),
    }
