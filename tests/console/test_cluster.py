"""The console of a cluster's node (SPEC §13) in headless Chromium: above the topics, each
node's role, epoch, applied bookmark and lag, as the node sees them (the primary lists its
replicas); a server alone shows no cluster table. Real processes: etcd and two ``sowd``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from sowdb import testing
from sowdb.testing.cluster import Cluster, nodes
from sowdb_client import Client
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import until
from tests.console.conftest import WAIT_MS, screenshot

HTTP = ("--http-listen", "127.0.0.1:0")


@pytest.fixture
def cluster(tmp_path: Path, etcd: EtcdServer) -> Iterator[Cluster]:
    with nodes(tmp_path, etcd) as c:
        yield c


def console_url(sowd: testing.Sowd) -> str:
    """The page's address, from the banner (``...; console http://HOST:PORT/``)."""
    return sowd.banner.split("console ")[1].split()[0]


async def test_the_console_shows_each_nodes_role_epoch_bookmark_and_lag(cluster: Cluster, page: Page) -> None:
    n1 = cluster.start("n1", *HTTP)
    assert cluster.primary() == "n1"
    n2 = cluster.start("n2", *HTTP)
    until(lambda: len(cluster.status("n1")) == 2)
    with Client(n1.target) as c:
        c.publish("orders", [{"id": i} for i in range(3)])
    until(lambda: cluster.own("n2").applied_bookmark == 3)
    epoch = str(cluster.own("n1").epoch)

    await page.goto(console_url(n1))
    table = page.locator("#cluster")
    await expect(table).to_be_visible(timeout=WAIT_MS)
    rows = page.locator("#cluster tbody tr")
    await expect(rows.locator("td[data-field='node']")).to_have_text(["n1", "n2"], timeout=WAIT_MS)
    await expect(rows.locator("td[data-field='role']")).to_have_text(["primary", "replica"])
    await expect(rows.locator("td[data-field='epoch']")).to_have_text([epoch, epoch])
    await expect(rows.locator("td[data-field='applied']")).to_have_text(["3", "3"], timeout=WAIT_MS)
    await expect(rows.locator("td[data-field='lag']")).to_have_text(["0", "0"])
    await expect(rows.locator("td[data-field='address']")).to_have_text([n1.target, n2.target])
    await screenshot(page, "cluster")

    with Client(n1.target) as c:  # the page asks again: the new bookmark shows on both rows
        c.publish("orders", [{"id": i} for i in range(3, 1003)])
    await expect(rows.locator("td[data-field='applied']")).to_have_text(["1,003", "1,003"], timeout=WAIT_MS)

    await page.goto(console_url(n2))  # a replica answers for itself
    await expect(page.locator("#cluster tbody tr td[data-field='role']")).to_have_text(["replica"], timeout=WAIT_MS)


async def test_a_server_alone_shows_no_cluster_table(cluster: Cluster, page: Page) -> None:
    with testing.start(cluster.tmp_path / "alone", *HTTP, config=cluster.config.with_name("alone.toml")) as sowd:
        await page.goto(console_url(sowd))
        await expect(page.locator("#topics tr[data-topic='orders']")).to_be_visible(timeout=WAIT_MS)
        await expect(page.locator("#cluster-section")).to_be_hidden()
