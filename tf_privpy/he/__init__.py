"""Homomorphic encryption: Paillier kernels, BatchCrypt's batched aggregation,
private scalar products and many-user vector sums (DESIGN §9).

Example:
  >>> import tf_privpy as tp
  >>> pk, sk = tp.he.paillier.keygen(2048)
  >>> c = tp.he.paillier.encrypt(pk, [1, -2, 3])
  >>> tp.he.paillier.decrypt(sk, tp.he.paillier.add(pk, c, c))
  <tf.Tensor: shape=(3,), dtype=int64, numpy=array([ 2, -4,  6])>
  >>> tp.he.scalar_product([1, 0, 1], [1, 1, 1], sk).reconstruct()   # Wright-Yang shares
  2
"""
from tf_privpy.he import batchcrypt, paillier, tasks  # noqa: E402,F401
from tf_privpy.he.tasks import encrypt_vector, scalar_product, vector_sum  # noqa: E402,F401

__all__ = ["batchcrypt", "encrypt_vector", "paillier", "scalar_product", "tasks", "vector_sum"]
