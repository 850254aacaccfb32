"""etcd secured (issue 40, part 1): whoever can write the cluster's keys in etcd decides who the
primary is, so the cluster's tests run etcd as docs/cluster.md sets it up (TLS, client
certificates, etcd's authentication, a role limited to ``/sowdb/t/``: the ``etcd`` fixture,
:func:`sowdb.testing.etcd.start_etcd`). Here: a leader key forged by a party without etcd
credentials is refused by etcd and the cluster keeps its primary; a node that etcd refuses (a
CA that did not sign etcd's certificate, a certificate etcd does not trust, a user without the
role, a wrong password) does not start, and says why; a node may authenticate as an etcd user
with a password file instead of a certificate; and a cluster on a plain ``http://`` etcd, as
configured before, still starts, warning that anyone who can reach etcd owns it."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from sowdb.cluster.dcs import EtcdRefused, EtcdUnavailable, KeyValue
from sowdb.config import EtcdAccess
from sowdb.testing import NotStarted
from sowdb.testing.etcd import start_etcd
from tests.cluster.conftest import EtcdServer
from tests.cluster.support import TTL, Cluster, node_config, publish_acknowledged, until

FORGED = json.dumps({"node": "evil", "advertise": "127.0.0.1:1"})
WARNING = "anyone who can reach etcd owns this cluster"


def leader_key(etcd: EtcdServer) -> KeyValue | None:
    async def read() -> KeyValue | None:
        client = etcd.client()
        try:
            return await client.get(b"/sowdb/t/leader")
        finally:
            await client.close()

    return asyncio.run(read())


def test_a_leader_key_forged_without_etcd_credentials_is_refused_and_the_primary_stays(
    cluster: Cluster, etcd: EtcdServer
) -> None:
    primary = cluster.primary_and_replica()
    before = leader_key(etcd)
    assert before is not None
    assert json.loads(before.value)["node"] == "n1"
    attempts = {
        "no client certificate": etcd.etcdctl("put", "/sowdb/t/leader", FORGED, cert=""),
        "a certificate etcd's CA did not sign": etcd.etcdctl("put", "/sowdb/t/leader", FORGED, cert="rogue"),
        "a certificate of no etcd user with the role": etcd.etcdctl("put", "/sowdb/t/leader", FORGED, cert="client"),
    }
    for who, done in attempts.items():
        assert done.returncode != 0, f"{who}: etcd took the forged leader key: {done.stdout}"
    assert "permission denied" in attempts["a certificate of no etcd user with the role"].stderr

    async def through_sowdbs_own_client() -> str:
        assert etcd.pki is not None
        intruder = etcd.client(access=EtcdAccess(etcd.pki["ca.pem"], etcd.pki["client.pem"], etcd.pki["client.key"]))
        try:
            await intruder.put(b"/sowdb/t/leader", FORGED.encode(), 0)
        except EtcdRefused as exc:
            return str(exc)
        finally:
            await intruder.close()
        return "taken"

    assert "permission denied" in asyncio.run(through_sowdbs_own_client())
    plain = etcd.url.replace("https://", "http://")  # plaintext to the same port: no answer at all
    assert etcd.etcdctl("put", "/sowdb/t/leader", FORGED, cert="", url=plain).returncode != 0
    after = leader_key(etcd)
    assert after is not None
    assert (after.value, after.create_revision, after.mod_revision) == (
        before.value,
        before.create_revision,
        before.mod_revision,
    )
    assert cluster.primary() == "n1"
    replica = cluster.own("n2")
    assert replica.role == "replica"
    assert replica.following
    last = publish_acknowledged(primary, "orders", [{"id": 1}]).last_bookmark
    until(lambda: cluster.own("n2").applied_bookmark == last, within=TTL + 20)
    assert all(WARNING not in sowd.output for sowd in cluster.nodes.values())


def refused_start(cluster: Cluster, settings: dict[str, str]) -> NotStarted:
    """Start n1 with ``settings`` in place of the config's etcd credentials; the refusal."""
    text = cluster.config.read_text()
    for key in ("etcd_ca", "etcd_cert", "etcd_key"):
        text = re.sub(rf"(?m)^{key} = .*\n", "", text)
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
    config = cluster.config.with_name("refused.toml")
    config.write_text(text.replace('name = "t"\n', f'name = "t"\n{lines}', 1))
    with pytest.raises(NotStarted) as info:
        cluster.start("n1", config=config)
    return info.value


