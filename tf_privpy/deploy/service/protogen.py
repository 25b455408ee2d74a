"""Generates the Python stubs of share_service.proto with grpc_tools.protoc.

The stubs (share_service_pb2.py, share_service_pb2_grpc.py) are build
outputs, never committed: `make build` runs this file as a script, setup.py's
build_py runs `generate()` (loading this file by path, so the build needs no
TensorFlow import), and tf_privpy.deploy.service._proto runs it once in a source
checkout where they are missing or older than the .proto.

grpcio-tools is pinned (requirements/base.txt) to 1.62.3, the newest release
whose protoc emits code for protobuf 4.x (TensorFlow 2.14 needs protobuf < 5);
its generated stubs run on grpcio 1.74.
"""
from __future__ import annotations

import os
import sys
from typing import List

PROTO = "share_service.proto"
OUTPUTS = ("share_service_pb2.py", "share_service_pb2_grpc.py")
_HERE = os.path.dirname(os.path.abspath(__file__))
#: the folder that holds tf_privpy/: the proto's import root, so the stubs
#: import each other as tf_privpy.deploy.service.share_service_pb2
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))


def stale(here: str = _HERE) -> bool:
    """True when a stub is missing or older than the .proto."""
    src = os.path.getmtime(os.path.join(here, PROTO))
    return any(not os.path.exists(os.path.join(here, o))
               or os.path.getmtime(os.path.join(here, o)) < src for o in OUTPUTS)


def generate(here: str = _HERE) -> List[str]:
    """Runs protoc on share_service.proto in `here` (a tf_privpy/deploy/service
    folder); returns the paths written. Raises RuntimeError when protoc fails."""
    try:
        from grpc_tools import protoc
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise RuntimeError("generating the share service's stubs needs grpcio-tools "
                           "(requirements/base.txt: pip install -c "
                           "requirements/constraints.txt grpcio-tools==1.62.3)") from e
    import importlib.resources

    import tempfile

    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    rel = os.path.relpath(os.path.join(here, PROTO), root)
    # Into a temp folder, then renamed into place: two processes generating
    # at once never import a half-written stub.
    with tempfile.TemporaryDirectory(dir=here, prefix=".protogen-") as out:
        code = protoc.main(["grpc_tools.protoc", f"-I{root}", f"-I{well_known}",
                            f"--python_out={out}", f"--grpc_python_out={out}", rel])
        if code != 0:
            raise RuntimeError(f"grpc_tools.protoc failed on {rel} (exit {code})")
        for o in OUTPUTS:
            os.replace(os.path.join(out, os.path.dirname(rel), o), os.path.join(here, o))
    return [os.path.join(here, o) for o in OUTPUTS]


if __name__ == "__main__":
    for path in generate():
        print(os.path.relpath(path), file=sys.stderr)
