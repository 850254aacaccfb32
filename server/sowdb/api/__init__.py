"""The protocol layer: the gRPC servicer, conversions and the error-status table."""
