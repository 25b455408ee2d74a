"""Cross-silo federated averaging with BatchCrypt's encrypted aggregation.

`build_batchcrypt_fed_avg` returns a process shaped like a `tff.learning`
process (`initialize()`, `next(state, client_datasets)`): TensorFlow Federated
trains on the clients and applies the server optimizer, and between the two
the clients' model updates are aggregated under Paillier encryption
(BatchCrypt, seed 003 §4; DESIGN §9).

The aggregation is the graph pass's (`convert`, issue 30): the round's
averaging is written as a plain TF step, sum_c n_c * u_c / sum_c n_c over
the clients' updates u_c with their public weights n_c, and `convert` with
the aggregation's backend ("batchcrypt", "paillier", "plaintext") finds the
cross-client sum in its traced graph and replaces it by the aggregator. A
fed-avg round and a converted step thus share one rewrite and one
aggregation path (converters/federated_run.py); a round's metrics carry the
pass's RoundReport.

Why the encryption is not a TFF aggregator: TFF 0.87 runs every TF
computation in its own C++ worker binary, which cannot load custom op
libraries, so tf_privpy's Paillier kernels cannot run inside a
`tff.federated_computation`. The process therefore calls TFF's client work
(`tff.learning.templates.build_model_delta_client_work`) and its optimizer
finalizer (`build_apply_optimizer_finalizer`) as two computations, and runs
encrypt (on each client's device), aggregate (on the aggregator's device) and
decrypt (on each client's device) with our kernels between them.

Roles and what each learns (BatchCrypt Algorithm 1):
- A leader client generates the Paillier key pair and shares it with the
  other clients; the aggregator only ever holds the public key and
  ciphertexts.
- Clients report per-layer min, max and size of their updates (and their
  example counts when weighting by examples) so the aggregator can fit the
  dACIQ clipping thresholds; these few numbers are revealed to it, as in
  BatchCrypt.
- Every client decrypts the aggregate; the aggregator never sees an update or
  the aggregate in the clear.

Example:
  >>> import tensorflow_federated as tff
  >>> process = tp.federated.build_batchcrypt_fed_avg(
  ...     model_fn, tff.learning.optimizers.build_sgdm(0.1), key_bits=2048)
  >>> state = process.initialize()
  >>> state, metrics = process.next(state, client_datasets)
  >>> metrics["accuracy"], metrics["bytes_up_per_client"]
  >>> print(process.aggregation_step(3).summary())   # what the pass rewrote
"""
from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tf_privpy.he import aggregation as _agg
from tf_privpy.converters.federated import (  # noqa: E402,F401  (public names)
    FederatedConversionError, FederatedPolicy)
from tf_privpy.converters.federated_run import FederatedStep, RoundReport  # noqa: F401

AGGREGATIONS = ("batchcrypt", "paillier", "plaintext")
WEIGHTINGS = ("num_examples", "uniform")


_reaper_registered = False


def _reap_tff_workers() -> None:
    """Stops the `worker_binary` processes TFF's execution context started.

    TFF 0.87 only stops its worker from a __del__ that need not run at
    interpreter exit; an orphaned worker keeps running and holds the parent's
    stdout/stderr open, so a pipeline like `python train.py | tail` never ends.
    """
    import psutil  # a TFF dependency
    workers = [p for p in psutil.Process().children(recursive=True)
               if p.name() == "worker_binary"]
    for w in workers:
        w.terminate()
    _, alive = psutil.wait_procs(workers, timeout=10)
    for w in alive:
        w.kill()


def _tff():
    """Imports TFF lazily (its import takes seconds and starts nothing) and
    arranges for its worker process to be stopped at exit."""
    global _reaper_registered
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import tensorflow_federated as tff
    if not _reaper_registered:
        import atexit
        from absl import logging as absl_logging
        atexit.register(_reap_tff_workers)
        # TFF's Keras wrapper logs an INFO line per model it builds.
        if absl_logging.get_verbosity() > absl_logging.WARNING:   # more verbose
            absl_logging.set_verbosity(absl_logging.WARNING)
        _reaper_registered = True
    return tff


