"""sowdb: a State-of-the-World server (latest keyed JSON message per topic, queries, subscriptions)."""

import os

# gRPC core logs at INFO on stderr, past Python's logging: a client that speaks plaintext to a
# TLS port put an "I1124 ... Handshake failed" line into sowd's log for every attempt, which
# reads like a fault of the server. Its errors still show; a user's own setting is kept. Set
# here, before any module of the server imports grpc (which reads it once).
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

__version__ = "0.1.0"
