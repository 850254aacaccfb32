"""``sowdb.v1.AdminService``: operations on a running server (backups), behind the same error
boundary as the rest of the API."""

from __future__ import annotations

from sowdb.api.servicer import Context, Servicer, error_boundary
from sowdb.engine.access import Access
from sowdb_api.v1 import admin_pb2 as pb


class AdminServicer(Servicer):
    """``sowdb.v1.AdminService`` over an :class:`Engine`."""

    @error_boundary
    async def Checkpoint(
        self, request: pb.CheckpointRequest, context: Context, access: Access
    ) -> pb.CheckpointResponse:
        directory, bookmark, size = self.engine.checkpoint(request.directory, access)
        return pb.CheckpointResponse(directory=directory, bookmark=bookmark, size_bytes=size)