@dataclasses.dataclass(frozen=True)
class FedAvgState:
    """The server's state between rounds (public: no key material).

    Attributes:
      model_weights: `tff.learning.models.ModelWeights` of numpy arrays.
      client_work_state: TFF client-work state (e.g. the client learning rate).
      finalizer_state: TFF server-optimizer state.
      round_num: rounds completed.
    """

    model_weights: Any
    client_work_state: Any
    finalizer_state: Any
    round_num: int = 0


class RoundOutput(NamedTuple):
    """What `next` returns, like `tff.learning.templates.LearningProcessOutput`."""

    state: FedAvgState
    metrics: Dict[str, Any]


def _as_optimizer(opt, what: str):
    tff = _tff()
    if callable(opt) and not isinstance(opt, tff.learning.optimizers.Optimizer):
        opt = opt()
    if not isinstance(opt, tff.learning.optimizers.Optimizer):
        raise TypeError(
            f"{what} must be a tff.learning.optimizers.Optimizer (e.g. "
            f"tff.learning.optimizers.build_sgdm(learning_rate=0.1)) or a no-argument "
            f"callable returning one; got {type(opt).__name__}")
    return opt


def _numpy_weights(weights):
    tff = _tff()
    return tff.learning.models.ModelWeights(
        trainable=[np.asarray(v) for v in weights.trainable],
        non_trainable=[np.asarray(v) for v in weights.non_trainable])


def averaging_step(num_layers: int, num_clients: int) -> Callable:
    """A round's aggregation as a plain TF step, for the pass to rewrite.

    Arguments: client 0's `num_layers` update tensors, client 1's, ..., then
    one public scalar weight per client (its example count, or 1). Returns
    per layer sum_c n_c * u_c / sum_c n_c: FedAvg's weighted mean (McMahan et
    al., Algorithm 1), written as plain TF so that `convert` finds the
    cross-client AddN of each layer and replaces it by a secure aggregation.
    Each client's product n_c * u_c is its own node (computed on its device);
    the division by the public total runs on the aggregate.
    """
    if num_clients < 2:
        raise ValueError("a secure aggregation needs at least 2 clients: one client's "
                         f"'aggregate' is its own update (got {num_clients})")

    def step(*args):
        ups = [args[c * num_layers:(c + 1) * num_layers] for c in range(num_clients)]
        weights = list(args[num_clients * num_layers:])
        total = tf.add_n(weights)
        return [tf.add_n([weights[c] * ups[c][k] for c in range(num_clients)]) / total
                for k in range(num_layers)]
    return step


