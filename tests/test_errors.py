"""Bad input gets a clear error that says what to do, and loses no data."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_py(code, **env):
    e = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT, **env)
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 1e9, -1e9])
def test_share_rejects_bad_values(ring, bad):
    data = np.array([1.0, 2.0, bad, 3.0])
    before = data.copy()
    bound = tp.get_runtime().config.bound
    with pytest.raises(ValueError, match=r"^tf_privpy: cannot share tensor 'features': flat "
                       r"index 2 .*\|x\| < " + f"{bound:.0f}" + r" .*at the cost of precision\.$"):
        tp.share(data, name="features")
    np.testing.assert_array_equal(data, before)  # the caller's data is untouched


def test_share_bound_in_tf_function(ring):
    f = tf.function(lambda a: tp.share(a, name="batch").reveal())
    np.testing.assert_allclose(f(tf.constant([1.0, 2.0])).numpy(), [1.0, 2.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="'batch'.*NaN"):
        f(tf.constant([1.0, np.nan]))


def test_public_operands_are_range_checked(ring):
    x = tp.share([1.0, 2.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="fixed-point range"):
        (x + np.array([1.0, np.inf])).reveal()


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="float32, float64, int32 or int64"):
        tp.share(tf.constant(["a"]))


def test_shape_mismatches(ring):
    a, b = tp.share(np.ones((2, 3))), tp.share(np.ones((4, 5)))
    with pytest.raises(ValueError, match="cannot be broadcast"):
        a * b
    with pytest.raises(ValueError, match="cannot be broadcast"):
        a + np.ones(4)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        a @ b
    with pytest.raises(ValueError, match="rank >= 2"):
        tp.matmul(tp.share(np.ones(3)), b)
    with pytest.raises(ValueError, match="channels"):
        tp.nn.conv2d(tp.share(np.ones((1, 4, 4, 2))), tp.share(np.ones((2, 2, 3, 1))))
    with pytest.raises(ValueError, match="out of range"):
        tp.reduce_sum(a, axis=2)
    with pytest.raises(ValueError, match="contracted dimensions differ"):
        tp.tensordot(a, b, 1)


def test_mixing_runtimes_is_rejected():
    tp.reset()
    tp.init()
    old = tp.share([1.0])
    tp.init()
    new = tp.share([2.0])
    with pytest.raises(ValueError, match="another|runtime #"):
        old + new
    with pytest.raises(ValueError, match="re-share"):
        old.reveal()


def test_not_initialized():
    tp.reset()
    try:
        with pytest.raises(RuntimeError, match=r"call tp.init\(\)"):
            tp.share([1.0])
    finally:
        tp.init()


def test_no_truth_value():
    with pytest.raises(TypeError, match="no truth value"):
        bool(tp.share([1.0]))


def test_repr_hides_values():
    p = tp.share(np.array([123.456]))
    r = repr(p)
    assert "123" not in r and "share" not in r and "PrivateTensor" in r
    assert str(p.share0.numpy()[0]) not in r


def test_config_validation():
    with pytest.raises(ValueError, match="ring_bits"):
        tp.Config(ring_bits=32)
    with pytest.raises(ValueError, match="backend"):
        tp.Config(backend="spdz")
    with pytest.raises(ValueError, match="too large"):
        tp.Config(ring_bits=64, bound=2.0 ** 20)
    with pytest.raises(TypeError, match="tp.Config"):
        tp.init({"ring_bits": 64})


def test_missing_library_fails_clearly(tmp_path):
    r = run_py("import tf_privpy", TF_PRIVPY_OPS_LIBRARY=str(tmp_path / "_tf_privpy_ops.so"))
    assert r.returncode != 0
    assert "OpLibraryError" in r.stderr and "does not exist" in r.stderr
    assert "make build" in r.stderr


def test_library_built_for_other_tf_fails_clearly(tmp_path):
    lib = os.path.join(ROOT, "tf_privpy", "_tf_privpy_ops.so")
    shutil.copy(lib, tmp_path / "_tf_privpy_ops.so")
    (tmp_path / "_build_info.json").write_text(json.dumps({"tf_version": "2.13.0"}))
    r = run_py("import tf_privpy", TF_PRIVPY_OPS_LIBRARY=str(tmp_path / "_tf_privpy_ops.so"))
    assert r.returncode != 0
    assert "built for TensorFlow 2.13.0" in r.stderr and "Rebuild" in r.stderr


def test_init_after_tf_started_fails_clearly():
    r = run_py("import tensorflow as tf; tf.constant(1.0) + 1.0\n"
               "import tf_privpy as tp; tp.init()")
    assert r.returncode != 0
    assert "already initialized its devices" in r.stderr
    assert "before running any TensorFlow op" in r.stderr


def test_init_in_fresh_process_works():
    r = run_py("import tf_privpy as tp; tp.init(); print(sorted(tp.servers()))")
    assert r.returncode == 0, r.stderr
    assert "['S1', 'S2', 'T1', 'T2', 'client']" in r.stdout
