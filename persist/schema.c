/*
 * schema.c - the SQLite schema: its migrations, and the statements, the
 * credential tables' built from their definitions (tables.c).
 */
#include <stdio.h>
#include <string.h>

#include "mcpkeep.h"
#include "persist/ddl.h"
#include "persist/store_impl.h"

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
        " PRIMARY KEY (client_id, mode, identity));" DDL_OAUTH_FLOWS
        " pkce_verifier BLOB NOT NULL,"
        " redirect_uri TEXT NOT NULL," DDL_FLOW_STATUS
        " expires_at INTEGER NOT NULL,"
        " created_at INTEGER NOT NULL);"
        "CREATE TABLE header_credentials (" DDL_CALLER
        " headers BLOB NOT NULL,"
        " status TEXT NOT NULL CHECK (status IN ('active','needs_update')),"
        " updated_at INTEGER NOT NULL,"
        " PRIMARY KEY (client_id, mode, identity));"
        "CREATE TABLE header_flows ("
        " id TEXT PRIMARY KEY," DDL_CALLER DDL_FLOW_STATUS
        " expires_at INTEGER NOT NULL,"
        " created_at INTEGER NOT NULL);",
        /* 1 -> 2 */
        "CREATE TABLE store_meta ("
        " key TEXT PRIMARY KEY,"
        " value BLOB NOT NULL);"
        "ALTER TABLE oauth_flows ADD COLUMN data TEXT;"
        "ALTER TABLE header_flows ADD COLUMN data TEXT;",
        /* 2 -> 3 */
        "ALTER TABLE mcp_tools ADD COLUMN versions TEXT NOT NULL "
        "DEFAULT '[]';",
        /* 3 -> 4 */
        "CREATE TABLE tool_approvals ("
        " client_id TEXT PRIMARY KEY,"
        " digest BLOB NOT NULL,"
        " tools BLOB NOT NULL,"
        " rejected BLOB,"
        " updated_at INTEGER NOT NULL);",
};
#define NMIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))
_Static_assert(NMIGRATIONS == STORE_VERSION, "one migration per version");

static const char *const sql[ST_COUNT] = {
        [ST_CLIENT_PUT] =
                "INSERT INTO mcp_clients (id, name, config, "
                "created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4) "
                "ON CONFLICT (id) DO UPDATE SET name = ?2, "
                "config = ?3, updated_at = ?4",
        [ST_CLIENT_DEL]    = "DELETE FROM mcp_clients WHERE id = ?1",
        [ST_CLIENT_CONFIG] = "UPDATE mcp_clients SET config = ?2 "
                             "WHERE id = ?1",
        [ST_TOOLS_HASH]    = "SELECT hash, versions FROM mcp_tools "
                             "WHERE client_id = ?1",
        [ST_TOOLS_PUT]     = "INSERT INTO mcp_tools (client_id, hash, tools, "
                             "updated_at, versions) VALUES (?1, ?2, ?3, ?4, ?5) "
                             "ON CONFLICT (client_id) DO UPDATE SET hash = ?2, "
                             "tools = ?3, updated_at = ?4, versions = ?5",
        [ST_CLIENTS_EACH]  = "SELECT c.id, c.name, c.config, t.tools, t.hash "
                             "FROM mcp_clients c LEFT JOIN mcp_tools t "
                             "ON t.client_id = c.id ORDER BY c.name",
        [ST_META_GET]      = "SELECT value FROM store_meta WHERE key = ?1",
        [ST_META_PUT]      = "INSERT OR IGNORE INTO store_meta (key, value) "
                             "VALUES (?1, ?2)",
};

int
sq_version(store *s, int *version)
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
	return (rv != 0 ? sq_fail_db(s, "reading the schema version") : 0);
}

int
sq_migrate(store *s, int upto)
{
	int  v, rv;
	char set[64];

	if ((rv = sq_version(s, &v)) != 0) {
		return (rv);
	}
	if (v > STORE_VERSION) {
		return (store_failf(
		        s, MK_EINVAL,
		        "schema version %d is newer than this mcpkeep "
		        "supports (%d): refusing to open it",
		        v, STORE_VERSION));
	}
	for (; v < upto; v++) {
		snprintf(set, sizeof(set), "PRAGMA user_version = %d", v + 1);
		if ((rv = sq_exec(s, "beginning a migration",
		                  "BEGIN IMMEDIATE")) != 0 ||
		    (rv = sq_exec(s, "migrating the schema", migrations[v])) !=
		            0 ||
		    (rv = sq_exec(s, "recording the schema version", set)) !=
		            0 ||
		    (rv = sq_exec(s, "committing a migration", "COMMIT")) !=
		            0) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			return (rv);
		}
	}
	return (0);
}

/* Builds and prepares a credential table's statements. */
static int
prepare_table(store *s, store_table t)
{
	const tabledef *d = &store_tables[t];
	char            put[2048], del[1024], each[1024];
	store_sql       q;

	store_sql_lists(d, '?', &q);
	snprintf(put, sizeof(put),
	         "INSERT INTO %s (%s, %s) VALUES (%s, ?%u) "
	         "ON CONFLICT (%s) DO UPDATE SET %s",
	         d->name, q.cols, d->stamp, q.vals, q.n + 1, q.keys, q.set);
	snprintf(del, sizeof(del), "DELETE FROM %s WHERE %s", d->name,
	         q.where);
	snprintf(each, sizeof(each), "SELECT %s FROM %s ORDER BY rowid",
	         q.cols, d->name);
	const char *text[RS_COUNT] = {put, del, each, NULL};
	char        byclient[256];
	snprintf(byclient, sizeof(byclient),
	         "DELETE FROM %s WHERE client_id = ?1", d->name);
	text[RS_DEL_CLIENT] = byclient;
	char get[1536];
	snprintf(get, sizeof(get), "SELECT %s FROM %s WHERE %s", q.cols,
	         d->name, q.where);
	text[RS_GET] = get;
	for (int i = 0; i < RS_COUNT; i++) {
		if (sqlite3_prepare_v3(s->db, text[i], -1,
		                       SQLITE_PREPARE_PERSISTENT, &s->rs[t][i],
		                       NULL) != SQLITE_OK) {
			return (sq_fail_db(s, "preparing statements"));
		}
	}
	return (0);
}

int
sq_prepare_all(store *s)
{
	int rv;

	for (int i = 0; i < ST_COUNT; i++) {
		if (sqlite3_prepare_v3(s->db, sql[i], -1,
		                       SQLITE_PREPARE_PERSISTENT, &s->st[i],
		                       NULL) != SQLITE_OK) {
			return (sq_fail_db(s, "preparing statements"));
		}
	}
	for (int t = 0; t < STORE_NTABLES; t++) {
		if ((rv = prepare_table(s, (store_table)t)) != 0) {
			return (rv);
		}
	}
	return (0);
}