class BatchCryptFedAvg:
    """Federated averaging whose aggregation runs under Paillier encryption.

    Build it with `build_batchcrypt_fed_avg`; use it like a tff.learning
    process: `state = p.initialize()`, then `state, metrics = p.next(state,
    client_datasets)` once per round. Each round's averaging is
    `aggregation_step(m)`: `averaging_step` converted by the pass with the
    aggregation's backend and this process's aggregator (one key pair for
    all rounds, whatever the number of clients).
    """

    def __init__(self, model_fn, client_optimizer, server_optimizer,
                 aggregator: _agg.SecureAggregator, client_weighting: str, progress: bool,
                 policy_options: Optional[Dict[str, Any]] = None):
        tff = _tff()
        self._model_fn = model_fn
        weighting = (tff.learning.ClientWeighting.NUM_EXAMPLES
                     if client_weighting == "num_examples"
                     else tff.learning.ClientWeighting.UNIFORM)
        self._client_work = tff.learning.templates.build_model_delta_client_work(
            model_fn, client_optimizer, client_weighting=weighting)
        weights_type = tff.learning.models.weights_type_from_model(model_fn)
        self._finalizer = tff.learning.templates.build_apply_optimizer_finalizer(
            server_optimizer, weights_type)
        self.aggregator = aggregator
        self.client_weighting = client_weighting
        self.progress = progress
        # FederatedPolicy's fields but the owners (set per number of clients)
        self._policy_options = dict(policy_options or {"backend": aggregator.name})
        self._layers = [tf.TensorSpec(np.shape(v), np.asarray(v).dtype) for v in
                        tff.learning.models.ModelWeights.from_model(model_fn()).trainable]
        self._steps: Dict[int, FederatedStep] = {}
        self.last_report: Optional[RoundReport] = None   # the pass's, of the last round

    def aggregation_step(self, num_clients: int) -> FederatedStep:
        """The pass's converted averaging step for rounds of `num_clients`
        clients (traced once per client count): its summary() says what was
        rewritten, the bytes per client and the overflow counters."""
        step = self._steps.get(num_clients)
        if step is None:
            layers = len(self._layers)
            owners = [c for c in range(num_clients) for _ in range(layers)]
            policy = FederatedPolicy(clients=owners + [None] * num_clients,
                                     **self._policy_options)
            specs = self._layers * num_clients + [tf.TensorSpec([], tf.float32)] * num_clients
            step = _convert(averaging_step(layers, num_clients), specs, policy, self.aggregator)
            self._steps[num_clients] = step
        return step

    def _aggregate(self, updates: Sequence[Sequence[np.ndarray]],
                   weights: Sequence[float]) -> Tuple[List[np.ndarray], Dict[str, Any], Any]:
        """The clients' weighted mean update through the pass: (mean, the
        aggregator's metrics, the pass's RoundReport)."""
        step = self.aggregation_step(len(updates))   # next() refused fewer than 2
        args = [u for upd in updates for u in upd] + [np.float32(w) for w in weights]
        mean, report = step.run(*args)
        metrics = dict(report.aggregation.as_dict())
        metrics["rewritten_reductions"] = len(report.factors)
        return [np.asarray(v) for v in mean], metrics, report

    def initialize(self) -> FedAvgState:
        """The initial server state: the model's initial weights and the
        optimizers' states. Also has the leader client generate the key pair."""
        tff = _tff()
        model = self._model_fn()
        weights = _numpy_weights(tff.learning.models.ModelWeights.from_model(model))
        self.aggregator.setup()
        return FedAvgState(weights, self._client_work.initialize(),
                           self._finalizer.initialize(), 0)

    def next(self, state: FedAvgState, client_datasets: Sequence[Any]) -> RoundOutput:
        """Runs one round: client training (TFF), encrypted aggregation (our
        kernels), server update (TFF).

        Args:
          state: from `initialize()` or the previous `next`.
          client_datasets: one `tf.data.Dataset` per participating client.

        Returns:
          (new state, metrics) with loss and accuracy of the clients' training,
          bytes up/down per client, seconds in client work, encrypt, aggregate,
          decrypt and server update, overflow counts, and the number of
          reductions the pass rewrote (`rewritten_reductions`: one per layer;
          the round's RoundReport is `last_report`).
        """
        if not isinstance(state, FedAvgState):
            raise TypeError("state must be the FedAvgState returned by initialize() or next()")
        m = len(client_datasets)
        if m < 2:
            raise ValueError("next() needs at least two client datasets: a secure "
                             "aggregation of one client's update is that update")
        t0 = time.perf_counter()
        cw = self._client_work.next(state.client_work_state, [state.model_weights] * m,
                                    list(client_datasets))
        t_client = time.perf_counter() - t0
        updates = [[np.asarray(u) for u in r.update] for r in cw.result]
        weights = [float(r.update_weight) for r in cw.result]
        if self.client_weighting == "uniform":
            weights = [1.0] * m
        mean_update, agg_metrics, report = self._aggregate(updates, weights)
        self.last_report = report
        t0 = time.perf_counter()
        fin = self._finalizer.next(state.finalizer_state, state.model_weights, mean_update)
        t_server = time.perf_counter() - t0
        new_state = FedAvgState(_numpy_weights(fin.result), cw.state, fin.state,
                                state.round_num + 1)
        train = cw.measurements["train"]
        metrics = {
            "round": new_state.round_num,
            "loss": float(train["loss"]),
            "accuracy": float(next(v for k, v in train.items() if "accuracy" in k))
            if any("accuracy" in k for k in train) else float("nan"),
            "num_examples": int(train["num_examples"]),
            "clients": m,
            "client_work_s": t_client,
            "server_update_s": t_server,
        }
        metrics.update(agg_metrics)
        if self.progress:
            print(f"[tf_privpy.federated] round {metrics['round']}: loss {metrics['loss']:.4f} "
                  f"acc {metrics['accuracy']:.4f}  encrypt {report.encrypt_s:.2f}s "
                  f"aggregate {report.aggregate_s:.2f}s decrypt {report.decrypt_s:.2f}s  "
                  f"up {report.bytes_up_per_client / 1e6:.2f} MB/client", file=sys.stderr)
        return RoundOutput(new_state, metrics)


