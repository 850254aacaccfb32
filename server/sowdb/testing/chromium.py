"""Debian's Chromium as the console's browser tests and ``make bench-console`` start it (headless;
``make setup`` installs it). Without the background-networking flags it tries to reach Google's
hosts at every start, which this machine's closed network refuses, many at a time."""

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
