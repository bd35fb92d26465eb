/*
 * pg.c - the PostgreSQL backend's connection: connecting with a deadline
 * on every wait, errors by SQLSTATE, reconnecting when the server went
 * away, the schema's migrations (one node at a time, under an advisory
 * lock) and transactions.  pg_rows.c has what it holds, pg_cluster.c
 * what nodes tell each other.
 *
 * The schema has its own versions, in mk_schema (PG_VERSION):
 *   v1  the SQLite v2 tables (store.h), with BIGINT times and BYTEA for
 *       every sealed column; mcp_clients.digest (of name and config:
 *       HMAC-SHA256 with the seal key when there is one) gates writes,
 *       so a node writing what is there changes nothing and tells no
 *       one; mk_nodes (each node's heartbeat, by the server's clock) and
 *       mk_node_states (each node's own state of each client);
 *       oauth_tokens.lease_owner, lease_until, lease_gen: the refresh
 *       lease (pg_cluster.c)
 *   v2  mcp_tools.versions (SQLite's v3)
 *   v3  tool_approvals (SQLite's v4); its writes are told to every node
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/clock.h"
#include "mcpkeep.h"
#include "persist/ddl.h"
#include "persist/store_impl.h"

#define PG_VERSION 3 /* the schema this build writes */

/* The advisory lock a migration holds (any constant every node shares:
 * "mcpkeep" in ASCII). */
#define PG_MIGRATE_LOCK "7882833440327026032"

/* Every wait is bounded: connecting, each statement, each lock, a
 * transaction left idle, and a server that stops answering. */
static const char *const pg_keywords[] = {"connect_timeout",
                                          "application_name",
                                          "keepalives_idle",
                                          "keepalives_interval",
                                          "keepalives_count",
                                          "tcp_user_timeout",
                                          "options",
                                          "dbname",
                                          NULL};
static const char *const pg_values[]   = {
          "5",
          "mcpkeep",
          "10",
          "5",
          "3",
          "10000",
          "-c statement_timeout=10000 -c lock_timeout=5000 "
            "-c idle_in_transaction_session_timeout=60000 "
            "-c client_min_messages=warning",
          NULL, /* the URL: last, so what it says overrides the above */
          NULL};

static const char *const migrations[] = {
        /* 0 -> 1 */
        "CREATE TABLE mcp_clients ("
        " id TEXT PRIMARY KEY,"
        " name TEXT NOT NULL UNIQUE,"
        " config BYTEA NOT NULL,"
        " digest TEXT NOT NULL,"
        " created_at BIGINT NOT NULL,"
        " updated_at BIGINT NOT NULL);"
        "CREATE TABLE mcp_tools ("
        " client_id TEXT PRIMARY KEY"
        "  REFERENCES mcp_clients(id) ON DELETE CASCADE,"
        " hash TEXT NOT NULL,"
        " tools TEXT NOT NULL,"
        " updated_at BIGINT NOT NULL);"
        "CREATE TABLE oauth_configs ("
        " id TEXT PRIMARY KEY,"
        " client_id TEXT REFERENCES mcp_clients(id) ON DELETE CASCADE,"
        " config BYTEA NOT NULL,"
        " updated_at BIGINT NOT NULL);"
        "CREATE TABLE oauth_tokens ("
        " client_id TEXT NOT NULL,"
        " mode TEXT NOT NULL"
        "  CHECK (mode IN ('shared','admin','user','vk','session')),"
        " identity TEXT NOT NULL DEFAULT '',"
        " access_token BYTEA NOT NULL,"
        " refresh_token BYTEA,"
        " token_type TEXT,"
        " scopes TEXT,"
        " expires_at BIGINT,"
        " last_refreshed BIGINT,"
        " status TEXT NOT NULL CHECK (status IN ('active','needs_reauth')),"
        " updated_at BIGINT NOT NULL,"
        " lease_owner TEXT,"
        " lease_until TIMESTAMPTZ,"
        " lease_gen BIGINT NOT NULL DEFAULT 0,"
        " PRIMARY KEY (client_id, mode, identity));" DDL_OAUTH_FLOWS
        " pkce_verifier BYTEA NOT NULL,"
        " redirect_uri TEXT NOT NULL," DDL_FLOW_STATUS
        " expires_at BIGINT NOT NULL,"
        " data TEXT,"
        " created_at BIGINT NOT NULL);"
        "CREATE TABLE header_credentials (" DDL_CALLER
        " headers BYTEA NOT NULL,"
        " status TEXT NOT NULL CHECK (status IN ('active','needs_update')),"
        " updated_at BIGINT NOT NULL,"
        " PRIMARY KEY (client_id, mode, identity));"
        "CREATE TABLE header_flows ("
        " id TEXT PRIMARY KEY," DDL_CALLER DDL_FLOW_STATUS
        " expires_at BIGINT NOT NULL,"
        " data TEXT,"
        " created_at BIGINT NOT NULL);"
        "CREATE TABLE store_meta ("
        " key TEXT PRIMARY KEY,"
        " value BYTEA NOT NULL);"
        "CREATE TABLE mk_nodes ("
        " node_id TEXT PRIMARY KEY,"
        " seen_at TIMESTAMPTZ NOT NULL,"
        " interval_ms INTEGER NOT NULL CHECK (interval_ms > 0));"
        "CREATE TABLE mk_node_states ("
        " node_id TEXT NOT NULL,"
        " client_id TEXT NOT NULL,"
        " state TEXT NOT NULL,"
        " last_failure TEXT,"
        " updated_at TIMESTAMPTZ NOT NULL,"
        " PRIMARY KEY (node_id, client_id));",
        /* 1 -> 2 */
        "ALTER TABLE mcp_tools ADD COLUMN versions JSONB NOT NULL "
        "DEFAULT '[]'::jsonb;",
        /* 2 -> 3 */
        "CREATE TABLE tool_approvals ("
        " client_id TEXT PRIMARY KEY,"
        " digest BYTEA NOT NULL,"
        " tools BYTEA NOT NULL,"
        " rejected BYTEA,"
        " updated_at BIGINT NOT NULL);",
};
#define NMIGRATIONS (sizeof(migrations) / sizeof(migrations[0]))
_Static_assert(NMIGRATIONS == PG_VERSION, "one migration per version");