@pytest.mark.parametrize(
    ("ca", "cert", "said"),
    [
        ("rogue.pem", "sowdb", "CERTIFICATE_VERIFY_FAILED"),  # etcd's certificate: not signed by that CA
        ("ca.pem", "rogue", "refused this node"),  # the node's certificate: not signed by etcd's CA
        ("ca.pem", "", "refused this node"),  # no certificate at all
        ("ca.pem", "client", "permission denied"),  # a certificate of a user without the role
    ],
    ids=["wrong-ca", "untrusted-certificate", "no-certificate", "no-role"],
)
def test_a_node_that_etcd_refuses_does_not_start_and_says_why(
    cluster: Cluster, etcd: EtcdServer, ca: str, cert: str, said: str
) -> None:
    assert etcd.pki is not None
    settings = {"etcd_ca": etcd.pki[ca]}
    if cert:
        settings |= {"etcd_cert": etcd.pki[f"{cert}.pem"], "etcd_key": etcd.pki[f"{cert}.key"]}
    refused = refused_start(cluster, settings)
    assert refused.status == 1
    assert f"etcd at {etcd.url} refused this node" in refused.output
    assert said in refused.output
    assert "check [cluster] etcd_ca, etcd_cert, etcd_key" in refused.output
    assert leader_key(etcd) is None  # nothing written


def test_a_node_may_be_an_etcd_user_with_a_password_file(cluster: Cluster, etcd: EtcdServer, tmp_path: Path) -> None:
    """``etcd_user`` + ``etcd_password_file``: etcd's ``--client-cert-auth`` still asks for a
    certificate its CA signed, here ``client``'s, whose own name has no role: the rights are the
    password user's. A wrong password stops the node."""
    assert etcd.pki is not None
    for step in (("user", "add", "n1-user:pw-of-n1"), ("user", "grant-role", "n1-user", "sowdb")):
        assert etcd.etcdctl(*step).returncode == 0
    (tmp_path / "password").write_text("pw-of-n1\n")
    (tmp_path / "wrong").write_text("guessed\n")
    tls = {"etcd_ca": etcd.pki["ca.pem"], "etcd_cert": etcd.pki["client.pem"], "etcd_key": etcd.pki["client.key"]}
    wrong = refused_start(cluster, {**tls, "etcd_user": "n1-user", "etcd_password_file": str(tmp_path / "wrong")})
    assert "authentication failed" in wrong.output
    good = cluster.config.with_name("user.toml")
    good.write_text(
        cluster.config.with_name("refused.toml")
        .read_text()
        .replace(str(tmp_path / "wrong"), str(tmp_path / "password"))
    )
    cluster.start("n1", config=good)
    assert cluster.primary() == "n1"
    key = leader_key(etcd)
    assert key is not None
    assert json.loads(key.value)["node"] == "n1"


def test_a_lapsed_token_is_replaced_at_the_next_call(etcd: EtcdServer) -> None:
    """A user's token lives in etcd's memory (etcd restarted: it is gone): the call that gets
    'invalid auth token' drops the connection, and the next one authenticates again."""
    assert etcd.pki is not None
    for step in (("user", "add", "u:pw"), ("user", "grant-role", "u", "sowdb")):
        assert etcd.etcdctl(*step).returncode == 0
    password = etcd.pki.dir / "u.password"
    password.write_text("pw")
    access = EtcdAccess(etcd.pki["ca.pem"], etcd.pki["client.pem"], etcd.pki["client.key"], "u", str(password))

    async def calls() -> None:
        client = etcd.client(access=access)
        try:
            await client.put(b"/sowdb/t/x", b"1", 0)
            client._client.metadata = (("token", "lapsed.1"),)
            with pytest.raises(EtcdUnavailable, match="invalid auth token"):
                await client.get(b"/sowdb/t/x")
            found = await client.get(b"/sowdb/t/x")
            assert found is not None
            assert found.value == b"1"
        finally:
            await client.close()

    asyncio.run(calls())


def test_a_cluster_on_plain_etcd_as_configured_before_still_starts_with_a_warning(tmp_path: Path) -> None:
    etcd = start_etcd(tmp_path / "plain", secured=False)
    try:
        config = node_config(tmp_path, etcd)
        assert "etcd_ca" not in config.read_text()
        cluster = Cluster(tmp_path, etcd)
        try:
            cluster.primary_and_replica()
            for sowd in cluster.nodes.values():
                assert "SECURITY RISK" in sowd.output
                assert f"etcd is reached over plain http:// ({etcd.url})" in sowd.output
                assert WARNING in sowd.output
        finally:
            cluster.stop()
    finally:
        etcd.stop()
