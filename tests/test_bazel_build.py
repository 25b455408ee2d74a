"""The Bazel build of the op library (tools/bazel_build.sh) against TF 2.14.

Runs tools/bazel_build.sh (Debian's bazel-bootstrap, offline) into a temporary
directory (`make test` runs it as a make step before pytest instead, `make
bazel` into build/bazel/, and passes the result in), loads the result with tf.load_op_library in a fresh interpreter and
checks that it registers the same ops and kernels (and so generates the same
Python wrappers) as the setup.py build, tf_privpy/_tf_privpy_ops.so.

Slow: a cold Bazel build of ops/ takes a few minutes on 2 cores; a warm one
(Bazel's output base is kept in ~/.cache/bazel) takes seconds.
"""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "tools" / "bazel_build.sh"
SETUP_PY_LIB = ROOT / "tf_privpy" / "_tf_privpy_ops.so"
BUILD_TIMEOUT_S = 3600
PROBE_TIMEOUT_S = 600

# Loads one op library in a fresh interpreter (two libraries registering the
# same ops cannot share a process) and prints what it registered as JSON.
_PROBE = r"""
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as py_tf
from tensorflow.python.framework import kernels

path = sys.argv[1]
module = tf.load_op_library(path)
# The OpList of the library itself (what load_op_library generates wrappers
# from); TF caches loaded libraries, so this does not load it twice.
handle = py_tf.TF_LoadLibrary(path)
try:
    op_list = op_def_pb2.OpList.FromString(py_tf.TF_GetOpList(handle))
finally:
    py_tf.TF_DeleteLibraryHandle(handle)
ops = sorted(op.name for op in op_list.op)
result = {
    "tf_version": tf.__version__,
    "ops": ops,
    "functions": sorted(
        name for name in dir(module)
        if not name.startswith("_") and callable(getattr(module, name))
    ),
    "kernels": {
        name: sorted(
            str(k).replace("\n", " ").strip()
            for k in kernels.get_registered_kernels_for_op(name).kernel
        )
        for name in ops
    },
}
print("PROBE_RESULT " + json.dumps(result))
"""


def _python():
    """The interpreter with TensorFlow: $PYTHON, else the repo's .venv, else this one."""
    if os.environ.get("PYTHON"):
        return os.environ["PYTHON"]
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _probe(lib):
    proc = subprocess.run(
        [_python(), "-c", _PROBE, str(lib)],
        cwd=str(lib.parent),
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
    )
    lines = [l for l in proc.stdout.splitlines() if l.startswith("PROBE_RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"tf.load_op_library({lib}) failed (exit {proc.returncode}):\n"
        f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )
    return json.loads(lines[-1][len("PROBE_RESULT "):])


def _library_sources():
    srcs = sorted((ROOT / "ops").glob("**/*.cc"))
    return [s for s in srcs if not s.name.endswith(("_test.cc", "_bench.cc"))]


def _ops_in_sources():
    """Op names registered with a literal REGISTER_OP("Name") in ops/."""
    names = set()
    for src in _library_sources():
        names.update(re.findall(r'REGISTER_OP\(\s*"(\w+)"', src.read_text(errors="replace")))
    return names


@pytest.fixture(scope="module")
def bazel_lib(tmp_path_factory):
    """The Bazel-built library: `make test` builds it before pytest (`make
    bazel`, into build/bazel/, rebuilt when a source changed) and names it in
    TF_PRIVPY_TEST_BAZEL_LIB; pytest alone builds it here."""
    prebuilt = os.environ.get("TF_PRIVPY_TEST_BAZEL_LIB")
    if prebuilt:
        lib = pathlib.Path(prebuilt)
        assert lib.is_file(), (f"{lib} is missing: `make bazel` failed (its output is above "
                               "pytest's in `make test`) or did not run; unset "
                               "TF_PRIVPY_TEST_BAZEL_LIB to build it in the test")
        return lib
    out = tmp_path_factory.mktemp("bazel_build") / "_tf_privpy_ops.so"
    env = dict(os.environ, PYTHON=_python())
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), str(out)],
        cwd=str(ROOT),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert proc.returncode == 0, (
        f"tools/bazel_build.sh failed (exit {proc.returncode}):\n"
        f"{proc.stdout[-4000:]}\n{proc.stderr[-12000:]}"
    )
    assert out.is_file(), f"tools/bazel_build.sh exited 0 but {out} is missing"
    return out


@pytest.mark.slow
def test_bazel_library_loads_in_tensorflow(bazel_lib):
    result = _probe(bazel_lib)
    assert result["tf_version"].startswith("2.14."), result["tf_version"]
    expected = _ops_in_sources()
    missing = sorted(expected - set(result["ops"]))
    assert not missing, f"ops registered in ops/ but not in the Bazel library: {missing}"
    if expected:
        assert result["ops"], "the Bazel library registers no op"
    # A kernel dropped at link time (static registrar not linked in) leaves
    # its op without kernels.
    no_kernel = sorted(op for op, ks in result["kernels"].items() if not ks)
    assert not no_kernel, f"ops without any kernel in the Bazel library: {no_kernel}"


@pytest.mark.slow
def test_bazel_ops_match_setup_py_build(request):
    if not SETUP_PY_LIB.is_file():
        pytest.fail(
            f"{SETUP_PY_LIB.relative_to(ROOT)} does not exist: build it first with "
            "`python setup.py build_ext --inplace` (the Bazel library is compared "
            "against it)",
            pytrace=False,
        )
    bazel = _probe(request.getfixturevalue("bazel_lib"))
    setup_py = _probe(SETUP_PY_LIB)
    newer = [
        str(s.relative_to(ROOT))
        for s in _library_sources()
        if s.stat().st_mtime > SETUP_PY_LIB.stat().st_mtime
    ]
    hint = (
        f"\n(note: sources newer than {SETUP_PY_LIB.name}, rebuild it with "
        f"setup.py: {newer})" if newer else ""
    )
    assert bazel["ops"] == setup_py["ops"], (
        f"op names differ: only Bazel {sorted(set(bazel['ops']) - set(setup_py['ops']))}, "
        f"only setup.py {sorted(set(setup_py['ops']) - set(bazel['ops']))}{hint}"
    )
    assert bazel["functions"] == setup_py["functions"], (
        f"generated wrapper functions differ{hint}"
    )
    assert bazel["kernels"] == setup_py["kernels"], f"registered kernels differ{hint}"
