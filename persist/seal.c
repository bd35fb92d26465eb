/*
 * seal.c - AES-256-GCM for stored secrets (see seal.h).
 */
#include "persist/seal.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"

#define NONCE 12
#define TAG   16

bool
seal_is_sealed(const uint8_t *in, size_t len)
{
	return (len >= SEAL_OVERHEAD && memcmp(in, "mk1", 3) == 0);
}

static int
hexval(char c)
{
	return (c >= '0' && c <= '9'           ? c - '0'
	                : c >= 'a' && c <= 'f' ? c - 'a' + 10
	                : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                                       : -1);
}

int
seal_key_from(const char *secret, const uint8_t *salt, size_t saltlen,
              seal_key *key)
{
	size_t n   = secret != NULL ? strlen(secret) : 0;
	bool   hex = n == 2 * SEAL_KEY_LEN;

	if (n == 0) {
		return (MK_EINVAL);
	}
	for (size_t i = 0; hex && i < n; i++) {
		hex = hexval(secret[i]) >= 0;
	}
	if (hex) {
		for (int i = 0; i < SEAL_KEY_LEN; i++) {
			key->k[i] = (uint8_t)(hexval(secret[2 * i]) << 4 |
			                      hexval(secret[2 * i + 1]));
		}
		return (0);
	}
	return (PKCS5_PBKDF2_HMAC(secret, (int)n, salt, (int)saltlen,
	                          SEAL_KDF_ITER, EVP_sha256(), SEAL_KEY_LEN,
	                          key->k) == 1
	                ? 0
	                : MK_EINVAL);
}

/* Runs one GCM pass; returns 0 or -1 (the tag did not verify). */
static int
gcm(bool enc, const seal_key *key, const char *aad, const uint8_t *nonce,
    const uint8_t *in, size_t len, uint8_t *out, uint8_t *tag)
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int             n, ok;
	size_t          alen = aad != NULL ? strlen(aad) : 0;

	ok = c != NULL &&
	        EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL,
	                          enc) == 1 &&
	        EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, NONCE, NULL) ==
	                1 &&
	        EVP_CipherInit_ex(c, NULL, NULL, key->k, nonce, enc) == 1 &&
	        (alen == 0 ||
	         EVP_CipherUpdate(c, NULL, &n, (const uint8_t *)aad,
	                          (int)alen) == 1) &&
	        EVP_CipherUpdate(c, out, &n, in, (int)len) == 1 &&
	        (enc ||
	         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TAG, tag) ==
	                 1) &&
	        EVP_CipherFinal_ex(c, out + n, &n) == 1 &&
	        (!enc ||
	         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TAG, tag) == 1);
	EVP_CIPHER_CTX_free(c);
	return (ok ? 0 : -1);
}

int
seal(const seal_key *key, const char *aad, const void *in, size_t len,
     uint8_t **out, size_t *outlen)
{
	uint8_t *b;

	*out = NULL;
	if (len > (size_t)INT32_MAX ||
	    (b = malloc(len + SEAL_OVERHEAD)) == NULL) {
		return (MK_ENOMEM);
	}
	memcpy(b, "mk1", 3);
	if (RAND_bytes(b + 3, NONCE) != 1 ||
	    gcm(true, key, aad, b + 3, in, len, b + 3 + NONCE,
	        b + 3 + NONCE + len) != 0) {
		free(b);
		return (MK_ESYS);
	}
	*out    = b;
	*outlen = len + SEAL_OVERHEAD;
	return (0);
}

int
unseal(const seal_key *key, const char *aad, const uint8_t *in, size_t len,
       uint8_t **out, size_t *outlen)
{
	size_t   n;
	uint8_t *b, tag[TAG];

	*out = NULL;
	if (!seal_is_sealed(in, len)) {
		return (MK_EINVAL);
	}
	n = len - SEAL_OVERHEAD;
	if ((b = malloc(n + 1)) == NULL) {
		return (MK_ENOMEM);
	}
	memcpy(tag, in + 3 + NONCE + n, TAG);
	if (gcm(false, key, aad, in + 3, in + 3 + NONCE, n, b, tag) != 0) {
		free(b);
		return (MK_EINVAL); /* wrong key or tampered */
	}
	b[n]    = '\0';
	*out    = b;
	*outlen = n;
	return (0);
}
