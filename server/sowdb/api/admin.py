"""``sowdb.v1.AdminService``: operations on a running server (backups), behind the same error
boundary as the rest of the API."""

from __future__ import annotations

from sowdb.api.servicer import Context, error_boundary
from sowdb.engine import Engine
from sowdb_api.v1 import admin_pb2 as pb
from sowdb_api.v1 import admin_pb2_grpc


class AdminServicer(admin_pb2_grpc.AdminServiceServicer):
    """``sowdb.v1.AdminService`` over an :class:`Engine`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @error_boundary
    async def Checkpoint(self, request: pb.CheckpointRequest, context: Context) -> pb.CheckpointResponse:
        directory, bookmark, size = self.engine.checkpoint(request.directory)
        return pb.CheckpointResponse(directory=directory, bookmark=bookmark, size_bytes=size)
