/*
 * store.c - SQLite schema, migrations and statements (see store.h).
 */
#include "persist/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcpkeep.h"
#include "persist/seal.h"

/* How long a statement waits for another process's lock before it fails
 * (and the persister retries with backoff): short, so the owning actor
 * never blocks long. */
#define STORE_BUSY_MS 250

/* Migration i brings the schema from version i to i + 1. */
static const char *const migrations[] = {
        /* 0 -> 1 */
        "CREATE TABLE mcp_clients ("
        " id TEXT PRIMARY KEY,"
        " name TEXT NOT NULL UNIQUE,"
        " config TEXT NOT NULL,"
        " created_at INTEGER NOT NULL,"
        " updated_at INTEGER NOT NULL);"
        "CREATE TABLE mcp_tools ("
        " client_id TEXT PRIMARY KEY"
        "  REFERENCES mcp_clients(id) ON DELETE CASCADE,"
        " hash TEXT NOT NULL,"
        " tools TEXT NOT NULL,"
        " updated_at INTEGER NOT NULL);"
        "CREATE TABLE oauth_configs ("
        " id TEXT PRIMARY KEY,"
        " client_id TEXT REFERENCES mcp_clients(id) ON DELETE CASCADE,"
        " config TEXT NOT NULL,"
        " updated_at INTEGER NOT NULL);"
        "CREATE TABLE oauth_tokens ("
        " client_id TEXT NOT NULL,"
        " mode TEXT NOT NULL"
        "  CHECK (mode IN ('shared','admin','user','vk','session')),"
        " identity TEXT NOT NULL DEFAULT '',"
        " access_token BLOB NOT NULL,"
        " refresh_token BLOB,"
        " token_type TEXT,"
        " scopes TEXT,"
        " expires_at INTEGER,"
        " last_refreshed INTEGER,"
        " status TEXT NOT NULL CHECK (status IN ('active','needs_reauth')),"
        " updated_at INTEGER NOT NULL,"
        " PRIMARY KEY (client_id, mode, identity));"
        "CREATE TABLE oauth_flows ("
        " state TEXT PRIMARY KEY,"
        " client_id TEXT NOT NULL,"
        " mode TEXT NOT NULL,"
        " identity TEXT NOT NULL DEFAULT '',"
        " pkce_verifier BLOB NOT NULL,"
        " redirect_uri TEXT NOT NULL,"
        " status TEXT NOT NULL CHECK (status IN ('pending','claiming')),"
        " expires_at INTEGER NOT NULL,"
        " created_at INTEGER NOT NULL);"
        "CREATE TABLE header_credentials ("
        " client_id TEXT NOT NULL,"
        " mode TEXT NOT NULL,"
        " identity TEXT NOT NULL,"
        " headers BLOB NOT NULL,"
        " status TEXT NOT NULL CHECK (status IN ('active','needs_update')),"
        " updated_at INTEGER NOT NULL,"
        " PRIMARY KEY (client_id, mode, identity));"
        "CREATE TABLE header_flows ("
        " id TEXT PRIMARY KEY,"
        " client_id TEXT NOT NULL,"
        " mode TEXT NOT NULL,"
        " identity TEXT NOT NULL,"
        " status TEXT NOT NULL CHECK (status IN ('pending','claiming')),"
        " expires_at INTEGER NOT NULL,"
        " created_at INTEGER NOT NULL);",
        /* 1 -> 2 */
        "CREATE TABLE store_meta ("
        " key TEXT PRIMARY KEY,"
        " value BLOB NOT NULL);"
        "ALTER TABLE oauth_flows ADD COLUMN data TEXT;"
        "ALTER TABLE header_flows ADD COLUMN data TEXT;",
};
#define NMIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))
_Static_assert(NMIGRATIONS == STORE_VERSION, "one migration per version");

/* The credential tables: columns (the first nkey are the primary key),
 * the ones sealed at rest, and the timestamp the store keeps. */
#define NCOLS_MAX 12
typedef struct tabledef {
	const char *name;            /* SQL name */
	const char *cols[NCOLS_MAX]; /* NULL-terminated */
	unsigned    nkey;            /* leading key columns */
	unsigned    sealed;          /* bit i: cols[i] is sealed */
	const char *stamp;           /* set to now at every write */
	bool        stamp_on_insert; /* only when the row is created */
} tabledef;

