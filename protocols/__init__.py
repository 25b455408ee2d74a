"""tf_privpy.protocols: protocols that compose kernels across devices.

Installed as tf_privpy.protocols; depends only on the op library (ops/).
Two halves that share only the kernel loader (loader.py) and the config:
  mpc/  secret sharing on the four servers (PrivPy): runtime, backends,
        multiplication, comparison, derived functions
  he/   homomorphic encryption: Paillier, BatchCrypt, scalar products, sums
"""
from .config import Config

__all__ = ["Config"]
