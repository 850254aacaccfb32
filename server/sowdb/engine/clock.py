"""The engine's notion of now, injectable so that tests control time."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]
"""Returns the time in microseconds since the epoch."""


def system_clock() -> int:
    return time.time_ns() // 1000
