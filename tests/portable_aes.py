"""The outputs test_kernels::test_prg_portable_path_matches and
test_gc_kernels::test_portable_aes_path_matches compare across AES paths.

TF_PRIVPY_DISABLE_VAES is read per call (ops/prg/aes_ctr.cc, ops/gc/garble.cc),
so the VAES and EVP paths run in this process; OPENSSL_ia32cap is read once
when OpenSSL starts, so the masked (portable AES) path needs a process of its
own. One such process computes both tests' outputs (a TensorFlow process
costs ~5 CPU-s before it does anything), cached here for the pytest worker:
the two tests used to start five processes, now one.
"""
import functools
import json
import os
import subprocess
import sys
from typing import Dict, Optional

# AES-NI (bit 57) and AVX (bit 41) masked off: OpenSSL's portable AES.
PORTABLE_CAP = "~0x200000200000000"

# Output of the PRG: a 4099-element 128-bit ring stream of key k, nonce 5.
PRG_CODE = """
def prg_hex():
    import tensorflow as tf
    from tf_privpy.protocols.mpc.runtime import kernels as K
    k = tf.constant([123456789, -987654321], tf.int64)
    return K.prg_ring(k, tf.constant(5, tf.int64), [4099], 128).numpy().tobytes().hex()
"""

# Garbling and evaluation of 300 comparisons; asserts they compare right.
GC_CODE = """
def gc_hex():
    import numpy as np, tensorflow as tf
    from tf_privpy.protocols.mpc.runtime import kernels as K
    k = tf.constant([123456789, -987654321], tf.int64); no = tf.constant(77, tf.int64)
    y = tf.constant(np.arange(-150, 150, dtype=np.int64) * 7919)
    x = tf.constant(np.arange(150, -150, -1, dtype=np.int64) * 104729)
    n = tf.constant(300, tf.int64); z = tf.constant(0, tf.int64)
    t, d = K.gc_garble(k, no, n, z, n, "compare")
    lx = K.gc_encode(k, no, x, n, z, "compare", "b")
    ly = K.gc_encode(k, no, y, n, z, "compare", "a")
    b = K.gc_evaluate(t, d, ly, lx, no, z, "compare")
    m = K.gc_mask(k, no, n, "compare")
    assert np.array_equal(b.numpy() ^ m.numpy(), (y.numpy() < x.numpy()).astype(np.uint8))
    return "".join(a.numpy().tobytes().hex() for a in (t, d, lx, ly, b, m))
"""

# In the masked process: the PRG with TF_PRIVPY_DISABLE_VAES=1 (EVP's portable
# AES), the garbled circuit with the variable as the parent has it (what the
# old per-test process ran) and with it set to 1 (EVP's portable AES for the
# fixed-key hash too, also where the CPU has VAES).
_CAPPED_MAIN = PRG_CODE + GC_CODE + """
import json, os, sys
os.environ["TF_PRIVPY_DISABLE_VAES"] = "1"
prg = prg_hex()
gc_evp = gc_hex()
if PARENT_VAES is None:
    del os.environ["TF_PRIVPY_DISABLE_VAES"]
else:
    os.environ["TF_PRIVPY_DISABLE_VAES"] = PARENT_VAES
gc = gc_hex()
sys.stdout.write(json.dumps({"prg": prg, "gc": gc, "gc_evp": gc_evp}))
"""


def _compiled(code: str, name: str):
    scope: dict = {}
    exec(compile(code, f"<tests/portable_aes.py:{name}>", "exec"), scope)
    return scope[name]


def prg_hex_here(disable_vaes: Optional[str]) -> str:
    """The PRG's output in this process, with TF_PRIVPY_DISABLE_VAES set to
    disable_vaes (None: unset) for the call and restored afterwards."""
    return _with_vaes_env(disable_vaes, _compiled(PRG_CODE, "prg_hex"))


def gc_hex_here(disable_vaes: Optional[str]) -> str:
    """The garbled comparison's outputs in this process (see prg_hex_here)."""
    return _with_vaes_env(disable_vaes, _compiled(GC_CODE, "gc_hex"))


def _with_vaes_env(value: Optional[str], fn):
    old = os.environ.get("TF_PRIVPY_DISABLE_VAES")
    try:
        if value is None:
            os.environ.pop("TF_PRIVPY_DISABLE_VAES", None)
        else:
            os.environ["TF_PRIVPY_DISABLE_VAES"] = value
        return fn()
    finally:
        if old is None:
            os.environ.pop("TF_PRIVPY_DISABLE_VAES", None)
        else:
            os.environ["TF_PRIVPY_DISABLE_VAES"] = old


@functools.lru_cache(maxsize=None)
def capped_outputs() -> Dict[str, str]:
    """{"prg", "gc", "gc_evp"} from one process with OpenSSL's AES-NI and AVX
    masked off (see _CAPPED_MAIN); run once per pytest worker."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OPENSSL_ia32cap=PORTABLE_CAP)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    parent = os.environ.get("TF_PRIVPY_DISABLE_VAES")
    code = f"PARENT_VAES = {parent!r}\n" + _CAPPED_MAIN
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)
