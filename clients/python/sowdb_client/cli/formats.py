"""AMPS spark's habits that ``sow`` takes (issue 36): ``-format`` templates of placeholders,
and a ``tcp://host:port/amps/json`` server URI.

A template is any ``-format`` that holds a ``{``: each record prints as the template with its
placeholders filled, e.g. ``-format "{bookmark} {sow_key} {data}"``; ``{{`` and ``}}`` print a
brace. The named formats (``data``, ``full``) stay as they were.
"""

from __future__ import annotations

import argparse
import string
from typing import Any

PLACEHOLDERS = {
    "bookmark": "the record's bookmark",
    "command": "sow (a query result), publish (an update), oof or deleted",
    "data": "the document, as stored (JSON)",
    "length": "the document's length in bytes",
    "reason": "an oof's reason (deleted, expired, match), else empty",
    "sow_key": "the record's SowKey (also {sowkey})",
    "sowkey": "the same as {sow_key}",
    "timestamp": "when the record was written, ISO-8601 UTC",
    "topic": "the record's topic",
}
NAMED = ("data", "full")
EXAMPLE = "'{bookmark} {sow_key} {data}'"


def record_format(text: str) -> str:
    """``-format`` of the commands that print records: ``data``, ``full``, or a template.

    Raises:
        argparse.ArgumentTypeError: neither a named format nor a template, or a template with
            a placeholder that is not one of :data:`PLACEHOLDERS` (the message lists them).
    """
    if text in NAMED:
        return text
    if "{" not in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a format: give data, full, or a template of placeholders, e.g. -format {EXAMPLE}"
        )
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(text) if name is not None]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc} (write {{{{ and }}}} for a brace)") from None
    unknown = [name for name in names if name not in PLACEHOLDERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: unknown placeholder {{{(unknown or [''])[0]}}}; the placeholders are "
            + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
        )
    return text


def render(template: str, fields: dict[str, Any]) -> str:
    """``template`` with its placeholders filled from a record's ``fields``."""
    return template.format_map(fields)


URI_SCHEMES = {"tcp": "", "tcps": " with -tls (or -cacert FILE)"}


def server_uri(text: str) -> str:
    """HOST:PORT from an AMPS-style URI (``tcp://db1:9007/amps/json``): the path names AMPS's
    protocol and message type, which sowdb does not have (it speaks gRPC and stores JSON), so a
    ``tcp://`` URI whose host and port are clear is taken as them; anything else is refused with
    what to write instead. Text without ``://`` is returned as it is.

    Raises:
        ValueError: a URI that is not plainly ``tcp://HOST[:PORT][/...]``.
    """
    if "://" not in text:
        return text
    scheme, rest = text.split("://", 1)
    address = rest.split("/", 1)[0]
    if "@" in address:
        raise ValueError(
            f"{text}: sowdb takes no user in the server address: write -server {address.split('@', 1)[1]} "
            "and give the user's token with -token"
        )
    if scheme.lower() == "tcp" and address:
        return address
    how = URI_SCHEMES.get(scheme.lower(), "")
    raise ValueError(
        f"{text}: -server takes HOST[:PORT] (sowdb's gRPC port, default 9007), not a {scheme}:// URI: "
        f"write -server {address or 'HOST:PORT'}{how}"
    )
