"""The launchers other languages' tests run (``python -m sowdb.testing.etcd`` and
``python -m sowdb.testing.faultproxy``): the Node, Go and Java SDKs' cluster tests start etcd
and inject faults through them, so every test of the project does it one way."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

from sowdb.testing.etcd import ETCDCTL


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


def test_a_secured_etcd_from_another_language_takes_the_settings_it_writes(tmp_path: Path) -> None:
    """``--secured``: etcd as docs/cluster.md sets it up; the ``[cluster]`` lines written to
    ``DIR/cluster-etcd.toml`` reach it (its CA and the ``sowdb`` user's certificate: that user may
    write the cluster's keys), and nothing less does."""
    etcd, banner = _start("sowdb.testing.etcd", "--dir", str(tmp_path), "--secured")
    try:
        assert banner.startswith("etcd listening on https://127.0.0.1:"), banner
        url = banner.rsplit(" ", 1)[1]
        settings = tomllib.loads((tmp_path / "cluster-etcd.toml").read_text())
        assert settings["etcd"] == [url]
        tls = [f"--cacert={settings['etcd_ca']}", f"--cert={settings['etcd_cert']}", f"--key={settings['etcd_key']}"]

        def put(*flags: str) -> subprocess.CompletedProcess[str]:
            command = [ETCDCTL, f"--endpoints={url}", "--dial-timeout=3s", *flags, "put", "/sowdb/t/leader", "x"]
            return subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)

        assert put(*tls).returncode == 0, put(*tls).stderr
        assert put(tls[0]).returncode != 0  # no client certificate: no connection
        assert not _healthy(url.replace("https://", "http://"), timeout=0.5)
    finally:
        assert etcd.stdin is not None
        etcd.stdin.close()
        assert etcd.wait(timeout=20) == 0
