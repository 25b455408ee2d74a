"""Homomorphic encryption: Paillier kernels, BatchCrypt's batched aggregation,
private scalar products and many-user vector sums (DESIGN §9).

Example:
  >>> import tf_privpy as tp
  >>> pk, sk = tp.he.paillier.keygen(2048)
  >>> c = tp.he.paillier.encrypt(pk, [1, -2, 3])
  >>> tp.he.paillier.decrypt(sk, tp.he.paillier.add(pk, c, c))
  <tf.Tensor: shape=(3,), dtype=int64, numpy=array([ 2, -4,  6])>
"""
from tf_privpy.he import batchcrypt, paillier  # noqa: E402,F401

__all__ = ["batchcrypt", "paillier"]