static const tabledef tables[STORE_NTABLES] = {
        [STORE_OAUTH_CONFIGS]      = {"oauth_configs",
                                      {"id", "client_id", "config"},
                                      1,
                                      1u << 2,
                                      "updated_at",
                                      false},
        [STORE_OAUTH_TOKENS]       = {"oauth_tokens",
                                      {"client_id", "mode", "identity",
                                       "access_token", "refresh_token", "token_type",
                                       "scopes", "expires_at", "last_refreshed",
                                       "status"},
                                      3,
                                      1u << 3 | 1u << 4,
                                      "updated_at",
                                      false},
        [STORE_OAUTH_FLOWS]        = {"oauth_flows",
                                      {"state", "client_id", "mode", "identity",
                                       "pkce_verifier", "redirect_uri", "status",
                                       "expires_at", "data"},
                                      1,
                                      1u << 4,
                                      "created_at",
                                      true},
        [STORE_HEADER_CREDENTIALS] = {"header_credentials",
                                      {"client_id", "mode", "identity",
                                       "headers", "status"},
                                      3,
                                      1u << 3,
                                      "updated_at",
                                      false},
        [STORE_HEADER_FLOWS]       = {"header_flows",
                                      {"id", "client_id", "mode", "identity",
                                       "status", "expires_at", "data"},
                                      1,
                                      0,
                                      "created_at",
                                      true},
};

enum {
	ST_CLIENT_PUT,
	ST_CLIENT_DEL,
	ST_CLIENT_CONFIG,
	ST_TOOLS_HASH,
	ST_TOOLS_PUT,
	ST_CLIENTS_EACH,
	ST_META_GET,
	ST_META_PUT,
	ST_COUNT
};

static const char *const sql[ST_COUNT] = {
        [ST_CLIENT_PUT] =
                "INSERT INTO mcp_clients (id, name, config, "
                "created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4) "
                "ON CONFLICT (id) DO UPDATE SET name = ?2, "
                "config = ?3, updated_at = ?4",
        [ST_CLIENT_DEL]    = "DELETE FROM mcp_clients WHERE id = ?1",
        [ST_CLIENT_CONFIG] = "UPDATE mcp_clients SET config = ?2 "
                             "WHERE id = ?1",
        [ST_TOOLS_HASH]    = "SELECT hash FROM mcp_tools WHERE client_id = ?1",
        [ST_TOOLS_PUT]     = "INSERT INTO mcp_tools (client_id, hash, tools, "
                             "updated_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT "
                             "(client_id) DO UPDATE SET hash = ?2, tools = ?3, "
                             "updated_at = ?4",
        [ST_CLIENTS_EACH]  = "SELECT c.id, c.name, c.config, t.tools, t.hash "
                             "FROM mcp_clients c LEFT JOIN mcp_tools t "
                             "ON t.client_id = c.id ORDER BY c.name",
        [ST_META_GET]      = "SELECT value FROM store_meta WHERE key = ?1",
        [ST_META_PUT]      = "INSERT OR REPLACE INTO store_meta (key, value) "
                             "VALUES (?1, ?2)",
};

/* A table's statements, built from its tabledef at open. */
enum { RS_PUT, RS_DEL, RS_EACH, RS_DEL_CLIENT, RS_GET, RS_COUNT };

struct store {
	sqlite3      *db;                          /* the connection */
	sqlite3_stmt *st[ST_COUNT];                /* prepared statements */
	sqlite3_stmt *rs[STORE_NTABLES][RS_COUNT]; /* per credential table */
	char         *path;                        /* for messages */
	bool          keyed;                       /* key holds the seal key */
	bool          durable;                     /* in a FULL-sync tx */
	seal_key      key;                         /* when keyed */
	uint64_t      tool_writes;                 /* tool lists written */
	char          err[STORE_ERR_MAX];          /* the last error */
};

#define CHECK_VALUE "mcpkeep seal check"
#define CHECK_AAD                                                             \
	"store_meta\x1f"                                                      \
	"seal_check"

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
static int
fail_db(store *s, const char *what)
{
	return (fail(s, code_of(s), what));
}

