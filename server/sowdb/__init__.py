"""sowdb: a State-of-the-World server (latest keyed JSON message per topic, queries, subscriptions)."""

__version__ = "0.1.0"
