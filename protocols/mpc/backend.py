"""Backends: how shares are created, combined and multiplied.

`PrivPyBackend` runs PrivPy's four-server protocols (DESIGN §5): shares live
on S1 and S2, every multiplication is the masked protocol through T1 and T2.
`PlaintextBackend` keeps the same API and fixed-point encoding but computes
in the clear on the client device (value in share 0, zero in share 1): a
debugging aid and the test oracle, never private.

Everything is expressed on `Shares` (pairs of ring tensors); the public API
(tf_privpy) wraps them in PrivateTensor.
"""
from __future__ import annotations

import abc
from typing import List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from . import kernels
from . import shares as sh
from .garbled import Pregarbled
from .runtime import CLIENT, Runtime

Shares = sh.Shares


class Backend(abc.ABC):
    """Protocol operations on shares for one runtime."""

    name = "abstract"
    #: the parties holding share 0 and share 1
    holders: Tuple[str, str] = ("S1", "S2")

    def __init__(self, runtime: Runtime):
        self.rt = runtime
        self.cfg = runtime.config
        self.bits = runtime.config.ring_bits
        self.limbs = runtime.config.limbs

    # ------------------------------------------------------------ helpers
    def on(self, i: int):
        """Device scope of the holder of share i."""
        return tf.device(self.rt.device(self.holders[i]))

    def local(self, fn, *shares_args: Shares) -> Shares:
        """Applies fn share-wise: fn(s_i of each arg..., party=i) on holder i."""
        out = []
        for i in range(2):
            with self.on(i):
                out.append(fn(*[a[i] for a in shares_args], party=i))
        return out[0], out[1]

    def encode(self, x: tf.Tensor, party: str, name: str = "",
               frac_bits: Optional[int] = None, bound: Optional[float] = None) -> tf.Tensor:
        """Fixed-point encoding of a (public or owned) tensor on `party`."""
        with tf.device(self.rt.device(party)):
            if x.dtype not in (tf.float32, tf.float64, tf.int32, tf.int64):
                x = tf.cast(x, tf.float64)
            return kernels.ring_encode(
                x, self.bits, self.cfg.frac_bits if frac_bits is None else frac_bits,
                self.cfg.bound if bound is None else bound, tensor_name=name)

    def decode(self, v: tf.Tensor) -> tf.Tensor:
        with tf.device(self.rt.device(CLIENT)):
            return kernels.ring_decode(v, self.bits, self.cfg.frac_bits)

    # ------------------------------------------------------ share / reveal
    @abc.abstractmethod
    def share(self, encoded: tf.Tensor) -> Shares:
        """Splits a ring tensor on the client device into the holders' shares."""

    def reveal(self, s: Shares) -> tf.Tensor:
        """The ring value on the client device."""
        s0 = self.rt.send(s[0], self.holders[0], CLIENT)
        s1 = self.rt.send(s[1], self.holders[1], CLIENT)
        with tf.device(self.rt.device(CLIENT)):
            return kernels.ring_add(s0, s1, self.bits)

    # ---------------------------------------------------------- linear ops
    def add(self, x: Shares, y: Shares) -> Shares:
        return self.local(lambda a, b, party: kernels.ring_add(a, b, self.bits), x, y)

    def sub(self, x: Shares, y: Shares) -> Shares:
        return self.local(lambda a, b, party: kernels.ring_sub(a, b, self.bits), x, y)

    def neg(self, x: Shares) -> Shares:
        return self.local(lambda a, party: kernels.ring_neg(a, self.bits), x)

    def add_public(self, x: Shares, c: tf.Tensor, name: str = "") -> Shares:
        """x + c for a public c of x's logical shape: only share 0 changes."""
        c0 = self.encode(c, self.holders[0], name)
        with self.on(0):
            z0 = kernels.ring_add(x[0], c0, self.bits)
        return z0, x[1]

    def public_sub(self, c: tf.Tensor, x: Shares, name: str = "") -> Shares:
        return self.add_public(self.neg(x), c, name)

    def mul_public(self, x: Shares, c: tf.Tensor, kind: str = "mul", public_left: bool = False,
                   strides=(1, 1), padding=(0, 0, 0, 0), c_frac_bits: Optional[int] = None,
                   c_bound: Optional[float] = None, name: str = "") -> Shares:
        """Product with a public operand: local, then local truncation.

        c is encoded with c_frac_bits (default: the config's) fractional bits
        and the product truncated by as many, so extra bits buy precision;
        c_bound (default: the config's bound) is the range c is checked against.
        """
        f = self.cfg.frac_bits if c_frac_bits is None else c_frac_bits

        def fn(s, party):
            cp = self.encode(c, self.holders[party], name, frac_bits=f, bound=c_bound)
            a, b = (cp, s) if public_left else (s, cp)
            return kernels.ring_bilinear(a, b, self.bits, kind, strides, padding,
                                         truncate_party=party if f > 0 else -1, frac_bits=f)

        return self.local(fn, x)

    def reduce_sum(self, x: Shares, axis=None, keepdims: bool = False) -> Shares:
        shape = sh.logical_shape(x[0], self.limbs)
        if not shape.is_fully_defined():
            raise ValueError("reduce_sum needs a fully known shape")
        kept, red = sh.reduce_axes_layout(shape, axis)
        outer = [shape[i] for i in kept]
        inner = int(np.prod([shape[i] for i in red], dtype=np.int64))
        out_shape = [1 if i in red else shape[i] for i in range(shape.rank)] if keepdims else outer

        def fn(s, party):
            t = sh.transpose(s, kept + red, self.limbs) if red else s
            t = sh.reshape(t, [int(np.prod(outer, dtype=np.int64)), inner], self.limbs)
            return sh.reshape(kernels.ring_reduce_sum(t, self.bits), out_shape, self.limbs)

        return self.local(fn, x)

    def garble_ahead(self, shape) -> Pregarbled:
        raise ValueError(f"the {self.name} backend has no garbled circuits to prepare; "
                         "garbling ahead belongs to the privpy backend")

    def map_shares(self, fn, x: Shares) -> Shares:
        """Applies a shape function (reshape, slice, ...) to both shares."""
        return self.local(lambda s, party: fn(s), x)

    def map_many(self, fn, xs: Sequence[Shares]) -> Shares:
        """Applies fn(list of shares) (concat, stack) share-wise."""
        out = []
        for i in range(2):
            with self.on(i):
                out.append(fn([x[i] for x in xs]))
        return out[0], out[1]

    # -------------------------------------------------------- multiplication
    @abc.abstractmethod
    def mul(self, x: Shares, y: Shares, kind: str = "mul", strides=(1, 1),
            padding=(0, 0, 0, 0)) -> Shares:
        """Bilinear product of two shared operands, truncated to frac_bits."""

    @abc.abstractmethod
    def ltz(self, x: Shares, pregarbled=None) -> Shares:
        """Shares of the bit [x < 0], encoded as fixed-point 1.0 or 0.0 (DESIGN §6).

        Every comparison derives from it: x < y is ltz(x - y)."""

    def mul_many(self, pairs: Sequence[Tuple[Shares, Shares]]) -> List[Shares]:
        """Independent elementwise products (equal shapes per pair) as ONE
        protocol call: one kernel per step and device, one round trip."""
        if not pairs:
            return []
        shapes = [sh.logical_shape(x[0], self.limbs) for x, _ in pairs]
        for (x, y), s in zip(pairs, shapes):
            if sh.logical_shape(y[0], self.limbs) != s or not s.is_fully_defined():
                raise ValueError("mul_many needs pairs of equal, fully known shapes")
        sizes = [s.num_elements() for s in shapes]

        def flat(parts):
            return tf.concat([sh.reshape(p, [-1], self.limbs) for p in parts], 0)

        fx = self.map_many(flat, [x for x, _ in pairs])
        fy = self.map_many(flat, [y for _, y in pairs])
        z = self.mul(fx, fy)
        out = []
        for i in range(2):
            with self.on(i):
                out.append(tf.split(z[i], sizes, axis=0))
        return [self.map_shares(lambda s, s_=s: sh.reshape(s, s_.as_list(), self.limbs),
                                (a, b)) for a, b, s in zip(out[0], out[1], shapes)]


