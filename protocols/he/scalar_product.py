"""Private scalar product on Paillier (Wright–Yang; seed 004; DESIGN §9).

Two parties. Bob holds the key pair and a vector y; Alice holds a vector x of
the same length and only Bob's public key. They end with additive shares of
x·y: Alice holds R, Bob holds s, R + s = x·y (mod M).

Protocol (seed 004, Figure 1, in the share form of its §2):
  1. Bob encrypts his vector element-wise, c_i = E(y_i), and sends it.
  2. Alice computes P = prod_i c_i^(x_i) · E(-R) mod n^2 for a fresh R drawn
     uniformly from Z_n with the OS CSPRNG (`secrets`): for binary x the
     product of the c_i with x_i = 1 (one C++ reduce_sum over the selected
     ciphertexts), for integer x one mul_plain (c_i^(x_i), negative x_i
     through the inverse) and one reduce_sum. E(-R) carries fresh noise, so
     P is a uniformly rerandomized ciphertext: its noise does not tell Bob
     which ciphertexts were multiplied.
  3. Bob decrypts s = x·y - R mod n.

Shares are the integers R and s in [0, M); `ScalarProductResult.reconstruct()`
returns (R + s) mod M as the signed integer in (-M/2, M/2), which is x·y
exactly because the inputs are checked so that |x·y| < M/2 (M = n with one
key). Alice's check uses only public values: the length, and the bound Bob
announces on |y_i| (1 for binary vectors; for integer vectors the declared
`y_bound`, by default max|y_i| rounded up to a power of two so that only its
bit length is revealed).

Optimizations of seed 004 §3:
- §3.2 streaming: Bob encrypts and sends chunks of `chunk_size` elements;
  Alice folds each chunk into her running product as it arrives, so each
  side holds one chunk (plus one in flight) at a time. Bob's encryption of
  the next chunk runs in a background thread while Alice works on the last
  one (pipeline parallelism, a queue of depth 2).
- §3.3 precomputation: Bob encrypts his vector offline (`encrypt_vector`), or
  fills a NoisePool offline and encrypts online with one multiplication per
  element; the online phase is then Alice's products and one decryption.
- §3.4 k clients with blinding: see `scalar_product` and the module README
  section in tf_privpy/he/tasks.py. In seed 004's §3.4 the party whose data
  is split among k clients is the one that encrypts (the key holder, our
  Bob), and the party that multiplies (our Alice) blinds each partial
  product; we implement exactly that, with the shares output of Figure 1.

Security: semi-honest parties. Alice sees only Bob's public key, the public
header and ciphertexts; Bob sees one rerandomized ciphertext per client,
whose plaintext is masked by a uniform value. Bob's ciphertexts are not
authenticated; a malicious Alice can make Bob's share anything.
"""
from __future__ import annotations

import dataclasses
import queue
import secrets
import threading
import time
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence

import numpy as np

from . import paillier as P
from .progress import Progress, ProgressReporter
from .scalar_product_parties import (  # noqa: F401  (re-exported: importers use this module)
    DEFAULT_CHUNK, KINDS, SIGMA, Alice, Bob, EncryptedVector, ScalarProductError,
    Transcript, VectorHeader, abs_sum, as_int_vector, check_chunk, default_bound, is_binary,
    resolve_kind, serialized_bytes, split_sizes)


# ------------------------------------------------------------------ driver
@dataclasses.dataclass
class ScalarProductResult:
    """Additive shares of x·y.

    alice_share + bob_share = x·y (mod modulus); `reconstruct()` gives x·y.
    modulus is n (one key) or 2^share_bits (clients with their own keys).
    timings (seconds, wall clock of this process): total, bob_encrypt (online
    encryption; 0 with precomputed encryptions), alice, bob_decrypt, combine;
    per-client lists under "clients". transcript: the messages exchanged.
    """
    alice_share: int
    bob_share: int
    modulus: int
    length: int
    kind: str
    clients: int
    chunk_size: int
    timings: dict
    transcript: Transcript

    def reconstruct(self) -> int:
        v = (self.alice_share + self.bob_share) % self.modulus
        return v - self.modulus if v > self.modulus // 2 else v

    @property
    def bytes_bob_to_alice(self) -> int:
        return self.transcript.bytes("bob", "alice")

    @property
    def bytes_alice_to_bob(self) -> int:
        return self.transcript.bytes("alice", "bob")

    def __repr__(self) -> str:
        return (f"<ScalarProductResult length={self.length} kind={self.kind} "
                f"clients={self.clients} modulus={self.modulus.bit_length()}-bit "
                f"total {self.timings.get('total', 0.0):.3f}s>")


