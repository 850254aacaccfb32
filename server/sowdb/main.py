"""``sowd``: the server command.

    sowd [--config FILE] [--listen HOST:PORT] [--data-dir DIR]

With no config it serves the built-in demo config on 127.0.0.1:9007 with data in ./data.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from sowdb.config import ConfigError, demo_config, load_config
from sowdb.server import run, with_overrides


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sowd", description="sowdb State-of-the-World server")
    parser.add_argument("--config", help="TOML config file (default: the built-in demo config)")
    parser.add_argument("--listen", help="HOST:PORT to listen on (overrides [server] listen)")
    parser.add_argument("--data-dir", help="RocksDB data directory (overrides [server] data_dir)")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config) if args.config else demo_config()
    except ConfigError as exc:
        print(f"sowd: invalid config: {exc}", file=sys.stderr)
        return 2
    config = with_overrides(config, listen=args.listen, data_dir=args.data_dir)
    try:
        asyncio.run(run(config))
    except OSError as exc:
        print(f"sowd: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
