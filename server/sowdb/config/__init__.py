"""The server configuration: the TOML contract of SPEC §3, validated into frozen dataclasses.

Every problem stops the server with a :class:`ConfigError` whose message names the file, the
entry and the problem (``sowdb.toml: [[topic]] #2 "orders": key: '/order Id' is not a field
path``), because a server that starts with half its config ignored is worse than one that
does not start.
"""

from sowdb.config.cluster import ClusterConfig, with_cluster_overrides
from sowdb.config.etcd import EtcdAccess
from sowdb.config.model import (
    Config,
    ConfigError,
    ConflatedTopicConfig,
    HistoryConfig,
    ServerConfig,
    TopicConfig,
    ViewConfig,
    field_path_steps,
    is_regex_topic,
    parse_duration,
    parse_listen,
)
from sowdb.config.printing import config_toml
from sowdb.config.reader import config_from_dict, demo_config, load_config
from sowdb.config.security import RoleConfig, SecurityConfig, UserConfig
from sowdb.config.server_table import with_overrides

__all__ = [
    "ClusterConfig",
    "Config",
    "ConfigError",
    "ConflatedTopicConfig",
    "EtcdAccess",
    "HistoryConfig",
    "RoleConfig",
    "SecurityConfig",
    "ServerConfig",
    "TopicConfig",
    "UserConfig",
    "ViewConfig",
    "config_from_dict",
    "config_toml",
    "demo_config",
    "field_path_steps",
    "is_regex_topic",
    "load_config",
    "parse_duration",
    "parse_listen",
    "with_cluster_overrides",
    "with_overrides",
]
