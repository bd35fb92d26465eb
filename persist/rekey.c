/*
 * rekey.c - secrets sealed at rest (see store.h: Sealing), for both
 * backends: a value sealed as it is written and opened as it is read,
 * the seal key set up at open, and a store first opened with a key
 * sealed in place (by the backend's seal_all); from then on a sealed
 * column's plain value is refused.
 */
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"
#include "persist/store_impl.h"

#define CHECK_VALUE "mcpkeep seal check"
#define CHECK_AAD                                                             \
	"store_meta\x1f"                                                      \
	"seal_check"

int
store_seal(store *s, const char *aad, const char *text, uint8_t **out,
           size_t *n)
{
	int rv;

	if ((rv = seal(&s->key, aad, text, strlen(text), out, n)) != 0) {
		return (store_failf(s, rv, "sealing a value failed"));
	}
	return (0);
}

int
store_open_value(store *s, const uint8_t *v, size_t n, const char *aad,
                 char **out)
{
	uint8_t *p;
	size_t   pn;

	*out = NULL;
	if (!seal_is_sealed(v, n)) {
		if (s->all_sealed) {
			return (MK_EINVAL); /* the first key sealed them all */
		}
		/* plain: written before a key was set */
		if ((*out = strndup(v != NULL ? (const char *)v : "", n)) ==
		    NULL) {
			return (MK_ENOMEM);
		}
		return (0);
	}
	if (!s->keyed || unseal(&s->key, aad, v, n, &p, &pn) != 0) {
		return (MK_EPROTO);
	}
	*out = (char *)p;
	return (0);
}

/* The first key: every plain value sealed, and the check written. */
static int
seal_store(store *s)
{
	uint8_t *c;
	size_t   n;
	int      rv;

	if ((rv = seal(&s->key, CHECK_AAD, CHECK_VALUE, strlen(CHECK_VALUE),
	               &c, &n)) != 0) {
		return (store_failf(s, rv, "sealing a value failed"));
	}
	rv = s->ops->seal_all(s, c, n);
	free(c);
	return (rv);
}

/* Sets up the seal key at open (see the header). */
int
store_key_setup(store *s, bool readonly, const char *secret)
{
	uint8_t salt[SEAL_SALT_LEN], check[256], *p;
	long    nsalt, ncheck;
	size_t  pn;
	int     rv;

	if ((rv = s->ops->meta_get(s, "seal_salt", salt, sizeof(salt),
	                           &nsalt)) != 0 ||
	    (rv = s->ops->meta_get(s, "seal_check", check, sizeof(check),
	                           &ncheck)) != 0) {
		return (rv);
	}
	if (secret == NULL || *secret == '\0') {
		return (ncheck < 0
		                ? 0
		                : store_failf(
		                          s, MK_EINVAL,
		                          "it holds sealed secrets: set its encryption key (MCPKEEP_ENCRYPTION_KEY)"));
	}
	if (nsalt != SEAL_SALT_LEN) {
		if (readonly) {
			return (0); /* never sealed: nothing to open */
		}
		/* another node may write its salt first: the one stored is
		 * the one used */
		if (RAND_bytes(salt, sizeof(salt)) != 1 ||
		    s->ops->meta_put(s, "seal_salt", salt, sizeof(salt)) !=
		            0 ||
		    s->ops->meta_get(s, "seal_salt", salt, sizeof(salt),
		                     &nsalt) != 0 ||
		    nsalt != SEAL_SALT_LEN) {
			return (store_failf(s, MK_ESYS,
			                    "cannot write a seal salt"));
		}
	}
	if (seal_key_from(secret, salt, sizeof(salt), &s->key) != 0) {
		return (store_failf(s, MK_EINVAL,
		                    "the encryption key is empty"));
	}
	s->keyed = true;
	if (ncheck >= 0) {
		if (unseal(&s->key, CHECK_AAD, check, (size_t)ncheck, &p,
		           &pn) != 0) {
			s->keyed = false;
			return (store_failf(
			        s, MK_EINVAL,
			        "the encryption key does not match the key its secrets were sealed with"));
		}
		free(p);
		s->all_sealed = true;
		return (0);
	}
	if (readonly) {
		return (0); /* the writer seals what is there */
	}
	if ((rv = seal_store(s)) == 0) {
		s->all_sealed = true;
	}
	return (rv);
}
