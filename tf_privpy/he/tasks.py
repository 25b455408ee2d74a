"""Two classic tasks on Paillier: a private scalar product (Wright–Yang,
seed 004) and a many-user vector sum (the Snips/SEAL blog's task, seed 002).
DESIGN §9. Re-exported as `tp.he.scalar_product`, `tp.he.encrypt_vector` and
`tp.he.vector_sum`; the party-level pieces live here (`tp.he.tasks`).

Scalar product
--------------
Alice holds x, Bob holds y and the key pair. Bob encrypts y element-wise and
streams it to Alice in chunks; Alice multiplies the ciphertexts selected by
x (binary x: the product of the c_i with x_i = 1, one C++ reduce_sum per
chunk; integer x: mul_plain then reduce_sum) and an encryption of -R under
fresh noise, R uniform in Z_n from the OS CSPRNG (`secrets`), fresh every
call; Bob decrypts s = x·y - R. Alice keeps R. Shares are integers in
[0, M) with R + s = x·y mod M; `result.reconstruct()` is the signed x·y.

    >>> pk, sk = tp.he.paillier.keygen(2048)
    >>> r = tp.he.scalar_product([1, 0, 1, 1], [1, 1, 0, 1], sk)   # x (Alice), y, Bob's key
    >>> r.reconstruct(), r.modulus == pk.n
    (2, True)
    >>> r = tp.he.scalar_product([3, -2], [-5, 7], sk)              # integer vectors
    >>> r.reconstruct(), (r.alice_share + r.bob_share) % r.modulus == r.modulus - 29
    (-29, True)

Precomputation (seed 004 §3.3): Bob encrypts offline, the online phase is
Alice's products and Bob's one decryption:

    >>> ev = tp.he.encrypt_vector(sk, y)                 # offline, single use
    >>> r = tp.he.scalar_product(x, key=sk, precomputed=ev)

or Bob fills a `tp.he.paillier.NoisePool(sk, len(y))` offline and passes
`bob_noise=pool` (online encryption is then one multiplication per element).

k clients with blinding (seed 004 §3.4), `clients=k`. What the seed
describes: the party that encrypts (its "Alice", the key holder, our Bob)
splits its vector among k clients (ceil(n/k) or floor(n/k) elements each),
which "independently and in parallel choose their own encryption keys";
each interacts with the server (the party that multiplies, its "Bob", our
Alice), who blinds client i's partial product with E(R_i), R_i random with
sum R_i = 0 (mod M); in phase two C_1 sends its blinded partial to C_2, each
C_i adds its own and passes it on, and C_k obtains the total. What we
implement: exactly that, run as k threads, with Figure 1's share output
instead of revealing x·y to the clients: Alice draws every R_i
independently (so sum R_i = R is her share; the seed's sum = 0 is the case
R = 0), client i decrypts only its blinded partial P_i - R_i, the chain
C_1 -> ... -> C_k adds them, and C_k ends with Bob's share s = x·y - R.
Each blinded partial, and each running sum on the chain, is uniform mod M
to the client that sees it, so no client learns its own or another's
partial. Keys: `key=sk` (one key, the clients are Bob's workers; M = n and
the blinding is perfect) or `key=[sk_1, ..., sk_k]` (each client its own
key, as in the seed; then the moduli differ, so shares live mod
M = 2^share_bits and Alice blinds with R_i uniform in [0, M 2^40): client i
decrypts P_i - R_i as an integer, statistically within 2^-40 of uniform,
and reduces it mod M). On one 2-core machine the k clients share the cores
the single-client run already uses, so they do not run k times faster (the
seed's 2.99x used 3 machines).

Vector sum
----------
Users each hold `dim` integers in [0, max_value]; each packs its vector
into ceil(dim / k) plaintexts of k slots of w = ceil(log2(max_users *
max_value + 1)) bits (no sign bits), encrypts them with the PUBLIC key
(generic r^n noise by default), and uploads the serialized ciphertexts; the
server multiplies them in a tree (C++ reduce_sum); the key holder decrypts
only the total and unpacks exact sums.

    >>> v = np.random.default_rng(0).integers(0, 21, (500, 100))   # 500 users
    >>> r = tp.he.vector_sum(v, max_value=20, key=sk, max_users=8000)
    >>> bool((r.totals == v.sum(axis=0)).all()), round(r.bytes_per_value, 2)
    (True, 5.56)

Party by party (what a deployment does):

    >>> spec = tp.he.tasks.VectorSumSpec(dim=100, max_value=20, max_users=8000,
    ...                                  key_bits=pk.bits)
    >>> blob = tp.he.tasks.encrypt_users(pk, spec, my_vector)[0]    # a user
    >>> server = tp.he.tasks.VectorSumServer(pk, spec)                # the server
    >>> server.receive([blob, ...]); total, count = server.total()
    >>> sums = tp.he.tasks.decrypt_total(sk, spec, total, count)     # the key holder
"""
from __future__ import annotations

from typing import Any, Optional

from tf_privpy.protocols.he import scalar_product as _sp
from tf_privpy.protocols.he import vector_sum as _vs
from tf_privpy.protocols.he.scalar_product import (Alice as ScalarProductAlice,
                                                Bob as ScalarProductBob, EncryptedVector,
                                                ScalarProductError, ScalarProductResult,
                                                Transcript, VectorHeader)
from tf_privpy.protocols.he.vector_sum import (Server as VectorSumServer, VectorSumError,
                                            VectorSumResult, VectorSumSpec, decrypt_total,
                                            encrypt_users, pack, unpack)

DEFAULT_CHUNK = _sp.DEFAULT_CHUNK