/* The MK_ code of a failed result, by its SQLSTATE class. */
static int
code_of(const PGresult *r)
{
	const char *st =
	        r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	if (st == NULL) {
		return (MK_ESYS); /* no answer: the connection */
	}
	if (strncmp(st, "22", 2) == 0 || strncmp(st, "23", 2) == 0) {
		return (MK_EINVAL); /* the row itself: permanent */
	}
	if (strcmp(st, "XX001") == 0 || strcmp(st, "XX002") == 0) {
		return (MK_EPROTO); /* corrupt data or index */
	}
	return (strcmp(st, "53200") == 0 ? MK_ENOMEM : MK_ESYS);
}

/* Records what failed with the server's (or libpq's) first line. */
static int
fail(store *s, const PGresult *r, const char *what)
{
	const char *m = r != NULL
	        ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
	        : NULL;
	int         n;

	if (m == NULL) {
		m = s->pq != NULL ? PQerrorMessage(s->pq) : "out of memory";
	}
	n = (int)strcspn(m, "\n");
	return (store_failf(s, code_of(r), "%s: %.*s", what, n,
	                    n > 0 ? m : "no answer from the server"));
}

bool
pg_ok(store *s, PGresult *r, const char *what, int *rv)
{
	ExecStatusType st = r != NULL ? PQresultStatus(r) : PGRES_FATAL_ERROR;

	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
		return (true);
	}
	*rv = fail(s, r, what);
	return (false);
}

int
pg_exec(store *s, const char *what, const char *sql)
{
	PGresult *r  = PQexec(s->pq, sql);
	int       rv = 0;

	pg_ok(s, r, what, &rv);
	PQclear(r);
	return (rv);
}

/* The server's notices are not printed: the store never logs (its
 * errors say what failed). */
static void
quiet(void *arg, const char *message)
{
}

static int
pg_connect(store *s)
{
	const char *values[sizeof(pg_values) / sizeof(pg_values[0])];
	char        opts[256];

	memcpy(values, pg_values, sizeof(values));
	if (s->pq_ro) {
		snprintf(opts, sizeof(opts), "%s %s", pg_values[6],
		         "-c default_transaction_read_only=on");
		values[6] = opts;
	}
	values[7] = s->url;
	PQfinish(s->pq);
	s->pq_ready = false;
	s->pq       = PQconnectdbParams(pg_keywords, values, 1);
	PQsetNoticeProcessor(s->pq, quiet, NULL);
	if (PQstatus(s->pq) != CONNECTION_OK) {
		/* the reconnects that follow wait a second between tries */
		s->pq_retry = codec_now_ns() + CODEC_NS_PER_S;
		return (fail(s, NULL, "connecting"));
	}
	return (0);
}

int
pg_ready(store *s)
{
	int rv;

	if (s->pq != NULL && PQstatus(s->pq) == CONNECTION_OK && s->pq_ready) {
		return (0);
	}
	if (s->pq == NULL || PQstatus(s->pq) != CONNECTION_OK) {
		if (codec_now_ns() < s->pq_retry) {
			return (MK_ESYS); /* the last error stands */
		}
		if ((rv = pg_connect(s)) != 0) {
			return (rv);
		}
	}
	if ((rv = pg_prepare_all(s)) != 0 ||
	    (s->pq_listen &&
	     (rv = pg_exec(s, "listening",
	                   "LISTEN " STORE_CHANNEL
	                   "; LISTEN " STORE_STATES_CHANNEL
	                   "; LISTEN " STORE_ROWS_CHANNEL)) != 0)) {
		return (rv);
	}
	/* what was told while the connection was down is lost */
	s->pq_resync = s->pq_listen;
	s->pq_ready  = true;
	return (0);
}

