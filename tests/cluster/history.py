"""A Jepsen-style history of writes against a cluster (issue 31): each write attempted (its
ids), each acknowledgement (the ids, the node and epoch that acknowledged it, when the request was
sent and its answer received on the test's monotonic clock, the last bookmark) and each refusal,
by any number of writer threads; and the check against a final read: *lost* = acknowledged - read
and *unexpected* = read - attempted must be empty, and no two epochs acknowledge at once."""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field, replace

import grpc

from sowdb_client import Client, SowdbError
from tests.cluster.support import TTL

UNKNOWN = -1
"""The epoch of an acknowledgement whose epoch is not known (:meth:`History.unlabel`)."""


@dataclass(frozen=True)
class Ack:
    """One acknowledged publish: its ids, the node and epoch that acknowledged it, and when the
    request was sent and its answer received (the decision lies between)."""

    ids: tuple[int, ...]
    node: str
    epoch: int
    sent: float
    received: float
    bookmark: int = 0  # the last one it gave


@dataclass(frozen=True)
class Refusal:
    node: str
    code: grpc.StatusCode
    message: str
    sent: float
    received: float


@dataclass
class History:
    """Every write attempted, acknowledged and refused, by any writer thread."""

    attempted: set[int] = field(default_factory=set)
    acks: list[Ack] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def publish(self, target: str, node: str, epoch: int, ids: range, timeout: float = TTL + 8) -> Ack | Refusal:
        with self.lock:
            self.attempted.update(ids)
        sent = time.monotonic()
        try:
            with Client(target) as c:
                bookmark = c.publish("orders", [{"id": i} for i in ids], timeout=timeout).last_bookmark
        except SowdbError as exc:
            refusal = Refusal(node, exc.code, exc.message, sent, time.monotonic())
            with self.lock:
                self.refusals.append(refusal)
            return refusal
        ack = Ack(tuple(ids), node, epoch, sent, time.monotonic(), bookmark)
        with self.lock:
            self.acks.append(ack)
        return ack

    def acknowledged(self, node: str | None = None) -> list[Ack]:
        with self.lock:
            return [a for a in self.acks if node is None or a.node == node]

    def unlabel(self, node: str, epoch: int) -> None:
        """Forget which epoch ``node``'s acknowledgements labelled ``epoch`` came at (a writer
        labels them with the epoch its node led at when it began; the node may since have stepped
        down and led again): they still count as acknowledged, not in the epochs' order."""
        with self.lock:
            self.acks = [replace(a, epoch=UNKNOWN) if (a.node, a.epoch) == (node, epoch) else a for a in self.acks]

    def check(self, read: set[int]) -> None:
        """Jepsen's set check, and no two epochs acknowledging at once: every acknowledgement of a
        lower epoch was sent before any of a higher epoch was received."""
        acknowledged = {i for a in self.acks for i in a.ids}
        lost, unexpected = acknowledged - read, read - self.attempted
        assert not lost, f"{len(lost)} acknowledged writes lost: {sorted(lost)[:20]}"
        assert not unexpected, f"{len(unexpected)} writes read that nobody attempted: {sorted(unexpected)[:20]}"
        epochs = sorted({a.epoch for a in self.acks} - {UNKNOWN})
        for lower, higher in itertools.pairwise(epochs):
            last = max((a for a in self.acks if a.epoch == lower), key=lambda a: a.sent)
            first = min((a for a in self.acks if a.epoch == higher), key=lambda a: a.received)
            assert last.sent < first.received, f"epoch {lower} acknowledged after epoch {higher}: {last}, {first}"


class Writer:
    """A thread publishing batches of fresh ids to one node until stopped; a refusal is recorded
    and the next batch follows (paced, so that a node that is down is not dialled in a tight loop)."""

    def __init__(self, history: History, target: str, node: str, epoch: int, start: int) -> None:
        self.history, self.target, self.node, self.epoch = history, target, node, epoch
        self.next = start
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"writer-{node}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            ids = range(self.next, self.next + 5)
            self.next += 5
            if isinstance(self.history.publish(self.target, self.node, self.epoch, ids), Refusal):
                self.stop.wait(0.05)

    def join(self) -> None:
        self.stop.set()
        self.thread.join(timeout=TTL + 20)
        assert not self.thread.is_alive()


REFUSED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.DEADLINE_EXCEEDED)
"""How a fenced or deposed primary may answer a write: refused, or not answered in time (a
request that waited for replicas the partition held)."""
