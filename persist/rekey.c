/*
 * rekey.c - secrets sealed at rest (see store.h: Sealing): a value
 * sealed as it is bound and opened as it is read, the seal key set up at
 * open, and a store first opened with a key sealed in place.
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
store_bind_secret(store *s, sqlite3_stmt *q, int i, const char *aad,
                  const char *text)
{
	uint8_t *b;
	size_t   n;
	int      rv;

	if (!s->keyed) {
		sqlite3_bind_text(q, i, text, -1, SQLITE_TRANSIENT);
		return (0);
	}
	if ((rv = seal(&s->key, aad, text, strlen(text), &b, &n)) != 0) {
		return (store_failf(s, rv, "sealing a value failed"));
	}
	sqlite3_bind_blob(q, i, b, (int)n, free);
	return (0);
}

int
store_column_secret(store *s, sqlite3_stmt *q, int i, const char *aad,
                    char **out)
{
	const uint8_t *v = sqlite3_column_blob(q, i);
	size_t         n = (size_t)sqlite3_column_bytes(q, i);
	uint8_t       *p;
	size_t         pn;

	*out = NULL;
	if (sqlite3_column_type(q, i) == SQLITE_NULL) {
		return (0);
	}
	if (!seal_is_sealed(v, n)) {
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

/* Reads a meta value into buf (at most len bytes); *n its length, or -1
 * when absent. */
static int
meta_get(store *s, const char *key, uint8_t *buf, size_t len, long *n)
{
	sqlite3_stmt *q = s->st[ST_META_GET];
	int           rc;

	*n = -1;
	sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
	if ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		size_t b = (size_t)sqlite3_column_bytes(q, 0);
		if (b <= len) {
			memcpy(buf, sqlite3_column_blob(q, 0), b);
			*n = (long)b;
		}
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		return (store_fail_db(s, "reading the seal settings"));
	}
	return (0);
}

static int
meta_put(store *s, const char *key, const void *v, size_t n)
{
	sqlite3_stmt *q = s->st[ST_META_PUT];
	int           rc;

	sqlite3_bind_text(q, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_blob(q, 2, v, (int)n, SQLITE_TRANSIENT);
	rc = sqlite3_step(q);
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return (rc == SQLITE_DONE
	                ? 0
	                : store_fail_db(s, "writing the seal settings"));
}

/* Seals, in place, every plain value of one column: SQL selects rowid,
 * the key columns, then the value; upd sets ?2 where rowid = ?1. */
static int
seal_column(store *s, const char *table, const char *select,
            const char *update, unsigned nkey, unsigned *count)
{
	sqlite3_stmt *q = NULL, *u = NULL;
	int           rc, rv       = 0;

	if (sqlite3_prepare_v2(s->db, select, -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, update, -1, &u, NULL) != SQLITE_OK) {
		rv = store_fail_db(s, "sealing stored secrets");
		goto out;
	}
	while (rv == 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		const uint8_t *v = sqlite3_column_blob(q, 1 + (int)nkey);
		size_t n = (size_t)sqlite3_column_bytes(q, 1 + (int)nkey);
		char   aad[STORE_ERR_MAX], *plain;
		size_t at = (size_t)snprintf(aad, sizeof(aad), "%s", table);

		if (sqlite3_column_type(q, 1 + (int)nkey) == SQLITE_NULL ||
		    seal_is_sealed(v, n)) {
			continue;
		}
		for (unsigned k = 0; k < nkey && at < sizeof(aad); k++) {
			at += (size_t)snprintf(
			        aad + at, sizeof(aad) - at, "\x1f%s",
			        (const char *)sqlite3_column_text(q,
			                                          1 + (int)k));
		}
		if ((plain = strndup((const char *)v, n)) == NULL) {
			rv = MK_ENOMEM;
			break;
		}
		sqlite3_bind_int64(u, 1, sqlite3_column_int64(q, 0));
		rv = store_bind_secret(s, u, 2, aad, plain);
		free(plain);
		if (rv == 0) {
			rc = sqlite3_step(u);
			sqlite3_reset(u);
			rv = rc == SQLITE_DONE
			        ? 0
			        : store_fail_db(s, "sealing stored secrets");
			(*count)++;
		}
	}
	if (rv == 0 && rc != SQLITE_DONE) {
		rv = store_fail_db(s, "sealing stored secrets");
	}
out:
	sqlite3_finalize(q);
	sqlite3_finalize(u);
	return (rv);
}

/* Seals every plain secret of the store, in one transaction. */
static int
seal_all(store *s)
{
	char     sel[512], upd[256], keys[256];
	unsigned count = 0;
	int      rv;

	if ((rv = store_exec(s, "sealing stored secrets",
	                     "BEGIN IMMEDIATE")) != 0) {
		return (rv);
	}
	rv = seal_column(s, "mcp_clients",
	                 "SELECT rowid, id, config FROM mcp_clients",
	                 "UPDATE mcp_clients SET config = ?2 WHERE rowid = ?1",
	                 1, &count);
	for (int t = 0; rv == 0 && t < STORE_NTABLES; t++) {
		const tabledef *d  = &store_tables[t];
		size_t          at = 0;

		for (unsigned k = 0; k < d->nkey; k++) {
			at += (size_t)snprintf(keys + at, sizeof(keys) - at,
			                       "%s%s", k ? ", " : "",
			                       d->cols[k]);
		}
		for (int c = 0; rv == 0 && d->cols[c] != NULL; c++) {
			if ((d->sealed & (1u << c)) == 0) {
				continue;
			}
			snprintf(sel, sizeof(sel),
			         "SELECT rowid, %s, %s FROM %s", keys,
			         d->cols[c], d->name);
			snprintf(upd, sizeof(upd),
			         "UPDATE %s SET %s = ?2 WHERE rowid = ?1",
			         d->name, d->cols[c]);
			rv = seal_column(s, d->name, sel, upd, d->nkey,
			                 &count);
		}
	}
	if (rv == 0) {
		uint8_t *c;
		size_t   n;
		if ((rv = seal(&s->key, CHECK_AAD, CHECK_VALUE,
		               strlen(CHECK_VALUE), &c, &n)) == 0) {
			rv = meta_put(s, "seal_check", c, n);
			free(c);
		}
	}
	if (rv == 0) {
		rv = store_exec(s, "sealing stored secrets", "COMMIT");
	}
	if (rv == 0) {
		/* the plain pages leave the log at once */
		rv = store_exec(s, "sealing stored secrets",
		                "PRAGMA wal_checkpoint(TRUNCATE)");
	}
	if (rv != 0) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	}
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

	if ((rv = meta_get(s, "seal_salt", salt, sizeof(salt), &nsalt)) != 0 ||
	    (rv = meta_get(s, "seal_check", check, sizeof(check), &ncheck)) !=
	            0) {
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
		if (RAND_bytes(salt, sizeof(salt)) != 1 ||
		    meta_put(s, "seal_salt", salt, sizeof(salt)) != 0) {
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
		return (0);
	}
	return (readonly ? 0 : seal_all(s));
}
