"""One benchmark round of the Python SDK, the counterpart of sow.ts and publish.ts.

Usage: ``python py_client.py sow ADDRESS TOPIC BATCH_SIZE`` or
``python py_client.py publish ADDRESS TOPIC FILE``; prints one JSON line like the Node scripts.
"""

from __future__ import annotations

import json
import sys
import time

from sowdb_client import Client


def sow(address: str, topic: str, batch: int) -> dict[str, float]:
    with Client(address) as c:
        c.ping()
        start = time.perf_counter()
        records = check = 0
        for rec in c.sow(topic, batch_size=batch):
            records += 1
            check += rec.json()["qty"]  # the document is parsed: read a field of it
        seconds = time.perf_counter() - start
    return {"records": records, "seconds": seconds, "check": check}


def publish(address: str, topic: str, path: str) -> dict[str, float]:
    with open(path, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f if line.strip()]  # dicts, as an application holds them
    with Client(address) as c:
        c.ping()
        start = time.perf_counter()
        ack = c.publish(topic, docs, batch_size=100)
        seconds = time.perf_counter() - start
    return {"messages": ack.count, "seconds": seconds}


if __name__ == "__main__":
    mode, address, topic, arg = sys.argv[1:5]
    out = sow(address, topic, int(arg)) if mode == "sow" else publish(address, topic, arg)
    print(json.dumps(out))