static int
pg_version(store *s, int *version)
{
	PGresult *r;
	int       rv = 0;

	r = PQexec(s->pq, "SELECT to_regclass('mk_schema') IS NOT NULL");
	if (pg_ok(s, r, "reading the schema version", &rv) &&
	    strcmp(PQgetvalue(r, 0, 0), "t") == 0) {
		PQclear(r);
		r = PQexec(s->pq, "SELECT max(version) FROM mk_schema");
		if (pg_ok(s, r, "reading the schema version", &rv)) {
			*version = atoi(PQgetvalue(r, 0, 0));
		}
	} else if (rv == 0) {
		*version = 0;
	}
	PQclear(r);
	return (rv);
}

/* Brings the schema to PG_VERSION, in one transaction under the
 * migration lock, so nodes started together migrate once. */
static int
pg_migrate(store *s)
{
	char set[96];
	int  v, rv;

	if ((rv = pg_exec(s, "beginning a migration", "BEGIN")) != 0) {
		return (rv);
	}
	if ((rv = pg_exec(s, "taking the migration lock",
	                  "SELECT pg_advisory_xact_lock(" PG_MIGRATE_LOCK
	                  ")")) != 0 ||
	    (rv = pg_exec(s, "migrating the schema",
	                  "CREATE TABLE IF NOT EXISTS mk_schema ("
	                  " version INTEGER NOT NULL)")) != 0 ||
	    (rv = pg_version(s, &v)) != 0) {
		goto out;
	}
	if (v > PG_VERSION) {
		rv = store_failf(
		        s, MK_EINVAL,
		        "schema version %d is newer than this mcpkeep "
		        "supports (%d): refusing to open it",
		        v, PG_VERSION);
		goto out;
	}
	for (; v < PG_VERSION; v++) {
		snprintf(set, sizeof(set),
		         "DELETE FROM mk_schema; "
		         "INSERT INTO mk_schema VALUES (%d)",
		         v + 1);
		if ((rv = pg_exec(s, "migrating the schema", migrations[v])) !=
		            0 ||
		    (rv = pg_exec(s, "recording the schema version", set)) !=
		            0) {
			goto out;
		}
	}
	rv = pg_exec(s, "committing a migration", "COMMIT");
out:
	if (rv != 0) {
		pg_exec(s, "rolling back", "ROLLBACK");
	}
	return (rv);
}

static int
pg_open(store *s, store_mode mode)
{
	int rv, v;

	s->pq_ro = mode != STORE_RW;
	if ((rv = pg_connect(s)) != 0 ||
	    (!s->pq_ro && (rv = pg_migrate(s)) != 0) ||
	    (rv = pg_version(s, &v)) != 0) {
		return (rv);
	}
	if (v != PG_VERSION) {
		return (store_failf(s, MK_EINVAL,
		                    "schema version %d, this mcpkeep reads %d",
		                    v, PG_VERSION));
	}
	return (pg_ready(s));
}

static void
pg_close(store *s)
{
	PQfinish(s->pq);
	s->pq = NULL;
}

/* A transaction: begin reconnects first when the server went away (the
 * persister retries a failed batch with backoff).  Every commit is
 * durable (synchronous_commit is the server's: on by default). */
static int
pg_begin(store *s, bool durable)
{
	int rv;

	if ((rv = pg_ready(s)) != 0 ||
	    (rv = pg_exec(s, "beginning a transaction", "BEGIN")) != 0) {
		return (rv);
	}
	s->pq_tx = true;
	return (0);
}

static int
pg_commit(store *s)
{
	int rv = pg_exec(s, "committing", "COMMIT");

	s->pq_tx = false; /* a failed COMMIT rolls back */
	return (rv);
}

static void
pg_rollback(store *s)
{
	PQclear(PQexec(s->pq, "ROLLBACK"));
	s->pq_tx = false;
}

const store_ops store_pg_ops = {
        .open          = pg_open,
        .close         = pg_close,
        .version       = pg_version,
        .begin         = pg_begin,
        .commit        = pg_commit,
        .rollback      = pg_rollback,
        .client_put    = pg_client_put,
        .client_del    = pg_client_del,
        .tools_put     = pg_tools_put,
        .tool_versions = pg_tool_versions,
        .clients_each  = pg_clients_each,
        .row_put       = pg_row_put,
        .row_del       = pg_row_del,
        .row_get       = pg_row_get,
        .rows_each     = pg_rows_each,
        .meta_get      = pg_meta_get,
        .meta_put      = pg_meta_put,
        .seal_all      = pg_seal_all,
};
