"""The examples run end to end and agree with plaintext (what `make demo` runs)."""
import os
import re
import subprocess
import sys

import pytest

import zoo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("ring", [128, 64])
def test_private_logistic_example(ring):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "private_logistic.py"),
                        f"--ring_bits={ring}", "--iters=20"], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    errs = [float(v) for v in re.findall(r"max \|private - plaintext[^=]*= ([0-9.e+-]+)", r.stdout)]
    assert len(errs) == 2, r.stdout
    # matmul of 6 terms and 40 chained products: a few hundred ulps at most
    ulp = 2.0 ** -(20 if ring == 128 else 16)
    assert errs[0] < 16 * ulp and errs[1] < 400 * ulp, errs


@pytest.fixture(scope="module")
def lenet5_cache(tmp_path_factory):
    """This run's model folder with LeNet-5 in it (tests/zoo.py): the demo
    loads the model the other tests check instead of training its own
    (the demo's key: the same digits, the same settings)."""
    zoo.trained("lenet5", tmp_path_factory)
    return zoo.run_cache(tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("ring", [128, 64])
def test_lenet5_demo(ring, lenet5_cache):
    """`make demo`: loads LeNet-5 (trained once in this run), converts it
    and classifies real digits privately; every private prediction equals
    the plaintext one."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT,
               TF_PRIVPY_MODEL_CACHE=lenet5_cache)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples",
                                                     "lenet5_private_inference.py"),
                        f"--ring_bits={ring}", "--images=40", "--batch=20"], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "private predictions equal to plaintext: 100.0%" in r.stdout, r.stdout
    assert re.search(r"cost of one predict \(batch 20\): \d+ rounds", r.stdout)


@pytest.mark.slow
def test_keras_convert_example(tmp_path):
    import tensorflow as tf
    tf.keras.utils.set_random_seed(0)   # deterministic weights; ties are handled either way
    model = tf.keras.Sequential([tf.keras.layers.InputLayer((6,)),
                                 tf.keras.layers.Dense(4, activation="relu"),
                                 tf.keras.layers.Dense(3, activation="softmax")])
    model.save(tmp_path / "m.keras")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "keras_convert.py"),
                        f"--model={tmp_path / 'm.keras'}", "--samples=8"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    diff = float(re.search(r"max \|private - plaintext\| output: ([0-9.e+-]+)", r.stdout)[1])
    assert diff < 1e-3 and "same class as plaintext: 100.0%" in r.stdout, r.stdout


@pytest.mark.slow
def test_lr_private_training_example():
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "lr_private_training.py"),
                        "--dataset=breast_cancer", "--steps=40", "--batch=32"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    rrmse = float(re.search(r"RRMSE[^:]*: ([0-9.e+-]+)", r.stdout)[1])
    acc = re.search(r"test accuracy: private ([0-9.]+)%, plaintext ([0-9.]+)%", r.stdout)
    assert rrmse <= 1e-3, r.stdout
    assert abs(float(acc[1]) - float(acc[2])) <= 0.5, r.stdout
