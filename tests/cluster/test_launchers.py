"""The launchers other languages' tests run (``python -m sowdb.testing.etcd`` and
``python -m sowdb.testing.faultproxy``): the Node, Go and Java SDKs' cluster tests start etcd
and inject faults through them, so every test of the project does it one way."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def _healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as reply:
            return bool(json.load(reply).get("health") == "true")
    except OSError:
        return False


def _say(proc: subprocess.Popen[str], line: str) -> str:
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return proc.stdout.readline().strip()


def test_etcd_and_a_proxy_before_it_from_another_language(tmp_path: Path) -> None:
    etcd, banner = _start("sowdb.testing.etcd", "--dir", str(tmp_path))
    try:
        assert banner.startswith("etcd listening on http://127.0.0.1:"), banner
        url = banner.rsplit(" ", 1)[1]
        assert _healthy(url)
        proxy, banner = _start("sowdb.testing.faultproxy", "--target", url.removeprefix("http://"))
        try:
            assert banner.startswith("proxy listening on 127.0.0.1:"), banner
            through = "http://" + banner.rsplit(" ", 1)[1]
            assert _healthy(through)
            assert _say(proxy, "blackhole") == "ok blackhole"
            assert not _healthy(through, timeout=0.5)  # silent: no answer, no error
            assert _say(proxy, "forward") == "ok forward"
            assert _healthy(through)
            assert _say(proxy, "sideways").startswith("error:")
        finally:
            assert proxy.stdin is not None
            proxy.stdin.close()  # its parent gone: it stops
            assert proxy.wait(timeout=10) == 0
        assert _say(etcd, "pause") == "ok"
        assert not _healthy(url, timeout=0.5)
        assert _say(etcd, "resume") == "ok"
        assert _healthy(url)
    finally:
        assert etcd.stdin is not None
        etcd.stdin.close()
        assert etcd.wait(timeout=20) == 0
    assert not _healthy(url, timeout=0.5)
