/*
 * sqlite.c - the SQLite backend's connection: opening the file with the
 * pragmas every handle needs, errors, transactions, the seal settings
 * and sealing a store in place (schema.c and rows.c have the rest).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcpkeep.h"
#include "persist/store_impl.h"

/* How long a statement waits for another process's lock before it fails
 * (and the persister retries with backoff): short, so the owning actor
 * never blocks long. */
#define STORE_BUSY_MS 250

/* The MK_ code for the connection's last SQLite error. */
static int
code_of(const store *s)
{
	int rc = s->db != NULL ? sqlite3_errcode(s->db) & 0xff
	                       : SQLITE_CANTOPEN;

	switch (rc) {
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
	case SQLITE_TOOBIG:
		return (MK_EINVAL); /* the row itself: permanent */
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return (MK_EPROTO);
	case SQLITE_NOMEM:
		return (MK_ENOMEM);
	default:
		return (MK_ESYS);
	}
}

int
sq_fail_db(store *s, const char *what)
{
	return (store_failf(s, code_of(s), "%s: %s", what,
	                    s->db != NULL ? sqlite3_errmsg(s->db)
	                                  : "cannot open"));
}

int
sq_exec(store *s, const char *what, const char *stmt)
{
	if (sqlite3_exec(s->db, stmt, NULL, NULL, NULL) != SQLITE_OK) {
		return (sq_fail_db(s, what));
	}
	return (0);
}

/* A new store file is made 0600 before SQLite opens it: it holds
 * credentials (sealed or not), and SQLite gives its -wal and -shm files
 * the database file's mode.  An existing file keeps its mode. */
static int
create_private(store *s)
{
	int fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd >= 0) {
		close(fd);
	} else if (errno != EEXIST) {
		return (store_failf(s, MK_ESYS, "creating the file: %s",
		                    strerror(errno)));
	}
	return (0);
}

int
sq_connect(store *s, store_mode mode, bool create)
{
	int   flags = mode == STORE_RW ? SQLITE_OPEN_READWRITE
	                               : SQLITE_OPEN_READONLY;
	char  uri[PATH_MAX * 3 + 32];
	char *at = uri;

	if (create) {
		int rv;
		if ((rv = create_private(s)) != 0) {
			return (rv);
		}
		flags |= SQLITE_OPEN_CREATE;
	}
	flags |= SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI; /* one thread */
	/* a URI, so no character of the path can read as a parameter */
	at += snprintf(uri, sizeof(uri), "file:");
	for (const char *p = s->path; *p != '\0' && at < uri + PATH_MAX * 3;
	     p++) {
		if (strchr("?#%", *p) != NULL) {
			at += sprintf(at, "%%%02X", (unsigned char)*p);
		} else {
			*at++ = *p;
		}
	}
	snprintf(at, sizeof(uri) - (size_t)(at - uri), "%s",
	         mode == STORE_SNAPSHOT ? "?immutable=1" : "");
	if (sqlite3_open_v2(uri, &s->db, flags, NULL) != SQLITE_OK) {
		return (store_failf(s, MK_ESYS, "opening: %s",
		                    s->db != NULL ? sqlite3_errmsg(s->db)
		                                  : "cannot open"));
	}
	sqlite3_busy_timeout(s->db, STORE_BUSY_MS);
	sqlite3_extended_result_codes(s->db, 1);
	/* a read-only file opens read-only without a word: say so */
	if (mode == STORE_RW && sqlite3_db_readonly(s->db, "main") == 1) {
		return (store_failf(s, MK_ESYS,
		                    "opening: the file is read-only"));
	}
	/* not a database (or corrupt) shows here, as a clear error */
	if (sq_exec(s, "enabling foreign keys", "PRAGMA foreign_keys = ON") !=
	            0 ||
	    (mode == STORE_RW &&
	     (sq_exec(s, "enabling WAL", "PRAGMA journal_mode = WAL") != 0 ||
	      /* a secret overwritten or deleted leaves no copy behind */
	      sq_exec(s, "enabling secure delete",
	              "PRAGMA secure_delete = ON") != 0 ||
	      sq_exec(s, "setting synchronous",
	              "PRAGMA synchronous = NORMAL") != 0))) {
		return (code_of(s));
	}
	return (0);
}

static int
sq_open(store *s, store_mode mode)
{
	bool readonly = mode != STORE_RW;
	int  rv, v;

	if ((rv = sq_connect(s, mode, !readonly)) != 0 ||
	    (!readonly && (rv = sq_migrate(s, STORE_VERSION)) != 0) ||
	    (rv = sq_version(s, &v)) != 0) {
		return (rv);
	}
	if (v != STORE_VERSION) {
		/* read-only handles cannot migrate */
		return (store_failf(s, MK_EINVAL,
		                    "schema version %d, this mcpkeep reads %d",
		                    v, STORE_VERSION));
	}
	return (sq_prepare_all(s));
}

static void
sq_close(store *s)
{
	for (int i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(s->st[i]);
	}
	for (int t = 0; t < STORE_NTABLES; t++) {
		for (int i = 0; i < RS_COUNT; i++) {
			sqlite3_finalize(s->rs[t][i]);
		}
	}
	sqlite3_close(s->db);
}