def build_batchcrypt_fed_avg(
        model_fn: Callable[[], Any],
        client_optimizer_fn,
        server_optimizer_fn=None,
        *,
        key_bits: int = 2048,
        quant_bits: int = 16,
        aggregation: str = "batchcrypt",
        client_weighting: str = "num_examples",
        max_clients: Optional[int] = None,
        on_overflow: str = "raise",
        fixed_point_bits: int = 24,
        seed: Optional[int] = None,
        progress: bool = False) -> BatchCryptFedAvg:
    """Builds federated averaging with encrypted aggregation (BatchCrypt).

    Args:
      model_fn: no-argument callable returning a `tff.learning.models.VariableModel`
        (e.g. `tff.learning.models.from_keras_model(...)`), as for tff.learning.
      client_optimizer_fn: a `tff.learning.optimizers.Optimizer` (or a
        no-argument callable returning one) for local training.
      server_optimizer_fn: the server optimizer; default SGD with learning rate
        1.0 (plain FedAvg: the new model is the average of the clients').
      key_bits: Paillier modulus size: 2048 (default) or 3072.
      quant_bits: BatchCrypt's quantization width r (8 to 32; 16 is lossless
        in practice, seed 003 §6).
      aggregation: "batchcrypt" (quantized, batched: ~100 values per
        ciphertext), "paillier" (one ciphertext per value, what stock FATE does;
        for comparison), or "plaintext" (no encryption: the reference).
      client_weighting: "num_examples" (FedAvg's weighting; each client scales
        its update by its share of the examples before encrypting) or "uniform".
      max_clients: slot padding is sized for this many summands; default: the
        number of clients of each round.
      on_overflow: "raise" (default) or "nan" when a decoded slot overflowed.
      fixed_point_bits: fractional bits of the "paillier" encoding.
      seed: seeds stochastic rounding (for reproducible experiments only;
        default: fresh OS randomness).
      progress: print one line per round to stderr.

    Returns:
      A `BatchCryptFedAvg` process with `initialize()` and `next()`.
    """
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
    if client_weighting not in WEIGHTINGS:
        raise ValueError(f"client_weighting must be one of {WEIGHTINGS}, got {client_weighting!r}")
    tff = _tff()
    client_opt = _as_optimizer(client_optimizer_fn, "client_optimizer_fn")
    server_opt = (_as_optimizer(server_optimizer_fn, "server_optimizer_fn")
                  if server_optimizer_fn is not None
                  else tff.learning.optimizers.build_sgdm(learning_rate=1.0))
    options = dict(backend=aggregation, key_bits=key_bits, quant_bits=quant_bits,
                   max_clients=max_clients, on_overflow=on_overflow,
                   fixed_point_bits=fixed_point_bits, seed=seed)
    # one aggregator (one key pair, made by initialize()) for every round's
    # converted step, whatever its number of clients
    aggregator = _agg.make_aggregator(aggregation, **{k: v for k, v in options.items()
                                                      if k != "backend"})
    return BatchCryptFedAvg(model_fn, client_opt, server_opt, aggregator, client_weighting,
                            progress, options)


