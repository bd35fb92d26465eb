/*
 * store.c - the store's handle: errors, open and close, transactions
 * (see store.h; schema.c, rekey.c and rows.c have the rest).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <stdarg.h>
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

static int
fail(store *s, int rv, const char *what)
{
	snprintf(s->err, sizeof(s->err), "store %s: %s: %s", s->path, what,
	         s->db != NULL ? sqlite3_errmsg(s->db) : "cannot open");
	return (rv);
}

/* fail with the code of SQLite's own error. */
int
store_fail_db(store *s, const char *what)
{
	return (fail(s, code_of(s), what));
}

int
store_failf(store *s, int rv, const char *fmt, ...)
{
	va_list ap;
	int     n = snprintf(s->err, sizeof(s->err), "store %s: ", s->path);

	va_start(ap, fmt);
	vsnprintf(s->err + n, sizeof(s->err) - (size_t)n, fmt, ap);
	va_end(ap);
	return (rv);
}

const char *
store_error(const store *s)
{
	return (s->err);
}

uint64_t
store_tool_writes(const store *s)
{
	return (s->tool_writes);
}

bool
store_sealed(const store *s)
{
	return (s->keyed);
}

int
store_exec(store *s, const char *what, const char *stmt)
{
	if (sqlite3_exec(s->db, stmt, NULL, NULL, NULL) != SQLITE_OK) {
		return (store_fail_db(s, what));
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

/* Opens the connection with the pragmas every handle needs. */
static int
db_connect(store *s, store_mode mode, bool create)
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
		return (fail(s, MK_ESYS, "opening"));
	}
	sqlite3_busy_timeout(s->db, STORE_BUSY_MS);
	sqlite3_extended_result_codes(s->db, 1);
	/* a read-only file opens read-only without a word: say so */
	if (mode == STORE_RW && sqlite3_db_readonly(s->db, "main") == 1) {
		return (store_failf(s, MK_ESYS,
		                    "opening: the file is read-only"));
	}
	/* not a database (or corrupt) shows here, as a clear error */
	if (store_exec(s, "enabling foreign keys",
	               "PRAGMA foreign_keys = ON") != 0 ||
	    (mode == STORE_RW &&
	     (store_exec(s, "enabling WAL", "PRAGMA journal_mode = WAL") !=
	              0 ||
	      /* a secret overwritten or deleted leaves no copy behind */
	      store_exec(s, "enabling secure delete",
	                 "PRAGMA secure_delete = ON") != 0 ||
	      store_exec(s, "setting synchronous",
	                 "PRAGMA synchronous = NORMAL") != 0))) {
		return (code_of(s));
	}
	return (0);
}

static store *
store_new(const char *path, char *err, size_t errlen)
{
	store *s;

	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->path = strdup(path)) == NULL) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return (NULL);
	}
	return (s);
}

int
store_open(store **sp, const char *path, store_mode mode, const char *secret,
           char *err, size_t errlen)
{
	bool   readonly = mode != STORE_RW;
	store *s;
	int    rv, v;

	*sp = NULL;
	if ((s = store_new(path, err, errlen)) == NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = db_connect(s, mode, !readonly)) != 0 ||
	    (!readonly && (rv = store_migrate(s, STORE_VERSION)) != 0)) {
		goto out;
	}
	if ((rv = store_version(s, &v)) != 0) {
		goto out;
	}
	if (v != STORE_VERSION) {
		/* read-only handles cannot migrate */
		rv = store_failf(s, MK_EINVAL,
		                 "schema version %d, this mcpkeep reads %d", v,
		                 STORE_VERSION);
		goto out;
	}
	if ((rv = store_prepare_all(s)) != 0 ||
	    (rv = store_key_setup(s, readonly, secret)) != 0) {
		goto out;
	}
	*sp = s;
	return (0);
out:
	snprintf(err, errlen, "%s", s->err);
	store_close(&s);
	return (rv);
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
	if ((s = store_new(path, err, errlen)) == NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = db_connect(s, STORE_RW, true)) == 0) {
		rv = store_migrate(s, version);
	}
	if (rv != 0) {
		snprintf(err, errlen, "%s", s->err);
	}
	store_close(&s);
	return (rv);
}

void
store_close(store **sp)
{
	store *s;

	if (sp == NULL || (s = *sp) == NULL) {
		return;
	}
	*sp = NULL;
	for (int i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(s->st[i]);
	}
	for (int t = 0; t < STORE_NTABLES; t++) {
		for (int i = 0; i < RS_COUNT; i++) {
			sqlite3_finalize(s->rs[t][i]);
		}
	}
	sqlite3_close(s->db);
	OPENSSL_cleanse(&s->key, sizeof(s->key));
	free(s->path);
	free(s);
}

/* ---- transactions --------------------------------------------------------
 */

int
store_begin(store *s, bool durable)
{
	int rv;

	if (durable &&
	    (rv = store_exec(s, "syncing", "PRAGMA synchronous = FULL")) !=
	            0) {
		return (rv);
	}
	s->durable = durable;
	return (store_exec(s, "beginning a transaction", "BEGIN IMMEDIATE"));
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

int
store_commit(store *s)
{
	int rv = store_exec(s, "committing", "COMMIT");

	if (rv == 0) {
		end_durable(s);
	}
	return (rv);
}

void
store_rollback(store *s)
{
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	end_durable(s);
}
