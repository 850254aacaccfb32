"""A server per core (SPEC §14, issue 41): ``sowd --workers N``.

``supervisor.py`` holds the port and runs the group: one writer (``sowd`` as a single process
runs it, plus the feed) and N - 1 readers, all serving the same port (``SO_REUSEPORT``: the kernel
spreads the connections over them). ``feed_rpc.py`` carries the writer's ordered feed
(:class:`sowdb.engine.Feed`) to the readers over a Unix socket only they can reach. A reader
(``reader.py``) serves live subscriptions from that feed and forwards every other call to the
writer over the same socket (``forward.py``).
"""