static int failf(store *s, int rv, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static int
failf(store *s, int rv, const char *fmt, ...)
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
store_table_find(const char *name)
{
	for (int t = 0; t < STORE_NTABLES; t++) {
		if (strcmp(tables[t].name, name) == 0) {
			return (t);
		}
	}
	return (-1);
}

const char *
store_table_name(store_table t)
{
	return (tables[t].name);
}

int
store_version(store *s, int *version)
{
	sqlite3_stmt *q;
	int           rv = MK_ESYS;

	if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &q, NULL) ==
	    SQLITE_OK) {
		if (sqlite3_step(q) == SQLITE_ROW) {
			*version = sqlite3_column_int(q, 0);
			rv       = 0;
		}
		sqlite3_finalize(q);
	}
	return (rv != 0 ? fail_db(s, "reading the schema version") : 0);
}

static int
exec(store *s, const char *what, const char *stmt)
{
	if (sqlite3_exec(s->db, stmt, NULL, NULL, NULL) != SQLITE_OK) {
		return (fail_db(s, what));
	}
	return (0);
}

/* Applies migrations from the file's version up to upto. */
static int
migrate(store *s, int upto)
{
	int  v, rv;
	char set[64];

	if ((rv = store_version(s, &v)) != 0) {
		return (rv);
	}
	if (v > STORE_VERSION) {
		return (failf(s, MK_EINVAL,
		              "schema version %d is newer than this mcpkeep "
		              "supports (%d): refusing to open it",
		              v, STORE_VERSION));
	}
	for (; v < upto; v++) {
		snprintf(set, sizeof(set), "PRAGMA user_version = %d", v + 1);
		if ((rv = exec(s, "beginning a migration",
		               "BEGIN IMMEDIATE")) != 0 ||
		    (rv = exec(s, "migrating the schema", migrations[v])) !=
		            0 ||
		    (rv = exec(s, "recording the schema version", set)) != 0 ||
		    (rv = exec(s, "committing a migration", "COMMIT")) != 0) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			return (rv);
		}
	}
	return (0);
}

/* ---- sealing ------------------------------------------------------------ */

/* Binds text (sealed with aad when the store has a key) to q's slot i. */
static int
bind_secret(store *s, sqlite3_stmt *q, int i, const char *aad,
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
		return (failf(s, rv, "sealing a value failed"));
	}
	sqlite3_bind_blob(q, i, b, (int)n, free);
	return (0);
}

/* Reads column i of q as text, unsealing it: *out malloc'd (NULL for a
 * NULL column).  Returns 0, or MK_EPROTO (does not open) / MK_ENOMEM. */
static int
column_secret(store *s, sqlite3_stmt *q, int i, const char *aad, char **out)
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
		return (fail_db(s, "reading the seal settings"));
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
	return (rc == SQLITE_DONE ? 0
	                          : fail_db(s, "writing the seal settings"));
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
		rv = fail_db(s, "sealing stored secrets");
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
		rv = bind_secret(s, u, 2, aad, plain);
		free(plain);
		if (rv == 0) {
			rc = sqlite3_step(u);
			sqlite3_reset(u);
			rv = rc == SQLITE_DONE
			        ? 0
			        : fail_db(s, "sealing stored secrets");
			(*count)++;
		}
	}
	if (rv == 0 && rc != SQLITE_DONE) {
		rv = fail_db(s, "sealing stored secrets");
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

	if ((rv = exec(s, "sealing stored secrets", "BEGIN IMMEDIATE")) != 0) {
		return (rv);
	}
	rv = seal_column(s, "mcp_clients",
	                 "SELECT rowid, id, config FROM mcp_clients",
	                 "UPDATE mcp_clients SET config = ?2 WHERE rowid = ?1",
	                 1, &count);
	for (int t = 0; rv == 0 && t < STORE_NTABLES; t++) {
		const tabledef *d  = &tables[t];
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
		rv = exec(s, "sealing stored secrets", "COMMIT");
	}
	if (rv == 0) {
		/* the plain pages leave the log at once */
		rv = exec(s, "sealing stored secrets",
		          "PRAGMA wal_checkpoint(TRUNCATE)");
	}
	if (rv != 0) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	}
	return (rv);
}

