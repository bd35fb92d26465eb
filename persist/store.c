/*
 * store.c - SQLite schema, migrations and statements (see store.h).
 */
#include "persist/store.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcpkeep.h"

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
};
#define NMIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))
_Static_assert(NMIGRATIONS == STORE_VERSION, "one migration per version");

enum {
	ST_CLIENT_PUT,
	ST_CLIENT_DEL,
	ST_TOOLS_HASH,
	ST_TOOLS_PUT,
	ST_CLIENTS_EACH,
	ST_COUNT
};

static const char *const sql[ST_COUNT] = {
        [ST_CLIENT_PUT] =
                "INSERT INTO mcp_clients (id, name, config, "
                "created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4) "
                "ON CONFLICT (id) DO UPDATE SET name = ?2, "
                "config = ?3, updated_at = ?4",
        [ST_CLIENT_DEL]   = "DELETE FROM mcp_clients WHERE id = ?1",
        [ST_TOOLS_HASH]   = "SELECT hash FROM mcp_tools WHERE client_id = ?1",
        [ST_TOOLS_PUT]    = "INSERT INTO mcp_tools (client_id, hash, tools, "
                            "updated_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT "
                            "(client_id) DO UPDATE SET hash = ?2, tools = ?3, "
                            "updated_at = ?4",
        [ST_CLIENTS_EACH] = "SELECT c.id, c.name, c.config, t.tools, t.hash "
                            "FROM mcp_clients c LEFT JOIN mcp_tools t "
                            "ON t.client_id = c.id ORDER BY c.name",
};

struct store {
	sqlite3      *db;                 /* the connection */
	sqlite3_stmt *st[ST_COUNT];       /* prepared statements */
	char         *path;               /* for messages */
	uint64_t      tool_writes;        /* tool lists written since open */
	char          err[STORE_ERR_MAX]; /* the last error */
};

static int
fail(store *s, int rv, const char *what)
{
	snprintf(s->err, sizeof(s->err), "store %s: %s: %s", s->path, what,
	         s->db != NULL ? sqlite3_errmsg(s->db) : "cannot open");
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
	return (rv != 0 ? fail(s, rv, "reading the schema version") : 0);
}

static int
exec(store *s, const char *what, const char *stmt)
{
	if (sqlite3_exec(s->db, stmt, NULL, NULL, NULL) != SQLITE_OK) {
		return (fail(s, MK_ESYS, what));
	}
	return (0);
}

static int
migrate(store *s)
{
	int  v, rv;
	char set[64];

	if ((rv = store_version(s, &v)) != 0) {
		return (rv);
	}
	if (v > STORE_VERSION) {
		snprintf(s->err, sizeof(s->err),
		         "store %s: schema version %d is newer than this "
		         "mcpkeep "
		         "supports (%d): refusing to open it",
		         s->path, v, STORE_VERSION);
		return (MK_EINVAL);
	}
	for (; v < STORE_VERSION; v++) {
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

int
store_open(store **sp, const char *path, bool readonly, char *err,
           size_t errlen)
{
	store *s;
	int    flags = readonly ? SQLITE_OPEN_READONLY
	                        : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	int    rv;

	*sp = NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->path = strdup(path)) == NULL) {
		free(s);
		snprintf(err, errlen, "out of memory");
		return (MK_ENOMEM);
	}
	flags |= SQLITE_OPEN_NOMUTEX; /* one thread per handle */
	if (sqlite3_open_v2(path, &s->db, flags, NULL) != SQLITE_OK) {
		rv = fail(s, MK_ESYS, "opening");
		goto out;
	}
	sqlite3_busy_timeout(s->db, 5000);
	sqlite3_extended_result_codes(s->db, 1);
	/* not a database (or corrupt) shows here, as a clear error */
	if ((rv = exec(s, "enabling foreign keys",
	               "PRAGMA foreign_keys = ON")) != 0 ||
	    (!readonly &&
	     ((rv = exec(s, "enabling WAL", "PRAGMA journal_mode = WAL")) !=
	              0 ||
	      (rv = exec(s, "setting synchronous",
	                 "PRAGMA synchronous = NORMAL")) != 0)) ||
	    (rv = (readonly ? 0 : migrate(s))) != 0) {
		if (rv == MK_ESYS && s->db != NULL &&
		    (sqlite3_errcode(s->db) == SQLITE_NOTADB ||
		     sqlite3_errcode(s->db) == SQLITE_CORRUPT)) {
			rv = MK_EINVAL;
		}
		goto out;
	}
	if (readonly) {
		int v;
		if ((rv = store_version(s, &v)) != 0) {
			goto out;
		}
		if (v != STORE_VERSION) {
			snprintf(s->err, sizeof(s->err),
			         "store %s: schema version %d, this mcpkeep "
			         "reads %d",
			         path, v, STORE_VERSION);
			rv = MK_EINVAL;
			goto out;
		}
	}
	for (int i = 0; i < ST_COUNT; i++) {
		if (sqlite3_prepare_v3(s->db, sql[i], -1,
		                       SQLITE_PREPARE_PERSISTENT, &s->st[i],
		                       NULL) != SQLITE_OK) {
			rv = fail(s, MK_ESYS, "preparing statements");
			goto out;
		}
	}
	*sp = s;
	return (0);
out:
	snprintf(err, errlen, "%s", s->err);
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
	sqlite3_close(s->db);
	free(s->path);
	free(s);
}

int
store_begin(store *s)
{
	return (exec(s, "beginning a transaction", "BEGIN IMMEDIATE"));
}

int
store_commit(store *s)
{
	return (exec(s, "committing", "COMMIT"));
}

void
store_rollback(store *s)
{
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Runs a prepared write statement to completion. */
static int
step_done(store *s, sqlite3_stmt *q, const char *what)
{
	int rc = sqlite3_step(q);

	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc == SQLITE_DONE) {
		return (0);
	}
	/* a row the schema refuses will never be written: not retried */
	return (fail(s, (rc & 0xff) == SQLITE_CONSTRAINT ? MK_EINVAL : MK_ESYS,
	             what));
}

int
store_client_put(store *s, const char *id, const char *name,
                 const char *config_json)
{
	sqlite3_stmt *q = s->st[ST_CLIENT_PUT];

	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 3, config_json, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 4, (sqlite3_int64)time(NULL));
	return (step_done(s, q, "writing a client"));
}

int
store_client_del(store *s, const char *id)
{
	sqlite3_stmt *q = s->st[ST_CLIENT_DEL];

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
		return (fail(s, MK_ESYS, "reading a tool-list hash"));
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
store_clients_each(store *s, store_client_fn fn, void *arg)
{
	sqlite3_stmt *q = s->st[ST_CLIENTS_EACH];
	int           rc, rv = 0;

	while (rv == 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		rv = fn(arg, (const char *)sqlite3_column_text(q, 0),
		        (const char *)sqlite3_column_text(q, 1),
		        (const char *)sqlite3_column_text(q, 2),
		        (const char *)sqlite3_column_text(q, 3),
		        (const char *)sqlite3_column_text(q, 4));
	}
	if (rv == 0 && rc != SQLITE_DONE) {
		rv = fail(s, MK_ESYS, "reading clients");
	}
	sqlite3_reset(q);
	return (rv);
}
