"""The numeric flags' types: each refuses, in one line naming its range, a value the command
could not use (issue 36).

argparse names the flag (``argument -topn/--topn: ...``), so the messages here say only what
is wrong with the value and what the flag takes. Before, ``-topn -1`` reached protobuf and
ended in a traceback (``ValueError: Value out of range``), and ``-timeout -1`` or ``-rate -1``
were taken silently (no timeout, no pacing).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

UINT32_MAX = 2**32 - 1
"""The largest ``top_n`` / ``skip_n`` the protocol carries (``uint32``)."""
UINT64_MAX = 2**64 - 1
"""The largest ``producer_seq`` (``uint64``)."""


def whole(low: int, high: int) -> Callable[[str], int]:
    """The type of a flag that takes a whole number in ``low..high``."""
    span = f"a whole number from {low} to {high}"

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {span}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: {span}")
        return n

    parse.__name__ = "whole number"  # what argparse would name the type in its own messages
    return parse


def seconds(*, zero: bool = False) -> Callable[[str], float]:
    """The type of a flag that takes a positive, finite number (of seconds, of messages a
    second); with ``zero``, 0 as well."""
    span = "a number of 0 or more" if zero else "a number above 0"

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {span}") from None
        if not math.isfinite(x) or x < 0 or (x == 0 and not zero):
            raise argparse.ArgumentTypeError(f"{text} is out of range: {span}, e.g. 0.5")
        return x

    parse.__name__ = "number"
    return parse


def delimiter(text: str) -> int:
    """``-delimiter``: the byte that ends each message of the input, as AMPS's spark takes it,
    a byte value (``10``, the default newline; ``0``; ``0x1e``) or one ASCII character
    (``'|'``)."""
    span = "a byte value from 0 to 255 (10 is a newline) or one ASCII character, e.g. -delimiter '|'"
    if len(text) == 1 and not text.isdigit():
        if not text.isascii():
            raise argparse.ArgumentTypeError(f"{text!r} is not {span}")
        return ord(text)
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {span}") from None
    if not 0 <= n <= 255:
        raise argparse.ArgumentTypeError(f"{text} is out of range: {span}")
    return n


TOP_N = whole(0, UINT32_MAX)
SKIP_N = whole(0, UINT32_MAX)
QUERY_BATCH = whole(1, 10_000)
PUBLISH_BATCH = whole(1, 1_000_000)
PRODUCER_SEQ = whole(0, UINT64_MAX)
COUNT = whole(0, UINT32_MAX)
POSITIVE = seconds()
