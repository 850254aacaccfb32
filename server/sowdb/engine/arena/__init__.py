"""A topic's records out of Python objects: the record arena (issue 39).

Why: a record as a Python object (``StoredRecord``, its bytes, its SowKey, its map entry) costs
~340 B for an order of 108 JSON bytes (3.1x); the same records as JSON in segments, metadata in
numpy arrays and keys in a numpy hash table cost ~180 B (1.6x), and other processes can map them.

The design:

- **Segments** (:mod:`.segments`): the JSON, each record followed by a comma, appended to
  fixed-size mapped files; keys likewise in their own. Bytes never change once written.
- **Slots** (:mod:`.slots`): one slot per version, its fields in numpy arrays in one mapped file:
  where its JSON and key are, the key's hash, the bookmark that wrote it (``born``) and the one
  that ended it (``died``), timestamp, expiry and the key's previous version (``prev``).
  An update appends a slot and ends the old one; a pin at bookmark B sees exactly the slots
  with ``born <= B < died``, so taking a pin is O(1) and a historical read walks ``prev``.
- **Key table** (:mod:`.keys`): open addressing over a stable hash (CRC-32: no per-process
  salt, so another process finds keys too), keys checked against their stored bytes; a
  large batch probes it in numpy steps, a publish's (up to 128 keys) key by key.
- **Small batches** (:mod:`.small`): a publish's batch written without a numpy call (slots
  through memoryviews, keys cell by cell): numpy's cost per call, not per key, set the pace.
- **Compaction** (:mod:`.compaction`): frees the slots no pin at or after the oldest pinned
  bookmark sees, and copies the live bytes of mostly-garbage segments to a new one. Slot ids
  never change while visible; only offsets move, so pins survive untouched. Freed ids are
  reused by later versions, which are born after every pin.
- **Readers** (:mod:`.reader`): another process maps the files read-only and reads as of the
  committed bookmark in the header (:mod:`.header`), written last under a seqlock, so it never
  sees a half-written slot; compactions and replaced files are flagged there too. A reader
  process that holds a read pins its bookmark in the arena's shared pins (:mod:`.pins`), which
  the writer's compactions read, so what it reads is moved, never freed.
- **Scans** (:mod:`.view`) decode 4,096 records per ``orjson.loads`` of ``[`` + slices + ``]``;
  a query takes a run of slots as a sequence of records made as it reaches them
  (:mod:`.slot_records`).

Limits, and what this relies on: one writer per directory; at most 2^31 - 1 slots in use;
a reader's ordering of the writer's stores is x86-64's (stores seen in order), which the
seqlock and "died before born" rely on; a weaker memory model would need fences. CRC-32 is
not keyed: a publisher who crafts colliding keys lengthens probes (a keyed hash with a per-arena
secret in the header would cost ~0.8 µs a key). Nothing here imports the rest of the engine but
``records`` (for :class:`~sowdb.engine.records.StoredRecord`).
"""

from sowdb.engine.arena.keys import key_hash
from sowdb.engine.arena.pins import SLOTS as PIN_SLOTS
from sowdb.engine.arena.reader import ArenaBusy, ArenaReader, AtPoint, HeldRecords
from sowdb.engine.arena.slot_records import AsOfHeads, SlotRecords
from sowdb.engine.arena.slots import LIVE
from sowdb.engine.arena.store import TopicArena
from sowdb.engine.arena.view import CHUNK, ArenaView, Pin, StalePin

__all__ = [
    "CHUNK",
    "LIVE",
    "PIN_SLOTS",
    "ArenaBusy",
    "ArenaReader",
    "ArenaView",
    "AsOfHeads",
    "AtPoint",
    "HeldRecords",
    "Pin",
    "SlotRecords",
    "StalePin",
    "TopicArena",
    "key_hash",
]