/* Sets up the seal key at open (see the header). */
static int
key_setup(store *s, bool readonly, const char *secret)
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
		return (ncheck < 0 ? 0
		                   : failf(s, MK_EINVAL,
		                           "it holds sealed secrets: set its "
		                           "encryption key "
		                           "(MCPKEEP_ENCRYPTION_KEY)"));
	}
	if (nsalt != SEAL_SALT_LEN) {
		if (readonly) {
			return (0); /* never sealed: nothing to open */
		}
		if (RAND_bytes(salt, sizeof(salt)) != 1 ||
		    meta_put(s, "seal_salt", salt, sizeof(salt)) != 0) {
			return (failf(s, MK_ESYS, "cannot write a seal salt"));
		}
	}
	if (seal_key_from(secret, salt, sizeof(salt), &s->key) != 0) {
		return (failf(s, MK_EINVAL, "the encryption key is empty"));
	}
	s->keyed = true;
	if (ncheck >= 0) {
		if (unseal(&s->key, CHECK_AAD, check, (size_t)ncheck, &p,
		           &pn) != 0) {
			s->keyed = false;
			return (failf(s, MK_EINVAL,
			              "the encryption key does not match the "
			              "key its secrets were sealed with"));
		}
		free(p);
		return (0);
	}
	return (readonly ? 0 : seal_all(s));
}

/* ---- open and close ----------------------------------------------------- */

/* Builds and prepares a credential table's statements. */
static int
prepare_table(store *s, store_table t)
{
	const tabledef *d = &tables[t];
	char            put[2048], del[1024], each[1024], cols[512], vals[128];
	char            keys[256], set[768], where[256];
	size_t          nc = 0, nv = 0, nk = 0, ns = 0, nw = 0;
	unsigned        n;

	for (n = 0; d->cols[n] != NULL; n++) {
		nc += (size_t)snprintf(cols + nc, sizeof(cols) - nc, "%s%s",
		                       n ? ", " : "", d->cols[n]);
		nv += (size_t)snprintf(vals + nv, sizeof(vals) - nv, "%s?%u",
		                       n ? ", " : "", n + 1);
		if (n < d->nkey) {
			nk += (size_t)snprintf(keys + nk, sizeof(keys) - nk,
			                       "%s%s", n ? ", " : "",
			                       d->cols[n]);
			nw += (size_t)snprintf(where + nw, sizeof(where) - nw,
			                       "%s%s = ?%u", n ? " AND " : "",
			                       d->cols[n], n + 1);
		} else {
			ns += (size_t)snprintf(set + ns, sizeof(set) - ns,
			                       "%s%s = excluded.%s",
			                       ns ? ", " : "", d->cols[n],
			                       d->cols[n]);
		}
	}
	if (!d->stamp_on_insert) {
		ns += (size_t)snprintf(set + ns, sizeof(set) - ns,
		                       ", %s = excluded.%s", d->stamp,
		                       d->stamp);
	}
	snprintf(put, sizeof(put),
	         "INSERT INTO %s (%s, %s) VALUES (%s, ?%u) "
	         "ON CONFLICT (%s) DO UPDATE SET %s",
	         d->name, cols, d->stamp, vals, n + 1, keys, set);
	snprintf(del, sizeof(del), "DELETE FROM %s WHERE %s", d->name, where);
	snprintf(each, sizeof(each), "SELECT %s FROM %s ORDER BY rowid", cols,
	         d->name);
	const char *text[RS_COUNT] = {put, del, each, NULL};
	char        byclient[256];
	snprintf(byclient, sizeof(byclient),
	         "DELETE FROM %s WHERE client_id = ?1", d->name);
	text[RS_DEL_CLIENT] = byclient;
	char get[1536];
	snprintf(get, sizeof(get), "SELECT %s FROM %s WHERE %s", cols, d->name,
	         where);
	text[RS_GET] = get;
	for (int i = 0; i < RS_COUNT; i++) {
		if (sqlite3_prepare_v3(s->db, text[i], -1,
		                       SQLITE_PREPARE_PERSISTENT, &s->rs[t][i],
		                       NULL) != SQLITE_OK) {
			return (fail_db(s, "preparing statements"));
		}
	}
	return (0);
}

