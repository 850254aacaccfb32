"""A secured ``sowd`` as an operator runs it (SPEC §11): a config file with TLS, a users file and
two roles (paths relative to the config), the ``sow`` CLI with ``-cacert`` and ``-token`` or
``$SOW_TOKEN``, ``sowd hash-token``, ``sowd checkpoint`` through TLS, and a SIGHUP that takes a
right away from a live CLI subscription (A-4)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sowdb.auth import hash_token
from sowdb.testing.pki import Certs
from tests.support import Process, sowd_command, start_sowd

TRADER, VIEWER = "trader-token-1", "viewer-token-2"
CONFIG = """
[[topic]]
name = "orders"
key = ["/id"]

[security]
tls_cert = "server.pem"
tls_key = "server.key"
users_file = "users.toml"

[[role]]
name = "trader"
read = [".*"]
write = ["orders"]
admin = true

[[role]]
name = "viewer"
read = [{viewer_reads}]
filter = "/desk = 'FX'"
"""


def write_config(directory: Path, viewer_reads: str = '"orders"') -> Path:
    path = directory / "sowd.toml"
    path.write_text(CONFIG.replace("{viewer_reads}", viewer_reads))
    return path


@pytest.fixture
def secured_sowd(tmp_path: Path, certs: Certs) -> Iterator[Process]:
    for name in ("server.pem", "server.key"):
        shutil.copy(certs[name], tmp_path / name)
    (tmp_path / "users.toml").write_text(
        f'[[user]]\nname = "tess"\ntoken_sha256 = "{hash_token(TRADER)}"\nroles = ["trader"]\n\n'
        f'[[user]]\nname = "vic"\ntoken_sha256 = "{hash_token(VIEWER)}"\nroles = ["viewer"]\n'
    )
    p = start_sowd(tmp_path / "data", "--config", str(write_config(tmp_path)))
    yield p
    p.stop()


def sow(server: Process, certs: Certs, *args: str, stdin: str = "", token: str | None = None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SOW_TOKEN", "SOW_SERVER")}
    env["SOW_SERVER"] = server.target
    if token is not None:
        env["SOW_TOKEN"] = token
    done = subprocess.run(
        [sys.executable, "-m", "sowdb_client.cli", *args, "-cacert", certs["ca.pem"]],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    return done.returncode, done.stdout, done.stderr


ORDERS = "".join(json.dumps({"id": i, "desk": "FX" if i % 2 else "EQ"}) + "\n" for i in range(6))


def test_the_cli_with_a_token_over_tls(secured_sowd: Process, certs: Certs) -> None:
    rc, _, err = sow(secured_sowd, certs, "publish", "-topic", "orders", "-token", TRADER, stdin=ORDERS)
    assert rc == 0, err
    rc, out, _ = sow(secured_sowd, certs, "sow", "-topic", "orders", token=VIEWER)  # $SOW_TOKEN
    assert rc == 0
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == [1, 3, 5]  # the FX rows only
    rc, _, err = sow(secured_sowd, certs, "publish", "-topic", "orders", token=VIEWER, stdin=ORDERS)
    assert rc == 1
    assert err.startswith("sow: PERMISSION_DENIED: user 'vic' may not write to topic 'orders' (no write right)")
    rc, _, err = sow(secured_sowd, certs, "sow", "-topic", "orders")
    assert rc == 1
    assert "UNAUTHENTICATED" in err
    assert TRADER not in err
    plain = subprocess.run(
        [sys.executable, "-m", "sowdb_client.cli", "-server", secured_sowd.target, "-token", TRADER, "topics"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plain.returncode == 1
    assert "it may want TLS" in plain.stderr


def test_hash_token_and_a_checkpoint_through_tls(secured_sowd: Process, tmp_path: Path) -> None:
    assert sowd_command("hash-token", TRADER).stdout.strip() == hash_token(TRADER)
    config = str(tmp_path / "sowd.toml")
    base = ["checkpoint", "--config", config, "--server", secured_sowd.target]
    refused = sowd_command(*base, str(tmp_path / "copy1"))  # TLS (its own tls_cert trusted), no token
    assert refused.returncode == 1
    assert "UNAUTHENTICATED" in refused.stderr
    done = sowd_command(*base, "--token", TRADER, str(tmp_path / "copy2"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "copy2" / "CURRENT").exists()


def test_sighup_ends_a_live_subscription_that_lost_its_right(
    secured_sowd: Process, certs: Certs, tmp_path: Path
) -> None:
    env = {**os.environ, "SOW_TOKEN": VIEWER, "SOW_SERVER": secured_sowd.target}
    command = ["subscribe", "-topic", "orders", "-format", "full", "-cacert", certs["ca.pem"]]
    live = subprocess.Popen(
        [sys.executable, "-m", "sowdb_client.cli", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert live.stdout is not None
        assert json.loads(live.stdout.readline())["command"] == "subscribed"  # placed, live
        write_config(tmp_path, viewer_reads='"^prices"')  # the viewer loses orders
        secured_sowd.proc.send_signal(signal.SIGHUP)
        _, err = live.communicate(timeout=30)
        assert live.returncode == 1
        assert "PERMISSION_DENIED" in err
    finally:
        live.kill()
    deadline = time.monotonic() + 10
    while True:  # new calls get the new rights too
        rc, _, err = sow(secured_sowd, certs, "sow", "-topic", "orders", token=VIEWER)
        if rc == 1 or time.monotonic() > deadline:
            break
    assert "PERMISSION_DENIED" in err
