"""The engine's state in memory: topics and what finds their records.

``ArenaTopic`` (a configured topic, its records in an arena, issue 39: ``arena_records``,
``slot_index``, ``arena_columns``), ``SowTopic`` (a derived topic, its records as objects;
one topic's records, indexes, key lookups, columns, version chains), ``Topics``
(the registry: SOW topics of the config, derived topics, name and regex resolution), the
expiry queue and the derived topics (views V-1, conflated topics C-2). It imports nothing from
the other subpackages: every other part reads or writes this state.
"""

from sowdb.engine.state.arena_records import ArenaRecords, PinnedRecords
from sowdb.engine.state.arena_topic import ArenaTopic
from sowdb.engine.state.columns import Columns, settled, worth_columns
from sowdb.engine.state.derived import View
from sowdb.engine.state.expiry import ExpiryQueue
from sowdb.engine.state.heap import release_free_memory
from sowdb.engine.state.history import Tombstone, version_at
from sowdb.engine.state.indexes import index_terms
from sowdb.engine.state.restricted_joins import RestrictedJoins
from sowdb.engine.state.sow_topic import SowTopic
from sowdb.engine.state.topics import Topics, TopicSummary, check_topic_name, compile_topic_pattern, key_fields_of

__all__ = [
    "ArenaRecords",
    "ArenaTopic",
    "Columns",
    "ExpiryQueue",
    "PinnedRecords",
    "RestrictedJoins",
    "SowTopic",
    "Tombstone",
    "TopicSummary",
    "Topics",
    "View",
    "check_topic_name",
    "compile_topic_pattern",
    "index_terms",
    "key_fields_of",
    "release_free_memory",
    "settled",
    "version_at",
    "worth_columns",
]