class PrivPyBackend(Backend):
    """PrivPy's four-server protocols (DESIGN §5)."""

    name = "privpy"
    holders = ("S1", "S2")

    def share(self, encoded: tf.Tensor) -> Shares:
        with tf.device(self.rt.device(CLIENT)):
            s0, s1 = kernels.share_split(encoded, self.bits)
        return self.rt.send(s0, CLIENT, "S1"), self.rt.send(s1, CLIENT, "S2")

    def mul(self, x: Shares, y: Shares, kind: str = "mul", strides=(1, 1),
            padding=(0, 0, 0, 0)) -> Shares:
        rt, bits, f = self.rt, self.bits, self.cfg.frac_bits
        geo = dict(kind=kind, strides=strides, padding=padding)
        # Step 1-2 (DESIGN §5): each server masks its shares with masks drawn
        # from the S1-S2 stream; no message is needed to agree on them.
        k12, n12 = {}, {}
        masked = {}
        for p, party in enumerate(("S1", "S2")):
            k12[p], n12[p] = rt.key_material("S1", "S2", party)
            with tf.device(rt.device(party)):
                masked[p] = kernels.mul_mask(x[p], y[p], k12[p], n12[p], bits, party=p)
        # T1 gets a = x0 + rx0 (from S1), b = y1 + ry1 (from S2);
        # T2 gets a' = x1 + rx1 (from S2), b' = y0 + ry0 (from S1).
        msgs = {}
        for t, (own, other) in (("T1", (0, 1)), ("T2", (1, 0))):
            left = rt.send(masked[own][0], ("S1", "S2")[own], t)
            right = rt.send(masked[other][1], ("S1", "S2")[other], t)
            server = ("S1", "S2")[own]  # T1 shares its mask u with S1, T2 with S2
            kt, nt = rt.key_material(server, t, t)
            with tf.device(rt.device(t)):
                msg = kernels.mul_assist(left, right, kt, nt, bits, **geo)
            msgs[other] = rt.send(msg, t, ("S1", "S2")[other])  # T1 -> S2, T2 -> S1
        z = []
        for p, (party, t) in enumerate((("S1", "T1"), ("S2", "T2"))):
            kt, nt = rt.key_material(party, t, party)
            with tf.device(rt.device(party)):
                z.append(kernels.mul_finish(x[p], y[p], masked[p][0], msgs[p], k12[p], n12[p],
                                            kt, nt, bits, party=p, frac_bits=f, **geo))
        return z[0], z[1]


    def ltz(self, x: Shares, pregarbled: Optional["Pregarbled"] = None) -> Shares:
        """PrivPy Protocol 2 (DESIGN §6): [x < 0] by a garbled comparator on
        the low 64 bits of the shares, evaluated by T1 (first half of the
        batch) and T2 (second half), turned back into arithmetic shares.

        With `pregarbled` (from `garble_ahead`), the garbled tables are
        already at T1 and T2 and only input labels travel online."""
        rt = self.rt
        shape = sh.dynamic_shape(x[0], self.limbs)
        low = [sh.reshape(s, [-1], self.limbs) for s in x]
        if self.limbs == 2:  # reduction mod 2^64 is a ring homomorphism
            low = [s[:, 0] for s in low]
        n_static = low[0].shape[0]
        chunk = int(self.cfg.comparison_batch)
        if pregarbled is None and n_static is not None and n_static > chunk:
            # Bounded memory: garbled tables take 2 KB per comparison, so big
            # batches go in chunks, each garbled after the previous finished.
            outs, dep = [], []
            for b in range(0, n_static, chunk):
                with tf.control_dependencies(dep):
                    o = self._ltz_flat([s[b:b + chunk] for s in low], None)
                outs.append(o)
                dep = [o[0], o[1]]
            out = self.map_many(lambda p: tf.concat(p, 0), outs)
        else:
            out = self._ltz_flat(low, pregarbled)
        return self.map_shares(lambda s: sh.reshape(s, shape, self.limbs), out)

    def _ltz_flat(self, low, pregarbled) -> Shares:
        """ltz of flat int64 low halves [n] of the shares: flat ring shares."""
        rt = self.rt
        if pregarbled is None:
            n = tf.shape(low[0], out_type=tf.int64)[0]
            key, nonce = self._take_gc_stream()
            with tf.device(rt.device("S1")):
                tables, decode = kernels.gc_garble(key[0], nonce[0], n)
            at_t = self._ship_tables(tables, decode, nonce[0], n // 2)
        else:
            key, nonce, at_t = pregarbled.consume(low[0].shape, 1)
            n = tf.shape(low[0], out_type=tf.int64)[0]
        # A run refused for a used batch must advance no stream counter: one
        # side of a pair advancing alone would desynchronise its nonces.
        taken = [] if pregarbled is None else [nonce[0], nonce[1]]
        with tf.device(rt.device("S1")):
            labels_y = kernels.gc_encode_input(key[0], nonce[0], low[0], "y")
            mask0 = kernels.gc_output_mask(key[0], nonce[0], n)
        with tf.device(rt.device("S2")):
            labels_x = kernels.gc_encode_input(key[1], nonce[1], kernels.ring_neg(low[1], 64), "x")
            mask1 = kernels.gc_output_mask(key[1], nonce[1], n)
        bits, f, half = self.bits, self.cfg.frac_bits, n // 2
        # T1 evaluates [0, half), T2 [half, n); each shares its bits b' with
        # its server (beta) and sends b'·2^f - beta to the other server.
        own_share, msg = {}, {}
        for t, server, other, sl in (("T1", "S1", "S2", slice(None, half)),
                                     ("T2", "S2", "S1", slice(half, None))):
            lx, ly = rt.send(labels_x[sl], "S2", t), rt.send(labels_y[sl], "S1", t)
            tables_t, decode_t, nonce_t, first_t = at_t[t]
            with tf.control_dependencies(taken):
                kt, nt = rt.key_material(server, t, t)
            with tf.device(rt.device(t)):
                b = kernels.gc_evaluate(tables_t, decode_t, lx, ly, nonce_t, first_t)
                m = kernels.bit_share_assist(b, kt, nt, bits, f)
            msg[other] = rt.send(m, t, other)
            with tf.control_dependencies(taken):
                ks, ns = rt.key_material(server, t, server)
            with tf.device(rt.device(server)):
                own_share[server] = kernels.prg_ring(ks, ns, tf.shape(b, out_type=tf.int64), bits)
        out = []
        for p, (party, first, second, mask) in enumerate((
                ("S1", own_share["S1"], msg["S1"], mask0),
                ("S2", msg["S2"], own_share["S2"], mask1))):
            with tf.device(rt.device(party)):
                out.append(kernels.bit_unmask(tf.concat([first, second], 0), mask, bits, f,
                                              party=p))
        return out[0], out[1]

    def _take_gc_stream(self):
        """(key, nonce) of a fresh S1-S2 stream on each server, per party index."""
        key, nonce = {}, {}
        for p, party in enumerate(("S1", "S2")):
            key[p], nonce[p] = self.rt.key_material("S1", "S2", party)
        return key, nonce

    def _ship_tables(self, tables, decode, nonce, half):
        """S1 sends the garbled tables and decoding bits of [0, half) to T1 and
        of [half, n) to T2, with the stream nonce and the index of the first
        comparison (public: together they fix the hash tweaks)."""
        at_t = {}
        half = tf.cast(half, tf.int64)
        for t, sl, first in (("T1", slice(None, half), tf.zeros_like(half)),
                             ("T2", slice(half, None), half)):
            at_t[t] = (self.rt.send(tables[sl], "S1", t), self.rt.send(decode[sl], "S1", t),
                       self.rt.send(nonce, "S1", t), self.rt.send(first, "S1", t))
        return at_t

    def garble_ahead(self, shape) -> Pregarbled:
        """Garbles comparators for one later comparison of `shape` now, and
        stores the tables at T1 and T2 (TF variables): the setup phase of
        DESIGN §6. The result is single-use, enforced in TF state by each
        server, so a traced function cannot replay it."""
        return Pregarbled(self, tf.TensorShape(shape))


class PlaintextBackend(Backend):
    """The same operations in the clear on the client device (test oracle)."""

    name = "plaintext"
    holders = ("client", "client")

    def share(self, encoded: tf.Tensor) -> Shares:
        with tf.device(self.rt.device(CLIENT)):
            return tf.identity(encoded), tf.zeros_like(encoded)

    def reveal(self, s: Shares) -> tf.Tensor:
        with tf.device(self.rt.device(CLIENT)):
            return kernels.ring_add(s[0], s[1], self.bits)

    def mul(self, x: Shares, y: Shares, kind: str = "mul", strides=(1, 1),
            padding=(0, 0, 0, 0)) -> Shares:
        with tf.device(self.rt.device(CLIENT)):
            a = kernels.ring_add(x[0], x[1], self.bits)
            b = kernels.ring_add(y[0], y[1], self.bits)
            z = kernels.ring_bilinear(a, b, self.bits, kind, strides, padding,
                                      truncate_party=0, frac_bits=self.cfg.frac_bits)
            return z, tf.zeros_like(z)


    def ltz(self, x: Shares, pregarbled=None) -> Shares:
        if pregarbled is not None:
            raise ValueError("pregarbled comparators belong to the privpy backend")
        with tf.device(self.rt.device(CLIENT)):
            v = kernels.ring_decode(kernels.ring_add(x[0], x[1], self.bits), self.bits, 0)
            bit = tf.cast(v < 0, tf.int64)
            z = kernels.ring_encode(bit, self.bits, self.cfg.frac_bits, 2.0)
            return z, tf.zeros_like(z)


BACKENDS = {"privpy": PrivPyBackend, "plaintext": PlaintextBackend}


def make_backend(runtime: Runtime) -> Backend:
    return BACKENDS[runtime.config.backend](runtime)
