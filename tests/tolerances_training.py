"""Tolerances of private training steps (SGD updates, a dense network's
step), derived from tests/tolerances.py's bounds as everything there is:
the same place, split off to keep each file readable."""
import numpy as np

from tolerances import (ACTIVATION_TOL, TRUNC_ULPS, _noisy_matmul, encode_tol, public_mul_tol,
                        select_tol, ulp)


def sgd_tol(w0, grads, lr: float, frac_bits: int) -> np.ndarray:
    """w_n = w_0 - lr·g_1 - ... - lr·g_n kept in a tp.Variable (values kept
    as float64, so reveal adds no float32 rounding): sharing w_0 costs one
    encoding; each step's lr·g_k is a product of the encoded g_k by the
    encoded public lr with one local truncation (public_mul_tol); assigning
    a share and subtracting are exact in the ring, so nothing else is lost
    and the step errors simply add up."""
    tol = encode_tol(frac_bits) + np.zeros(np.shape(w0))
    for g in grads:
        tol = tol + public_mul_tol(g, lr, frac_bits)
    return tol


# ------------------------------------------------------------ private training
def dense_sgd_step_tol(x, y, weights, activations, loss: str, lr: float,
                       frac_bits: int, ring_bits: int, loss_scale: bool = True):
    """Error bounds on the weights after ONE converted SGD step of a chain of
    Dense layers (tp.keras.convert_training), against the same step in
    float64, propagated operation by operation:

    forward   z = h@W + b: each operand carries its error (x, W, b, y shared
              with encode_tol; h from the layer below), a product of noisy
              values errs by |a|·eb + ea·|b| + ea·eb, plus one truncation;
              ReLU is 1-Lipschitz plus a selection's truncation, sigmoid
              1/4-Lipschitz and softmax 1-Lipschitz (max over the row) plus
              their ACTIVATION_TOL.
    loss      δ = (p − y)·c with the public c = 1/(N·K) (BCE in gradient
              form), 1/N (softmax cross-entropy), 2/(N·K) (MSE, then times
              sigmoid'(z) = p(1 − p): two products): a subtraction, then
              products by public values (public_mul_tol).
    backward  dW = hᵀδ, db = Σ δ (exact sum), δ' = (δWᵀ)·[z > 0]: where
              |z| <= its error the private bit may differ, and the error is
              then bounded by |δWᵀ| itself.
    scale     with the loss_scale pass (default), the backward pass runs on
              N·δ (the constants c above times N) and each gradient is then
              multiplied by the public 1/N (public_mul_tol).
    update    Keras' SGD: m = −lr·dW + 0·m (a product by the public lr and a
              product of the zero slot, each one truncation), W + m.

    activations: one of "relu", "sigmoid", "linear" per layer.
    Returns [bound of W1, bound of b1, W2, b2, ...]."""
    u = ulp(frac_bits)
    enc = encode_tol(frac_bits)
    h = [np.asarray(x, np.float64)]
    eh = [np.full(h[0].shape, enc)]
    zs, ez = [], []
    for (w, b), act in zip(weights, activations):
        w, b = np.asarray(w, np.float64), np.asarray(b, np.float64)
        z = h[-1] @ w + b
        e = _noisy_matmul(h[-1], eh[-1], w, np.full(w.shape, enc), frac_bits) + enc
        zs.append(z)
        ez.append(e)
        if act == "relu":
            h.append(np.maximum(z, 0))
            eh.append(e + select_tol(1, frac_bits))
        elif act == "sigmoid":
            h.append(1 / (1 + np.exp(-z)))
            eh.append(e / 4 + ACTIVATION_TOL[ring_bits]["sigmoid"])
        else:
            h.append(z)
            eh.append(e)
    p, ep = h[-1], eh[-1]
    y = np.asarray(y, np.float64)
    n, k = p.shape
    scale = float(n) if loss_scale else 1.0
    if loss == "bce":
        c = scale / (n * k)
        delta = (p - y) * c
        ed = (ep + enc) * c + public_mul_tol(p - y, c, frac_bits)
    elif loss == "cce":
        s = np.exp(p - p.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        es = ep.max(-1, keepdims=True) + ACTIVATION_TOL[ring_bits]["softmax"]
        c = scale / n
        delta = (s - y) * c
        ed = (es + enc) * c + public_mul_tol(s - y, c, frac_bits)
    elif loss == "mse":
        c = 2.0 * scale / (n * k)
        g = (p - y) * c
        eg = (ep + enc) * c + public_mul_tol(p - y, c, frac_bits)
        if activations[-1] == "sigmoid":  # SigmoidGrad: dy·(p·(1 − p))
            d = p * (1 - p)
            e_d = ep * (1 + np.abs(1 - p)) + ep * ep + TRUNC_ULPS * u
            delta = g * d
            ed = np.abs(g) * e_d + eg * np.abs(d) + eg * e_d + TRUNC_ULPS * u
        else:
            delta, ed = g, eg
    else:
        raise ValueError(loss)
    bounds = []
    for layer in range(len(weights) - 1, -1, -1):
        w = np.asarray(weights[layer][0], np.float64)
        dw = h[layer].T @ delta
        edw = _noisy_matmul(h[layer].T, eh[layer].T, delta, ed, frac_bits)
        db = delta.sum(0)
        edb = ed.sum(0)
        for grad, eg_ in ((dw, edw), (db, edb)):
            if loss_scale:
                eg_ = eg_ / scale + public_mul_tol(grad, 1.0 / scale, frac_bits)
                grad = grad / scale
            bounds.append(enc + lr * eg_ + public_mul_tol(grad, lr, frac_bits) +
                          TRUNC_ULPS * u)
        if layer == 0:
            break
        g = delta @ w.T
        eg = _noisy_matmul(delta, ed, w.T, np.full(w.T.shape, enc), frac_bits)
        z, e = zs[layer - 1], ez[layer - 1]
        flip = np.abs(z) <= e
        delta = g * (z > 0)
        ed = np.where(flip, np.abs(g) + eg, eg) + TRUNC_ULPS * u
    # collected last layer first, (dW, db) per layer
    pairs = [bounds[i:i + 2] for i in range(0, len(bounds), 2)][::-1]
    return [b for pair in pairs for b in pair]


# ------------------------------------------------------------- fast mode


# ------------------------------------------------------------ optimizers
#: optimizer -> |pre-activation| every hidden unit keeps from 0 at every
#: step of that optimizer's float64 training (its batches are drawn so):
#: where the private training's pre-activation and Keras' lie on both sides
#: of the ReLU's kink, one sample's derivative flips, a jump no tolerance of
#: the numerics should absorb. What separates them is the drift of the
#: private weights from Keras' (the shares' random truncations, compounded
#: over the steps), so each margin is at least 4x the largest gap between
#: the two trainings' pre-activations measured over the 100 steps (25 runs
#: per optimizer at 64 bits, 2-core AMD EPYC; 128 bits: about 2^-4 of it):
#:   sgd 2.3e-4-4.3e-4, momentum 2.3e-3-6.4e-3 (its velocity sums ~10
#:   steps' errors), adam 7.3e-4-1.3e-3, amsgrad 7.3e-4-1.1e-3;
#: on the batches these margins draw, at most 5.5e-3, 1.1e-3 and 1.2e-3
#: for momentum (119 runs), Adam and AMSGrad (30 each).
#: Seen below these: a Keras pre-activation of 1.2e-4 flipped in 4 of 60
#: 64-bit SGD runs (RRMSE 2.8e-3 instead of 1e-4), and with momentum's
#: margin at 2e-3, one of 3.0e-3 in about 1 run in 100 (the private one at
#: 3.4e-4 on the other side at step 95; RRMSE 1.5e-2, 9x the tolerance).
RELU_KINK_MARGIN = {"sgd": 2e-3, "momentum": 3e-2, "adam": 6e-3, "amsgrad": 6e-3}

#: weights' RRMSE after 100 steps of each optimizer against the same
#: training in float64 Keras (tests/test_training_optimizers.py: a
#: 6-5-3 ReLU network, batch 8, learnable labels, SGD and momentum at lr
#: 0.1, Adam and AMSGrad at 0.01). Not composed from the one-step bounds
#: above: over 100 steps momentum amplifies each step's rounding, and Adam
#: divides each gradient by its own RMS, so an absolute error e of a
#: gradient g becomes a relative one e/|g| of a step of about lr, a derived
#: worst case far above what happens (a true but useless bound, as
#: VIT_LOGIT_TOL's). Budget: 2x the largest measured (2-core
#: AMD EPYC, 30 runs per optimizer at 64 bits, momentum's 119, and 20 at
#: 128, on the batches clear of the ReLU's kink by RELU_KINK_MARGIN; the
#: shares' random truncations make runs differ):
#:   sgd       128: 6.1e-6-8.4e-6   64: 0.9e-4-1.7e-4
#:   momentum  128: 2.9e-5-4.3e-5   64: 3.7e-4-8.1e-4
#:   adam      128: 1.4e-5-1.8e-5   64: 2.5e-4-3.4e-4
#:   amsgrad   128: 1.1e-5-1.6e-5   64: 2.5e-4-3.3e-4
#: (before the margin, AMSGrad's 64-bit runs spread to 1.3e-3 and one SGD
#: run in 15 flipped a sample at the kink: 2.8e-3),
#: beside the floor no fixed point can beat: float64 training whose weights
#: get uniform noise of +-1 ulp after every step is 1.2e-5 (128) and 1.9e-4
#: (64) from noiseless float64 for SGD and Adam alike. Adam's own numerics
#: (converters/optimizers.py: moments scaled by S = 2^10 / 2^6, a public
#: floor d_min = 2^-18 / 2^-12 under its denominator) add no more than that
#: floor here; a gradient whose RMS is below d_min steps shorter than Keras'.
OPTIMIZER_RRMSE_TOL = {
    "sgd": {128: 2e-5, 64: 3.5e-4},
    "momentum": {128: 1.2e-4, 64: 1.6e-3},
    "adam": {128: 4.5e-5, 64: 8.5e-4},
    "amsgrad": {128: 3.5e-5, 64: 7e-4},
}


def lr_sgd_rrmse_tol(x, batch_size: int, steps: int, lr: float, w_plain, frac_bits: int,
                     ring_bits: int) -> float:
    """Relative RMS error of private SGD logistic regression's [weights; bias]
    against float64 NumPy after `steps` steps (PrivPy §7.3.1's RRMSE).

    Each step adds its own error: per sample the logit carries the product's
    rounding (tolerances.matmul_tol with x encoded, through the sigmoid's slope <= 1/4)
    and the sigmoid its target (ACTIVATION_TOL); lr/b x^T g turns that into
    lr * mean_i |x_i| * err per coordinate, plus the truncations of x^T g and
    of the public scale (2 x TRUNC_ULPS ulp) and the encoding (ulp/2). With
    lr <= 2/L for every batch (L the batch loss's smoothness, lambda_max(x^T x)
    / 4b: the caller checks it), an SGD step is non-expansive, so earlier
    errors are not amplified and the per-step errors add (sum over steps)."""
    x = np.abs(np.asarray(x, np.float64))
    n, d = x.shape
    u = ulp(frac_bits)
    total, done = 0.0, 0
    while done < steps:
        for r0 in range(0, n, batch_size):
            if done == steps:
                break
            xb = np.concatenate([x[r0:r0 + batch_size], np.ones((len(x[r0:r0 + batch_size]), 1))],
                                1)
            logit_err = (xb.sum(1) + 1) * u + TRUNC_ULPS * u
            err = ACTIVATION_TOL[ring_bits]["sigmoid"] + logit_err / 4     # per sample
            grad = lr * (xb * err[:, None]).mean(0) + (2 * TRUNC_ULPS + 0.5) * u
            total += float(np.linalg.norm(grad))
            done += 1
    return total / float(np.linalg.norm(w_plain))
