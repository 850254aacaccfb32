"""A replica behind the primary's retained journal rebuilds from a checkpoint (SPEC §13, HA-2):
the primary's journal retention removed entries the stopped replica never applied, so Follow
refuses it with OUT_OF_RANGE; it copies a checkpoint of the primary's store
(``ReplicationService.CopyCheckpoint``), stops, installs it at its next start and follows from the
checkpoint's bookmark, ending with the primary's digest."""

from __future__ import annotations

from pathlib import Path

import grpc

from sowdb import testing
from sowdb.cluster.catchup import install_checkpoint
from sowdb_client import Client, SowdbError
from tests.cluster.support import Cluster, digest, journal, publish_acknowledged, until


def test_a_replica_behind_the_retained_journal_catches_up_through_a_checkpoint(cluster: Cluster) -> None:
    cluster.config.write_text("[server]\njournal_max_entries = 20\n" + cluster.config.read_text())
    cluster.start("n1")
    assert cluster.primary() == "n1"
    cluster.start("n2")
    primary = cluster.nodes["n1"].target
    publish_acknowledged(primary, "orders", [{"id": i} for i in range(10)], producer_id="first", producer_seq=1)
    until(lambda: cluster.own("n2").applied_bookmark == 10)
    cluster.nodes["n2"].stop()
    for n in range(10):  # 100 entries the replica never applies; retention keeps the last 20
        docs = [{"id": 10 + 10 * n + i, "n": n} for i in range(10)]
        publish_acknowledged(primary, "orders", docs, producer_id="feed", producer_seq=n)
    with Client(primary) as c:

        def delete() -> bool:  # 5 deletes, journaled once (a refused attempt that wrote them leaves a retry none)
            try:
                c.sow_delete("orders", filter="/id < 5")
            except SowdbError as exc:
                if exc.code != grpc.StatusCode.UNAVAILABLE:
                    raise
                return False
            return True

        until(delete)
        until(lambda: c.stats().server.journal.oldest_bookmark > 11, within=30)  # n2's next entry is gone

    cluster.start("n2")  # refused as behind the journal: it copies a checkpoint, and stops
    status, output = cluster.nodes["n2"].stop(sig=0, timeout=60)
    assert status == 0
    assert "copying a checkpoint" in output
    assert "copied the primary's checkpoint at bookmark 115" in output
    assert (cluster.tmp_path / "n2" / "checkpoint-incoming").is_dir()

    cluster.start("n2")  # installs it, then follows from its bookmark
    last = publish_acknowledged(primary, "orders", [{"id": 1000}], producer_id="feed", producer_seq=10).last_bookmark
    until(lambda: cluster.own("n2").applied_bookmark == last)
    assert "installed the checkpoint" in cluster.nodes["n2"].output
    assert not (cluster.tmp_path / "n2" / "checkpoint-installing").exists()
    cluster.stop()
    assert digest(cluster.tmp_path / "n2") == digest(cluster.tmp_path / "n1")
    tail = journal(cluster.tmp_path / "n1")[-10:]
    assert journal(cluster.tmp_path / "n2")[-10:] == tail
    flags = ("--config", str(cluster.config), "--node", "n2", "--advertise", "127.0.0.1:1")
    verified = testing.run("verify", *flags, "--data-dir", str(cluster.tmp_path / "n2"))
    assert verified.returncode == 0, verified.stdout


def test_installing_a_copy_is_finished_by_the_next_start_after_a_crash(tmp_path: Path) -> None:
    """The swap's two steps: a crash after the old files went (the copy renamed to
    ``checkpoint-installing``, some of its files moved already) is finished by the next start,
    and the lost-writes file is kept; without a whole copy nothing is touched."""
    data = tmp_path / "data"
    (data / "checkpoint-incoming.tmp").mkdir(parents=True)  # a copy cut short
    (data / "OLD.sst").write_text("old")
    assert not install_checkpoint(data)
    assert (data / "OLD.sst").exists()

    (data / "checkpoint-incoming").mkdir()
    for name in ("A.sst", "MANIFEST"):
        (data / "checkpoint-incoming" / name).write_text(name)
    (data / "lost-writes.jsonl").write_text("{}\n")
    assert install_checkpoint(data)
    assert sorted(p.name for p in data.iterdir() if p.is_file()) == ["A.sst", "MANIFEST", "lost-writes.jsonl"]

    (data / "checkpoint-installing").mkdir()  # crashed in step 2: B.sst moved, C.sst not yet
    (data / "B.sst").write_text("B")
    (data / "checkpoint-installing" / "C.sst").write_text("C")
    assert install_checkpoint(data)
    assert {p.name for p in data.iterdir() if p.is_file()} >= {"B.sst", "C.sst"}
    assert not (data / "checkpoint-installing").exists()
