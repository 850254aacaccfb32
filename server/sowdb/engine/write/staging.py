"""Staged writes: messages held until a commit applies exactly the named stages atomically
(SPEC §9, batch and streaming writes).

A writer (a Spark task attempt) stages its messages under an id of its choosing. They are
validated as they arrive — JSON, key fields, SowKeys, the same checks as a publish (K-3) — so a
bad message fails the job early, naming it; a stage is complete once its stream ends well
(:meth:`StageBuilder.seal`). :meth:`Stages.commit` then applies the named stages as ONE batch of
the single writer: one WriteBatch, contiguous bookmarks, one place in the total order. What can
be done ahead — decoding each document again, for the in-memory state — is done in slices of
:data:`~sowdb.engine.read.execution.SLICE_S` with the event loop free; the apply itself is one
synchronous step (:meth:`Writer.publish_decoded`), because every reader must see all of it or
none of it. A commit with a producer id and sequence (J-4) that is not above the producer's last
is a duplicate: nothing is applied and its stages are dropped.

Stages live in memory, as the documents' bytes and SowKeys (the decoded documents would cost
several times the bytes): a failed or aborted job — or a server restart — simply loses them,
which leaves the topic unchanged, as it must. Stages neither committed nor aborted are dropped
when their lease ends (:meth:`Stages.expire`, from the upkeep). The bytes staged at once are
bounded (:data:`MAX_STAGED_BYTES`).

A stage belongs to the user who staged it: stage ids are the user's own namespace (two users may
both stage ``spark-…-0``), and no other user can add to, commit or abort it, or learn its topic
— to them it does not exist. A stage whose owner lost the right to write its topic (a reload,
A-4) is dropped (:meth:`Stages.reauthorize`).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from sowdb.engine.access import EVERYONE, Access, check_quota
from sowdb.engine.clock import Clock
from sowdb.engine.read import CHUNK, Slicer
from sowdb.engine.state import Topics, check_topic_name
from sowdb.engine.write.enrichment import of_topic, preprocess
from sowdb.engine.write.messages import MessageLike, check_ttls, decode_batch
from sowdb.engine.write.producers import Producer, scoped
from sowdb.engine.write.writer import Writer
from sowdb.errors import FailedPrecondition, InvalidArgument, NotFound, PublishError, ResourceExhausted
from sowdb.expr.rewrite import Rewrite

STAGE_LEASE_S = 3600.0
"""How long a stage is kept after it was last written, if neither committed nor aborted."""
MAX_STAGED_BYTES = 2 * 1024**3
"""Bytes of documents staged at once, over all stages; a stage that would pass it is refused."""
MAX_STAGE_ID = 256

StageKey = tuple[str, str]
"""(owner, stage id): a stage's name is its owner's own."""

log = logging.getLogger("sowdb.engine")


class Prepared(NamedTuple):
    """Staged messages ready for :meth:`Writer.publish_decoded`, in its argument order, and
    the messages as received where a topic's preprocessing (EN-1) rewrote them."""

    keys: list[str]
    docs: list[dict[str, Any]]
    raws: list[bytes]
    ttls: list[float | None] | None
    received: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class Committed:
    """What :meth:`Stages.commit` answers: the bookmarks applied, or a J-4 duplicate."""

    first: int
    last: int
    count: int
    duplicate: bool = False


class _Stage:
    __slots__ = ("bytes", "committing", "expires_us", "keys", "raws", "sealed", "topic", "ttls")

    def __init__(self, topic: str, expires_us: int) -> None:
        self.topic = topic
        self.raws: list[bytes] = []
        self.keys: list[str] = []
        self.ttls: list[float | None] | None = None
        self.bytes = 0
        self.sealed = False
        self.committing = False
        self.expires_us = expires_us


def _check_stage_id(stage_id: str, field: str = "stage_id") -> None:
    if not stage_id or len(stage_id) > MAX_STAGE_ID or "\x00" in stage_id:
        raise InvalidArgument(f"{field} must be 1 to {MAX_STAGE_ID} characters without NUL", field=field)