def convert(step_fn: Callable, input_signature: Sequence[Any],
            policy: "FederatedPolicy") -> "FederatedStep":
    """Converts a plain TF federated aggregation step into one whose
    cross-client reduction runs as a secure aggregation (issue 30; DESIGN §8
    "FL gradient aggregation", §9).

    The step is traced and frozen as tp.convert does; each node is labelled
    with the clients whose arguments it depends on; the reductions across
    clients (tf.add_n / + chains, or tf.reduce_sum / reduce_mean over axis 0
    of a tf.stack of the clients' values) are replaced by the policy's
    backend, and what follows them (products by public weights, 1/n, the
    global model's update) runs on the aggregate. Each client's own nodes run
    in plain TF on its device. Anything that combines clients' values
    otherwise (a nonlinear op, a division by privately weighted sums, an
    output that is one client's value) is refused before anything runs with
    a FederatedConversionError naming each node and what to do.

    Args:
      step_fn: the step: a function of tensors (per-client arguments and
        public ones, e.g. the global model's weights) returning tensors.
      input_signature: one tf.TensorSpec per argument (static shapes give
        the bytes per client in summary()).
      policy: a `FederatedPolicy`: which client owns each argument, the
        backend ("mpc": the four servers; "batchcrypt": BatchCrypt over
        Paillier; "paillier": one ciphertext per value; "plaintext": the
        unprotected reference), who receives the aggregate.

    Returns:
      A `FederatedStep`: call it like the step (a dropped client's arguments
      may be None: the round aggregates the others, each reduction's weights
      renormalised over them); `.run(...)` also returns a RoundReport
      (bytes, seconds, overflow counters); `.summary()` says what was
      rewritten, the bytes per client and the overflow counters before
      anything runs.

    Example:
      >>> tp.init(num_clients=4)      # the driver and three data owners
      >>> def step(u0, u1, u2):
      ...     return (10. * u0 + 20. * u1 + 30. * u2) / 60.
      >>> spec = tf.TensorSpec([100], tf.float32)
      >>> fed = tp.federated.convert(step, [spec] * 3,
      ...                            tp.federated.FederatedPolicy(clients=3))
      >>> print(fed.summary())
      >>> mean = fed(u0, u1, u2)        # the weighted mean; servers saw shares
      >>> mean = fed(u0, None, u2)      # client 1 dropped: (10 u0 + 30 u2) / 40
    """
    return _convert(step_fn, input_signature, policy, None)


def _convert(step_fn: Callable, input_signature: Sequence[Any], policy: "FederatedPolicy",
             aggregator: Optional[_agg.SecureAggregator]) -> "FederatedStep":
    """convert, with the HE backends' aggregator given (build_batchcrypt_fed_avg:
    one key pair across its steps) or made from the policy (None)."""
    from tf_privpy.converters import federated as _fed
    from tf_privpy.converters import federated_run as _run
    from tf_privpy.converters import trace as _trace
    if not isinstance(policy, _fed.FederatedPolicy):
        raise TypeError(f"policy must be a tp.federated.FederatedPolicy, got "
                        f"{type(policy).__name__}")
    specs = list(input_signature)
    traced = _trace.trace(step_fn, specs)
    plan = _fed.analyse(traced, policy.arg_clients(len(specs)))
    if policy.backend in _fed.HE_BACKENDS and aggregator is None:
        aggregator = _agg.make_aggregator(
            policy.backend, key_bits=policy.key_bits, quant_bits=policy.quant_bits,
            max_clients=policy.max_clients or plan.num_clients, on_overflow=policy.on_overflow,
            fixed_point_bits=policy.fixed_point_bits, seed=policy.seed)
    elif policy.backend not in _fed.HE_BACKENDS:
        aggregator = None
    elif aggregator.name != policy.backend:
        raise ValueError(f"the aggregator is {aggregator.name!r} but the policy's backend is "
                         f"{policy.backend!r}")
    return _run.FederatedStep(plan, policy, aggregator)


def evaluate_keras(keras_model_fn: Callable[[], Any], state: FedAvgState,
                   x: np.ndarray, y: np.ndarray) -> float:
    """Accuracy of the state's global model on (x, y), via a fresh Keras model.

    Example:
      >>> acc = tp.federated.evaluate_keras(create_keras_model, state, x_test, y_test)
    """
    model = keras_model_fn()
    state.model_weights.assign_weights_to(model)
    correct = 0
    for i in range(0, len(x), 1024):   # plain calls: no predict() retracing per model
        logits = model(x[i:i + 1024], training=False)
        correct += int(np.sum(np.argmax(logits, axis=-1) == y[i:i + 1024]))
    return correct / max(len(x), 1)
