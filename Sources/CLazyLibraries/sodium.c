// libsodium, loaded on first use: only the file store and export bundles (age) need it.
#include "CLazyLibraries.h"
#include "lanyard_lazy.h"

// The header marks every function visibility("default"); the trampolines are hidden.
#define SODIUM_STATIC 1
#include <sodium.h>

#define SODIUM_FUNCTIONS(F, P)                                                                                       \
    F(int, crypto_aead_chacha20poly1305_ietf_decrypt,                                                                \
      (unsigned char *m, unsigned long long *mlen_p, unsigned char *nsec, const unsigned char *c,                    \
       unsigned long long clen, const unsigned char *ad, unsigned long long adlen, const unsigned char *npub,        \
       const unsigned char *k),                                                                                      \
      (m, mlen_p, nsec, c, clen, ad, adlen, npub, k))                                                                \
    F(int, crypto_aead_chacha20poly1305_ietf_encrypt,                                                                \
      (unsigned char *c, unsigned long long *clen_p, const unsigned char *m, unsigned long long mlen,                 \
       const unsigned char *ad, unsigned long long adlen, const unsigned char *nsec, const unsigned char *npub,      \
       const unsigned char *k),                                                                                      \
      (c, clen_p, m, mlen, ad, adlen, nsec, npub, k))                                                                \
    F(int, crypto_auth_hmacsha256_final, (crypto_auth_hmacsha256_state * state, unsigned char *out), (state, out))   \
    F(int, crypto_auth_hmacsha256_init, (crypto_auth_hmacsha256_state * state, const unsigned char *key, size_t keylen), \
      (state, key, keylen))                                                                                          \
    F(int, crypto_auth_hmacsha256_update,                                                                            \
      (crypto_auth_hmacsha256_state * state, const unsigned char *in, unsigned long long inlen), (state, in, inlen)) \
    F(int, crypto_hash_sha256, (unsigned char *out, const unsigned char *in, unsigned long long inlen),              \
      (out, in, inlen))                                                                                              \
    F(int, crypto_pwhash_scryptsalsa208sha256_ll,                                                                    \
      (const uint8_t *passwd, size_t passwdlen, const uint8_t *salt, size_t saltlen, uint64_t N, uint32_t r,         \
       uint32_t p, uint8_t *buf, size_t buflen),                                                                     \
      (passwd, passwdlen, salt, saltlen, N, r, p, buf, buflen))                                                      \
    F(int, crypto_scalarmult, (unsigned char *q, const unsigned char *n, const unsigned char *p), (q, n, p))         \
    F(int, crypto_scalarmult_base, (unsigned char *q, const unsigned char *n), (q, n))                               \
    F(int, crypto_sign_detached,                                                                                     \
      (unsigned char *sig, unsigned long long *siglen_p, const unsigned char *m, unsigned long long mlen,            \
       const unsigned char *sk),                                                                                     \
      (sig, siglen_p, m, mlen, sk))                                                                                  \
    F(int, crypto_sign_seed_keypair, (unsigned char *pk, unsigned char *sk, const unsigned char *seed), (pk, sk, seed)) \
    F(int, crypto_sign_verify_detached,                                                                              \
      (const unsigned char *sig, const unsigned char *m, unsigned long long mlen, const unsigned char *pk),          \
      (sig, m, mlen, pk))                                                                                            \
    P(void, randombytes_buf, (void *const buf, const size_t size), (buf, size))                                      \
    F(int, sodium_base642bin,                                                                                        \
      (unsigned char *const bin, const size_t bin_maxlen, const char *const b64, const size_t b64_len,               \
       const char *const ignore, size_t *const bin_len, const char **const b64_end, const int variant),              \
      (bin, bin_maxlen, b64, b64_len, ignore, bin_len, b64_end, variant))                                            \
    F(size_t, sodium_base64_encoded_len, (const size_t bin_len, const int variant), (bin_len, variant))              \
    F(char *, sodium_bin2base64,                                                                                     \
      (char *const b64, const size_t b64_maxlen, const unsigned char *const bin, const size_t bin_len,               \
       const int variant),                                                                                           \
      (b64, b64_maxlen, bin, bin_len, variant))                                                                      \
    F(int, sodium_init, (void), ())                                                                                  \
    F(int, sodium_is_zero, (const unsigned char *n, const size_t nlen), (n, nlen))                                   \
    F(int, sodium_memcmp, (const void *const b1_, const void *const b2_, size_t len), (b1_, b2_, len))               \
    P(void, sodium_memzero, (void *const pnt, const size_t len), (pnt, len))

LAZY_LIBRARY(sodium, "libsodium.so.23", SODIUM_FUNCTIONS)
#define LAZY_REQUIRE sodium_require
SODIUM_FUNCTIONS(LAZY_FUNCTION, LAZY_PROCEDURE)