def pipelined(items: Iterable, depth: int = 2) -> Iterator:
    """Runs the producer `items` in a background thread, at most `depth`
    items ahead of the consumer (bounded memory); re-raises its errors."""
    q: "queue.Queue" = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for it in items:
                if not put((None, it)):
                    return
            put((None, done))
        except BaseException as e:  # surfaced in the consumer
            put((e, done))

    t = threading.Thread(target=produce, name="scalar-product-bob", daemon=True)
    t.start()
    try:
        while True:
            err, it = q.get()
            if err is not None:
                raise err
            if it is done:
                return
            yield it
    finally:
        stop.set()
        t.join()


def _timed_chunks(bob: Bob, chunk_size: int, times: dict, progress: ProgressReporter):
    for start in range(0, len(bob.y), chunk_size):
        t0 = time.perf_counter()
        c = bob.encrypt(start, min(start + chunk_size, len(bob.y)))
        times["bob_encrypt"] += time.perf_counter() - t0
        progress.add(int(c.shape[0]))
        yield c


def run_client(bob: Optional[Bob], alice: Alice, chunks: Optional[List[P.EncryptedTensor]],
               mask: int, decrypt: Callable[[P.EncryptedTensor], int], tag: str,
               chunk_size: int, transcript: Transcript, progress: ProgressReporter,
               pipeline: bool) -> dict:
    """One client's run: Bob's chunks -> Alice -> one blinded ciphertext ->
    Bob's decryption. Returns its timings and the decrypted signed value."""
    times = {"bob_encrypt": 0.0, "alice": 0.0, "bob_decrypt": 0.0}
    if chunks is None:
        stream = _timed_chunks(bob, chunk_size, times, progress)
        stream = pipelined(stream) if pipeline else stream
    else:
        stream = iter(chunks)
    pk = alice.pk
    for c in stream:
        transcript.record(f"bob{tag}", f"alice{tag}", c, serialized_bytes(pk, int(c.shape[0])))
        t0 = time.perf_counter()
        alice.absorb(c)
        times["alice"] += time.perf_counter() - t0
        if chunks is not None:
            progress.add(int(c.shape[0]))
    t0 = time.perf_counter()
    blinded = alice.finish(mask)
    times["alice"] += time.perf_counter() - t0
    transcript.record(f"alice{tag}", f"bob{tag}", blinded, serialized_bytes(pk, 1, 0))
    t0 = time.perf_counter()
    times["value"] = decrypt(blinded)
    times["bob_decrypt"] = time.perf_counter() - t0
    return times


def draw_mask(bound: int) -> int:
    """Uniform in [0, bound) from the OS CSPRNG; a fresh value per call."""
    return secrets.randbelow(bound)


def share_bits_for(keys: Sequence[P.PrivateKey], share_bits: Optional[int]) -> int:
    min_bits = min(k.public_key.bits for k in keys)
    top = min_bits - SIGMA - 3
    if share_bits is None:
        return top
    if isinstance(share_bits, bool) or not isinstance(share_bits, (int, np.integer)) \
            or not 8 <= share_bits <= top:
        raise ValueError(f"share_bits must be an integer in [8, {top}] for "
                         f"{min_bits}-bit keys (2^share_bits · 2^{SIGMA} must fit the "
                         f"plaintexts), got {share_bits!r}")
    return int(share_bits)




