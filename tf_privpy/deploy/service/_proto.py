"""The generated stubs, generated first where a source checkout lacks them
(or has them older than the .proto): see protogen.py."""
from . import protogen

try:
    if protogen.stale():
        protogen.generate()
except OSError:  # pragma: no cover - a read-only install ships its stubs
    pass

from . import share_service_pb2 as pb  # noqa: E402
from . import share_service_pb2_grpc as pb_grpc  # noqa: E402

__all__ = ["pb", "pb_grpc"]
