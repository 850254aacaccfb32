"""What the sync and asyncio ``publish`` calls share: the requests they send and the tally of
the acknowledgements they receive.

A publish call keeps requests in flight (the request iterator is consumed by gRPC while acks
come back), so each request is sent with ``stop_on_error``: the server applies nothing after
the first refused request and ends the stream. The tally turns each response into a
:class:`PublishAck`, or into a :class:`PublishError` that says what the call stored before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from sowdb_api.v1 import sow_pb2 as pb
from sowdb_client.errors import PublishError, from_status
from sowdb_client.options import DEFAULT_PUBLISH_BATCH
from sowdb_client.types import DEFAULT_MAX_MESSAGE_BYTES, PublishAck, PublishItem, publish_message

REQUEST_HEADROOM = 4096
"""Bytes of a request's message limit kept for what is not a message: the topic, the producer
id, the correlation id, the flags and the framing (a topic name is at most a few hundred)."""
MESSAGE_FRAMING = 16
"""Bytes of a message's framing inside a request (its field tag and length) and more."""


def publish_requests(
    topic: str,
    messages: Iterable[PublishItem],
    options: Mapping[str, Any],
    tally: PublishTally,
    max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> Iterator[pb.PublishRequest]:
    """Group messages into requests of ``batch_size`` (:class:`~sowdb_client.options.PublishOptions`)
    messages, each also under ``max_bytes`` (the gRPC message limit: 30 documents of 900 KB
    fit the server's ``max_document_bytes`` one by one, not a 16 MiB request together); appends
    each request's size to ``tally.sizes``.

    Every request carries ``stop_on_error``, so that a refusal stops the whole call there. The
    options are checked here, before the call starts: an error raised while gRPC reads the
    requests would reach the caller only as ``UNKNOWN: Exception iterating requests!``, which
    is also why an error raised by ``messages`` is kept in ``tally.input_error`` (the requests
    end there; the caller raises it once the messages sent before it are answered).

    Raises:
        ValueError: ``batch_size`` below 1, or ``producer_seq`` below 0.
    """
    batch_size: int = options.get("batch_size", DEFAULT_PUBLISH_BATCH)
    producer_seq: int = options.get("producer_seq", 1)
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if producer_seq < 0:
        raise ValueError(f"producer_seq must be at least 0, got {producer_seq}")
    return _requests(topic, messages, options, tally, max_bytes)


def _requests(
    topic: str, messages: Iterable[PublishItem], options: Mapping[str, Any], tally: PublishTally, max_bytes: int
) -> Iterator[pb.PublishRequest]:
    delta: bool = options.get("delta", False)
    batch_size: int = options.get("batch_size", DEFAULT_PUBLISH_BATCH)
    producer_id: str = options.get("producer_id", "")
    producer_seq: int = options.get("producer_seq", 1)
    room = max_bytes - REQUEST_HEADROOM - len(topic.encode()) - len(producer_id.encode())

    def request(batch: list[pb.PublishMessage], n: int) -> pb.PublishRequest:
        tally.sizes.append(len(batch))
        req = pb.PublishRequest(topic=topic, messages=batch, delta=delta, correlation_id=str(n), stop_on_error=True)
        if producer_id:  # J-4: request n of the call carries producer_seq + n
            req.producer_id = producer_id
            req.producer_seq = producer_seq + n
        return req

    batch: list[pb.PublishMessage] = []
    used = 0
    n = 0
    try:
        for item in messages:
            msg = publish_message(item)
            size = msg.ByteSize() + MESSAGE_FRAMING
            if batch and used + size > room:  # a message over the limit alone goes alone (refused)
                yield request(batch, n)
                n, batch, used = n + 1, [], 0
            batch.append(msg)
            used += size
            if len(batch) >= batch_size:
                yield request(batch, n)
                n, batch, used = n + 1, [], 0
    except Exception as exc:  # kept, and raised by the call once the requests before it are answered
        tally.input_error = exc
        return  # the batch the error cut short is not sent: a request is stored whole or not at all
    if batch:
        yield request(batch, n)


class PublishTally:
    """The acknowledgements of one publish call so far.

    Attributes:
        sizes: the number of messages of each request sent (filled by :func:`publish_requests`;
            a request is always sent before its response arrives, so its size is known).
        input_error: what the messages' iterable (or encoding a message) raised; the requests
            ended there.
        stored: messages acknowledged so far.
        first_bookmark: the bookmark of the first acknowledged message (0 before any).
        last_bookmark: the bookmark of the last acknowledged message (0 before any).
    """

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.stored = 0
        self.duplicates = 0
        self.first_bookmark = 0
        self.last_bookmark = 0
        self.input_error: Exception | None = None
        self._acked = 0

    def end(self) -> None:
        """The call's stream has ended: raise what the messages' iterable raised, if it did.

        Raises:
            Exception: that error, as the messages' iterable raised it.
        """
        if self.input_error is not None:
            raise self.input_error

    def ack(self, resp: pb.PublishResponse) -> PublishAck:
        """The acknowledgement of the next request.

        Raises:
            PublishError: the request was refused; it carries the tally of what was stored.
        """
        if resp.HasField("error"):
            raise self._refusal(resp)
        size = self.sizes[self._acked]
        self._acked += 1
        self.stored += size
        if resp.duplicate:  # J-4: applied by an earlier call; no bookmarks now
            self.duplicates += size
            return PublishAck(size, 0, 0, duplicates=size)
        self.first_bookmark = self.first_bookmark or resp.first_bookmark
        self.last_bookmark = resp.last_bookmark
        return PublishAck(size, resp.first_bookmark, resp.last_bookmark)

    def total(self) -> PublishAck:
        """The whole call's acknowledgement: every message stored so far."""
        return PublishAck(self.stored, self.first_bookmark, self.last_bookmark, self.duplicates)

    def _refusal(self, resp: pb.PublishResponse) -> PublishError:
        base = from_status(resp.error)
        index = base.metadata.get("message_index")
        offset = sum(self.sizes[: self._acked])
        return PublishError(
            base,
            offset + int(index) if index is not None else None,
            stored=self.stored,
            first_bookmark=self.first_bookmark,
            last_bookmark=self.last_bookmark,
        )