# ------------------------------------------------------------------ entry points
def _as_list(value: Any, k: int, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != k:
            raise ValueError(f"{name} has {len(value)} entries for {k} clients")
        return list(value)
    return [value] * k


def _keys(key: Any, clients: Optional[int]) -> List[P.PrivateKey]:
    keys = list(key) if isinstance(key, (list, tuple)) else None
    if keys is None:
        if not isinstance(key, P.PrivateKey):
            raise TypeError("key must be Bob's PrivateKey (or one PrivateKey per client), got "
                            f"{type(key).__name__}")
        return [key] * (1 if clients is None else clients)
    if clients is not None and len(keys) != clients:
        raise ValueError(f"{len(keys)} keys for {clients} clients")
    if not keys or not all(isinstance(k, P.PrivateKey) for k in keys):
        raise TypeError("key must be a PrivateKey or a non-empty list of PrivateKeys")
    return keys


def encrypt_vector(key: Any, y: Any, *, kind: str = "auto", y_bound: Optional[int] = None,
                   clients: Optional[int] = None, chunk_size: int = DEFAULT_CHUNK,
                   noise: Any = None, progress: Progress = False):
    """Bob's offline phase (seed 004 §3.3): his vector encrypted ahead of time,
    in chunks; one EncryptedVector, or a tuple of one per client."""
    y = as_int_vector(y, "y")
    kind = resolve_kind(kind, y)
    keys = _keys(key, clients)
    chunk_size = check_chunk(chunk_size)
    sizes = split_sizes(len(y), len(keys))
    noises = _as_list(noise, len(keys), "noise")
    prog = ProgressReporter(progress, len(y), "scalar product: encrypting y")
    bound = default_bound(y, kind) if y_bound is None else y_bound
    out, start = [], 0
    for k, size, nz in zip(keys, sizes, noises):
        bob = Bob(k, y[start:start + size], kind, bound, nz)
        chunks = []
        for c in bob.chunks(chunk_size):
            chunks.append(c)
            prog.add(int(c.shape[0]))
        out.append(EncryptedVector(k.public_key, bob.header, chunks, start))
        start += size
    return out[0] if len(out) == 1 else tuple(out)


def scalar_product(x: Any, y: Any = None, key: Any = None, *, kind: str = "auto",
                   y_bound: Optional[int] = None, clients: Optional[int] = None,
                   chunk_size: int = DEFAULT_CHUNK, precomputed: Any = None,
                   bob_noise: Any = None, alice_noise: Any = None,
                   share_bits: Optional[int] = None, pipeline: bool = True,
                   progress: Progress = False) -> ScalarProductResult:
    """Runs the protocol between Alice (x) and Bob (y, key); see the module
    docstring and tf_privpy.he.scalar_product for the arguments."""
    t_start = time.perf_counter()
    x = as_int_vector(x, "x")
    chunk_size = check_chunk(chunk_size)
    if key is None:
        raise TypeError("scalar_product needs Bob's key: a PrivateKey, or one per client")
    if precomputed is not None:
        if y is not None:
            raise ValueError("pass either y (encrypted online) or precomputed (Bob's "
                             "EncryptedVector from encrypt_vector), not both")
        parts = list(precomputed) if isinstance(precomputed, (list, tuple)) else [precomputed]
        if not all(isinstance(p, EncryptedVector) for p in parts):
            raise TypeError("precomputed must be an EncryptedVector (or one per client) from "
                            "encrypt_vector")
        if clients is not None and clients != len(parts):
            raise ValueError(f"clients={clients} but precomputed has {len(parts)} parts")
        keys = _keys(key, len(parts))
        for i, (p, k) in enumerate(zip(parts, keys)):
            if p.public_key != k.public_key:
                raise P.KeyMismatchError(f"precomputed part {i} was encrypted under another key")
        total = sum(p.header.length for p in parts)
        if total != len(x):
            raise ScalarProductError(f"x has {len(x)} elements but Bob's vector has {total}; "
                                     "the vectors must have the same length")
        y_binary = all(p.header.kind == "binary" for p in parts)
        if kind == "binary" and not y_binary:
            raise ScalarProductError("kind='binary' but Bob's precomputed vector is an integer "
                                     "vector")
        kind = resolve_kind(kind, x) if y_binary else resolve_kind(
            "integer" if kind == "auto" else kind, x)
        sizes = [p.header.length for p in parts]
        headers = [p.header for p in parts]
    else:
        if y is None:
            raise TypeError("scalar_product needs Bob's vector y (or precomputed=...)")
        y = as_int_vector(y, "y")
        if len(y) != len(x):
            raise ScalarProductError(f"x has {len(x)} elements and y has {len(y)}; the vectors "
                                     "must have the same length")
        kind = resolve_kind(kind, x, y)
        keys = _keys(key, clients)
        sizes = split_sizes(len(x), len(keys))
        parts, headers = None, None
    k = len(keys)
    shared = all(kk.public_key == keys[0].public_key for kk in keys)
    if shared:
        modulus = keys[0].public_key.n
        mask_bound = modulus
    else:
        modulus = 1 << share_bits_for(keys, share_bits)
        mask_bound = modulus << SIGMA
    bob_noises = _as_list(bob_noise, k, "bob_noise")
    alice_noises = _as_list(alice_noise, k, "alice_noise")

    bobs, alices, offsets, start = [], [], [], 0
    for i in range(k):
        size = sizes[i]
        if parts is None:
            bound = (1 if kind == "binary" else default_bound(y, kind)) if y_bound is None \
                else y_bound
            bobs.append(Bob(keys[i], y[start:start + size], "binary" if kind == "binary"
                            else "integer", bound, bob_noises[i]))
            header = bobs[-1].header
        else:
            bobs.append(None)
            header = headers[i]
        limit = keys[i].public_key.max_int - (0 if shared else mask_bound)
        alices.append(Alice(keys[i].public_key, x[start:start + size], header,
                            alice_noises[i], limit=limit, kind=kind))
        offsets.append(start)
        start += size
    total_bound = sum(a.partial_bound for a in alices)
    if total_bound > (modulus - 1) // 2:
        raise ScalarProductError(
            f"|x·y| could reach {total_bound.bit_length()} bits, but shares modulo a "
            f"{modulus.bit_length()}-bit modulus reconstruct only |x·y| < M/2; use smaller "
            "values" + ("" if shared else " or a larger share_bits"))
    masks = [draw_mask(mask_bound) for _ in range(k)]
    transcript = Transcript()
    prog = ProgressReporter(progress, len(x), "scalar product")
    for i, a in enumerate(alices):
        transcript.record(f"bob{i}", f"alice{i}", a.header,
                          len(a.header.fingerprint) + 3 * 8)
    chunk_lists = [None] * k if parts is None else [p.take() for p in parts]

    def client(i: int) -> dict:
        dec = bobs[i].decrypt if bobs[i] is not None else (
            lambda c, kk=keys[i]: int(P.decrypt_ints(kk, c.reshape([1]))[0]))
        return run_client(bobs[i], alices[i], chunk_lists[i], masks[i], dec,
                          str(i) if k > 1 else "", chunk_size, transcript, prog, pipeline)

    t0 = time.perf_counter()
    if k == 1:
        per_client = [client(0)]
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=k, thread_name_prefix="scalar-product-client") as ex:
            per_client = list(ex.map(client, range(k)))
    t_clients = time.perf_counter() - t0
    # Phase two (seed 004 §3.4): C_1 -> C_2 -> ... -> C_k add their blinded
    # partials; C_k ends with Bob's share. Every partial is uniform mod M.
    t0 = time.perf_counter()
    share_bytes = (modulus.bit_length() + 7) // 8
    bob_share = 0
    for i, r in enumerate(per_client):
        bob_share = (bob_share + r.pop("value")) % modulus
        if i + 1 < k:
            transcript.record(f"bob{i}", f"bob{i + 1}", bob_share, share_bytes)
    alice_share = sum(masks) % modulus
    t_combine = time.perf_counter() - t0
    timings = {
        "total": time.perf_counter() - t_start,
        "clients_wall": t_clients,
        "bob_encrypt": sum(r["bob_encrypt"] for r in per_client),
        "alice": sum(r["alice"] for r in per_client),
        "bob_decrypt": sum(r["bob_decrypt"] for r in per_client),
        "combine": t_combine,
        "clients": per_client,
    }
    return ScalarProductResult(alice_share, bob_share, modulus, len(x), kind, k, chunk_size,
                               timings, transcript)


__all__ = [
    "Alice", "Bob", "DEFAULT_CHUNK", "EncryptedVector", "KINDS", "SIGMA", "ScalarProductError",
    "ScalarProductResult", "Transcript", "VectorHeader", "encrypt_vector", "scalar_product",
]