int
store_create_version(const char *path, int version, char *err, size_t errlen)
{
	store *s;
	int    rv;

	if (version < 1 || version > STORE_VERSION) {
		snprintf(err, errlen, "no schema version %d", version);
		return (MK_EINVAL);
	}
	if ((s = store_new(path, &store_sqlite_ops, err, errlen)) == NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = sq_connect(s, STORE_RW, true)) == 0) {
		rv = sq_migrate(s, version);
	}
	if (rv != 0) {
		snprintf(err, errlen, "%s", s->err);
	}
	store_close(&s);
	return (rv);
}

/* ---- transactions ------------------------------------------------------- */

static int
sq_begin(store *s, bool durable)
{
	int rv;

	if (durable &&
	    (rv = sq_exec(s, "syncing", "PRAGMA synchronous = FULL")) != 0) {
		return (rv);
	}
	s->durable = durable;
	return (sq_exec(s, "beginning a transaction", "BEGIN IMMEDIATE"));
}

static void
end_durable(store *s)
{
	if (s->durable) {
		s->durable = false;
		sqlite3_exec(s->db, "PRAGMA synchronous = NORMAL", NULL, NULL,
		             NULL);
	}
}

static int
sq_commit(store *s)
{
	int rv = sq_exec(s, "committing", "COMMIT");

	if (rv == 0) {
		end_durable(s);
	}
	return (rv);
}

static void
sq_rollback(store *s)
{
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	end_durable(s);
}

/* ---- secrets ------------------------------------------------------------ */

int
sq_bind_secret(store *s, sqlite3_stmt *q, int i, const char *aad,
               const char *text)
{
	uint8_t *b;
	size_t   n;
	int      rv;

	if (!s->keyed) {
		sqlite3_bind_text(q, i, text, -1, SQLITE_TRANSIENT);
		return (0);
	}
	if ((rv = store_seal(s, aad, text, &b, &n)) != 0) {
		return (rv);
	}
	sqlite3_bind_blob(q, i, b, (int)n, free);
	return (0);
}

int
sq_column_secret(store *s, sqlite3_stmt *q, int i, const char *aad, char **out)
{
	*out = NULL;
	if (sqlite3_column_type(q, i) == SQLITE_NULL) {
		return (0);
	}
	return (store_open_value(s, sqlite3_column_blob(q, i),
	                         (size_t)sqlite3_column_bytes(q, i), aad,
	                         out));
}

static int
sq_meta_get(store *s, const char *key, uint8_t *buf, size_t len, long *n)
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
		return (sq_fail_db(s, "reading the seal settings"));
	}
	return (0);
}

static int
sq_meta_put(store *s, const char *key, const void *v, size_t n)
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
	                : sq_fail_db(s, "writing the seal settings"));
}

/* Seals, in place, every plain value of one column: select gives rowid,
 * the key columns, then the value; update sets ?2 where rowid = ?1. */
static int
seal_column(store *s, const char *table, const char *select,
            const char *update, unsigned nkey)
{
	sqlite3_stmt *q = NULL, *u = NULL;
	int           rc, rv       = 0;

	if (sqlite3_prepare_v2(s->db, select, -1, &q, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, update, -1, &u, NULL) != SQLITE_OK) {
		rv = sq_fail_db(s, "sealing stored secrets");
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
		rv = sq_bind_secret(s, u, 2, aad, plain);
		free(plain);
		if (rv == 0) {
			rc = sqlite3_step(u);
			sqlite3_reset(u);
			rv = rc == SQLITE_DONE
			        ? 0
			        : sq_fail_db(s, "sealing stored secrets");
		}
	}
	if (rv == 0 && rc != SQLITE_DONE) {
		rv = sq_fail_db(s, "sealing stored secrets");
	}
out:
	sqlite3_finalize(q);
	sqlite3_finalize(u);
	return (rv);
}

static int
sq_seal_all(store *s, const uint8_t *check, size_t n)
{
	char sel[512], upd[256], keys[256];
	int  rv;

	if ((rv = sq_exec(s, "sealing stored secrets", "BEGIN IMMEDIATE")) !=
	    0) {
		return (rv);
	}
	rv = seal_column(
	        s, "mcp_clients", "SELECT rowid, id, config FROM mcp_clients",
	        "UPDATE mcp_clients SET config = ?2 WHERE rowid = ?1", 1);
	for (int t = 0; rv == 0 && t < STORE_NTABLES; t++) {
		const tabledef *d = &store_tables[t];

		store_key_list(d, keys, sizeof(keys));
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
			rv = seal_column(s, d->name, sel, upd, d->nkey);
		}
	}
	if (rv == 0 && (rv = sq_meta_put(s, "seal_check", check, n)) == 0 &&
	    (rv = sq_exec(s, "sealing stored secrets", "COMMIT")) == 0) {
		/* the plain pages leave the log at once */
		rv = sq_exec(s, "sealing stored secrets",
		             "PRAGMA wal_checkpoint(TRUNCATE)");
	}
	if (rv != 0) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	}
	return (rv);
}

const store_ops store_sqlite_ops = {
        .open          = sq_open,
        .close         = sq_close,
        .version       = sq_version,
        .begin         = sq_begin,
        .commit        = sq_commit,
        .rollback      = sq_rollback,
        .client_put    = sq_client_put,
        .client_del    = sq_client_del,
        .tools_put     = sq_tools_put,
        .tool_versions = sq_tool_versions,
        .clients_each  = sq_clients_each,
        .row_put       = sq_row_put,
        .row_del       = sq_row_del,
        .row_get       = sq_row_get,
        .rows_each     = sq_rows_each,
        .meta_get      = sq_meta_get,
        .meta_put      = sq_meta_put,
        .seal_all      = sq_seal_all,
};
