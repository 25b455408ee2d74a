"""Authenticated encryption of channel messages between servers (issue 11).

TensorFlow's gRPC runtime has no TLS and runs graphs for anyone who reaches
its port, so in the distributed mode every message from one server to another
is sealed on the sender with AES-128-GCM under the pair's link key (ops/aead:
per-link key by HMAC-SHA256 from the pair key, nonce = stream || counter taken
from a variable on the sender) and opened on the receiver, which rejects a
tampered, misdirected, replayed or reordered message with an error naming the
link and delivers no plaintext.

A message's tensors are sealed as ONE plaintext: first, for each tensor
whose shape the receiver cannot know statically, its dimensions (so that
they are authenticated too), then each tensor's bytes padded to 8. The seal
kernel reads these parts in place (no packing copy); the receiver's tensors
are views (bitcast, reshape, aligned slices) of the opened words. The
receiver derives the plaintext length from the ciphertext's length and checks
every length against what it expects.

Ordering: one counter (sender) and one state (receiver) variable per link.
The receiver accepts counters that only go up. Inside a tf.function the
automatic control dependencies run the seals of a link in program order (they
share the counter variable) and its opens too (they share the state
variable), so one traced function delivers in order; eager code runs in
order anyway. Two runs on one runtime that overlap in time (two Python threads
calling private functions at once) may open out of order and then fail with
the replay error rather than compute anything wrong.
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import List, Sequence

import numpy as np
import tensorflow as tf

from . import kernels

#: bytes a sealed message of up to 1 MiB adds to its plaintext (8-byte counter
#: + 16-byte tag); larger ones add a tag per 1 MiB chunk (kernels.aead_message_bytes)
OVERHEAD = kernels.AEAD_OVERHEAD


@dataclasses.dataclass
class Link:
    """The crypto state of one directed link src -> dst."""

    name: str                 # "S1->T1": bound into the link key and the AAD
    key_at_src: tf.Variable   # the pair's link key (int64[2]) on src
    key_at_dst: tf.Variable   # the same key on dst
    counter: tf.Variable      # int64 scalar on src: the next nonce counter
    state: tf.Variable        # int64 scalar on dst: the lowest counter accepted
    #: graph -> {"src"/"dst": the key read in that graph}
    _reads: weakref.WeakKeyDictionary = dataclasses.field(
        default_factory=weakref.WeakKeyDictionary, repr=False, compare=False)

    def key(self, side: str) -> tf.Tensor:
        """The link key on `side` ("src" or "dst"), read once per graph being
        built: a model's graph seals thousands of messages per link, and two
        ops per read per message were a sixth of its ops on four processes.
        The keys never change after tp.init(). The read is made outside any
        control-dependency scope, so reusing it orders nothing. Build it
        under that side's device scope."""
        var = self.key_at_src if side == "src" else self.key_at_dst
        if tf.executing_eagerly():
            return var.read_value()
        reads = self._reads.setdefault(tf.compat.v1.get_default_graph(), {})
        if side not in reads:
            with tf.control_dependencies(None), tf.device(var.device):
                reads[side] = var.read_value()
        return reads[side]


def _byte_view(t: tf.Tensor) -> tf.Tensor:
    """t's bytes as a flat uint8 vector (bool as one byte per element)."""
    if t.dtype == tf.bool:
        return tf.reshape(tf.cast(t, tf.uint8), [-1])
    if t.dtype == tf.uint8:
        return tf.reshape(t, [-1])
    return tf.reshape(tf.bitcast(t, tf.uint8), [-1])


def _to_words(t: tf.Tensor) -> tf.Tensor:
    """t as int64 words: a bitcast when its elements are 8 bytes or its size
    is a known multiple of 8 bytes (no copy: garbled tables are large uint8
    tensors), else its bytes padded with zeros to a multiple of 8."""
    if t.dtype == tf.int64:   # the shares' own type: no op when already flat
        return t if t.shape.rank == 1 else tf.reshape(t, [-1])
    if t.dtype.size == 8 and t.dtype != tf.bool:
        return tf.reshape(tf.bitcast(t, tf.int64), [-1])
    b = _byte_view(t)
    n = t.shape.num_elements()
    if n is None or (n * _elem_bytes(t.dtype)) % 8:
        b = tf.pad(b, [[0, (-tf.size(b)) % 8]])
    return tf.bitcast(tf.reshape(b, [-1, 8]), tf.int64)


def _elem_bytes(dtype: tf.DType) -> int:
    return 1 if dtype == tf.bool else dtype.size


def _from_words(words: tf.Tensor, dtype: tf.DType, shape, n_elems) -> tf.Tensor:
    """The inverse of _to_words for a tensor of `dtype` and `shape` (a list,
    or an int64 tensor) with n_elems elements (an int, or a tensor)."""
    if dtype == tf.int64:
        flat = isinstance(shape, list) and len(shape) == 1
        return words if flat else tf.reshape(words, shape)
    if dtype.size == 8 and dtype != tf.bool:
        return tf.reshape(tf.bitcast(words, dtype), shape)
    n = n_elems * _elem_bytes(dtype)
    b = tf.reshape(tf.bitcast(words, tf.uint8), [-1])
    if not isinstance(n, int) or n % 8:
        b = b[:n]  # drop the padding (a copy: only when there is padding)
    if dtype == tf.bool:
        return tf.reshape(tf.cast(b, tf.bool), shape)
    if dtype == tf.uint8:
        return tf.reshape(b, shape)
    return tf.reshape(tf.bitcast(tf.reshape(b, [-1, dtype.size]), dtype), shape)


def _n_words(n_elems, dtype: tf.DType):
    return (n_elems * _elem_bytes(dtype) + 7) // 8