class StageBuilder:
    """One StageWrite call: messages added in order, checked as they come."""

    def __init__(self, stages: Stages, key: StageKey, stage: _Stage, access: Access = EVERYONE) -> None:
        self._stages = stages
        self.key = key
        self.stage_id = key[1]
        self._stage = stage
        self._access = access

    @property
    def count(self) -> int:
        return len(self._stage.raws)

    @property
    def topic(self) -> str:
        return self._stage.topic

    def add(self, messages: Sequence[MessageLike], ttls: Sequence[float | None] | None = None) -> None:
        """Check and keep messages (K-3); an error names the message by its index in the stage.

        Raises:
            PublishError: a message is invalid (nothing of this call's stage is kept).
            ResourceExhausted: the server holds too many staged bytes, or the caller its
                ``max_staged_bytes`` quota (issue 26).
        """
        stage = self._stage
        if not messages:
            return
        if ttls is not None:
            check_ttls(ttls, len(messages))
        raws = [m.data for m in messages]
        size = sum(map(len, raws))
        try:
            check_quota(self._access, "max_staged_bytes", self._stages.bytes_of(self.key[0]), size)
        except ResourceExhausted:
            self._stages.discard(self.key)
            raise
        if self._stages.staged_bytes + size > MAX_STAGED_BYTES:
            self._stages.discard(self.key)
            raise ResourceExhausted(
                f"the server holds {MAX_STAGED_BYTES // 1024**2} MiB of staged messages, its limit; commit or abort "
                "stages, or write in smaller jobs",
                field="messages",
            )
        topic = self._stages.topics.get(stage.topic)
        try:
            _, keys = decode_batch(
                stage.topic,
                topic.keys if topic is not None else None,
                messages,
                list(raws),  # the stage keeps the messages as received; the commit preprocesses again
                self._stages.writer.max_document_bytes,
                key_optional=topic is None,
                preprocessing=of_topic(topic).preprocessing,
            )
        except PublishError as exc:
            self._stages.discard(self.key)
            raise PublishError(self.count + exc.index, exc.cause) from None
        if ttls is not None or stage.ttls is not None:
            stage.ttls = (stage.ttls or [None] * len(stage.raws)) + list(ttls or [None] * len(raws))
        stage.raws.extend(raws)
        stage.keys.extend(keys)
        stage.bytes += size
        self._stages.staged_bytes += size
        stage.expires_us = self._stages.clock() + self._stages.lease_us

    def seal(self) -> int:
        """The call ended well: the stage may be committed. Returns its message count."""
        self._stage.sealed = True
        return self.count

    def discard(self) -> None:
        """The call failed or was cancelled: the stage is dropped."""
        if not self._stage.sealed:
            self._stages.discard(self.key, only=self._stage)


