"""Private non-linear numerics on shares: exp, log, reciprocal, division,
sqrt, rsqrt, sigmoid, tanh, softmax, log_softmax (DESIGN §7).

Building blocks (all on `Shares`, through the Backend API only):

- Range reduction (protocols/range_reduction.py): the octave of x, or the
  piece of t = x·log2 e for exp, and the values that go with it (2^-j, 2^k,
  m·ln 2), by one garbled leading-one circuit per element for octave pieces
  ("leading_one", protocols/mpc/privpy/leading_one.py), a binary search of one
  garbled comparison per element per level ("binary_search") or one
  comparison per boundary in one round ("thresholds"). Config
  "range_reduction", per call overridable.
- Fixed point (protocols/lifted.py): tables exact on the fixed-point grid,
  lifted arithmetic with 8 more fractional bits in the 128-bit ring.
- Products of independent values are batched: a tree of powers of degree d
  costs ceil(log2 d) multiplication rounds (ceil(log2(d+1)) with a scale);
  `power_terms` schedules it by depth when the scale arrives a round late.

Rounds are the one cost model's (runtime/cost.py): message hops on the
critical path, 2 per batched private multiplication (cost.MUL_ROUNDS), 2
per batched garbled circuit (cost.CIRCUIT_ROUNDS) and per batched comparison
what the comparison family declares (garbled 2, bitwise 8); "a multiplication
round" below is one such batched call. `measure` takes the rounds,
products and comparisons from the protocols' declarations (cost.record);
`CostTracker` only splits the longest path into multiplications and
comparisons.
"""
from __future__ import annotations

import functools
import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from ..bitwise import backend as bitwise_backend
from ..bitwise import protocol as bitwise_protocol
from ..privpy import leading_one as lo
from ..privpy import compare
from ..runtime import cost as C
from ..runtime import shares as sh
from ..privpy.backend import Backend, Shares
from .lifted import Ctx
from .series import (FUNCS, cheb_fit, elementwise, goldschmidt, newton_recip, to_rows,
                     power_terms)
from .range_reduction import Geo, Lin, Plan, octave_plan, octaves, reduce_range
# sigmoid, tanh and erf: piecewise polynomials (their own module)
from .piecewise import erf, fast as _fast, gelu, setting as _setting, sigmoid, tanh  # noqa: F401

LOG2E = 1.0 / math.log(2.0)
LN2 = math.log(2.0)