def check_sealable(tensors: Sequence[tf.Tensor], name: str) -> None:
    for t in tensors:
        if t.dtype == tf.string or t.dtype.is_complex or t.dtype == tf.resource \
                or t.dtype == tf.variant:
            raise TypeError(f"the {name} channel seals numeric and bool tensors only, "
                            f"got {t.dtype.name}")
        if t.shape.rank is None:
            raise ValueError(f"the {name} channel needs tensors of known rank")


def seal(link: Link, tensors: Sequence[tf.Tensor]) -> tf.Tensor:
    """The sealed message (uint8 vector) of `tensors`. Build it under the
    sender's device scope."""
    check_sealable(tensors, link.name)
    parts = [tf.shape(t, out_type=tf.int64) for t in tensors
             if not t.shape.is_fully_defined()]
    parts += [_to_words(t) for t in tensors]
    # The kernel reads the parts in place (no concat: a packing copy of the
    # whole message on the sender); the bytes sealed are their concatenation.
    return kernels.aead_seal(link.key("src"), link.counter, parts, link.name)


def open_(link: Link, message: tf.Tensor, like: Sequence[tf.Tensor]) -> List[tf.Tensor]:
    """The tensors of a sealed message, shaped and typed as `like` (the
    sender's tensors: only their static dtype and shape are used). Build it
    under the receiver's device scope."""
    if all(t.shape.is_fully_defined() for t in like):
        return _open_static(link, message, like)
    n_words = kernels.aead_plaintext_words(tf.size(message, out_type=tf.int64))
    words = kernels.aead_open(link.key("dst"), link.state, message, tf.reshape(n_words, [1]),
                              link.name)
    # positions and sizes stay Python ints while every shape is static
    # The checks pass `words` through (kernels.check), so every output waits
    # for them; a stateless check, unlike Assert, orders nothing else.
    pos, shapes, checked = 0, [], words
    for t in like:
        if t.shape.is_fully_defined():
            shapes.append(t.shape.as_list())
            continue
        s = words[pos:pos + t.shape.rank]
        known = tf.constant([-1 if d is None else d for d in t.shape.as_list()], tf.int64)
        checked = kernels.check(
            tf.reduce_all(((known < 0) | tf.equal(s, known)) & (s >= 0)), checked,
            f"tf_privpy: a message on {link.name} carries a shape that does not fit the "
            "receiver's", s)
        shapes.append(s)
        pos += t.shape.rank
    elems = [tf.reduce_prod(s) if isinstance(s, tf.Tensor) else int(np.prod(s, dtype=np.int64))
             for s in shapes]
    sizes = [_n_words(n, t.dtype) for n, t in zip(elems, like)]
    needed = pos + sum(sizes)
    needed = tf.convert_to_tensor(needed, tf.int64)
    checked = kernels.check(tf.equal(needed, n_words), checked,
                            f"tf_privpy: a message on {link.name} does not have the length "
                            "its tensors need (words received, words needed):",
                            n_words, needed)
    out = []
    for s, t, n, e in zip(shapes, like, sizes, elems):
        o = _from_words(checked[pos:pos + n], t.dtype, s, e)
        # a shape read from the message has unknown static rank: the
        # sender's static shape (rank known, dims maybe not) is the
        # receiver's too, and later seals need the rank (a sort's loop)
        o.set_shape(t.shape)
        out.append(o)
        pos = pos + n
    return out


#: a part of at least this many words (32 KiB) whose first and last word end
#: on 64-byte boundaries is sliced out of the opened words as a view of their
#: buffer: TF's dim-0 slice of a 1-D tensor copies nothing when both ends are
#: aligned to EIGEN_MAX_ALIGN_BYTES, while a split (or an unaligned slice)
#: copies every byte (a product's 16 MB message to its assistant, which
#: carries two nonces as headers, was copied once more on arrival: 4 % of
#: the four servers' CPU in a loopback product of 10^6 at 128 bits)
_VIEW_WORDS = 4096
_ALIGN_WORDS = 8


def _parts(words: tf.Tensor, sizes: Sequence[int]) -> List[tf.Tensor]:
    """The opened words cut into parts of `sizes` (Python ints): one split
    when no part is large and aligned (_VIEW_WORDS), else a slice each, the
    large aligned ones views."""
    starts = np.cumsum([0] + list(sizes[:-1])).tolist()
    if not any(n >= _VIEW_WORDS and a % _ALIGN_WORDS == 0 and (a + n) % _ALIGN_WORDS == 0
               for a, n in zip(starts, sizes)):
        # one split for all the parts, not a slice (and its three constants) each
        return tf.split(words, list(sizes))
    return [words[a:a + n] for a, n in zip(starts, sizes)]


def _open_static(link: Link, message: tf.Tensor, like: Sequence[tf.Tensor]) -> List[tf.Tensor]:
    """open_ when the receiver knows every shape: the word count is a Python
    int, and the open kernel checks the message's length against it (and
    fails naming the link), so no length arithmetic or check ops are built:
    about 20 of a sealed message's 48 ops, for every message of a model's
    graph on four processes."""
    elems = [t.shape.num_elements() for t in like]
    sizes = [_n_words(n, t.dtype) for n, t in zip(elems, like)]
    words = kernels.aead_open(link.key("dst"), link.state, message,
                              tf.constant([sum(sizes)], tf.int64), link.name)
    parts = [words] if len(like) == 1 else _parts(words, sizes)
    out = []
    for part, t, e in zip(parts, like, elems):
        o = _from_words(part, t.dtype, t.shape.as_list(), e)
        o.set_shape(t.shape)
        out.append(o)
    return out
