"""The optimizers of the training half (DESIGN §8 "Training", "refuse rather
than compute wrong"): which Keras optimizers a private step reproduces, and
Adam's update in a form 20 (or 16) fractional bits can compute.

  check_optimizer  refuses, before anything is traced, shared or run, every
                   optimizer and option the converter does not reproduce
                   within the tolerances tests/test_training_optimizers.py
                   states, saying what to use instead.
  adam_update      Adam and AMSGrad (tf.keras.optimizers.Adam, amsgrad=True):
                   the step's update, written here on the optimizer's own
                   slot variables instead of traced from Keras' update_step.

SGD (tf.keras.optimizers.SGD and .legacy.SGD: learning rate, momentum,
Nesterov) is traced as Keras writes it (training.py replays its
ResourceApply* / Assign*VariableOp updates): every operation of it is a sum
or a product by a public value, exact in the ring up to one truncation.

Why Adam is not traced as Keras writes it. Keras 2.14's Adam.update_step
(Kingma & Ba 2015, Algorithm 1 with the "epsilon hat" of their §2) is

    m ← m + (g − m)(1 − β1);   v ← v + (g² − v)(1 − β2)
    [AMSGrad, Reddi et al. 2018: v̂ ← max(v̂, v); v ← v̂]
    w ← w − α_t·m / (sqrt(v) + ε),   α_t = lr·sqrt(1 − β2^t) / (1 − β1^t).

Replayed on shares it went wrong (issue 28): v = (1 − β2)·g² is below one
ulp (2^-20) for every |g| < 0.03 at the first steps, so sqrt(v) is 0, ε =
1e-7 encodes to 0 too, and the private division's x / 0 = 0 left those
weights still where Keras moves them by about lr each step (5 steps of
Adam(0.01) on a small CNN: 0.048 away from Keras; SGD: 3e-6).

What adam_update computes instead, the same math:
- Bias-corrected moments (Kingma & Ba 2015, Algorithm 1's m̂, v̂) kept in
  the slots: m̂ ← m̂ + (g − m̂)·k1, k1 = (1 − β1)/(1 − β1^t), v̂ likewise
  with k2 = (1 − β2)/(1 − β2^t), public coefficients from the public
  counter t. Keras' step α_t·m/(sqrt(v) + ε) is then lr·m̂/(sqrt(v̂) + ε_t),
  ε_t = ε/sqrt(1 − β2^t): v̂ is g²-sized from the first step instead of
  (1 − β2)·g²-sized, 1000 times more ulps. AMSGrad keeps max(v̂_old·(1 −
  β2^(t−1))/(1 − β2^t), v̂), Keras' max(v̂, v) of the uncorrected values
  corrected at the current step (Reddi et al. 2018), a private maximum.
- Scaled moments. Adam's step is invariant to rescaling the gradient when
  ε is rescaled with it (Kingma & Ba 2015, §2.1): with g' = S·g the slots
  hold S·m̂ and S²·v̂ (trainer.variables), and S·m̂/(sqrt(S²v̂) + S·ε_t) is
  the step. S = gradient_scale(config) = 2^10 in the 128-bit ring, 2^6 in
  the 64-bit one, puts v̂ far above the ulp; in return the step assumes |g|
  < sqrt(B)/S = 2.8 per element (so that (S·g)² and v̂ <= max (S·g)² stay
  below the bound B, the domain of the private sqrt), as every private
  value assumes its range. The loss_scale pass's 1/N and S are one public
  product of N·g by S/N.
- A public floor. The denominator is max(sqrt(S²v̂) + S·ε_t, F), F =
  denominator_floor(config) = 2^(2 − f/2) = 4·sqrt(ulp) (2^-8 with 20
  fractional bits, 2^-6 with 16): below it sqrt's absolute error (about the
  square root of v̂'s few ulps near 0) would no longer be small against the
  denominator, and a gradient that is fixed-point noise would be divided by
  noise. An element whose Keras denominator sqrt(v̂) + ε_t is below d_min =
  F/S (2^-18 = 3.8e-6 and 2^-12 = 2.4e-4 in gradient units) steps by
  Keras' step times (sqrt(v̂) + ε_t)/d_min < 1: in the same direction,
  shorter, by at most Keras' own step. Where S·ε >= F the floor never binds
  and is not computed (no comparison).
- The public part (the coefficients, S·ε_t, F, lr) is plain TF on the
  client; the private part is the registry's: a square and two products by
  public values per element, then for all weights at once sqrt(v̂) and
  1/sqrt(v̂) from one range reduction (tp.math.sqrt_and_rsqrt), two
  comparisons (against F, and of sqrt(v̂) against max(S·ε_t, F)), AMSGrad's
  private maximum, and the quotient by Goldschmidt's iteration from the
  guess 1/sqrt(v̂) gives (_quotient): no division's own range reduction.
- Refused before anything runs (check_optimizer, check_numerics): epsilon
  <= 0 (Keras' own step is 0/0 there) or S·epsilon >= B; the fast numerics
  mode, whose sqrt and rsqrt hold on [0.5, 50] only.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

import tensorflow as tf

from tf_privpy.protocols.mpc.runtime import context

#: options of the new (Keras 2.14) optimizers the step does not reproduce
_NEW_OPTIONS = ("weight_decay", "clipnorm", "clipvalue", "global_clipnorm", "use_ema")
#: and of the legacy ones (OptimizerV2)
_LEGACY_OPTIONS = ("clipnorm", "clipvalue", "global_clipnorm")
_WHAT = ("tf.keras.optimizers.SGD (momentum, nesterov), tf.keras.optimizers.legacy.SGD or "
         "tf.keras.optimizers.Adam (amsgrad)")


def _legacy(optimizer) -> bool:
    return isinstance(optimizer, tf.keras.optimizers.legacy.Optimizer)


def kind(optimizer) -> str:
    """'sgd' or 'adam' (AMSGrad included); ValueError for any other."""
    O = tf.keras.optimizers
    if type(optimizer) in (O.SGD, O.legacy.SGD):
        return "sgd"
    if type(optimizer) is O.Adam:
        return "adam"
    name = type(optimizer).__name__
    hint = (" (tf.keras.optimizers.Adam, the new one, is supported: Adam and AMSGrad)"
            if type(optimizer) is O.legacy.Adam else "")
    raise ValueError(
        f"convert_training does not train with {type(optimizer).__module__}.{name}{hint}: "
        f"its update is not reproduced on private values within the stated tolerance; "
        f"use {_WHAT}")


def check_optimizer(optimizer) -> str:
    """The optimizer's kind ('sgd' or 'adam'), or a ValueError saying what
    to use, before anything is traced: an optimizer or option whose update
    the private step does not reproduce (RMSprop, Adagrad, Adadelta, Ftrl,
    Nadam, Adamax, AdamW, legacy Adam; weight decay, gradient clipping,
    EMA, legacy decay) is refused, never trained wrong."""
    k = kind(optimizer)
    options = _LEGACY_OPTIONS if _legacy(optimizer) else _NEW_OPTIONS
    set_ = [o for o in options if getattr(optimizer, o, None) not in (None, 0, 0.0, False)]
    if _legacy(optimizer) and float(getattr(optimizer, "_initial_decay", 0.0) or 0.0):
        set_.append("decay")
    if set_:
        raise ValueError(
            f"convert_training does not reproduce the optimizer option(s) "
            f"{', '.join(set_)} of {type(optimizer).__name__} on private values (clipping "
            f"needs private norms, weight decay and EMA are not implemented): use "
            f"{type(optimizer).__name__} without them")
    if k == "adam":
        eps = float(optimizer.epsilon)
        bound = context.get_handle().config.bound
        if not (eps > 0.0) or gradient_scale() * eps >= bound:
            raise ValueError(
                f"Adam's epsilon {eps!r} cannot be honoured on private values: it must be > 0 "
                f"(Keras' own step divides 0 by 0 at epsilon 0) and its scaled value "
                f"{gradient_scale():g}·epsilon below the bound {bound:g}; use epsilon in "
                f"(0, {bound / gradient_scale():g}), e.g. Keras' default 1e-7")
    return k


def check_numerics(optimizer, policy) -> None:
    """Adam's sqrt and rsqrt in the fast numerics mode work on the stated
    domain [0.5, 50] only, and its v̂ spans many octaves: refused (the exact
    mode's domain is [2^-f, B))."""
    if kind(optimizer) != "adam":
        return
    from tf_privpy.protocols.mpc.fixedpoint import fast_numerics
    backend = context.get_handle().backend
    fast = [fn for fn in ("sqrt", "rsqrt")
            if fast_numerics.mode(backend, fn, policy.numerics_mode) == "fast"]
    if fast:
        raise ValueError(
            f"Adam's private {' and '.join(fast)} would run in the fast numerics mode, accurate "
            f"on [0.5, 50] only, while its v spans many octaves: "
            f"use Policy(numerics_mode='exact') (the default) for Adam, or SGD in fast mode")


# ------------------------------------------------------------------ Adam
def gradient_scale(config=None) -> float:
    """S, the public power of two Adam's gradients are scaled by:
    2^(floor(log2 B / 2) − 1), so that |g| < 2.8 keeps (S·g)² below B
    (2^10 in the 128-bit ring, B = 2^23; 2^6 in the 64-bit ring, B = 2^15)."""
    cfg = config or context.get_handle().config
    return 2.0 ** (math.floor(math.log2(cfg.bound) / 2) - 1)


def denominator_floor(config=None) -> float:
    """F, the public floor of Adam's scaled denominator: 2^(2 − f/2), 4
    times the square root of an ulp (the absolute error of sqrt(v̂) near 0
    when v̂ errs by an ulp): 2^-8 with 20 fractional bits, 2^-6 with 16."""
    cfg = config or context.get_handle().config
    return 2.0 ** (2 - cfg.frac_bits // 2)


def _corrections(optimizer, t):
    """(1 − β1^t, 1 − β2^t): Adam's bias corrections at step t (public)."""
    b1, b2 = (tf.constant(float(b), t.dtype) for b in (optimizer.beta_1, optimizer.beta_2))
    return 1.0 - tf.pow(b1, t), 1.0 - tf.pow(b2, t)


def slot_scales(optimizer, weights: Sequence[tf.Variable]) -> Dict[int, float]:
    """id(slot variable) -> the factor its Keras value is shared with: S/(1 −
    β1^t) for m, S²/(1 − β2^t) for v and v̂ (t the counter; S and S² at t =
    0, where the slots are zeros), so that an optimizer that already took
    steps in Keras carries on from its own state."""
    s = gradient_scale()
    with tf.init_scope():  # eagerly, also while the trainer's step is traced
        t = int(optimizer.iterations.numpy())
        c1, c2 = ((1.0, 1.0) if t == 0 else tuple(
            float(c) for c in _corrections(optimizer, tf.constant(float(t), tf.float64))))
    out: Dict[int, float] = {}
    for w in weights:
        i = optimizer._index_dict[optimizer._var_key(w)]
        out[id(optimizer._momentums[i])] = s / c1
        out[id(optimizer._velocities[i])] = s * s / c2
        if optimizer.amsgrad:
            out[id(optimizer._velocity_hats[i])] = s * s / c2
    return out


#: Goldschmidt iterations of Adam's quotient: error (1/3)^(2^4) = 2.3e-8
QUOTIENT_ITERATIONS = 4


def _quotient(m, d, root, inv_root, big):
    """m/d for Adam's denominator d = max(root + ε, F) (or root + ε), root =
    sqrt(v̂), inv_root = 1/root (0 at v̂ = 0), big = max(ε, F) public. d lies
    in [M, 2M], M = max(root, big), so g = (2/3)/M gives |1 − d·g| <= 1/3,
    and 1/M is 1/big where root < big (one comparison; also at v̂ = 0, where
    inv_root is 0), else inv_root. Then Goldschmidt (as numerics' divide):
    y = m·g, w = d·g, and each iteration multiplies both by 2 − w, w → 1,
    y → m/d. y stays near m/d (Adam's step over lr, about 1) and w near 1,
    so the ring's fractional bits hold them to a few ulps (their errors are
    multiplied by lr: far below a weight's ulp)."""
    small = tf.cast(root < big, d.dtype)
    g = (inv_root + (1.0 / big - inv_root) * small) * (2.0 / 3.0)
    y, w = m * g, d * g
    for i in range(QUOTIENT_ITERATIONS):
        f = 2.0 - w
        y = y * f
        if i + 1 < QUOTIENT_ITERATIONS:
            w = w * f
    return y


def adam_update(optimizer, grads: List[Any], weights: Sequence[tf.Variable],
                grad_factor: float = 1.0) -> None:
    """Keras 2.14's Adam / AMSGrad update of `weights`, traced as TF ops on
    the optimizer's own slots (see the module docstring): `grads` times the
    public `grad_factor` are the gradients (the loss_scale pass hands N·g
    with grad_factor 1/N). The counter advances as in apply_gradients."""
    s = gradient_scale()
    floor = denominator_floor()
    b1, b2 = float(optimizer.beta_1), float(optimizer.beta_2)
    # public, from the public counter t (Kingma & Ba 2015, Algorithm 1): the
    # slots' coefficients and epsilon in the bias-corrected form
    f64 = tf.float64
    t = tf.cast(optimizer.iterations, f64)
    c1_old, c2_old = _corrections(optimizer, t)
    c1, c2 = _corrections(optimizer, t + 1.0)
    lr = tf.cast(optimizer.learning_rate, f64)
    k1 = (1.0 - b1) / c1                          # m̂ ← m̂ + (g − m̂)·k1
    k2 = (1.0 - b2) / c2                          # v̂ ← v̂ + (g² − v̂)·k2
    eps = s * float(optimizer.epsilon) / tf.sqrt(c2)
    moments, denominators = [], []
    for g, w in zip(grads, weights):
        i = optimizer._index_dict[optimizer._var_key(w)]
        m, v = optimizer._momentums[i], optimizer._velocities[i]
        dt = g.dtype
        g = g * tf.cast(grad_factor * s, dt)                    # g' = S·g
        m_new = m + (g - m) * tf.cast(k1, dt)
        v_new = v + (tf.square(g) - v) * tf.cast(k2, dt)
        m.assign(m_new)
        v.assign(v_new)
        moments.append(tf.reshape(m_new, [-1]))
        denominators.append(tf.reshape(v_new, [-1]))
    # the roots, comparisons and quotient for all weights at once
    # (as the batch_same_depth pass would: the rounds of one call, not of one
    # call per weight)
    sizes = [w.shape.num_elements() for w in weights]
    m_all, v_all = tf.concat(moments, 0), tf.concat(denominators, 0)
    if optimizer.amsgrad:
        # Reddi et al. 2018: the largest v so far, kept bias-corrected at the
        # current step: max(v̂_old·(1 − β2^(t−1))/(1 − β2^t), v̂), one private
        # maximum for all weights
        hats = [optimizer._velocity_hats[optimizer._index_dict[optimizer._var_key(w)]]
                for w in weights]
        old = tf.concat([tf.reshape(h, [-1]) for h in hats], 0)
        v_all = tf.maximum(old * tf.cast(c2_old / c2, v_all.dtype), v_all)
        for h, new in zip(hats, tf.split(v_all, sizes)):
            h.assign(tf.reshape(new, h.shape))
    dt = m_all.dtype
    # sqrt(v̂) and 1/sqrt(v̂) from one range reduction (the converter pairs
    # them: adapters.root), then m̂/d by Goldschmidt's iteration from a guess
    # they give, instead of a division's own leading-one circuit: about half
    # the bytes of the step's update
    root, inv_root = tf.sqrt(v_all), tf.math.rsqrt(v_all)
    eps = tf.cast(eps, dt)
    d = root + eps
    if s * float(optimizer.epsilon) < floor:  # else the floor never binds
        d = tf.maximum(d, floor)
    steps = tf.split(tf.cast(lr, dt) * _quotient(m_all, d, root, inv_root,
                                                 tf.maximum(eps, floor)), sizes)
    for w, step in zip(weights, steps):
        w.assign_sub(tf.reshape(step, w.shape))
    optimizer.iterations.assign_add(1)
