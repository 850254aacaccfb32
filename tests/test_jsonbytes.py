"""The JSON bytes the server keeps (records, view rows) cost their size, not an allocator page."""

from __future__ import annotations

from pathlib import Path

import orjson

from sowdb.jsonbytes import dumps

ORDER = {"orderId": 1, "symbol": "SYM1", "price": 101, "qty": 7, "side": "B", "trader": "t1", "venue": "V1", "ts": 1}


def _resident_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def test_a_kept_encoding_is_the_encoding_in_bytes_of_its_own_size() -> None:
    assert dumps(ORDER) == orjson.dumps(ORDER)
    before = _resident_kb()
    kept = [dumps({**ORDER, "orderId": i}) for i in range(20_000)]
    grown_per_encoding = (_resident_kb() - before) * 1024 / len(kept)
    # ~150 B each here; orjson.dumps' own bytes kept ~4 KiB each (issue 42)
    assert grown_per_encoding < 1024, f"{grown_per_encoding:.0f} B of resident memory per kept encoding"
