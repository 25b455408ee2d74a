#include "ops/paillier/paillier_modexp.h"

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

#include <vector>

// Only functions that OpenSSL and BoringSSL share, with the same meaning, are
// used here. TensorFlow's framework library exports its bundled BoringSSL's
// BN_* symbols, and inside a TF process the dynamic linker binds these calls
// to them (outside TF, as in the standalone tests, to libcrypto): every call
// must then resolve to the same library, which a function only OpenSSL has
// (BN_lebin2bn, BN_set_flags) would break. Both implementations'
// BN_mod_exp_mont_consttime are the constant-time fixed-window Montgomery
// exponentiation with MULX/ADX code chosen at run time.

namespace tf_privpy {
namespace paillier {

namespace {

std::string OpenSslError(const char* what) {
  const unsigned long code = ERR_get_error();  // NOLINT: OpenSSL's type
  ERR_clear_error();
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return std::string("OpenSSL ") + what + " failed: " + buf;
}

// Frees with BN_clear_free: the values may be secret.
struct BnDeleter {
  void operator()(BIGNUM* b) const { BN_clear_free(b); }
};
using Bn = std::unique_ptr<BIGNUM, BnDeleter>;
struct CtxDeleter {
  void operator()(BN_CTX* c) const { BN_CTX_free(c); }
};

// mpz (>= 0) -> BIGNUM through big-endian bytes; the buffer is wiped.
Bn ToBn(mpz_srcptr x) {
  const size_t len = (mpz_sizeinbase(x, 2) + 7) / 8;
  std::vector<unsigned char> buf(len + 1);
  size_t count = 0;
  mpz_export(buf.data(), &count, 1, 1, 0, 0, x);
  Bn out(BN_bin2bn(buf.data(), static_cast<int>(count), nullptr));
  OPENSSL_cleanse(buf.data(), buf.size());
  return out;
}

bool FromBn(const BIGNUM* b, mpz_ptr out) {
  std::vector<unsigned char> buf((BN_num_bits(b) + 7) / 8 + 1);
  const int len = BN_bn2binpad(b, buf.data(), static_cast<int>(buf.size()));
  if (len < 0) return false;
  mpz_import(out, len, 1, 1, 0, 0, buf.data());
  OPENSSL_cleanse(buf.data(), buf.size());
  return true;
}

}  // namespace

struct MontModulus::Impl {
  BN_MONT_CTX* mont = nullptr;
  Bn m;
};

std::shared_ptr<const MontModulus> MontModulus::Make(mpz_srcptr m, std::string* error) {
  if (mpz_cmp_ui(m, 3) < 0 || mpz_even_p(m)) {
    *error = "a Montgomery modulus must be odd and >= 3";
    return nullptr;
  }
  std::shared_ptr<MontModulus> out(new MontModulus());
  out->impl_ = new Impl();
  out->impl_->m = ToBn(m);
  std::unique_ptr<BN_CTX, CtxDeleter> ctx(BN_CTX_new());
  out->impl_->mont = BN_MONT_CTX_new();
  if (!out->impl_->m || !ctx || !out->impl_->mont ||
      !BN_MONT_CTX_set(out->impl_->mont, out->impl_->m.get(), ctx.get())) {
    *error = OpenSslError("BN_MONT_CTX_set");
    return nullptr;
  }
  return out;
}

MontModulus::~MontModulus() {
  if (impl_ == nullptr) return;
  BN_MONT_CTX_free(impl_->mont);  // clears its copies of the modulus
  delete impl_;                   // Bn clears m
}

bool MontModulus::Pow(mpz_ptr out, mpz_srcptr base, mpz_srcptr exp, std::string* error) const {
  std::unique_ptr<BN_CTX, CtxDeleter> ctx(BN_CTX_new());
  Bn a = ToBn(base), e = ToBn(exp), r(BN_new());
  if (!ctx || !a || !e || !r) {
    *error = OpenSslError("BN allocation");
    return false;
  }
  if (!BN_mod_exp_mont_consttime(r.get(), a.get(), e.get(), impl_->m.get(), ctx.get(),
                                 impl_->mont)) {
    *error = OpenSslError("BN_mod_exp_mont_consttime");
    return false;
  }
  if (!FromBn(r.get(), out)) {
    *error = "BN_bn2lebinpad failed";
    return false;
  }
  return true;
}

}  // namespace paillier
}  // namespace tf_privpy
