/*
 * seal.h - encryption at rest for secrets in the store: AES-256-GCM with
 * a fresh 96-bit nonce per value.  A sealed value is
 *     "mk1" | nonce (12) | ciphertext | tag (16)
 * so a row tells whether it is sealed, and a wrong key or a changed byte
 * fails the tag check - a clear error, never garbage.
 */
#ifndef PERSIST_SEAL_H
#define PERSIST_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEAL_KEY_LEN  32
#define SEAL_OVERHEAD (3 + 12 + 16)

typedef struct seal_key {
	uint8_t k[SEAL_KEY_LEN]; /* AES-256 key */
} seal_key;

#define SEAL_SALT_LEN 16
#define SEAL_KDF_ITER 100000 /* PBKDF2-HMAC-SHA256 rounds for a passphrase */

/*
 * seal_key_from derives the key from the configured secret: 64 hex digits
 * are the key itself; any other text is a passphrase stretched with
 * PBKDF2-HMAC-SHA256 over salt (the store's own random salt), which costs
 * tens of milliseconds.  Never blocks otherwise.  Returns 0 or MK_EINVAL
 * (empty secret).
 */
int seal_key_from(const char *secret, const uint8_t *salt, size_t saltlen,
                  seal_key *key);

/*
 * seal encrypts len bytes, bound to aad (the row the value belongs to, so
 * a sealed value moved to another row fails to open); *out (malloc'd,
 * *outlen bytes) on 0.  Returns 0, MK_ENOMEM or MK_ESYS.
 */
int seal(const seal_key *key, const char *aad, const void *in, size_t len,
         uint8_t **out, size_t *outlen);

/* unseal reverses seal with the same aad; *out is NUL-terminated for
 * convenience.  Returns 0, MK_EINVAL (not sealed, truncated, wrong key,
 * another row's value, or tampered), MK_ENOMEM. */
int unseal(const seal_key *key, const char *aad, const uint8_t *in, size_t len,
           uint8_t **out, size_t *outlen);

/* seal_is_sealed tells whether a stored value carries the seal prefix. */
bool seal_is_sealed(const uint8_t *in, size_t len);

#endif /* PERSIST_SEAL_H */