__all__ = [
    "DEFAULT_CHUNK", "EncryptedVector", "ScalarProductAlice", "ScalarProductBob",
    "ScalarProductError", "ScalarProductResult", "Transcript", "VectorHeader",
    "VectorSumError", "VectorSumResult", "VectorSumServer", "VectorSumSpec", "decrypt_total",
    "encrypt_users", "encrypt_vector", "pack", "scalar_product", "unpack", "vector_sum",
]


def scalar_product(x: Any, y: Any = None, key: Any = None, *, kind: str = "auto",
                   y_bound: Optional[int] = None, clients: Optional[int] = None,
                   chunk_size: int = DEFAULT_CHUNK, precomputed: Any = None,
                   bob_noise: Any = None, alice_noise: Any = None,
                   share_bits: Optional[int] = None, pipeline: bool = True,
                   progress: Any = False) -> ScalarProductResult:
    """Additive shares of x·y between Alice (x) and Bob (y, key): Wright–Yang
    on Paillier (seed 004), run in this process party by party.

    Args:
      x: Alice's vector: 1-D ints or bools (|x_i| < 2^62).
      y: Bob's vector, same length; None when `precomputed` is given.
      key: Bob's PrivateKey (he encrypts with CRT and decrypts), or a list of
        k PrivateKeys, one per client (seed 004 §3.4).
      kind: "binary" (x and y must hold only 0 and 1: checked), "integer",
        or "auto" (binary when both are 0/1). Binary x multiplies the
        selected ciphertexts; integer x exponentiates them (mul_plain).
      y_bound: the bound on |y_i| Bob announces (Alice checks
        sum|x_i| * y_bound < M/2 so that x·y cannot wrap). Default: 1 for
        binary y, else max|y_i| rounded up to a power of two.
      clients: k parallel clients with blinding (default 1, or len(key)).
      chunk_size: elements per streamed chunk (memory is O(chunk_size)).
      precomputed: Bob's EncryptedVector(s) from `encrypt_vector` (offline
        encryption; used once).
      bob_noise: noise for Bob's online encryption: None (CRT), or a
        NoisePool(sk) filled ahead (one per client with per-client keys).
      alice_noise: noise of Alice's E(-R): None (generic r^n, she has only
        the public key), "djn", or a NoisePool(pk).
      share_bits: with per-client keys, shares live mod 2^share_bits
        (default: the largest that fits, key_bits - 43).
      pipeline: Bob encrypts the next chunk in a background thread while
        Alice works on the last (seed 004 §3.2).
      progress: True prints progress to stderr (at most once a second);
        a callable gets (done, total, elapsed_seconds).

    Returns:
      ScalarProductResult: alice_share, bob_share, modulus, reconstruct(),
      timings (total, bob_encrypt, alice, bob_decrypt, combine, per client),
      transcript (every message, its type and serialized bytes).

    Raises:
      ScalarProductError (a ValueError) on different lengths, non-binary
      values with kind="binary", y beyond y_bound, |x·y| possibly >= M/2,
      more clients than elements, or a reused EncryptedVector; TypeError on
      non-integer inputs or a wrong key type.
    """
    return _sp.scalar_product(x, y, key, kind=kind, y_bound=y_bound, clients=clients,
                              chunk_size=chunk_size, precomputed=precomputed,
                              bob_noise=bob_noise, alice_noise=alice_noise,
                              share_bits=share_bits, pipeline=pipeline, progress=progress)


def encrypt_vector(key: Any, y: Any, *, kind: str = "auto", y_bound: Optional[int] = None,
                   clients: Optional[int] = None, chunk_size: int = DEFAULT_CHUNK,
                   noise: Any = None, progress: Any = False):
    """Bob's offline phase (seed 004 §3.3): y encrypted ahead of time, in
    chunks. Returns one EncryptedVector, or a tuple of k (one per client,
    split as scalar_product splits). Each is used by one scalar_product."""
    return _sp.encrypt_vector(key, y, kind=kind, y_bound=y_bound, clients=clients,
                              chunk_size=chunk_size, noise=noise, progress=progress)


def vector_sum(vectors: Any, max_value: int, key: Any, *, max_users: Optional[int] = None,
               noise: Any = None, users_per_batch: int = 256, fan_in: int = 256,
               progress: Any = False) -> VectorSumResult:
    """Sum of many users' vectors of small non-negative integers under packed
    Paillier encryption (seed 002's task), all parties simulated here.

    Args:
      vectors: [users, dim] integers in [0, max_value] (one row per user).
      max_value: the public bound on every value; larger values raise.
      key: the key holder's PrivateKey. Users get only its public key.
      max_users: the slot width is sized for this many users (default: the
        number of rows); the server refuses more uploads.
      noise: the users' encryption noise: None = generic r^n (textbook
        Paillier, one exponentiation per ciphertext: the default, resting on
        Paillier's assumption alone), "djn" (several times cheaper, adds
        DJN's assumption), or a NoisePool(public_key) filled ahead.
      users_per_batch: users encrypted per kernel call in this simulation
        (each user's ciphertexts are still independent encryptions).
      fan_in: uploads per node of the server's summation tree.
      progress: True prints progress to stderr; a callable gets
        (users done, users, elapsed seconds).

    Returns:
      VectorSumResult: totals (int64 [dim], exact), timings (users_encrypt,
      server, key_holder, total: users' encryption included),
      upload_bytes_per_user and bytes_per_value (serialized ciphertext bytes
      per value), spec (slot width, slots per plaintext).

    Raises:
      VectorSumError (a ValueError) naming the user and index of a value
      outside [0, max_value], or when more users than max_users are summed.
    """
    return _vs.vector_sum(vectors, max_value, key, max_users=max_users, noise=noise,
                          users_per_batch=users_per_batch, fan_in=fan_in, progress=progress)
