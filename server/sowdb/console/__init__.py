"""The web console (SPEC §12): its page, and the HTTP side of ``sowd`` that serves it with a
Connect / gRPC-web gateway to the server's gRPC service (``[server] http_listen``)."""
