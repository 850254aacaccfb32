"""``[cluster]`` (SPEC §13): read exactly as specified, every mistake refused with the entry and
the problem, the election's timing derived so that ``loop_wait + 2 * retry_timeout <= ttl``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from sowdb.config import ClusterConfig, Config, ConfigError, config_from_dict, with_cluster_overrides

SPEC_EXAMPLE = """
[cluster]
name = "desk1"                     # etcd keys under /sowdb/desk1/
node = "n1"                        # unique in the cluster (or --node)
advertise = "127.0.0.1:9007"       # what clients and replicas dial (or --advertise)
etcd = ["http://127.0.0.1:2379"]
ack = "sync"                       # "async" | "sync" | "sync_strict"
sync_replicas = 1                  # sync: a publish is acknowledged once this many replicas hold it
lease_ttl = "5s"
"""


def read(cluster: dict[str, Any]) -> ClusterConfig | None:
    return config_from_dict({"cluster": cluster}, source="c.toml").cluster


def test_the_spec_example_reads_as_written() -> None:
    cluster = config_from_dict(tomllib.loads(SPEC_EXAMPLE), source="c.toml").cluster
    assert cluster == ClusterConfig("desk1", "n1", "127.0.0.1:9007", ("http://127.0.0.1:2379",), "sync", 1, 5.0)
    assert cluster.prefix == "/sowdb/desk1/"
    assert cluster.loop_wait_s + 2 * cluster.retry_timeout_s <= cluster.lease_ttl_s
    assert 0 < cluster.margin_s < cluster.retry_timeout_s  # a refresh round ends before the deadline


def test_without_a_cluster_section_nothing_changes() -> None:
    assert config_from_dict({}, source="c.toml").cluster is None


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({}, "name: required"),
        ({"name": "a/b"}, "name: required, letters"),
        ({"name": "d", "ack": "quorum"}, "ack: 'quorum' is not one of async, sync, sync_strict"),
        ({"name": "d", "sync_replicas": 0}, "sync_replicas: an integer of at least 1"),
        ({"name": "d", "lease_ttl": "500ms"}, "lease_ttl: whole seconds, at least 2s"),
        ({"name": "d", "lease_ttl": "2.5s"}, "lease_ttl: whole seconds"),
        ({"name": "d", "lease_ttl": "soon"}, "lease_ttl: 'soon' is not a duration"),
        ({"name": "d", "etcd": []}, "etcd: expected a non-empty list of URLs"),
        ({"name": "d", "etcd": ["127.0.0.1:2379"]}, "etcd: expected a non-empty list of URLs"),
        ({"name": "d", "advertise": "nowhere"}, "advertise: 'nowhere' is not HOST:PORT"),
        ({"name": "d", "leader": "n1"}, "unknown setting 'leader'"),
    ],
)
def test_a_bad_cluster_table_is_refused_naming_the_problem(table: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=r"^c\.toml: \[cluster\]: ") as info:
        read(table)
    assert problem in str(info.value)


def test_node_and_advertise_come_from_the_file_or_the_flags() -> None:
    config = config_from_dict({"cluster": {"name": "d"}}, source="c.toml")
    with pytest.raises(ConfigError, match=re.escape("node: required (in the file or as --node)")):
        with_cluster_overrides(config, node=None, advertise="127.0.0.1:9007")
    cluster = with_cluster_overrides(config, node="n2", advertise="127.0.0.1:9008").cluster
    assert cluster is not None
    assert (cluster.node, cluster.advertise) == ("n2", "127.0.0.1:9008")
    with pytest.raises(ConfigError, match=re.escape("--advertise: '127.0.0.1' is not HOST:PORT")):
        with_cluster_overrides(config, node="n2", advertise="127.0.0.1")


def test_sowd_refuses_cluster_flags_without_a_cluster() -> None:
    sowd = Path(sys.executable).with_name("sowd")
    done = subprocess.run([sowd, "--node", "n1"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "--node and --advertise need a [cluster] section" in done.stderr


def test_the_ca_is_a_file_relative_to_the_config(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    raw = {"cluster": {"name": "c", "ca": "pki/ca.pem"}}
    cluster = config_from_dict(raw, source=str(tmp_path / "c.toml"), base=tmp_path).cluster
    assert cluster is not None
    assert cluster.ca == str(tmp_path / "pki" / "ca.pem")
    with pytest.raises(ConfigError, match=r"\[cluster\]: ca: .*missing.pem does not exist \(the CA that signed"):
        config_from_dict({"cluster": {"name": "c", "ca": "missing.pem"}}, source="c.toml", base=tmp_path)


@pytest.mark.parametrize("command", ["verify", "rebuild"])
def test_the_offline_commands_take_a_cluster_config_without_node_or_advertise(tmp_path: Path, command: str) -> None:
    """``sowd verify --config cluster.toml --data-dir nX`` (the docs' cluster config names no node:
    each node gets ``--node`` and ``--advertise`` when it serves) works on a stopped node's store."""
    config = tmp_path / "cluster.toml"
    config.write_text('[[topic]]\nname = "orders"\nkey = ["/id"]\n\n[cluster]\nname = "c"\n')
    done = subprocess.run(
        [sys.executable, "-m", "sowdb.main", command, "--config", str(config), "--data-dir", str(tmp_path / "n1")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "advertise" not in done.stderr
    serve = subprocess.run(
        [sys.executable, "-m", "sowdb.main", "--config", str(config), "--print-config"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert serve.returncode == 2
    assert "[cluster]: node: required" in serve.stderr  # serving still needs them


def etcd_files(tmp_path: Path) -> Path:
    """A CA, a client certificate, its key and a password file (their contents unread here)."""
    for name in ("ca.pem", "me.pem", "me.key"):
        (tmp_path / name).write_text("-----BEGIN-----\n")
    (tmp_path / "password").write_text("s3cret\n")
    (tmp_path / "empty").write_text("")
    return tmp_path


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"etcd": ["https://e:2379", "http://f:2379"], "etcd_ca": "ca.pem"}, "etcd: every endpoint https:// or"),
        ({"etcd": ["https://e:2379"]}, "etcd_ca: required with https:// endpoints"),
        ({"etcd": ["http://e:2379"], "etcd_ca": "ca.pem"}, "etcd_ca: need https:// etcd endpoints"),
        (
            {"etcd": ["http://e:2379"], "etcd_user": "n1", "etcd_password_file": "password"},
            "etcd_password_file, etcd_user: need https://",
        ),
        ({"etcd": ["https://e:2379"], "etcd_ca": "ca.pem", "etcd_cert": "me.pem"}, "etcd_cert and etcd_key: one"),
        ({"etcd": ["https://e:2379"], "etcd_ca": "ca.pem", "etcd_user": "n1"}, "etcd_user and etcd_password_file"),
        (
            {"etcd": ["https://e:2379"], "etcd_ca": "ca.pem", "etcd_password_file": "password"},
            "etcd_user and etcd_password_file",
        ),
        ({"etcd": ["https://e:2379"], "etcd_ca": "missing.pem"}, "etcd_ca: {base}/missing.pem does not exist"),
        (
            {"etcd": ["https://e:2379"], "etcd_ca": "ca.pem", "etcd_cert": "me.pem", "etcd_key": "nokey"},
            "etcd_key: {base}/nokey does not exist",
        ),
        (
            {"etcd": ["https://e:2379"], "etcd_ca": "ca.pem", "etcd_user": "n1", "etcd_password_file": "empty"},
            "etcd_password_file: {base}/empty is empty",
        ),
        ({"etcd": ["https://e:2379"], "etcd_ca": 3}, "etcd_ca: expected a string"),
        ({"etcd": ["ftp://e:2379"]}, "etcd: expected a non-empty list of URLs"),
    ],
)
def test_etcd_credentials_are_checked_naming_the_problem(
    tmp_path: Path, settings: dict[str, Any], problem: str
) -> None:
    base = etcd_files(tmp_path)
    with pytest.raises(ConfigError, match=r"^c\.toml: \[cluster\]: ") as info:
        config_from_dict({"cluster": {"name": "c", **settings}}, source="c.toml", base=base)
    assert problem.format(base=base) in str(info.value)


