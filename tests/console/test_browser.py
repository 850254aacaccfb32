"""The console in a real browser (headless Chromium, driven by Playwright) against a real sowd:
the topics page refreshing its figures, the live grid of a page of a topic with rows arriving
and being pushed out as the world changes, a bad filter's message beside the filter box, and
the token box (SPEC §11). Each test leaves a screenshot under ``test-artifacts/console``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from sowdb.config import ServerConfig, config_from_dict
from sowdb_client import SowdbError
from tests.api.test_joined_views import TOPICS as JOINED
from tests.console.conftest import TOKEN, WAIT_MS, screenshot
from tests.support import Running, running


async def test_the_grid_follows_a_page_as_the_world_changes(console: Running, page: Page) -> None:
    orders = [{"orderId": i, "symbol": "IBM" if i % 2 else "MSFT", "qty": 10 * i} for i in (1, 2, 5, 7, 9)]
    await console.client.publish("orders", orders)
    await page.goto(console.console_url + "#grid")
    await page.fill("#topic", "orders")
    await page.fill("#order-by", "/orderId")
    await page.fill("#page-size", "2")
    await page.fill("#page", "2")
    await page.click("#subscribe")

    ids = page.locator("#grid tbody tr td[data-field='orderId']")
    await expect(ids).to_have_text(["5", "7"], timeout=WAIT_MS)  # the window [2, 4) of 1 2 5 7 9
    await expect(page.locator("#grid-status")).to_have_attribute("data-state", "live")
    await expect(page.locator("#grid tbody tr td.num").first).to_have_text("3")  # its rank in the result

    await console.client.publish("orders", [{"orderId": 4, "symbol": "IBM", "qty": 40}])
    await expect(ids).to_have_text(["4", "5"], timeout=WAIT_MS)  # 4 arrives, 7 is pushed out
    await expect(page.locator("tr[data-sow-key] td[data-field='qty']").first).to_have_text("40")

    await console.client.publish("orders", [{"orderId": 5, "symbol": "IBM", "qty": 55}])  # an update in place
    await expect(page.locator("#grid tbody tr").nth(1).locator("td[data-field='qty']")).to_have_text("55")
    await console.client.sow_delete("orders", filter="/orderId = 4")  # 4 leaves, 7 comes back
    await expect(ids).to_have_text(["5", "7"], timeout=WAIT_MS)
    await screenshot(page, "grid")

    with pytest.raises(SowdbError) as refused:  # what the server says of the same filter
        async for _ in console.client.sow("orders", filter="/qty >"):
            pass
    await page.fill("#filter", "/qty >")
    await page.press("#filter", "Enter")
    error = page.locator("#filter-error")
    await expect(error).to_be_visible(timeout=WAIT_MS)
    await expect(error).to_contain_text(refused.value.message)
    assert refused.value.column is not None
    caret = (await error.inner_text()).splitlines()[-1]
    assert caret == " " * (refused.value.column - 1) + "^"
    await expect(page.locator("#grid-status")).to_have_attribute("data-state", "error")
    await screenshot(page, "grid-bad-filter")

    await page.fill("#filter", "/symbol = 'IBM'")  # a good filter clears the error
    await page.click("#subscribe")
    await expect(error).to_be_hidden(timeout=WAIT_MS)
    await expect(ids).to_have_text(["7", "9"], timeout=WAIT_MS)  # IBM: 1 5 7 9, page 2


async def test_the_topics_page_shows_the_figures_as_they_change(console: Running, page: Page) -> None:
    await console.client.publish("orders", [{"orderId": i} for i in range(3)])
    await page.goto(console.console_url)
    count = page.locator("#topics tr[data-topic='orders'] td[data-field='records']")
    await expect(count).to_have_text("3", timeout=WAIT_MS)
    await console.client.publish("orders", [{"orderId": i} for i in range(3, 1203)])
    await expect(count).to_have_text("1,203", timeout=WAIT_MS)  # the page asks again every 1.5 s
    published = page.locator("#topics tr[data-topic='orders'] td[data-field='publishes']")
    await expect(published).to_have_text("1,203", timeout=WAIT_MS)  # Stats' figures, beside ListTopics'
    expected = {t.name for t in await console.client.list_topics()}
    shown = await page.locator("#topics tbody tr").evaluate_all("rows => rows.map(r => r.dataset.topic)")
    assert set(shown) == expected
    key = "#topics tr[data-topic='{}'] td[data-field='key']"
    await expect(page.locator(key.format("orders"))).to_have_text("/orderId")
    await expect(page.locator(key.format("orders_by_symbol"))).to_have_text("(group values)")  # was blank
    await expect(page.locator(key.format("notes"))).to_have_text("(set by publisher)")
    await screenshot(page, "topics")
    await page.click("#topics tr[data-topic='orders'] a")  # a topic's name opens its grid
    await expect(page.locator("#grid-status")).to_have_attribute("data-state", "live", timeout=WAIT_MS)
    await expect(page.locator("#grid tbody tr")).to_have_count(20)


async def test_the_token_box_is_how_the_console_honours_security(secured: Running, page: Page) -> None:
    await page.goto(secured.console_url)
    refused = page.locator("#topics-error")
    await expect(refused).to_contain_text("UNAUTHENTICATED", timeout=WAIT_MS)
    await page.fill("#token", TOKEN)
    await page.press("#token", "Enter")
    await page.locator("#token").dispatch_event("change")
    await expect(refused).to_be_hidden(timeout=WAIT_MS)
    await expect(page.locator("#topics tbody tr")).to_have_count(1)  # only what it may read
    await page.goto(secured.console_url + "#grid?topic=secrets")
    await expect(page.locator("#grid-error")).to_contain_text("PERMISSION_DENIED", timeout=WAIT_MS)


async def test_the_console_shows_a_joined_view_live(tmp_path: Path, page: Page) -> None:
    """V-2 in the browser: a joined view is listed among the topics with its figures, and its
    grid follows a change on either side of the join (a price, then a customer leaving the
    inner join) as it follows any topic."""
    config = config_from_dict(JOINED, source="<test>")
    server = ServerConfig(listen="127.0.0.1:0", http_listen="127.0.0.1:0", data_dir=str(tmp_path), heartbeat_s=0.2)
    async with running(replace(config, server=server)) as r:
        c = r.client
        await c.publish(
            "customers", [{"id": 1, "name": "Ann", "tier": "gold"}, {"id": 2, "name": "Bob", "tier": "gold"}]
        )
        await c.publish("instruments", [{"symbol": "IBM", "price": 10}, {"symbol": "MSFT", "price": 20}])
        await c.publish(
            "orders",
            [
                {"id": 1, "customer_id": 1, "symbol": "IBM", "qty": 3},
                {"id": 2, "customer_id": 2, "symbol": "MSFT", "qty": 1},
            ],
        )
        await page.goto(r.console_url)
        listed = page.locator("#topics tr[data-topic='by_customer']")
        await expect(listed.locator("td[data-field='records']")).to_have_text("2", timeout=WAIT_MS)
        await expect(listed.locator("td[data-field='key']")).to_have_text("(group values)")
        await screenshot(page, "topics-joined-view")

        await page.goto(r.console_url + "#grid")
        await page.fill("#topic", "by_customer")
        await page.fill("#order-by", "/customer")
        await page.click("#subscribe")
        names = page.locator("#grid tbody tr td[data-field='name']")
        notionals = page.locator("#grid tbody tr td[data-field='notional']")
        await expect(names).to_have_text(["Ann", "Bob"], timeout=WAIT_MS)
        await expect(notionals).to_have_text(["30", "20"])
        await c.publish("instruments", [{"symbol": "IBM", "price": 11}])  # the other side of the join
        await expect(notionals).to_have_text(["33", "20"], timeout=WAIT_MS)
        await c.sow_delete("customers", filter="/id = 1")  # Ann's orders leave the inner join
        await expect(names).to_have_text(["Bob"], timeout=WAIT_MS)
        await screenshot(page, "grid-joined-view")
