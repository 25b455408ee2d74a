"""Local truncation in the 128-bit ring (DESIGN §3): 10^6 random products of
in-range values, one protocol call, and not one truncation failure.

A failure would be off by about 2^(128-20) (or 2^(64-16)), so the check is a
tight absolute bound on every element, not an average."""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from tolerances import mul_tol

N = 10 ** 6


@pytest.mark.slow
def test_million_products_no_truncation_failure_ring128():
    tp.reset()
    tp.init(tp.Config(ring_bits=128))
    try:
        rng = np.random.default_rng(2024)
        bound = tp.get_runtime().config.bound
        # half typical activations, half spread over the whole share-time range
        x = np.concatenate([rng.normal(0, 30, N // 2), rng.uniform(-bound, bound, N // 2)])
        y = np.concatenate([rng.normal(0, 30, N // 2), rng.uniform(-bound, bound, N // 2)])
        x = np.clip(x, -bound + 1, bound - 1)
        y = np.clip(y, -bound + 1, bound - 1)
        z = (tp.share(x) * tp.share(y)).reveal().numpy()
        err = np.abs(z - x * y)
        failures = int(np.sum(err > mul_tol(x, y, 20)))
        assert failures == 0, f"{failures} of {N} products failed truncation"
    finally:
        tp.reset()
        tp.init()