# ---------------------------------------------------------------------- exp
def _exp_flat(ctx: Ctx, x: Shares, degree: int, rr: str, h: int,
              nonpositive: bool = False) -> Shares:
    """exp(x) = 2^t, t = x·log2(e) in the piece [e_i, e_i + h) of width h
    (config "piece_octaves"): 2^t = 2^(e_i + h//2)·p(w), w = t - e_i - h/2 in
    [-h/2, h/2), p a degree-d fit of 2^(w + h/2 - h//2). The piece comes from
    the range reduction on t; the scale S = 2^(e_i + h//2) is folded into the
    power tree (terms S·w^i, all <= S). Saturates: 0 for t < -f, 2^floor(log2 B)
    for t >= floor(log2 B) (`nonpositive`: t <= 0, no upper row)."""
    b = ctx.b
    t = ctx.scale(x, LOG2E)                                   # for comparisons
    tl = ctx.lscale(x, LOG2E)                                 # lifted t
    jlo = -ctx.f
    if nonpositive:
        K, above = (0 - jlo) // h + 1, None                   # the last piece holds t = 0
    else:
        jhi = int(math.floor(math.log2(b.cfg.bound)))
        K, above = -(-(jhi - jlo) // h), float(jhi)
    plan = Plan("add", K=K, jlo=jlo, h=h, below=float(jlo), above=above)
    feats = {"k": Lin(jlo + h / 2, h), "S": Geo(2.0 ** (jlo + h // 2), 2.0 ** h)}
    if not nonpositive:
        feats["sat"] = Lin(0.0, 0.0, above=2.0 ** jhi)
    res = reduce_range(ctx, t, plan, feats, rr)
    w = b.sub(tl, res["k"])                                   # lifted, in [-h/2, h/2)
    name = f"exp2_{h}"
    FUNCS.setdefault(name, lambda v, c=h / 2 - h // 2: 2.0 ** (v + c))
    coeffs = cheb_fit(name, -h / 2, h / 2, degree)
    terms = power_terms(ctx, w, degree, scale=res["S"], lag=1 if res["levels"] > 1 else 0)
    y = ctx.combine(terms, coeffs)
    if not nonpositive:
        y = b.add(y, res["sat"])
    return ctx.lower(y)


def _exp_settings(backend: Backend, fn: str, degree, range_reduction):
    return (int(_setting(backend, fn, "degree", degree)),
            _setting(backend, fn, "range_reduction", range_reduction),
            int(_setting(backend, fn, "piece_octaves")))


@elementwise
def _exp(ctx: Ctx, x: Shares, degree: Optional[int] = None,
         range_reduction: Optional[str] = None) -> Shares:
    d, rr, h = _exp_settings(ctx.b, "exp", degree, range_reduction)
    return _exp_flat(ctx, x, d, rr, h)


def exp(backend: Backend, x: Shares, degree: Optional[int] = None,
        range_reduction: Optional[str] = None, mode: Optional[str] = None) -> Shares:
    """e^x. Saturates: 0 where x·log2(e) < -f (e^x below one ulp), 2^floor(log2 B)
    where x·log2(e) >= floor(log2 B). mode "fast": fast_numerics.exp."""
    fast = _fast(backend, "exp", mode)
    if fast:
        return fast.exp(backend, x)
    return _exp(backend, x, degree=degree, range_reduction=range_reduction)


# ----------------------------------------------------------- reciprocal, div
def _recip_guess(ctx: Ctx, y: Shares, signed: bool, rr: str) -> Shares:
    """Initial guesses (2/3)·2^-j on |y| in [2^j, 2^(j+1)): |1 - y·g| <= 1/3;
    g = 0 at y = 0 (and for y < 0 when unsigned)."""
    plan = octave_plan(ctx, signed)
    g = Geo((2 / 3) * 2.0 ** -plan.jlo, 0.5, neg_sign=-1.0)
    return reduce_range(ctx, y, plan, {"g": g}, rr)["g"]


def _divide_flat(ctx, x, y, method, iterations, signed, rr):
    if method not in ("goldschmidt", "newton"):
        raise ValueError(f"unknown reciprocal method {method!r} (goldschmidt, newton)")
    g = _recip_guess(ctx, y, signed, rr)
    if method == "goldschmidt":
        return goldschmidt(ctx, x, y, g, iterations)
    return newton_recip(ctx, x, y, g, iterations)


def reciprocal(backend: Backend, x: Shares, method: Optional[str] = None,
               iterations: Optional[int] = None, signed: Optional[bool] = None,
               range_reduction: Optional[str] = None, mode: Optional[str] = None) -> Shares:
    """1/x for 2^-f <= |x| < B (x >= 2^-f only, if unsigned). 1/0 = 0.
    mode "fast": fast_numerics.divide on its domain."""
    return divide(backend, None, x, method=method, iterations=iterations, signed=signed,
                  range_reduction=range_reduction, mode=mode, _fn="reciprocal")


def divide(backend: Backend, x: Optional[Shares], y: Shares, method: Optional[str] = None,
           iterations: Optional[int] = None, signed: Optional[bool] = None,
           range_reduction: Optional[str] = None, mode: Optional[str] = None,
           _fn: str = "divide") -> Shares:
    """x / y for shares of equal shapes (x None: 1/y). x / 0 = 0.
    mode "fast": fast_numerics.divide on its domain."""
    fast = _fast(backend, _fn, mode)
    if fast:
        return fast.divide(backend, x, y, fn=_fn)
    ctx = Ctx(backend)
    method = _setting(backend, _fn, "method", method)
    iterations = int(_setting(backend, _fn, "iterations", iterations))
    signed = bool(_setting(backend, _fn, "signed", signed))
    rr = _setting(backend, _fn, "range_reduction", range_reduction)
    shape = ctx.shape(y)
    out = _divide_flat(ctx, None if x is None else ctx.flat(x), ctx.flat(y), method,
                       iterations, signed, rr)
    return backend.map_shares(lambda s: sh.reshape(s, shape, ctx.limbs), out)


# -------------------------------------------------------------- sqrt, rsqrt
def _roots_flat(ctx: Ctx, x: Shares, degrees: Dict[bool, int], rr: str) -> Dict[bool, Shares]:
    """x = u·2^j, u in [1, 2) from the range reduction (z), e = 1 - (2/3)u in
    (-1/3, 1/3] (local). 1/sqrt(x) = G·(1 - e)^(-1/2), G = sqrt(2/3)·2^(-j/2);
    sqrt(x) = G·(1 - e)^(1/2), G = sqrt(3/2)·2^(j/2); each degree-d polynomial
    is folded into a power tree with its scale G. x <= 0 gives 0 (G = 0).
    `degrees`: {True: sqrt's degree, False: rsqrt's}; both from ONE range
    reduction when both are asked for (its table gets a second column: the
    leading-one circuit, the costly part, is shared)."""
    b = ctx.b
    plan = octave_plan(ctx)
    scales = {True: ("G", Geo(math.sqrt(3 / 2) * 2.0 ** (plan.jlo / 2), math.sqrt(2.0)),
                     "sqrt1m"),
              False: ("H", Geo(math.sqrt(2 / 3) * 2.0 ** (-plan.jlo / 2), math.sqrt(0.5)),
                      "rsqrt1m")}
    res = reduce_range(ctx, x, plan, {scales[w][0]: scales[w][1] for w in degrees}, rr,
                       want_z=True)
    e = b.public_sub(ctx.fill(x, ctx.lconst(1.0)), ctx.scale(res["z"], 2 / 3))
    out = {}
    for want_sqrt, degree in degrees.items():
        key, _, fit = scales[want_sqrt]
        terms = power_terms(ctx, e, degree, scale=res[key])
        out[want_sqrt] = ctx.lower(ctx.combine(terms, cheb_fit(fit, -1 / 3, 1 / 3, degree)))
    return out


def _root_flat(ctx: Ctx, x: Shares, degree: int, want_sqrt: bool, rr: str) -> Shares:
    return _roots_flat(ctx, x, {want_sqrt: degree}, rr)[want_sqrt]


def _root_settings(backend, fn, degree, range_reduction):
    return (int(_setting(backend, fn, "degree", degree)),
            _setting(backend, fn, "range_reduction", range_reduction))


@elementwise
def _rsqrt(ctx, x, degree=None, range_reduction=None):
    d, rr = _root_settings(ctx.b, "rsqrt", degree, range_reduction)
    return _root_flat(ctx, x, d, False, rr)


@elementwise
def _sqrt(ctx, x, degree=None, range_reduction=None):
    d, rr = _root_settings(ctx.b, "sqrt", degree, range_reduction)
    return _root_flat(ctx, x, d, True, rr)


def rsqrt(backend: Backend, x: Shares, degree: Optional[int] = None,
          range_reduction: Optional[str] = None, mode: Optional[str] = None) -> Shares:
    """1/sqrt(x) for 2^-f <= x < B; 0 for x <= 0. mode "fast":
    fast_numerics.rsqrt on its domain."""
    fast = _fast(backend, "rsqrt", mode)
    if fast:
        return fast.rsqrt(backend, x)
    return _rsqrt(backend, x, degree=degree, range_reduction=range_reduction)


def sqrt(backend: Backend, x: Shares, degree: Optional[int] = None,
         range_reduction: Optional[str] = None, mode: Optional[str] = None) -> Shares:
    """sqrt(x) for 0 <= x < B; 0 for x <= 0. mode "fast": fast_numerics.sqrt
    on its domain."""
    fast = _fast(backend, "sqrt", mode)
    if fast:
        return fast.sqrt(backend, x)
    return _sqrt(backend, x, degree=degree, range_reduction=range_reduction)


def sqrt_rsqrt(backend: Backend, x: Shares, range_reduction: Optional[str] = None
               ) -> Tuple[Shares, Shares]:
    """(sqrt(x), 1/sqrt(x)) from one range reduction (one leading-one
    circuit per element instead of two), each at its own configured degree;
    the range reduction is sqrt's setting. Exact mode only: Adam's update
    (converters/optimizers.py) needs both of one tensor."""
    ctx = Ctx(backend)
    rr = _setting(backend, "sqrt", "range_reduction", range_reduction)
    degrees = {True: int(_setting(backend, "sqrt", "degree", None)),
               False: int(_setting(backend, "rsqrt", "degree", None))}
    shape = ctx.shape(x)
    out = _roots_flat(ctx, ctx.flat(x), degrees, rr)
    return tuple(backend.map_shares(lambda s: sh.reshape(s, shape, ctx.limbs), out[w])
                 for w in (True, False))


# ---------------------------------------------------------------------- log
def _log_flat(ctx: Ctx, x: Shares, degree: int, rr: str,
              js: Optional[Sequence[int]] = None) -> Shares:
    """ln x = m·ln2 + ln(1 + z), z = x·2^-m - 1 in [2^-1/2 - 1, 2^1/2 - 1) with m
    from the range reduction on the boundaries 2^(j - 1/2); ln(1 + z) by a
    degree-d polynomial. x <= 0 gives ln(2^-(f+1)) (half an ulp). With `js`
    (a row sum known to be >= 1), m only takes those values and there is no
    row for x <= 0."""
    b = ctx.b
    positive = js is not None
    if js is None:
        jlo, _ = octaves(ctx)
        js = list(range(jlo, int(math.floor(math.log2(b.cfg.bound) + 0.5)) + 1))
    coeffs = cheb_fit("log1p", 2 ** -0.5 - 1, 2 ** 0.5 - 1, degree)
    p_at_m1 = float(np.polynomial.polynomial.polyval(-1.0, coeffs))
    bad = -(ctx.f + 1) * LN2 - p_at_m1                        # x <= 0: z = -1
    plan = Plan("mul", K=len(js), jlo=js[0], delta=-0.5,
                 below=None if positive else 2.0 ** (js[0] - 0.5))
    res = reduce_range(ctx, x, plan, {"m": Lin(js[0] * LN2, LN2, below=bad)}, rr,
                       want_z=True)
    z = ctx.add_const(res["z"], -ctx.lconst(1.0))
    terms = power_terms(ctx, z, degree)
    poly = ctx.combine([ctx.ones(z) if t is None else t for t in terms],
                       [coeffs[0] * 2.0 ** ctx.E] + list(coeffs[1:]))
    return ctx.lower(b.add(poly, res["m"]))


@elementwise
def _log(ctx, x, degree=None, range_reduction=None):
    d, rr = _root_settings(ctx.b, "log", degree, range_reduction)
    return _log_flat(ctx, x, d, rr)


def log(backend: Backend, x: Shares, degree: Optional[int] = None,
        range_reduction: Optional[str] = None, mode: Optional[str] = None) -> Shares:
    """Natural log for 2^-f <= x < B; ln(2^-(f+1)) for x <= 0.
    mode "fast": fast_numerics.log on its domain."""
    fast = _fast(backend, "log", mode)
    if fast:
        return fast.log(backend, x)
    return _log(backend, x, degree=degree, range_reduction=range_reduction)


# ------------------------------------------------------ softmax, log_softmax
def _shifted_exp(ctx: Ctx, x: Shares, axis: int, degree: int, rr: str):
    """d = x - max along axis (a comparison tree), e = exp(d) <= 1 and the row
    sums s in [1, n], in the [R, n] layout."""
    b = ctx.b
    x2, rows, n, back = to_rows(b, x, axis)
    m = compare.reduce_max_last(b, x2, n)                      # [R]

    def expand(v: Shares) -> Shares:                          # [R] -> flat [R·n]
        return b.map_shares(lambda s: sh.reshape(sh.broadcast_to(
            sh.reshape(s, [rows, 1], ctx.limbs), [rows, n], ctx.limbs), [-1], ctx.limbs), v)
    d = b.sub(ctx.flat(x2), expand(m))
    h = int(_setting(b, "exp", "piece_octaves"))
    e = _exp_flat(ctx, d, degree, rr, h, nonpositive=True)     # flat [R·n]
    s = b.reduce_sum(b.map_shares(lambda v: sh.reshape(v, [rows, n], ctx.limbs), e), 1)
    return d, e, s, n, expand, back, rows


def softmax(backend: Backend, x: Shares, axis: int = -1, degree: Optional[int] = None,
            iterations: Optional[int] = None, range_reduction: Optional[str] = None,
            mode: Optional[str] = None) -> Shares:
    """exp(x - max) / Σ exp(x - max) along axis (static length n). exp of the
    non-positive shifted values needs pieces on [-f, 0] only; the row sum is
    in [1, n], so its reciprocal's range reduction has ceil(log2 n) + 1
    octaves (one per row), and the division is Goldschmidt's with the
    numerators in the first round. mode "fast": fast_numerics.softmax."""
    fast = _fast(backend, "softmax", mode)
    if fast:
        return fast.softmax(backend, x, axis)
    ctx = Ctx(backend)
    degree = int(_setting(backend, "softmax", "degree", degree))
    iterations = int(_setting(backend, "softmax", "iterations", iterations))
    rr = _setting(backend, "softmax", "range_reduction", range_reduction)
    d, e, s, n, expand, back, rows = _shifted_exp(ctx, x, axis, degree, rr)
    c = int(math.ceil(math.log2(max(n, 2))))
    plan = Plan("mul", K=c + 1, jlo=0)                       # s in [1, 2^(c+1))
    g = reduce_range(ctx, s, plan, {"g": Geo(2 / 3, 0.5)}, rr)["g"]
    out = goldschmidt(ctx, e, s, g, iterations, expand=expand)
    return back(backend.map_shares(lambda v: sh.reshape(v, [rows, n], ctx.limbs), out))


def log_softmax(backend: Backend, x: Shares, axis: int = -1, degree: Optional[int] = None,
                log_degree: Optional[int] = None,
                range_reduction: Optional[str] = None, mode: Optional[str] = None) -> Shares:
    """(x - max) - ln Σ exp(x - max) along axis; the log of the row sum (in
    [1, n]) needs ceil(log2 n + 1/2) + 1 pieces per row. mode "fast":
    fast_numerics.log_softmax."""
    fast = _fast(backend, "log_softmax", mode)
    if fast:
        return fast.log_softmax(backend, x, axis)
    ctx = Ctx(backend)
    degree = int(_setting(backend, "log_softmax", "degree", degree))
    log_degree = int(_setting(backend, "log_softmax", "log_degree", log_degree))
    rr = _setting(backend, "log_softmax", "range_reduction", range_reduction)
    d, e, s, n, expand, back, rows = _shifted_exp(ctx, x, axis, degree, rr)
    js = list(range(0, int(math.ceil(math.log2(max(n, 2)) + 0.5)) + 1))
    ls = _log_flat(ctx, s, log_degree, rr, js=js)              # [R]
    out = backend.sub(d, expand(ls))
    return back(backend.map_shares(lambda v: sh.reshape(v, [rows, n], ctx.limbs), out))


# ------------------------------------------------------------- cost tracker
#: a batched comparison's rounds by family (Config.comparison)
FAMILY_ROUNDS = {"garbled": C.CIRCUIT_ROUNDS, "bitwise": bitwise_protocol.BITWISE_ROUNDS}


class CostTracker:
    """A Backend proxy that measures what a computation costs.

    Every Shares value gets a depth: the critical path of rounds that
    produced it (a batched multiplication adds cost.MUL_ROUNDS, a batched
    comparison or circuit the rounds its protocol declares; local
    operations add none).
    Values the tracker has not seen raise, so nothing is silently counted as free; register inputs first.
    Also counts elementwise products and comparisons.
    """

    _LINEAR = ("add", "sub", "neg", "add_public", "public_sub", "mul_public", "truncate",
               "reduce_sum", "map_shares", "map_many")

    def __init__(self, backend: Backend):
        self._b = backend
        self._depth: Dict[int, Tuple[int, int, int]] = {}
        self._keep: list = []
        self.products = 0
        self.comparisons = 0

    def __getattr__(self, name):
        if name in CostTracker._LINEAR:
            return functools.partial(self._linear, name)
        return getattr(self._b, name)

    @staticmethod
    def _is_shares(v) -> bool:
        return isinstance(v, tuple) and len(v) == 2 and all(isinstance(t, tf.Tensor) for t in v)

    def _size(self, s: Shares) -> int:
        return int(sh.logical_shape(s[0], self._b.limbs).num_elements())

    def register(self, s: Shares) -> Shares:
        self._set(s, (0, 0, 0))
        return s

    def depth(self, s: Shares) -> Tuple[int, int, int]:
        """(rounds, multiplication rounds, comparison rounds) on the critical path."""
        key = id(s[0])
        if key not in self._depth:
            raise KeyError("CostTracker: a value of unknown origin (register the inputs)")
        return self._depth[key]

    def _set(self, s: Shares, d):
        self._depth[id(s[0])] = d
        self._keep.append(s)

    def _deepest(self, values) -> Tuple[int, int, int]:
        ds = [self.depth(v) for v in values]
        return max(ds) if ds else (0, 0, 0)

    def _linear(self, name, *args, **kw):
        ins = []
        for a in args:
            if self._is_shares(a):
                ins.append(a)
            elif isinstance(a, (list, tuple)):
                ins += [v for v in a if self._is_shares(v)]
        out = getattr(self._b, name)(*args, **kw)
        self._set(out, self._deepest(ins))
        return out

    def mul(self, x: Shares, y: Shares, *args, **kw) -> Shares:
        d = self._deepest([x, y])
        out = self._b.mul(x, y, *args, **kw)
        self.products += self._size(out)
        self._set(out, (d[0] + C.MUL_ROUNDS, d[1] + C.MUL_ROUNDS, d[2]))
        return out

    def mul_many(self, pairs, **kw):
        d = self._deepest([v for p in pairs for v in p])
        outs = self._b.mul_many(pairs, **kw)
        for o in outs:
            self.products += self._size(o)
            self._set(o, (d[0] + C.MUL_ROUNDS, d[1] + C.MUL_ROUNDS, d[2]))
        return outs

    def _circuit(self, x: Shares, call, fallback: int) -> Shares:
        """A comparison or circuit per element of x: its rounds are what
        the protocol declares (cost.record around the call: 2 for a garbled
        batch, 8 for a bitwise one, as the family and the circuit settings
        chose); `fallback` for a backend that declares none (the plaintext
        oracle, which tools/gen_numerics_doc.py measures with). Counted as
        one comparison per element        (cost.leading_one_cost, cost.thresholds_cost)."""
        d = self.depth(x)
        with C.record() as bill:
            out = call()
        rounds = bill.rounds or fallback
        self.comparisons += self._size(x)
        self._set(out, (d[0] + rounds, d[1], d[2] + rounds))
        return out

    def ltz(self, x: Shares, **kw) -> Shares:
        return self._circuit(x, lambda: self._b.ltz(x, **kw),
                             FAMILY_ROUNDS[self._b.cfg.comparison])

    def ltz_mul(self, z: Shares, vs, pregarbled=None) -> list:
        """Backend.ltz_mul: the rounds its protocol declares (bitwise: the
        products beside the comparison's 8; else a multiplication after the
        comparison), for the plaintext oracle the same by the config."""
        d, cmp = self._deepest([z, *vs]), FAMILY_ROUNDS[self._b.cfg.comparison]
        with C.record() as bill:
            outs = self._b.ltz_mul(z, vs, pregarbled)
        beside = self._b.cfg.comparison == "bitwise" and pregarbled is None
        rounds = bill.rounds or (cmp if beside else cmp + C.MUL_ROUNDS)
        self.comparisons += self._size(z)
        self.products += self._size(z) * len(vs)
        for o in outs:   # the products' rounds: those past the comparison's
            self._set(o, (d[0] + rounds, d[1] + rounds - cmp, d[2] + cmp))
        return outs

    def leading_one(self, x: Shares, columns, **kw) -> Shares:
        cfg = self._b.cfg
        width = kw.get("width") or lo.default_width(cfg)
        m = bitwise_backend.leading_one_comparisons(columns, kw.get("magnitude", False), width)
        return self._circuit(x, lambda: self._b.leading_one(x, columns, **kw),
                             bitwise_backend.circuit_rounds(cfg, "leading_one", m, width))

    def thresholds(self, x: Shares, points, **kw) -> Shares:
        return self._circuit(x, lambda: self._b.thresholds(x, points, **kw),
                             bitwise_backend.circuit_rounds(self._b.cfg, "thresholds",
                                                            len(points)))


def measure(backend: Backend, fn, *inputs: Shares) -> Dict[str, float]:
    """Runs fn(tracker, *inputs) eagerly and returns its output, rounds on
    the critical path (total, multiplication, comparison) and products and
    comparisons per element of the first input."""
    tr = CostTracker(backend)
    for v in inputs:
        tr.register(v)
    out = fn(tr, *inputs)
    rounds, mrounds, crounds = tr.depth(out)
    n = tr._size(inputs[0])
    # The same rounds as the protocols' declarations (cost.MUL_ROUNDS,
    # cost.CIRCUIT_ROUNDS per circuit, the comparison family's per ltz); tests/test_cost_model.py checks that the
    # traced bill (cost.advance) agrees on the published functions.
    return {"out": out, "rounds": rounds, "mul_rounds": mrounds, "cmp_rounds": crounds,
            "products": tr.products / n, "comparisons": tr.comparisons / n}


def declared(backend: Backend, fn, *inputs: Shares) -> C.Cost:
    """The declared cost (runtime/cost.py, the one model) of
    fn(backend, *inputs), traced as a tf.function on inputs of the same
    shapes: nothing runs."""
    flat = [t for v in inputs for t in v]

    def body(*ts):
        return fn(backend, *[(ts[2 * i], ts[2 * i + 1]) for i in range(len(inputs))])

    # autograph=False: fn is protocol code (plain Python over static
    # shapes); converting it only made the trace about 3x slower
    with C.record() as bill:
        tf.function(body, autograph=False).get_concrete_function(
            *[tf.TensorSpec(t.shape, t.dtype) for t in flat])
    return bill