static int
prepare_all(store *s)
{
	int rv;

	for (int i = 0; i < ST_COUNT; i++) {
		if (sqlite3_prepare_v3(s->db, sql[i], -1,
		                       SQLITE_PREPARE_PERSISTENT, &s->st[i],
		                       NULL) != SQLITE_OK) {
			return (fail_db(s, "preparing statements"));
		}
	}
	for (int t = 0; t < STORE_NTABLES; t++) {
		if ((rv = prepare_table(s, (store_table)t)) != 0) {
			return (rv);
		}
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
		return (failf(s, MK_ESYS, "creating the file: %s",
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
		return (failf(s, MK_ESYS, "opening: the file is read-only"));
	}
	/* not a database (or corrupt) shows here, as a clear error */
	if (exec(s, "enabling foreign keys", "PRAGMA foreign_keys = ON") !=
	            0 ||
	    (mode == STORE_RW &&
	     (exec(s, "enabling WAL", "PRAGMA journal_mode = WAL") != 0 ||
	      /* a secret overwritten or deleted leaves no copy behind */
	      exec(s, "enabling secure delete", "PRAGMA secure_delete = ON") !=
	              0 ||
	      exec(s, "setting synchronous", "PRAGMA synchronous = NORMAL") !=
	              0))) {
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
	    (!readonly && (rv = migrate(s, STORE_VERSION)) != 0)) {
		goto out;
	}
	if ((rv = store_version(s, &v)) != 0) {
		goto out;
	}
	if (v != STORE_VERSION) {
		/* read-only handles cannot migrate */
		rv = failf(s, MK_EINVAL,
		           "schema version %d, this mcpkeep reads %d", v,
		           STORE_VERSION);
		goto out;
	}
	if ((rv = prepare_all(s)) != 0 ||
	    (rv = key_setup(s, readonly, secret)) != 0) {
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
		rv = migrate(s, version);
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
	    (rv = exec(s, "syncing", "PRAGMA synchronous = FULL")) != 0) {
		return (rv);
	}
	s->durable = durable;
	return (exec(s, "beginning a transaction", "BEGIN IMMEDIATE"));
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
	int rv = exec(s, "committing", "COMMIT");

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

/* ---- clients and tools ---------------------------------------------------
 */

/* Runs a prepared write statement to completion. */
static int
step_done(store *s, sqlite3_stmt *q, const char *what)
{
	int rc = sqlite3_step(q);

	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	/* a row the schema refuses will never be written: not retried */
	return (rc == SQLITE_DONE ? 0 : fail_db(s, what));
}

static void
client_aad(char *aad, size_t len, const char *id)
{
	snprintf(aad, len, "mcp_clients\x1f%s", id);
}

int
store_client_put(store *s, const char *id, const char *name,
                 const char *config_json)
{
	sqlite3_stmt *q = s->st[ST_CLIENT_PUT];
	char          aad[STORE_ERR_MAX];
	int           rv;

	client_aad(aad, sizeof(aad), id);
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, name, -1, SQLITE_STATIC);
	if ((rv = bind_secret(s, q, 3, aad, config_json)) != 0) {
		sqlite3_clear_bindings(q);
		return (rv);
	}
	sqlite3_bind_int64(q, 4, (sqlite3_int64)time(NULL));
	return (step_done(s, q, "writing a client"));
}

int
store_client_del(store *s, const char *id)
{
	sqlite3_stmt *q;
	int           rv;

	for (int t = 0; t < STORE_NTABLES; t++) {
		q = s->rs[t][RS_DEL_CLIENT];
		sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
		if ((rv = step_done(s, q,
		                    "deleting a client's credentials")) != 0) {
			return (rv);
		}
	}
	q = s->st[ST_CLIENT_DEL];
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	return (step_done(s, q, "deleting a client"));
}

int
store_tools_put(store *s, const char *client_id, const char *hash,
                const char *tools_json, bool *written)
{
	sqlite3_stmt *q = s->st[ST_TOOLS_HASH];
	int           rc, same;

	*written = false;
	sqlite3_bind_text(q, 1, client_id, -1, SQLITE_STATIC);
	rc   = sqlite3_step(q);
	same = rc == SQLITE_ROW &&
	        strcmp((const char *)sqlite3_column_text(q, 0), hash) == 0;
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		return (fail_db(s, "reading a tool-list hash"));
	}
	if (same) {
		return (0); /* unchanged: never written */
	}
	q = s->st[ST_TOOLS_PUT];
	sqlite3_bind_text(q, 1, client_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 3, tools_json, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 4, (sqlite3_int64)time(NULL));
	if ((rc = step_done(s, q, "writing a tool list")) == 0) {
		s->tool_writes++;
		*written = true;
	}
	return (rc);
}

int
store_clients_each(store *s, store_client_fn fn, void *arg, unsigned *skipped)
{
	sqlite3_stmt *q = s->st[ST_CLIENTS_EACH];
	int           rc, rv = 0;

	*skipped = 0;
	while (rv == 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *id   = (const char *)sqlite3_column_text(q, 0);
		const char *name = (const char *)sqlite3_column_text(q, 1);
		char        aad[STORE_ERR_MAX], *config;

		client_aad(aad, sizeof(aad), id);
		if ((rv = column_secret(s, q, 2, aad, &config)) != 0 ||
		    config == NULL) {
			failf(s, MK_EPROTO,
			      "client %s: its stored config does not open "
			      "with this key (tampered, or moved from another "
			      "row)",
			      name);
			(*skipped)++;
			rv = rv == MK_ENOMEM ? rv : 0;
			continue;
		}
		rv = fn(arg, id, name, config,
		        (const char *)sqlite3_column_text(q, 3),
		        (const char *)sqlite3_column_text(q, 4));
		free(config);
	}
	if (rv == 0 && rc != SQLITE_DONE) {
		rv = fail_db(s, "reading clients");
	}
	sqlite3_reset(q);
	return (rv);
}

/* ---- credential rows ------------------------------------------------------
 */

int
store_row_key(store_table t, json_t *row, char *buf, size_t len)
{
	const tabledef *d  = &tables[t];
	size_t          at = (size_t)snprintf(buf, len, "%s", d->name);

	for (unsigned k = 0; k < d->nkey; k++) {
		const char *v =
		        json_string_value(json_object_get(row, d->cols[k]));
		if (v == NULL) {
			return (MK_EINVAL);
		}
		at += (size_t)snprintf(buf + at, at < len ? len - at : 0,
		                       "\x1f%s", v);
	}
	return (at < len ? 0 : MK_ETOOBIG);
}

/* Index of column name in d, or -1. */
static int
col_index(const tabledef *d, const char *name)
{
	for (int c = 0; d->cols[c] != NULL; c++) {
		if (strcmp(d->cols[c], name) == 0) {
			return (c);
		}
	}
	return (-1);
}

int
store_row_put(store *s, store_table t, json_t *row)
{
	const tabledef *d = &tables[t];
	sqlite3_stmt   *q = s->rs[t][RS_PUT];
	const char     *k;
	json_t         *v;
	char            aad[STORE_ERR_MAX];
	int             c, rv;

	if ((rv = store_row_key(t, row, aad, sizeof(aad))) != 0) {
		return (failf(s, rv,
		              "%s: a key column is missing or not a "
		              "string",
		              d->name));
	}
	json_object_foreach(row, k, v)
	{
		if ((c = col_index(d, k)) < 0) {
			return (failf(s, MK_EINVAL, "%s has no column %s",
			              d->name, k));
		}
		if (json_is_string(v)) {
			if ((d->sealed & (1u << c)) != 0) {
				if ((rv = bind_secret(s, q, c + 1, aad,
				                      json_string_value(v))) !=
				    0) {
					sqlite3_clear_bindings(q);
					return (rv);
				}
			} else {
				sqlite3_bind_text(q, c + 1,
				                  json_string_value(v), -1,
				                  SQLITE_TRANSIENT);
			}
		} else if (json_is_integer(v)) {
			sqlite3_bind_int64(q, c + 1, json_integer_value(v));
		} else if (!json_is_null(v)) {
			sqlite3_clear_bindings(q);
			return (failf(
			        s, MK_EINVAL,
			        "%s.%s: expected a string, an integer or "
			        "null",
			        d->name, k));
		}
	}
	for (c = 0; d->cols[c] != NULL; c++) {
	}
	sqlite3_bind_int64(q, c + 1, (sqlite3_int64)time(NULL));
	return (step_done(s, q, "writing a credential row"));
}

/* Binds t's key columns of key to q's first slots. */
static int
bind_key(store *s, store_table t, sqlite3_stmt *q, json_t *key)
{
	const tabledef *d = &tables[t];

	for (unsigned k = 0; k < d->nkey; k++) {
		const char *v =
		        json_string_value(json_object_get(key, d->cols[k]));
		if (v == NULL) {
			sqlite3_clear_bindings(q);
			return (failf(s, MK_EINVAL,
			              "%s: key column %s missing", d->name,
			              d->cols[k]));
		}
		sqlite3_bind_text(q, (int)k + 1, v, -1, SQLITE_TRANSIENT);
	}
	return (0);
}

int
store_row_del(store *s, store_table t, json_t *key)
{
	sqlite3_stmt *q = s->rs[t][RS_DEL];
	int           rv;

	if ((rv = bind_key(s, t, q, key)) != 0) {
		return (rv);
	}
	return (step_done(s, q, "deleting a credential row"));
}

/* Reads the current row of a table's RS_EACH into a new object; NULL
 * with *bad set when a sealed value does not open. */
static json_t *
read_row(store *s, store_table t, sqlite3_stmt *q, int *bad)
{
	const tabledef *d   = &tables[t];
	json_t         *row = json_object();
	char            aad[STORE_ERR_MAX];
	size_t          at = (size_t)snprintf(aad, sizeof(aad), "%s", d->name);

	*bad = 0;
	for (unsigned k = 0; k < d->nkey && at < sizeof(aad); k++) {
		at += (size_t)snprintf(
		        aad + at, sizeof(aad) - at, "\x1f%s",
		        (const char *)sqlite3_column_text(q, (int)k));
	}
	for (int c = 0; row != NULL && d->cols[c] != NULL; c++) {
		json_t *v;
		char   *text;

		switch (sqlite3_column_type(q, c)) {
		case SQLITE_NULL:
			v = json_null();
			break;
		case SQLITE_INTEGER:
			v = json_integer(sqlite3_column_int64(q, c));
			break;
		default:
			if ((d->sealed & (1u << c)) != 0) {
				if (column_secret(s, q, c, aad, &text) != 0) {
					failf(s, MK_EPROTO,
					      "%s row %s: %s does not open "
					      "with this key (tampered, or "
					      "moved "
					      "from another row)",
					      d->name,
					      (const char *)
					              sqlite3_column_text(q,
					                                  0),
					      d->cols[c]);
					*bad = 1;
					json_decref(row);
					return (NULL);
				}
				v = json_string(text != NULL ? text : "");
				free(text);
			} else {
				v = json_string(
				        (const char *)sqlite3_column_text(q,
				                                          c));
			}
		}
		json_object_set_new(row, d->cols[c], v);
	}
	return (row);
}

int
store_row_get(store *s, store_table t, json_t *key, json_t **row)
{
	sqlite3_stmt *q = s->rs[t][RS_GET];
	int           rc, bad, rv;

	*row = NULL;
	if ((rv = bind_key(s, t, q, key)) != 0) {
		return (rv);
	}
	if ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		if ((*row = read_row(s, t, q, &bad)) == NULL) {
			rv = bad ? MK_EPROTO : MK_ENOMEM;
		}
	} else if (rc != SQLITE_DONE) {
		rv = fail_db(s, "reading a credential row");
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return (rv);
}

int
store_rows_each(store *s, store_table t, store_row_fn fn, void *arg,
                unsigned *skipped)
{
	sqlite3_stmt *q = s->rs[t][RS_EACH];
	int           rc, rv = 0, bad;

	*skipped = 0;
	while (rv == 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		json_t *row = read_row(s, t, q, &bad);
		if (row == NULL) {
			*skipped += (unsigned)bad;
			rv = bad ? 0 : MK_ENOMEM;
			continue;
		}
		rv = fn(arg, row);
		json_decref(row);
	}
	if (rv == 0 && rc != SQLITE_DONE) {
		rv = fail_db(s, "reading credential rows");
	}
	sqlite3_reset(q);
	return (rv);
}
