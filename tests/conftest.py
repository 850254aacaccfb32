"""Suite-wide fixtures (a real sowd in process or as a process) and settings: Hypothesis runs
the same examples on every machine.

CI runs on a clean clone, where ``.hypothesis/`` does not exist and the first ``st.text()`` of
the run builds Hypothesis's Unicode tables (~2 s), which trips the ``too_slow`` health check of
whichever test happens to draw text first. The profile below makes every property test
deterministic (``derandomize``: the examples derive from the test itself, not from a random seed
or a saved database) and tolerates that one-off start-up cost; every other health check stays on.
"""

from __future__ import annotations

import os

# Before anything imports grpc: the suite starts Spark's JVM (subprocess.Popen with a preexec_fn)
# after in-process servers and clients have run, and grpcio 1.85's fork handlers then kill the
# forked child before exec (JAVA_GATEWAY_EXITED; grpc/grpc#43055). Nothing in the suite forks a
# process that goes on using gRPC (multiprocessing uses spawn), so fork support is not needed.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from sowdb.config import Config, demo_config
from sowdb.testing.pki import Certs
from tests.support import Process, Running, make_config, running, start_sowd

settings.register_profile(
    "sowdb",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("sowdb")


@pytest.fixture
async def sowd(tmp_path: Path) -> AsyncIterator[Running]:
    config = make_config(tmp_path / "data", max_document_bytes=4096, max_message_bytes=64 * 1024, heartbeat_s=0.2)
    async with running(config) as r:
        yield r


@pytest.fixture
def sowd_process(tmp_path: Path) -> Iterator[Process]:
    p = start_sowd(tmp_path / "data")
    try:
        yield p
    finally:
        if p.proc.poll() is None:
            p.stop()


@pytest.fixture
def demo() -> Config:
    return demo_config()


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """One throw-away PKI for the whole run (``openssl``, EC keys: a few tens of ms)."""
    return Certs(tmp_path_factory.mktemp("pki"))
