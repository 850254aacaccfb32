"""A SOW topic's rewrites of what is published to it (EN-1, EN-2), where the write path applies them.

``preprocessing`` runs while a request is decoded, before its SowKeys are computed
(:func:`~sowdb.engine.write.messages.decode_batch`), so a preprocessed field may be a key
field; it sees the message alone. ``enrichment`` runs in the single writer's step, after a
delta's merge and the entitlement check, with each record's previous version at hand
(``OF PREVIOUS``): the writer alone knows it, and the version an earlier message of the same
request made counts as the previous one. What comes out is the message journaled, stored,
delivered and shipped to replicas; a replica or a rebuild applies the journal's bytes and
never evaluates a rewrite again.

Entitlements (A-2's row filter on writes) are checked on the messages as received, before
either rewrite, as AMPS does: the caller is judged on what it sent, not on what the topic's
configuration computed from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sowdb.config import TopicConfig
from sowdb.engine.access import Access
from sowdb.engine.records import StoredRecord, document
from sowdb.engine.state import SowTopic
from sowdb.expr.rewrite import Context, Rewrite, compile_rewrite
from sowdb.jsonbytes import dumps


@dataclass(frozen=True)
class Rewrites:
    """A topic's compiled ``preprocessing`` and ``enrichment``; None where it has none."""

    preprocessing: Rewrite | None = None
    enrichment: Rewrite | None = None


NONE = Rewrites()


_COMPILED: dict[int, tuple[TopicConfig, Rewrites]] = {}


def rewrites(config: TopicConfig) -> Rewrites:
    """The topic's rewrites, compiled on first use (the config's validation compiled them
    already, so this cannot fail) and then kept: a config's topics are few and fixed. Kept by
    the config's identity, which the hot path looks up per request, rather than its hash,
    which would hash every field of the config each time."""
    held = _COMPILED.get(id(config))
    if held is not None and held[0] is config:
        return held[1]
    if not config.preprocessing and not config.enrichment:
        found = NONE
    else:
        pre = compile_rewrite(config.preprocessing, previous=False) if config.preprocessing else None
        enrich = compile_rewrite(config.enrichment, previous=True) if config.enrichment else None
        found = Rewrites(pre, enrich)
    _COMPILED[id(config)] = (config, found)
    return found


def of_topic(topic: SowTopic | None) -> Rewrites:
    """The rewrites of a SOW topic (none for a topic without a SOW, K-5)."""
    return NONE if topic is None else rewrites(topic.config)


def preprocess(rewrite: Rewrite, topic_name: str, docs: list[dict[str, Any]], raws: list[bytes]) -> None:
    """EN-1 on a request's decoded messages, in place in ``docs`` and ``raws`` (a message no
    item changes keeps its bytes)."""
    ctx = Context(topic_name)
    apply = rewrite.apply
    for i, doc in enumerate(docs):
        out = apply(doc, ctx)
        if out is not None:
            docs[i] = out
            raws[i] = dumps(out)


def preprocess_one(rewrite: Rewrite | None, topic_name: str, doc: dict[str, Any]) -> dict[str, Any]:
    """EN-1 on one message (the checks that name a refused message)."""
    if rewrite is None:
        return doc
    out = rewrite.apply(doc, Context(topic_name))
    return doc if out is None else out


def enrich(
    rewrite: Rewrite,
    topic: SowTopic,
    sow_keys: list[str],
    docs: list[dict[str, Any]],
    raws: list[bytes],
    first: int,
    now: int,
) -> None:
    """EN-2 on a request about to be applied at bookmarks ``first``, ``first + 1``, … and
    timestamp ``now``, in place in ``docs`` and ``raws`` (each message's top object is the
    request's own: decoded for it, or a delta's merge). A previous version is looked up and
    decoded only when an expression reaches it (``IF(/qty < 0, /qty OF PREVIOUS, /qty)`` reads
    it for corrections only), and its decoded form is not kept: it is about to be replaced."""
    records = topic.records

    def stored(key: str) -> dict[str, Any] | None:
        rec = records.get(key)
        return None if rec is None else document(rec)

    update = rewrite.update
    ctx = Context(topic.name, None, None, now, None, stored)
    if not rewrite.reads_previous:
        for i, key in enumerate(sow_keys):
            doc = docs[i]
            if update(doc, ctx.at(key, first + i, None)):
                raws[i] = dumps(doc)
        return
    latest: dict[str, dict[str, Any]] = {}  # versions made by this request, for a key it names twice
    for i, key in enumerate(sow_keys):
        made = latest.get(key)
        doc = docs[i]
        if update(doc, ctx.at(key, first + i, made, key if made is None else None)):
            raws[i] = dumps(doc)
        latest[key] = doc


def check_rows(
    access: Access, topic: SowTopic, sow_keys: list[str], docs: list[dict[str, Any]], first: int, now: int
) -> None:
    """A-2 on writes for a restricted caller: each record before the write and each message
    (``docs``: as received, or as merged for a delta) inside the caller's rows.

    Raises:
        PublishError: one is not (nothing of the request is applied).
    """
    records, name = topic.records, topic.name
    writes: list[tuple[StoredRecord | None, StoredRecord]] = []
    for i, (key, doc) in enumerate(zip(sow_keys, docs, strict=True)):
        judged = StoredRecord(name, key, None, b"", first + i, now)  # the filter's metadata of the version
        judged.kept = doc  # set after: a version built with its document joins the decoded ones kept
        writes.append((records.get(key), judged))
    access.require_rows(name, writes)
