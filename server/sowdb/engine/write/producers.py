"""J-4 idempotent producers: the last sequence each producer had applied.

A publish (or a commit of staged writes) may carry a producer id and a sequence number. The
writer applies it only if the sequence is above the producer's last applied one, and writes the
new sequence in the same WriteBatch as the messages (a ``meta`` key per producer), so that a
crash can never keep the messages and lose the sequence, or the reverse. A request whose
sequence is not above it is acknowledged as a duplicate and changes nothing: a producer that
did not hear its acknowledgement sends the same request again, safely.

A producer is its caller's, on one topic: the id is scoped to the (user, topic) it is used by
(:func:`scoped`), so one user cannot take another's id — a high sequence there would make every
later request of the other user an acknowledged, silently dropped, duplicate. The sequence is
at most 2^63 - 1 (a signed 64-bit counter, which every client language has; a -1 sent as
unsigned is refused rather than taken as the highest sequence, which would leave the producer no
sequence above it).

Entries stored before producers were scoped are keyed by the id alone (``producer | 0x00 | id``,
no NUL after the prefix, since an id holds none): they belong to the user of a server without
security (``""``) on every topic, and keep de-duplicating its requests as they did; other users
start afresh.

Replication (SPEC §13): beside the producer's entry, the same WriteBatch writes a ``producer_at``
entry keyed by the batch's last bookmark (:func:`~sowdb.storage.keys.producer_log_key`). The
primary ships those with the journal entries they belong to; a replica writes them, and the
producer's entry, in the WriteBatch of the same entries, so a promoted replica knows every
producer's last sequence exactly as the primary did after the same bookmark, and a producer's
retry after a failover is a duplicate there too.

A producer never seen before accepts any sequence (0 included). The table keeps one entry per
producer ever seen; producers are expected to be few and long-lived (a service, a streaming
query), not one per request.
"""

from __future__ import annotations

from sowdb.errors import InvalidArgument
from sowdb.storage import Batch
from sowdb.storage.keys import encode_producer_log, encode_seq, producer_key, producer_log_key

Producer = tuple[str, int]
"""(producer id, sequence number): as a request names it, or as :func:`scoped` keys it."""

MAX_PRODUCER_ID = 256
MAX_SEQ = 2**63 - 1


def check_producer(producer_id: str, seq: int) -> None:
    """Raises:
    InvalidArgument: an id over 256 characters or holding NUL, or a sequence beyond 2^63 - 1.
    """
    if len(producer_id) > MAX_PRODUCER_ID or "\x00" in producer_id:
        raise InvalidArgument(
            f"producer_id must be at most {MAX_PRODUCER_ID} characters without NUL", field="producer_id"
        )
    if not 0 <= seq <= MAX_SEQ:
        raise InvalidArgument(
            "producer_seq must be between 0 and 2^63 - 1 (a higher one would leave the producer no next sequence)",
            field="producer_seq",
        )


def scoped(producer: Producer, user: str, topic: str) -> Producer:
    """A request's producer, checked and keyed by its caller and topic (``user NUL topic NUL
    id``: neither a topic nor an id holds NUL, so no two scopes share a key).

    Raises:
        InvalidArgument: see :func:`check_producer`.
    """
    check_producer(*producer)
    return f"{user}\x00{topic}\x00{producer[0]}", producer[1]


class Producers:
    """The last applied sequence per scoped producer, as loaded at start and kept by the writer."""

    def __init__(self, last: dict[str, int]) -> None:
        self.last = last

    def duplicate(self, key: str, seq: int) -> bool:
        """Whether ``seq`` was applied already for the producer ``key`` (:func:`scoped`): it is
        not above the producer's last one, or, for the security-off user, not above the entry
        of its id stored before producers were scoped."""
        last = self.last.get(key)
        if last is not None and seq <= last:
            return True
        if key.startswith("\x00"):  # the user "": its id's unscoped entry, if any, counts too
            legacy = self.last.get(key[key.index("\x00", 1) + 1 :])
            return legacy is not None and seq <= legacy
        return False

    def write(self, batch: Batch, key: str, seq: int, bookmark: int = 0) -> None:
        """Put the producer's new sequence into the batch of its messages, and its log entry at
        the batch's last bookmark (``bookmark`` when given: a replica's batch may hold several
        of the primary's)."""
        batch.put_meta(producer_key(key), encode_seq(seq))
        batch.put_meta(producer_log_key(bookmark or batch.last), encode_producer_log(key, seq))

    def applied(self, key: str, seq: int) -> None:
        """The batch holding the sequence was written."""
        self.last[key] = seq
