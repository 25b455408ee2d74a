"""Standalone C++ test programs of the kernels (no TensorFlow): the ring GEMM
against a naive reference, fast AVX-512 path and forced portable path; the
AES-128-CTR PRG's VAES path against FIPS-197 / SP 800-38A vectors and its EVP
path; the channel AEAD (HMAC-SHA256 against RFC 4231, AES-128-GCM against the
GCM specification's test cases, tamper rejection; the VAES/VPCLMULQDQ GCM
against the same cases and byte for byte against EVP, ~2 s); the key exchange's X25519 /
HKDF-SHA256 against RFC 7748 / RFC 5869 with the system's OpenSSL
(tests/test_kex.py runs them inside TF, on BoringSSL); the bitwise
comparison's three parties in one process against the plain sign (ties,
bounds, powers of two, both rings).

The programs are built once, into build/cc-tests/<family>/ (`make cc-tests`,
which `make test` runs first); make rebuilds one only when a source or header
changed, so a test here mostly runs them."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_standalone(makefile):
    out = os.path.join(ROOT, "build", "cc-tests", os.path.basename(os.path.dirname(makefile)))
    r = subprocess.run(["make", "-s", "-f", makefile, "test", f"OUT={out}"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.endswith(" 0 failed") and not last.startswith("0 passed"), r.stdout


def test_ring_gemm_cc():
    _run_standalone("ops/ring/Makefile.standalone")


def test_aes_ctr_cc():
    _run_standalone("ops/prg/Makefile.standalone")


def test_aead_cc():
    _run_standalone("ops/aead/Makefile.standalone")


def test_kex_cc():
    _run_standalone("ops/kex/Makefile.standalone")


def test_bitwise_cc():
    _run_standalone("ops/bitwise/Makefile.standalone")
