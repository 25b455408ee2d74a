"""Piecewise-constant tables of the private numerics (Ctx.table,
protocols/mpc/fixedpoint/lifted.py): exact on the grid in both rings, for
values as large as a range reduction's 2^-j factors.

A table is the comparison bits times public grid values. With fixed-point
bits (b·2^f) the product b·2^f·v·2^f needs a local truncation, which fails
with probability ~|v|·2^(2f-64) per element: 2^-16 for v = 2^16 in the
64-bit ring, where it put ln(3 ulps) at 9.8e6 about once in 70,000 elements
(CI, test_numerics.py::test_piece_boundaries). Integer bits times integer
grid values need no truncation. `_fixed_point_table` below is that old
variant; the test shows the check catches it.
"""
import numpy as np
import pytest
import tensorflow as tf

import tf_privpy as tp
from conftest import activate_runtime
from tf_privpy.protocols.mpc.fixedpoint.lifted import Ctx
from tf_privpy.protocols.mpc.runtime import kernels
from tf_privpy.protocols.mpc.runtime import shares as sh

#: rows: half of them hold 2^16, whose old truncation failed with probability
#: ~2^-16 each, so the broken variant shows ~16 failures and passes with
#: probability ~e^-16 (measured: 5, 5, 8 failures in 2^20 rows)
N = 1 << 21


def _integer_bits(backend, n):
    """Shares of integer bits [n, 1], alternating 0 and 1, and their values."""
    want = (np.arange(n) % 2).astype(np.int64)
    enc = kernels.ring_encode(tf.constant(want[:, None]), backend.bits, 0, 2.0)
    return backend.share(enc), want


def _fixed_point_table(ctx, bits, values):
    """The old Ctx.table: fixed-point bits, values at f bits, one truncation."""
    b = ctx.b
    fp = b.mul_public(bits, tf.constant(2.0 ** ctx.f), c_frac_bits=0, c_bound=2.0 ** 62)
    coeff = ctx._grid_coeff(values, True) / 2.0 ** ctx.f
    ones = b.map_shares(lambda s: sh.getitem(s, (slice(None), slice(0, 1)), ctx.limbs), fp)
    ones = ctx.ones(ones)
    aug = b.map_many(lambda p: sh.concat(p, 1, ctx.limbs), [fp, ones])
    return b.mul_public(aug, tf.constant(coeff), kind="matmul", c_frac_bits=ctx.f,
                        c_bound=2.0 ** (62 - ctx.f))


def _table_errors(ctx, table_fn):
    b = ctx.b
    bits, want_bits = _integer_bits(b, N)
    big = 2.0 ** (tp.get_runtime().config.frac_bits if ctx.ring == 64 else 20)
    values = np.array([[big], [1.0]])          # [x < θ] = 1 -> big, else 1
    got = b.decode(b.reveal(ctx.column(table_fn(ctx, bits, values), 0))).numpy()
    want = np.where(want_bits == 1, big, 1.0) * 2.0 ** ctx.E
    return int(np.sum(got != want))


@pytest.mark.parametrize("ring", [64, 128])
def test_table_of_large_values_is_exact(request, ring):
    activate_runtime(request.config, "privpy", ring)
    ctx = Ctx(tp.get_runtime().backend)
    assert _table_errors(ctx, lambda c, bits, v: c.table(bits, v)) == 0


def test_fixed_point_table_variant_fails_the_check(request):
    """The check can fail: the old table, in the 64-bit ring."""
    activate_runtime(request.config, "privpy", 64)
    ctx = Ctx(tp.get_runtime().backend)
    assert _table_errors(ctx, _fixed_point_table) > 0
