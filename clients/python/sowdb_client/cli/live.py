"""``sow subscribe`` and ``sow sow_and_subscribe``: print events until -count, -timeout or Ctrl-C."""

from __future__ import annotations

import argparse
import threading
from typing import IO, Any

from sowdb_client.cli.output import Printer, group_end_fields, note, unconfigured
from sowdb_client.cli.query import empty_result, flags, query_options
from sowdb_client.client import Client, SubscriptionStream
from sowdb_client.events import Event

_FRAMES = ("subscribed", "group_begin", "group_end", "completed", "heartbeat")


def _options(a: argparse.Namespace) -> dict[str, Any]:
    """The subscription options shared by both commands."""
    conflation_key = [k.strip() for k in a.conflationkey.split(",") if k.strip()]
    named = flags(a, "filter", "oof", "delta", "no_empties", "bookmark", "conflation", "sub_id")
    return named | {"conflation_key": conflation_key}


def run_subscribe(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    note_text = f"'{a.topic}' is not a configured topic: only messages published to it from now on will arrive"
    return _print_events(c, c.subscribe(a.topic, **_options(a)), a, out, note_text)


def run_sow_and_subscribe(c: Client, a: argparse.Namespace, out: IO[str]) -> int:
    query = query_options(a)
    del query["filter"], query["bookmark"]  # also subscription options
    note_text = (
        f"'{a.topic}' is not a configured topic: it keeps no records, so the query part is empty; "
        "messages published to it from now on will arrive"
    )
    return _print_events(c, c.sow_and_subscribe(a.topic, **query, **_options(a)), a, out, note_text)


def _print_events(
    c: Client, stream: SubscriptionStream, a: argparse.Namespace, out: IO[str], unconfigured_note: str
) -> int:
    """Print events until ``-count`` records, ``-timeout`` seconds or Ctrl-C (all a normal end).

    ``unconfigured_note`` is said once the server has accepted the subscription (its
    ``subscribed`` event), and only when the topic is not configured: a refusal comes first
    and alone (issue 36).

    The data format prints the documents of query results and updates; oofs and deletes have no
    document of their own to show there, so they print with ``-format full`` only (which is why
    ``-oof`` needs it).
    """
    printer = Printer(out, a.format, count=a.count, live=True)
    timer = threading.Timer(a.timeout, stream.cancel) if a.timeout else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        if printer.done:  # -count 0
            return 0
        told = False
        for event in stream:
            if event.kind == "subscribed" and not told:  # once: a resumed subscription says it again
                told = True
                if unconfigured(c, a.topic):
                    note(unconfigured_note)
            if event.kind in _FRAMES:
                printer.frame(event.kind, **_frame_fields(event))
                if event.kind == "group_end" and event.group_end is not None and not event.group_end.records_returned:
                    empty_result(a)
                continue
            if a.format == "data" and event.kind in ("oof", "deleted"):
                continue
            for rec in event.records:
                printer.record(rec, event.kind, event.reason)
                if printer.done:
                    return 0
    finally:
        stream.cancel()
        if timer is not None:
            timer.cancel()
    return 0


def _frame_fields(event: Event) -> dict[str, Any]:
    if event.kind == "group_end" and event.group_end is not None:
        return group_end_fields(event.group_end)
    fields: dict[str, Any] = {"bookmark": event.bookmark}
    if event.sub_id:
        fields["sub_id"] = event.sub_id
    if event.kind == "group_begin":
        fields["query_id"] = event.query_id
    return fields
