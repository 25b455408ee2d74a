"""PrivateTensor: a secret-shared tensor as a TF extension type.

The value type only: its operators are attached by the op registry
(registry.py), so this module imports nothing above the protocols."""
from __future__ import annotations

import tensorflow as tf
from tensorflow.python.framework import type_spec as _type_spec

from ..runtime import context as _context
from ..runtime import placement as _placement
from ..runtime import shares as _sh


class PrivateTensor(tf.experimental.ExtensionType):
    """A tensor secret-shared between the servers S1 and S2.

    `share0` lives on S1 and `share1` on S2; each is an int64 tensor of ring
    elements (with a trailing limb dimension of 2 in the 128-bit ring). Their
    sum modulo 2^ring_bits is the fixed-point encoding of the value. Neither
    share alone says anything about the value, and the repr shows neither.

    Create one with `tp.share(x)`; get the value back with `tp.reveal(p)` or
    `p.reveal()`. PrivateTensors work in eager mode and inside tf.function,
    support + - * / @ ** (integer powers), comparisons and indexing, and are
    accepted by every TF function with a private implementation
    (docs/supported_ops.md); other TF functions raise a TypeError, and a
    PrivateTensor never converts to a plaintext tf.Tensor.

    Example:
      >>> x = tp.share(tf.constant([1.5, -2.0]))
      >>> (x * x + 1.0).reveal()
      <tf.Tensor: shape=(2,), dtype=float32, numpy=array([3.25, 5.  ], dtype=float32)>
    """

    __name__ = "tf_privpy.PrivateTensor"
    share0: tf.Tensor
    share1: tf.Tensor
    ring_bits: int
    frac_bits: int
    value_dtype: tf.DType
    runtime_id: int

    # numpy defers to our reflected operators (np.ndarray + PrivateTensor).
    __array_ufunc__ = None

    @property
    def limbs(self) -> int:
        return self.ring_bits // 64

    @property
    def shape(self) -> tf.TensorShape:
        """The logical shape of the shared value."""
        return _sh.logical_shape(self.share0, self.limbs)

    @property
    def dtype(self) -> tf.DType:
        """The dtype that was shared, and that reveal() returns."""
        return self.value_dtype

    @property
    def ndim(self) -> int:
        return self.shape.rank

    def __repr__(self) -> str:
        return (f"<tp.PrivateTensor shape={self.shape} dtype={self.value_dtype.name} "
                f"ring=2^{self.ring_bits} frac_bits={self.frac_bits}>")

    __str__ = __repr__

    def __len__(self) -> int:
        if self.shape.rank == 0:
            raise TypeError("len() of a scalar PrivateTensor")
        return self.shape[0]

    def __bool__(self):
        raise TypeError("a PrivateTensor has no truth value that the servers may learn, so "
                        "a Python `if`/`while` (also under AutoGraph) cannot branch on it: "
                        "choose with tp.cond(pred, true_fn, false_fn) or tp.where (both "
                        "branches computed, an oblivious select), loop a public number of "
                        "times, or reveal it first (tp.reveal) if the value may be disclosed")

    # The operators (+ - * / @ ** unary -, abs, comparisons, indexing) and
    # reveal() are attached by the op registry (registry.py) from the op
    # modules, so that the value type imports no op implementation.

    def __setattr__(self, name, value):
        # Keras tags activation outputs (`output._keras_logits = x`, to find
        # logits for its losses). A Python-side tag carries no share and is not
        # part of the type spec, so allow those few and keep the rest immutable.
        if name in _TAG_ATTRIBUTES:
            object.__setattr__(self, name, value)
            return
        super().__setattr__(name, value)


_BATCH_MESSAGE = (
    "tf.map_fn, tf.vectorized_map and tf.data cannot carry a PrivateTensor (they batch and "
    "unbatch values on the client, outside the servers): apply the tp ops to the whole batch "
    "at once (they are elementwise or batched), or loop explicitly: a Python loop over "
    "x[i] with tp.stack, or a `for i in tf.range(n)` loop inside tf.function.")
_DATASET_MESSAGE = (
    "a tf.data.Dataset cannot carry a PrivateTensor, and a loop over a dataset inside "
    "tf.function cannot carry one either (tf.data runs the loop on the client): iterate the "
    "dataset in Python and call your tf.function per element or batch, or loop with "
    "`for i in tf.range(n)` over tp ops.")

def _from_components(self, components):
    """PrivateTensor.Spec._from_components: rebuilding a PrivateTensor from
    placeholders (a tf.function's arguments, a loop's variables) tags each
    share's placeholder with its holder, for the trace-time placement guard
    (placement.py)."""
    value = _base_from_components(self, components)
    if _context.is_initialized() and tf.inside_function():
        _placement.tag_shares(value.share0, value.share1, _context.get_handle().backend.holders)
    return value


def _to_components(self, value):
    """PrivateTensor.Spec._to_components: a PrivateTensor flattened inside a
    traced function (returned, passed to a branch or loop) installs the
    placement guard in that graph and the graphs around it."""
    if tf.inside_function():
        _placement.install()
    return _base_to_components(self, value)


def _refuse_batching(*_args, **_kwargs):
    raise TypeError(_BATCH_MESSAGE)


def _refuse_dataset(*_args, **_kwargs):
    raise TypeError(_DATASET_MESSAGE)


# Set on the generated spec after the class is made (ExtensionType reserves
# these names in a nested Spec): batching is refused with what to do instead.
_base_from_components = PrivateTensor.Spec._from_components
PrivateTensor.Spec._from_components = _from_components
_base_to_components = PrivateTensor.Spec._to_components
PrivateTensor.Spec._to_components = _to_components
PrivateTensor.Spec._batch = _refuse_batching
PrivateTensor.Spec._unbatch = _refuse_batching
PrivateTensor.Spec._to_batched_tensor_list = _refuse_batching
PrivateTensor.Spec._to_tensor_list = _refuse_batching  # map_fn's outputs, tf.data
# tf.map_fn and tf.vectorized_map test `isinstance(spec, BatchableTypeSpec)`
# before anything else and would refuse with their own message, which says
# nothing about what to do; registered as one (virtually: no behaviour is
# inherited), they reach the refusals above.
_type_spec.BatchableTypeSpec.register(PrivateTensor.Spec)
for _name in ("_to_legacy_output_types", "_to_legacy_output_shapes",
              "_to_legacy_output_classes"):
    setattr(PrivateTensor.Spec, _name, _refuse_dataset)

#: attributes other libraries set on a tensor as a Python-side tag
_TAG_ATTRIBUTES = frozenset({"_keras_logits", "_keras_mask", "_keras_history"})


def check_runtime(p: PrivateTensor) -> "_context.Handle":
    """The current handle, after checking that p belongs to it."""
    h = _context.get_handle()
    if p.runtime_id != h.runtime.id:
        raise ValueError(
            f"this PrivateTensor was created by tf_privpy runtime #{p.runtime_id}, but "
            f"runtime #{h.runtime.id} is active (tp.init() was called again). Shares of "
            "different runtimes use different keys and cannot be mixed: re-share the value "
            "in the current runtime.")
    # A comparison's bits are held as integer shares (frac_bits 0, issue 15).
    frac_ok = p.frac_bits == h.config.frac_bits or (p.frac_bits == 0 and
                                                   p.value_dtype == tf.bool)
    if p.ring_bits != h.config.ring_bits or not frac_ok:
        raise ValueError("PrivateTensor ring/encoding differs from the runtime's config")
    return h
