"""J-4 idempotent producers: the last sequence each producer had applied.

A publish (or a commit of staged writes) may carry a producer id and a sequence number. The
writer applies it only if the sequence is above the producer's last applied one, and writes the
new sequence in the same WriteBatch as the messages (a ``meta`` key per producer), so that a
crash can never keep the messages and lose the sequence, or the reverse. A request whose
sequence is not above it is acknowledged as a duplicate and changes nothing: a producer that
did not hear its acknowledgement sends the same request again, safely.

A producer never seen before accepts any sequence (0 included). The table keeps one entry per
producer ever seen; producers are expected to be few and long-lived (a service, a streaming
query), not one per request.
"""

from __future__ import annotations

from sowdb.errors import InvalidArgument
from sowdb.storage import Batch
from sowdb.storage.keys import encode_seq, producer_key

Producer = tuple[str, int]
"""(producer id, sequence number)."""

MAX_PRODUCER_ID = 256
MAX_SEQ = 2**64 - 1


def check_producer(producer_id: str, seq: int) -> None:
    """Raises:
    InvalidArgument: an id over 256 characters or holding NUL, or a sequence beyond 64 bits.
    """
    if len(producer_id) > MAX_PRODUCER_ID or "\x00" in producer_id:
        raise InvalidArgument(
            f"producer_id must be at most {MAX_PRODUCER_ID} characters without NUL", field="producer_id"
        )
    if not 0 <= seq <= MAX_SEQ:
        raise InvalidArgument("producer_seq must be between 0 and 2^64 - 1", field="producer_seq")


class Producers:
    """The last applied sequence per producer, as loaded at start and kept by the writer."""

    def __init__(self, last: dict[str, int]) -> None:
        self.last = last

    def duplicate(self, producer_id: str, seq: int) -> bool:
        """Whether ``seq`` was applied already (it is not above the producer's last one).

        Raises:
            InvalidArgument: see :func:`check_producer`.
        """
        check_producer(producer_id, seq)
        last = self.last.get(producer_id)
        return last is not None and seq <= last

    def write(self, batch: Batch, producer_id: str, seq: int) -> None:
        """Put the producer's new sequence into the batch of its messages."""
        batch.put_meta(producer_key(producer_id), encode_seq(seq))

    def applied(self, producer_id: str, seq: int) -> None:
        """The batch holding the sequence was written."""
        self.last[producer_id] = seq
