"""The query planner: the one place that chooses how a filter's records are found.

In order of preference: a point lookup by SowKey when the filter's top-level conjuncts fix every
key field (:class:`~sowdb.engine.state.key_lookups.KeyLookup`, which lists every key a literal
can equal under the filter language's coercions, or declines); else the hash index with the
fewest candidates (:mod:`sowdb.engine.state.indexes`); else the columns of the filter's
top-level comparisons where they are built (:mod:`sowdb.engine.state.columns`; asking for them
makes the upkeep build them for the next query); else a scan (None). Every choice returns a
superset of the matches, and whoever takes them may run the filter on them; where the filter is
nothing but comparisons that columns decide exactly, or one equality of a hash index to strings
it files exactly, the candidates are marked ``settled`` and a query's scan takes them as they
are, reading no document (issue 39: the range and indexed queries).

Queries (current and historical), deletes by filter and replaced subscriptions all ask it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sowdb.engine.records import StoredRecord
from sowdb.engine.state import SowTopic, index_terms, settled, worth_columns
from sowdb.expr import CompiledFilter


def plan_candidates(topic: SowTopic, flt: CompiledFilter) -> Sequence[StoredRecord] | None:
    """The records of ``topic`` that may match ``flt``, or None when neither the SowKeys, an
    index nor the columns narrow them (the query scans every record).

    A filter that fixes every key field is a point lookup; otherwise, with several indexed
    conjuncts, the index with the fewest candidates is used; otherwise the columns of its
    comparisons, those that are built (the others are wanted, for the next query).
    """
    conjuncts = flt.conjuncts
    keys = topic.lookup.sow_keys(conjuncts) if topic.lookup is not None else None
    if keys is not None:
        get = topic.records.get
        return [r for r in map(get, keys) if r is not None]
    found = topic.indexed(conjuncts)
    if found is not None:
        return settled(found) if _index_settles(flt) else found
    return _column_candidates(topic, flt) if flt.comparisons else None


def _index_settles(flt: CompiledFilter) -> bool:
    """Whether a hash index's candidates for ``flt`` are exactly its matches: the filter is one
    ``path = 'text'`` (or ``IN`` of such) of strings that are not numbers. Such a string is filed
    under itself alone and an array under its elements (:func:`index_terms`), as ``=`` compares
    them, so every record filed under the literal equals it; a numeric string also meets numbers,
    and a second conjunct is not what the index looked up."""
    if not flt.only_comparisons or len(flt.comparisons) != 1 or len(flt.conjuncts) != 1:
        return False
    return all(type(v) is str and index_terms(v) == [v] for v in flt.conjuncts[0].values)


def _column_candidates(topic: SowTopic, flt: CompiledFilter) -> Sequence[StoredRecord] | None:
    count = len(topic.records)
    if topic.columns is None:
        if not worth_columns(count):
            return None
        topic.columns = topic.new_columns()
    columns = topic.columns
    for term in flt.comparisons:
        columns.want(term)
    found = columns.candidates(flt.comparisons, count)
    if found is not None and flt.only_comparisons and columns.settles(flt.comparisons):
        return settled(found)
    return found


def plan_heads(topic: SowTopic, flt: CompiledFilter) -> list[StoredRecord] | None:
    """The version chains (newest versions, :meth:`SowTopic.heads`) of ``topic`` that may hold a
    match at a past point, or None when every chain must be walked. Only a point lookup narrows
    them: the indexes describe the current state, but a key is the same in every version."""
    keys = topic.lookup.sow_keys(flt.conjuncts) if topic.lookup is not None else None
    if keys is None:
        return None
    heads = (topic.head(k) for k in keys)
    return [h for h in heads if h is not None]
