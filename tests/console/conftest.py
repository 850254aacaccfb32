"""The console's fixtures: a real sowd in process with ``http_listen`` on a free port (open, or
with a token user), and a headless Chromium (Debian's, which ``make setup`` installs) driven by
Playwright."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

from sowdb.auth import hash_token
from sowdb.config import config_from_dict
from sowdb.testing.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.cluster.conftest import etcd  # noqa: F401  (a real etcd, for the console of a cluster)
from tests.support import Running, make_config, running

ARTIFACTS = Path(os.environ.get("SOWDB_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts")) / "console"
"""Where the browser tests save their screenshots (printed at the end of the run)."""

WAIT_MS = 10_000
"""How long the browser tests wait for the page to show a state."""

TOKEN = "console-reader-token"
"""The token of the ``secured`` server's one user, who may read ``orders`` and nothing else."""


@pytest.fixture
async def console(tmp_path: Path) -> AsyncIterator[Running]:
    async with running(make_config(tmp_path / "data", http_listen="127.0.0.1:0", heartbeat_s=0.2)) as r:
        yield r


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Running]:
    """A console on a server with users (SPEC §11): topics ``orders`` and ``secrets``, one user
    (:data:`TOKEN`) who may read ``orders``; its client carries that token."""
    users = tmp_path / "users.toml"
    users.write_text(f'[[user]]\nname = "reader"\ntoken_sha256 = "{hash_token(TOKEN)}"\nroles = ["reader"]\n')
    raw = {
        "topic": [{"name": "orders", "key": ["/id"]}, {"name": "secrets", "key": ["/id"]}],
        "server": {"listen": "127.0.0.1:0", "http_listen": "127.0.0.1:0", "data_dir": str(tmp_path / "data")},
        "security": {"users_file": str(users)},
        "role": [{"name": "reader", "read": ["orders"]}],
    }
    async with running(config_from_dict(raw, source="sowd.toml"), token=TOKEN) as r:
        yield r


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium, never Playwright's own download (``playwright install`` is not used here)."""
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: `make setup` installs Debian's chromium"
    return CHROMIUM


@pytest.fixture
async def browser(chromium: str) -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if ARTIFACTS.is_dir() and any(ARTIFACTS.iterdir()):
        terminalreporter.write_line(f"console screenshots: {ARTIFACTS}")


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1100, "height": 560})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    yield page
    await context.close()
    assert not errors, f"the page threw: {errors}"


async def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)