def test_etcd_over_tls_with_a_certificate_and_a_user_reads_its_files_relative_to_the_config(tmp_path: Path) -> None:
    base = etcd_files(tmp_path)
    table = {
        "name": "c",
        "etcd": ["https://e1:2379", "https://e2:2379"],
        "etcd_ca": "ca.pem",
        "etcd_cert": "me.pem",
        "etcd_key": "me.key",
        "etcd_user": "n1",
        "etcd_password_file": "password",
    }
    cluster = config_from_dict({"cluster": table}, source="c.toml", base=base).cluster
    assert cluster is not None
    access = cluster.etcd_access
    assert cluster.etcd == ("https://e1:2379", "https://e2:2379")
    assert (access.ca, access.cert, access.key) == tuple(str(base / n) for n in ("ca.pem", "me.pem", "me.key"))
    assert (access.user, access.password()) == ("n1", "s3cret")  # the line's end is not the password's
    assert access.tls
    assert access.authenticated
    plain = read({"name": "c"})
    assert plain is not None
    assert plain.etcd == ("http://127.0.0.1:2379",)  # as before: plain etcd still configures
    assert not plain.etcd_access.tls
    assert not plain.etcd_access.authenticated


def test_a_node_certificate_needs_its_key_and_the_ca_and_names_the_node(tmp_path: Path) -> None:
    """``[cluster] cert`` and ``key`` (issue 40): ``{node}`` in them is the node's name, checked
    once the name is known; a certificate without its key, or without the CA that signed the
    other nodes', and a peer port without a certificate, are refused naming the problem."""
    for name in ("ca.pem", "n1.pem", "n1.key"):
        (tmp_path / name).write_text("-----BEGIN-----\n")
    table = {"name": "c", "ca": "ca.pem", "cert": "{node}.pem", "key": "{node}.key"}

    def read(**changes: object) -> Config:
        return config_from_dict({"cluster": {**table, **changes}}, source="c.toml", base=tmp_path)

    def cluster(config: Config) -> ClusterConfig:
        assert config.cluster is not None
        return config.cluster

    config = read(peer_listen="127.0.0.1:9101")
    assert cluster(config).node_certs
    served = cluster(with_cluster_overrides(config, node="n1", advertise="127.0.0.1:9001"))
    assert (served.cert, served.key) == (str(tmp_path / "n1.pem"), str(tmp_path / "n1.key"))
    assert served.peer_listen == "127.0.0.1:9101"
    with pytest.raises(ConfigError, match=re.escape(f"cert: {tmp_path / 'n2.pem'} does not exist (node n2)")):
        with_cluster_overrides(config, node="n2", advertise="127.0.0.1:9002")
    assert cluster(with_cluster_overrides(config, node=None, advertise=None, serving=False)).cert.endswith("{node}.pem")
    refusals = [
        ({"key": ""}, "cert and key go together"),
        ({"ca": ""}, "cert: needs ca, the CA that signed the nodes' certificates"),
        ({"cert": "missing.pem"}, "cert: " + str(tmp_path / "missing.pem") + " does not exist"),
        ({"peer_listen": "nowhere"}, "peer_listen: 'nowhere' is not HOST:PORT"),
        (
            {"cert": "", "key": "", "peer_listen": "127.0.0.1:9101"},
            "peer_listen: the peer port serves node certificates",
        ),
    ]
    for changes, problem in refusals:
        with pytest.raises(ConfigError, match=re.escape(problem)):
            read(**changes)
    assert not cluster(config_from_dict({"cluster": {"name": "c"}}, source="c.toml")).node_certs
