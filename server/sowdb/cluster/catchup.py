"""A replica behind the primary's retained journal rebuilds from a checkpoint (SPEC §13, HA-2).

Journal retention (H-4) may remove entries a stopped replica has not applied yet; the primary
then refuses its ``Follow`` with OUT_OF_RANGE. The replica asks ``ReplicationService.CopyCheckpoint``
instead: the primary takes a fresh RocksDB checkpoint (the ``sowd checkpoint`` path: one step of
the writer, hard links) in a temp directory beside its data directory and streams its files in
chunks, the checkpoint's last bookmark in the final message; it removes the temp directory when
the stream ends.

The replica writes the files into ``DATA_DIR/checkpoint-incoming.tmp``, syncs them, and renames
the directory to ``checkpoint-incoming`` only once every file is whole: a copy cut short never
replaces anything. It then stops, as a node whose journal forked does (:mod:`sowdb.cluster.fork`):
swapping the store under a running engine would mean unwinding memory, views and
subscriptions, which a start rebuilds anyway. At its next start, before the store opens,
:func:`install_checkpoint` swaps it in, in two steps that a crash may interrupt and the next
start finishes: (1) remove the old store's files (everything but the incoming copy and the
lost-writes file), then rename the copy to ``checkpoint-installing``; (2) move its files into
the data directory and remove it. The node then follows from the checkpoint's bookmark.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sowdb.cluster.fork import LOST_WRITES
from sowdb.engine.replication import ReplicationPort
from sowdb_api.v1 import replication_pb2 as pb

log = logging.getLogger("sowdb.cluster")

CHUNK_BYTES = 1 << 20
INCOMING = "checkpoint-incoming"
INSTALLING = "checkpoint-installing"
_KEEP = {INCOMING, INSTALLING, LOST_WRITES}


async def checkpoint_chunks(engine: ReplicationPort) -> AsyncIterator[pb.CopyCheckpointResponse]:
    """The primary's side: a fresh checkpoint's files, chunk by chunk, then its bookmark."""
    temp, files, bookmark = _take_checkpoint(engine)
    try:
        for path in files:
            with path.open("rb") as f:
                first = True
                while True:
                    data = await asyncio.to_thread(f.read, CHUNK_BYTES)
                    if not data and not first:
                        break
                    yield pb.CopyCheckpointResponse(file=path.name, data=data)
                    first = False
        yield pb.CopyCheckpointResponse(done=True, bookmark=bookmark)
    finally:
        await asyncio.to_thread(shutil.rmtree, temp, True)


def _take_checkpoint(engine: ReplicationPort) -> tuple[Path, list[Path], int]:
    """A checkpoint in a new temp directory beside the data directory (hard links need the same
    filesystem): (the temp directory, the checkpoint's files, its bookmark)."""
    data_dir = Path(engine.config.server.data_dir).resolve()
    temp = Path(tempfile.mkdtemp(prefix=f".{data_dir.name}-copy-", dir=data_dir.parent))
    try:
        directory, bookmark, size = engine.checkpoint(str(temp / "copy"))
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    log.info("cluster: a checkpoint at bookmark %d (%d bytes) for a replica behind the journal", bookmark, size)
    return temp, sorted(Path(directory).iterdir()), bookmark


async def copy_checkpoint(data_dir: str | Path, chunks: AsyncIterator[Any]) -> int:
    """The replica's side: write the streamed files into ``DATA_DIR/checkpoint-incoming`` (whole,
    or not at all); returns the checkpoint's bookmark.

    Raises:
        ValueError: a file name that is not a plain name, or a stream without its end.
    """
    target = Path(data_dir) / INCOMING
    partial = target.with_name(INCOMING + ".tmp")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    out = None
    name = ""
    try:
        async for chunk in chunks:
            if chunk.done:
                break
            if chunk.file != name:
                if Path(chunk.file).name != chunk.file or chunk.file in ("", ".", ".."):
                    raise ValueError(f"the checkpoint names a file {chunk.file!r}: not a plain file name")
                if out is not None:
                    _close(out)
                name, out = chunk.file, (partial / chunk.file).open("wb")
            assert out is not None
            out.write(chunk.data)
        else:
            raise ValueError("the checkpoint stream ended before its last message")
        if out is not None:
            _close(out)
            out = None
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        _sync_dir(Path(data_dir))
        return int(chunk.bookmark)
    finally:
        if out is not None:
            out.close()


def install_checkpoint(data_dir: str | Path) -> bool:
    """At start, before the store opens: swap in a checkpoint copied whole (see the module's
    docstring for the steps and why a crash between them is safe); returns whether one was."""
    data = Path(data_dir)
    incoming, installing = data / INCOMING, data / INSTALLING
    if incoming.is_dir() and not installing.exists():
        for entry in data.iterdir():
            if entry.name not in _KEEP and not entry.name.startswith(INCOMING):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        incoming.rename(installing)
        _sync_dir(data)
    if not installing.is_dir():
        return False
    for entry in installing.iterdir():
        entry.replace(data / entry.name)
    _sync_dir(data)
    installing.rmdir()
    log.warning("installed the checkpoint copied from the primary in %s: this node follows from its bookmark", data)
    return True


def _close(f: Any) -> None:
    f.flush()
    os.fsync(f.fileno())
    f.close()


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
