"""JSON bytes that the server keeps: a record's, a view row's, for as long as it lives.

``orjson.dumps`` writes into a buffer of a few kilobytes and shrinks it when done; the bytes it
returns then keep the allocator's whole chunk in use for as long as they live: ~4 KiB of
resident memory and a page fault for every encoding kept (measured with orjson 3.13 for a
150-byte order: 100,000 kept encodings grew the process by 400 MB, and a publish whose
enrichment encoded each message again page-faulted 1.2 times a message against 0.2 without;
issue 42). :func:`dumps` copies the encoding into bytes of its own size, which the small-object
allocator places (~0.05 µs), and the big buffer goes back at once, to be reused by the next.
Encodings used and dropped (a reply, a key's text) need no copy.
"""

from __future__ import annotations

from typing import Any

import orjson

_EMPTY = b""
_join = _EMPTY.join


def dumps(value: Any) -> bytes:
    """``orjson.dumps(value)`` in bytes of its own size, to keep.

    Raises:
        orjson.JSONEncodeError: ``value`` is not JSON (as ``orjson.dumps``).
    """
    return _join((orjson.dumps(value), _EMPTY))