class Stages:
    """The staged writes of a server, by stage id."""

    def __init__(self, topics: Topics, writer: Writer, clock: Clock, *, lease_s: float = STAGE_LEASE_S) -> None:
        self.topics = topics
        self.writer = writer
        self.clock = clock
        self.lease_us = int(lease_s * 1_000_000)
        self.staged_bytes = 0
        self._held: dict[StageKey, _Stage] = {}

    def __len__(self) -> int:
        return len(self._held)

    def bytes_of(self, user: str) -> int:
        """The bytes ``user``'s stages hold."""
        return sum(stage.bytes for (owner, _), stage in self._held.items() if owner == user)

    def begin(self, stage_id: str, topic: str, access: Access = EVERYONE) -> StageBuilder:
        """Start (or restart: a stage id the owner holds already is replaced) a stage for ``topic``,
        owned by ``access``'s user; its bytes count against that user's ``max_staged_bytes`` quota.

        Raises:
            InvalidArgument: a bad stage id or topic name.
            FailedPrecondition: the topic is a view or conflated topic (K-4); the stage is being
                committed.
        """
        _check_stage_id(stage_id)
        check_topic_name(topic)
        self.topics.check_writable(topic, "stage writes for")
        key = (access.user, stage_id)
        old = self._held.get(key)
        if old is not None and old.committing:
            raise FailedPrecondition(f"stage {stage_id!r} is being committed", field="stage_id")
        self.discard(key)
        stage = self._held[key] = _Stage(topic, self.clock() + self.lease_us)
        return StageBuilder(self, key, stage, access)

    def discard(self, key: StageKey, *, only: _Stage | None = None) -> bool:
        stage = self._held.get(key)
        if stage is None or (only is not None and stage is not only):
            return False
        del self._held[key]
        self.staged_bytes -= stage.bytes
        return True

    def abort(
        self,
        stage_ids: Sequence[str] = (),
        prefix: str = "",
        writable: Callable[[str], bool] | None = None,
        owner: str = "",
    ) -> int:
        """Drop the owner's stages by id and by id prefix (those being committed stay, and,
        given ``writable``, those of topics the caller may not write); returns how many."""
        keys = {(owner, sid) for sid in stage_ids}
        if prefix:
            keys.update(k for k in self._held if k[0] == owner and k[1].startswith(prefix))
        held = self._held
        return sum(
            1
            for key in keys
            if key in held
            and not held[key].committing
            and (writable is None or writable(held[key].topic))
            and self.discard(key)
        )

    def reauthorize(self, rights: Callable[[str], Access | None]) -> int:
        """A-4: drop the stages (not being committed) whose owner no longer exists or may no
        longer write their topic; returns how many. ``rights`` gives a user's new rights."""
        gone = []
        for key, stage in self._held.items():
            new = rights(key[0])
            if not stage.committing and (new is None or not new.can_write(stage.topic)):
                gone.append(key)
        for key in gone:
            self.discard(key)
        return len(gone)

    def expire(self) -> int:
        """Drop stages whose lease has ended; returns how many."""
        now = self.clock()
        gone = [key for key, s in self._held.items() if s.expires_us <= now and not s.committing]
        for key in gone:
            self.discard(key)
        return len(gone)

    def _claim(self, topic: str, stage_ids: Sequence[str], owner: str) -> list[_Stage]:
        if not stage_ids:
            raise InvalidArgument("name at least one stage to commit", field="stage_ids")
        if len(set(stage_ids)) != len(stage_ids):
            raise InvalidArgument("a stage is named twice", field="stage_ids")
        out = []
        for i, sid in enumerate(stage_ids):
            stage = self._held.get((owner, sid))
            field = f"stage_ids[{i}]"
            if stage is None:
                raise NotFound(
                    f"no stage {sid[:100]!r}: it was never staged, was aborted, its lease ended, or the server "
                    "restarted; nothing was committed",
                    field=field,
                )
            if not stage.sealed:
                raise FailedPrecondition(f"stage {sid[:100]!r} is still being written", field=field)
            if stage.committing:
                raise FailedPrecondition(f"stage {sid[:100]!r} is being committed already", field=field)
            if stage.topic != topic:
                raise InvalidArgument(
                    f"stage {sid[:100]!r} was staged for topic {stage.topic!r}, not {topic!r}", field=field
                )
            out.append(stage)
        return out

    async def commit(
        self, topic: str, stage_ids: Sequence[str], producer: Producer | None = None, access: Access = EVERYONE
    ) -> Committed:
        """Apply exactly the named stages to ``topic``, in the order named, as one atomic batch,
        under the committer's ``access`` (a row filter: its rows only, as a publish).

        Raises:
            NotFound: the committer holds no such stage (nothing is applied); its stages and its
                J-4 ``producer`` on this topic are its own.
            FailedPrecondition: a stage is still being written or committed; the topic is
                read-only.
            InvalidArgument: no stages, a stage of another topic, a bad producer.
        """
        check_topic_name(topic)
        owner = access.user
        if producer is not None:
            producer = scoped(producer, owner, topic)
        stages = self._claim(topic, stage_ids, owner)
        if producer is not None and self.writer.producers.duplicate(*producer):
            for sid in stage_ids:
                self.discard((owner, sid))
            return Committed(0, 0, 0, duplicate=True)
        for stage in stages:
            stage.committing = True
        try:
            prepared = await self._prepare(stages, of_topic(self.topics.get(topic)).preprocessing, access)
            raws = prepared.raws
            first, last = (0, 0) if not raws else self._apply(topic, prepared, producer, access)
        finally:
            for stage in stages:
                stage.committing = False
        for sid in stage_ids:
            self.discard((owner, sid))
        if raws and not first:
            return Committed(0, 0, 0, duplicate=True)  # the producer committed the same sequence meanwhile
        return Committed(first, last, len(raws))

    def _apply(self, topic: str, prepared: Prepared, producer: Producer | None, access: Access) -> tuple[int, int]:
        """The one step: the writer applies everything. The cyclic garbage collector is held off
        meanwhile (the step allocates a few objects per message, which would trigger collections
        that walk every stored record for nothing: ~10 % of the step at a million messages)."""
        enabled = gc.isenabled()
        gc.disable()
        start = time.perf_counter()
        try:
            keys, docs, raws, ttls, received = prepared
            return self.writer.publish_decoded(
                topic, keys, docs, raws, ttls, producer, access=access, received=received
            )
        finally:
            if enabled:
                gc.enable()
            took = time.perf_counter() - start
            log.info(
                "committed %d staged messages to %s in one step of %.0f ms", len(prepared.raws), topic, took * 1000
            )

    async def _prepare(self, stages: list[_Stage], preprocessing: Rewrite | None, access: Access) -> Prepared:
        """The stages' messages decoded again, in slices (they were checked when staged), and
        preprocessed again (EN-1 is a function of the message alone: the same SowKeys)."""
        keys: list[str] = []
        raws: list[bytes] = []
        ttls: list[float | None] | None = None
        if any(s.ttls is not None for s in stages):
            ttls = []
            for s in stages:
                ttls.extend(s.ttls or [None] * len(s.raws))
        for s in stages:
            keys.extend(s.keys)
            raws.extend(s.raws)
        docs: list[dict[str, Any]] = []
        loads = orjson.loads
        slicer = Slicer()
        step = CHUNK * 8
        for i in range(0, len(raws), step):
            docs.extend(map(loads, raws[i : i + step]))
            await slicer.pause()
        if preprocessing is None:
            return Prepared(keys, docs, raws, ttls)
        received = None if access.unrestricted else list(docs)
        for i in range(0, len(raws), step):
            done = docs[i : i + step], raws[i : i + step]
            preprocess(preprocessing, stages[0].topic, *done)
            docs[i : i + step], raws[i : i + step] = done
            await slicer.pause()
        return Prepared(keys, docs, raws, ttls, received)
