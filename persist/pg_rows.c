/*
 * pg_rows.c - what the PostgreSQL store holds (see store.h): the same
 * rows as SQLite's, through this session's prepared statements.
 * Parameters go as text, sealed values as binary BYTEA; results come as
 * text, BYTEA unescaped.  The tool-list gate is one statement, so nodes
 * checking the same unchanged list at once write nothing, and a change
 * is written once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/hmac.h>

#include "mcpkeep.h"
#include "persist/store_impl.h"

#define OID_BYTEA 17 /* pg_type.h */
#define OID_INT8  20

void
pg_arg_text(pgargs *a, const char *v)
{
	a->v[a->n]   = v;
	a->len[a->n] = 0;
	a->fmt[a->n] = 0;
	a->n++;
}

void
pg_arg_int(pgargs *a, long long v)
{
	snprintf(a->num[a->n], sizeof(a->num[0]), "%lld", v);
	pg_arg_text(a, a->num[a->n]);
}

/* A secret column: sealed with aad when the store has a key, else the
 * text's bytes. */
int
pg_arg_secret(store *s, pgargs *a, const char *aad, const char *text)
{
	size_t n = strlen(text);
	int    rv;

	if (s->keyed) {
		if ((rv = store_seal(s, aad, text, &a->own[a->n], &n)) != 0) {
			return (rv);
		}
		text = (const char *)a->own[a->n];
	}
	a->v[a->n]   = text;
	a->len[a->n] = (int)n;
	a->fmt[a->n] = 1;
	a->n++;
	return (0);
}

void
pg_args_free(pgargs *a)
{
	for (int i = 0; i < a->n; i++) {
		free(a->own[i]);
	}
}

/* Ready to run a statement: outside a transaction a lost connection is
 * tried again first. */
static int
use(store *s)
{
	return (s->pq_tx ? 0 : pg_ready(s));
}

/* Runs prepared statement name with a's parameters: the result, or NULL
 * with *rv set (and the error recorded as what). */
PGresult *
pg_run(store *s, const char *name, pgargs *a, const char *what, int *rv)
{
	PGresult *r;

	if ((*rv = use(s)) != 0) {
		pg_args_free(a);
		return (NULL);
	}
	r = PQexecPrepared(s->pq, name, a->n, a->v, a->len, a->fmt, 0);
	pg_args_free(a);
	if (!pg_ok(s, r, what, rv)) {
		PQclear(r);
		return (NULL);
	}
	return (r);
}

/* Runs a statement whose result is not read. */
static int
run_done(store *s, const char *name, pgargs *a, const char *what)
{
	int rv;

	PQclear(pg_run(s, name, a, what, &rv));
	return (rv);
}

PGresult *
pg_run_text(store *s, const char *name, int n, const char *const *v,
            const char *what, int *rv)
{
	pgargs a = {0};

	for (int i = 0; i < n && i < NPARAMS; i++) {
		pg_arg_text(&a, v[i]);
	}
	return (pg_run(s, name, &a, what, rv));
}

/* ---- statements --------------------------------------------------------- */

int
pg_prepare(store *s, const char *name, const char *sql)
{
	PGresult *r  = PQprepare(s->pq, name, sql, 0, NULL);
	int       rv = 0;

	pg_ok(s, r, "preparing statements", &rv);
	PQclear(r);
	return (rv);
}

/* A credential table's statement names: "t<table>_<what>". */
static void
tname(char *buf, size_t len, store_table t, const char *what)
{
	snprintf(buf, len, "t%d_%s", (int)t, what);
}

static int
prepare_table(store *s, store_table t)
{
	const tabledef *d = &store_tables[t];
	char            sql[2048], name[32];
	store_sql       q;
	unsigned        n;
	int             rv;

	store_sql_lists(d, '$', &q);
	n = q.n;
	tname(name, sizeof(name), t, "put");
	if (d->told) {
		/* its writes are told to every node */
		snprintf(sql, sizeof(sql),
		         "WITH w AS (INSERT INTO %s (%s, %s) VALUES (%s, $%u) "
		         "ON CONFLICT (%s) DO UPDATE SET %s RETURNING 1) "
		         "SELECT pg_notify('" STORE_ROWS_CHANNEL
		         "', $%u) FROM w",
		         d->name, q.cols, d->stamp, q.vals, n + 1, q.keys,
		         q.set, n + 2);
	} else {
		snprintf(sql, sizeof(sql),
		         "INSERT INTO %s (%s, %s) VALUES (%s, $%u) "
		         "ON CONFLICT (%s) DO UPDATE SET %s",
		         d->name, q.cols, d->stamp, q.vals, n + 1, q.keys,
		         q.set);
	}
	if ((rv = pg_prepare(s, name, sql)) != 0) {
		return (rv);
	}
	if (d->leased) {
		/* the refreshed row, written only under the lease of gen */
		char   upd[768];
		size_t nu = 0;
		for (unsigned c = d->nkey; d->cols[c] != NULL; c++) {
			nu += (size_t)snprintf(upd + nu, sizeof(upd) - nu,
			                       "%s = $%u, ", d->cols[c],
			                       c + 1);
		}
		tname(name, sizeof(name), t, "fput");
		snprintf(
		        sql, sizeof(sql),
		        "WITH w AS (UPDATE %s SET %s%s = $%u, lease_owner = "
		        "NULL, lease_until = NULL WHERE %s AND lease_gen = $%u "
		        "AND lease_owner = $%u RETURNING 1) SELECT "
		        "pg_notify('" STORE_ROWS_CHANNEL "', $%u) FROM w",
		        d->name, upd, d->stamp, n + 1, q.where, n + 2, n + 3,
		        n + 4);
		if ((rv = pg_prepare(s, name, sql)) != 0) {
			return (rv);
		}
	}
	tname(name, sizeof(name), t, "del");
	snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE %s", d->name,
	         q.where);
	if ((rv = pg_prepare(s, name, sql)) != 0) {
		return (rv);
	}
	tname(name, sizeof(name), t, "delc");
	snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE client_id = $1",
	         d->name);
	if ((rv = pg_prepare(s, name, sql)) != 0) {
		return (rv);
	}
	tname(name, sizeof(name), t, "get");
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s WHERE %s", q.cols,
	         d->name, q.where);
	if ((rv = pg_prepare(s, name, sql)) != 0) {
		return (rv);
	}
	tname(name, sizeof(name), t, "each");
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s ORDER BY %s", q.cols,
	         d->name, q.keys);
	return (pg_prepare(s, name, sql));
}

static const char *const fixed[][2] = {
        /* a client written, or deleted, is told to every node (at
         * commit); one unchanged is neither */
        {"client_put",
         "WITH w AS (INSERT INTO mcp_clients (id, name, config, digest, "
         "created_at, updated_at) VALUES ($1, $2, $3, $5, $4, $4) ON "
         "CONFLICT (id) DO UPDATE SET name = $2, config = $3, digest = $5, "
         "updated_at = $4 WHERE mcp_clients.digest <> $5 RETURNING id) "
         "SELECT pg_notify('" STORE_CHANNEL "', json_build_object('op', "
         "'put', 'id', id, 'node', $6::text)::text) FROM w"},
        {"client_del",
         "WITH d AS (DELETE FROM mcp_clients WHERE id = $1 RETURNING id) "
         "SELECT pg_notify('" STORE_CHANNEL "', json_build_object('op', "
         "'del', 'id', id, 'node', $2::text)::text) FROM d"},
        /* written only when the hash differs: one statement, so the
         * row lock orders nodes writing the same list (and one of them
         * appends its version, the last 20 kept: STORE_TOOL_VERSIONS) */
        {"tools_put",
         "INSERT INTO mcp_tools (client_id, hash, tools, updated_at, "
         "versions) VALUES ($1, $2, $3, $4, COALESCE($5::jsonb, "
         "'[]'::jsonb)) ON "
         "CONFLICT (client_id) DO UPDATE SET hash = excluded.hash, tools = "
         "excluded.tools, updated_at = excluded.updated_at, versions = "
         "(SELECT COALESCE(jsonb_agg(v ORDER BY n), '[]'::jsonb) FROM "
         "(SELECT v, n FROM jsonb_array_elements(CASE WHEN "
         "jsonb_typeof(mcp_tools.versions) = 'array' THEN mcp_tools.versions "
         "ELSE '[]'::jsonb END || excluded.versions) WITH ORDINALITY AS "
         "e(v, n) ORDER BY n DESC LIMIT 20) x) "
         "WHERE mcp_tools.hash <> excluded.hash"},
        {"tool_versions",
         "SELECT versions::text FROM mcp_tools WHERE client_id = $1"},
        {"clients_each",
         "SELECT c.id, c.name, c.config, t.tools, t.hash FROM mcp_clients "
         "c LEFT JOIN mcp_tools t ON t.client_id = c.id ORDER BY c.name"},
        {"client_get",
         "SELECT c.id, c.name, c.config, t.tools, t.hash FROM mcp_clients "
         "c LEFT JOIN mcp_tools t ON t.client_id = c.id WHERE c.id = $1"},
        {"meta_get", "SELECT value FROM store_meta WHERE key = $1"},
        /* another node may have written it first: its value stands */
        {"meta_put",
         "INSERT INTO store_meta (key, value) VALUES ($1, $2) "
         "ON CONFLICT (key) DO NOTHING"},
};

int
pg_prepare_all(store *s)
{
	int rv;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		if ((rv = pg_prepare(s, fixed[i][0], fixed[i][1])) != 0) {
			return (rv);
		}
	}
	for (int t = 0; t < STORE_NTABLES; t++) {
		if ((rv = prepare_table(s, (store_table)t)) != 0) {
			return (rv);
		}
	}
	return (pg_prepare_cluster(s));
}

/* ---- values ------------------------------------------------------------- */

/* Opens BYTEA column c of row i as text (store_open_value): *out
 * malloc'd, NULL for NULL.  Returns 0, MK_EINVAL (plain, in a sealed
 * store), MK_EPROTO or MK_ENOMEM. */
static int
column_secret(store *s, const PGresult *r, int i, int c, const char *aad,
              char **out)
{
	unsigned char *b;
	size_t         n;
	int            rv;

	*out = NULL;
	if (PQgetisnull(r, i, c)) {
		return (0);
	}
	if ((b = PQunescapeBytea((const unsigned char *)PQgetvalue(r, i, c),
	                         &n)) == NULL) {
		return (MK_ENOMEM);
	}
	rv = store_open_value(s, b, n, aad, out);
	PQfreemem(b);
	return (rv);
}

/* A client's digest: its config (which holds its name), keyed with the
 * seal key when there is one (a plain hash of a secret could be guessed
 * at). */
static void
client_digest(const store *s, const char *config, char hex[65])
{
	static const uint8_t none[1];
	uint8_t              md[EVP_MAX_MD_SIZE];
	unsigned             n = 0;

	if (HMAC(EVP_sha256(), s->keyed ? s->key.k : none,
	         s->keyed ? (int)sizeof(s->key.k) : 0, (const uint8_t *)config,
	         strlen(config), md, &n) == NULL) {
		n = 0;
	}
	for (unsigned i = 0; i < 32; i++) {
		snprintf(hex + 2 * i, 3, "%02x", i < n ? md[i] : 0);
	}
}

static int
client_put_once(store *s, const char *id, const char *name,
                const char *config_json)
{
	pgargs a = {0};
	char   aad[STORE_ERR_MAX], digest[65];
	int    rv;

	store_client_aad(aad, sizeof(aad), id);
	client_digest(s, config_json, digest);
	pg_arg_text(&a, id);
	pg_arg_text(&a, name);
	if ((rv = pg_arg_secret(s, &a, aad, config_json)) != 0) {
		pg_args_free(&a);
		return (rv);
	}
	pg_arg_int(&a, (long long)time(NULL));
	pg_arg_text(&a, digest);
	pg_arg_text(&a, s->node != NULL ? s->node : "");
	return (run_done(s, "client_put", &a, "writing a client"));
}

/* Nodes booting together write the same new client (the same id) at
 * once: the upsert's arbiter is the id's index, so the other's row,
 * committed while this insert ran, fails it on the name's instead.  It
 * is tried once more (after a savepoint in a transaction, which the
 * failure aborts), now taking the id's conflict path; a name another
 * client truly holds fails again. */
int
pg_client_put(store *s, const char *id, const char *name,
              const char *config_json)
{
	bool tx = s->pq_tx;
	int  rv;

	if (tx &&
	    (rv = pg_exec(s, "writing a client", "SAVEPOINT client_put")) !=
	            0) {
		return (rv);
	}
	if ((rv = client_put_once(s, id, name, config_json)) == MK_EINVAL &&
	    (!tx ||
	     (rv = pg_exec(s, "writing a client",
	                   "ROLLBACK TO SAVEPOINT client_put")) == 0)) {
		rv = client_put_once(s, id, name, config_json);
	}
	if (tx && rv == 0) {
		rv = pg_exec(s, "writing a client",
		             "RELEASE SAVEPOINT client_put");
	}
	return (rv);
}

int
pg_client_del(store *s, const char *id)
{
	char name[32];
	int  rv;

	for (int t = 0; t < STORE_NTABLES; t++) {
		pgargs a = {0};
		pg_arg_text(&a, id);
		tname(name, sizeof(name), (store_table)t, "delc");
		if ((rv = run_done(s, name, &a,
		                   "deleting a client's credentials")) != 0) {
			return (rv);
		}
	}
	pgargs a = {0};
	pg_arg_text(&a, id);
	pg_arg_text(&a, s->node != NULL ? s->node : "");
	return (run_done(s, "client_del", &a, "deleting a client"));
}

int
pg_tools_put(store *s, const char *client_id, const char *hash,
             const char *tools_json, const char *added, bool *written)
{
	pgargs    a = {0};
	PGresult *r;
	int       rv;

	pg_arg_text(&a, client_id);
	pg_arg_text(&a, hash);
	pg_arg_text(&a, tools_json);
	pg_arg_int(&a, (long long)time(NULL));
	pg_arg_text(&a, added);
	if ((r = pg_run(s, "tools_put", &a, "writing a tool list", &rv)) !=
	    NULL) {
		*written = strcmp(PQcmdTuples(r), "1") == 0;
		PQclear(r);
	}
	return (rv);
}

int
pg_tool_versions(store *s, const char *client_id, char **json)
{
	pgargs    a = {0};
	PGresult *r;
	int       rv;

	pg_arg_text(&a, client_id);
	if ((r = pg_run(s, "tool_versions", &a, "reading tool-list versions",
	                &rv)) != NULL) {
		*json = store_versions_add(
		        PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : NULL, NULL,
		        STORE_TOOL_VERSIONS);
		PQclear(r);
		if (*json == NULL) {
			rv = store_failf(s, MK_ENOMEM, "out of memory");
		}
	}
	return (rv);
}

/* Calls fn per client of r (clients_each's columns). */
static int
each_client(store *s, PGresult *r, store_client_fn fn, void *arg,
            unsigned *skipped)
{
	int rv = 0;

	for (int i = 0; rv == 0 && i < PQntuples(r); i++) {
		const char *id   = PQgetvalue(r, i, 0),
		           *name = PQgetvalue(r, i, 1);
		char aad[STORE_ERR_MAX], *config;

		store_client_aad(aad, sizeof(aad), id);
		if ((rv = column_secret(s, r, i, 2, aad, &config)) != 0 ||
		    config == NULL) {
			rv = store_client_skip(s, rv, id, name, skipped);
			continue;
		}
		rv = fn(arg, id, name, config,
		        PQgetisnull(r, i, 3) ? NULL : PQgetvalue(r, i, 3),
		        PQgetisnull(r, i, 4) ? NULL : PQgetvalue(r, i, 4));
		free(config);
	}
	PQclear(r);
	return (rv);
}

int
pg_clients_each(store *s, store_client_fn fn, void *arg, unsigned *skipped)
{
	pgargs    a = {0};
	PGresult *r;
	int       rv;

	if ((r = pg_run(s, "clients_each", &a, "reading clients", &rv)) ==
	    NULL) {
		return (rv);
	}
	return (each_client(s, r, fn, arg, skipped));
}

int
pg_client_get(store *s, const char *id, store_client_fn fn, void *arg)
{
	pgargs    a = {0};
	PGresult *r;
	unsigned  skipped = 0;
	int       rv;

	pg_arg_text(&a, id);
	if ((r = pg_run(s, "client_get", &a, "reading a client", &rv)) ==
	    NULL) {
		return (rv);
	}
	rv = each_client(s, r, fn, arg, &skipped);
	return (rv == 0 && skipped > 0 ? MK_EPROTO : rv);
}

int
pg_bind_row(store *s, store_table t, json_t *row, pgargs *a)
{
	const tabledef *d = &store_tables[t];
	char            aad[STORE_ERR_MAX];
	json_t         *v;
	int             rv = 0, c;

	if ((rv = store_row_key(t, row, aad, sizeof(aad))) != 0) {
		return (store_failf(
		        s, rv, "%s: a key column is missing or not a string",
		        d->name));
	}
	const char *k;
	json_object_foreach(row, k, v)
	{
		if (store_col_index(d, k) < 0) {
			return (store_failf(s, MK_EINVAL,
			                    "%s has no column %s", d->name,
			                    k));
		}
	}
	for (c = 0; rv == 0 && d->cols[c] != NULL; c++) {
		v = json_object_get(row, d->cols[c]);
		if (json_is_string(v) && (d->sealed & (1u << c)) != 0) {
			rv = pg_arg_secret(s, a, aad, json_string_value(v));
		} else if (json_is_string(v)) {
			pg_arg_text(a, json_string_value(v));
		} else if (json_is_integer(v) &&
		           (d->sealed & (1u << c)) == 0) {
			pg_arg_int(a, json_integer_value(v));
		} else if (v == NULL || json_is_null(v)) {
			pg_arg_text(a, NULL);
		} else {
			rv = store_failf(
			        s, MK_EINVAL, "%s.%s: expected %s", d->name,
			        d->cols[c],
			        (d->sealed & (1u << c)) != 0
			                ? "a string or null (sealed)"
			                : "a string, an integer or null");
		}
	}
	if (rv != 0) {
		pg_args_free(a);
		return (rv);
	}
	pg_arg_int(a, (long long)time(NULL));
	return (0);
}

int
pg_row_put(store *s, store_table t, json_t *row)
{
	pgargs a = {0};
	char   name[32], told[STORE_ERR_MAX];
	int    rv;

	if ((rv = pg_bind_row(s, t, row, &a)) != 0) {
		return (rv);
	}
	if (store_tables[t].told) {
		pg_told_row(s, t, row, told, sizeof(told));
		pg_arg_text(&a, told); /* the others told of it */
	}
	tname(name, sizeof(name), t, "put");
	return (run_done(s, name, &a, "writing a credential row"));
}

/* A key column as the next parameter (store_key_bind). */
static void
arg_key(void *a, unsigned k, const char *v)
{
	pg_arg_text(a, v);
}

int
pg_row_del(store *s, store_table t, json_t *key)
{
	pgargs a = {0};
	char   name[32];
	int    rv;

	if ((rv = store_key_bind(s, t, key, arg_key, &a)) != 0) {
		return (rv);
	}
	tname(name, sizeof(name), t, "del");
	return (run_done(s, name, &a, "deleting a credential row"));
}

/* Row i of r (a table's columns, in order) as a new object; NULL with
 * *bad set when a sealed column's value is refused (see
 * store_open_value). */
static json_t *
read_row(store *s, store_table t, const PGresult *r, int i, int *bad)
{
	const tabledef *d   = &store_tables[t];
	json_t         *row = json_object();
	char            aad[STORE_ERR_MAX], *text;
	size_t          at = (size_t)snprintf(aad, sizeof(aad), "%s", d->name);
	int             rv;

	*bad = 0;
	for (unsigned k = 0; k < d->nkey && at < sizeof(aad); k++) {
		at += (size_t)snprintf(aad + at, sizeof(aad) - at, "\x1f%s",
		                       PQgetvalue(r, i, (int)k));
	}
	for (int c = 0; row != NULL && d->cols[c] != NULL; c++) {
		json_t *v;

		if (PQgetisnull(r, i, c)) {
			v = json_null();
		} else if (PQftype(r, c) == OID_INT8) {
			v = json_integer(
			        strtoll(PQgetvalue(r, i, c), NULL, 10));
		} else if (PQftype(r, c) == OID_BYTEA) {
			if ((rv = column_secret(s, r, i, c, aad, &text)) !=
			    0) {
				store_unopened(s, rv, d->name,
				               PQgetvalue(r, i, 0),
				               d->cols[c]);
				*bad = 1;
				json_decref(row);
				return (NULL);
			}
			v = json_string(text);
			free(text);
		} else {
			v = json_string(PQgetvalue(r, i, c));
		}
		json_object_set_new(row, d->cols[c], v);
	}
	return (row);
}

int
pg_row_get(store *s, store_table t, json_t *key, json_t **row)
{
	pgargs    a = {0};
	PGresult *r;
	char      name[32];
	int       rv, bad;

	if ((rv = store_key_bind(s, t, key, arg_key, &a)) != 0) {
		return (rv);
	}
	tname(name, sizeof(name), t, "get");
	if ((r = pg_run(s, name, &a, "reading a credential row", &rv)) ==
	    NULL) {
		return (rv);
	}
	if (PQntuples(r) > 0 && (*row = read_row(s, t, r, 0, &bad)) == NULL) {
		rv = bad ? MK_EPROTO : MK_ENOMEM;
	}
	PQclear(r);
	return (rv);
}

int
pg_rows_each(store *s, store_table t, store_row_fn fn, void *arg,
             unsigned *skipped)
{
	pgargs    a = {0};
	PGresult *r;
	char      name[32];
	int       rv, bad;

	tname(name, sizeof(name), t, "each");
	if ((r = pg_run(s, name, &a, "reading credential rows", &rv)) ==
	    NULL) {
		return (rv);
	}
	for (int i = 0; rv == 0 && i < PQntuples(r); i++) {
		json_t *row = read_row(s, t, r, i, &bad);
		if (row == NULL) {
			*skipped += (unsigned)bad;
			rv = bad ? 0 : MK_ENOMEM;
			continue;
		}
		rv = fn(arg, row);
		json_decref(row);
	}
	PQclear(r);
	return (rv);
}

/* ---- the seal settings, and sealing in place ---------------------------- */

int
pg_meta_get(store *s, const char *key, uint8_t *buf, size_t len, long *n)
{
	pgargs         a = {0};
	PGresult      *r;
	unsigned char *b;
	size_t         bn;
	int            rv;

	*n = -1;
	pg_arg_text(&a, key);
	if ((r = pg_run(s, "meta_get", &a, "reading the seal settings",
	                &rv)) == NULL) {
		return (rv);
	}
	if (PQntuples(r) > 0 &&
	    (b = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 0),
	                         &bn)) != NULL) {
		if (bn <= len) {
			memcpy(buf, b, bn);
			*n = (long)bn;
		}
		PQfreemem(b);
	}
	PQclear(r);
	return (0);
}

int
pg_meta_put(store *s, const char *key, const void *v, size_t n)
{
	pgargs a = {0};

	pg_arg_text(&a, key);
	a.v[a.n]   = v;
	a.len[a.n] = (int)n;
	a.fmt[a.n] = 1;
	a.n++;
	return (run_done(s, "meta_put", &a, "writing the seal settings"));
}

/* Seals, in place, every plain value of table's column col (keys: its
 * nkey key columns).  Rows are locked as read: a node sealing at the
 * same time waits, then seals what is left. */
static int
seal_column(store *s, const char *table, const tabledef *d, unsigned nkey,
            const char *col)
{
	char      sel[512], upd[512], keys[256], aad[STORE_ERR_MAX], *plain;
	PGresult *r, *u;
	size_t    at = 0;
	int       rv = 0;

	if (d != NULL) {
		store_key_list(d, keys, sizeof(keys));
	} else {
		snprintf(keys, sizeof(keys), "id");
	}
	snprintf(sel, sizeof(sel), "SELECT %s, %s FROM %s FOR UPDATE", keys,
	         col, table);
	at = (size_t)snprintf(upd, sizeof(upd), "UPDATE %s SET %s = $1 WHERE ",
	                      table, col);
	for (unsigned k = 0; k < nkey; k++) {
		at += (size_t)snprintf(upd + at, sizeof(upd) - at,
		                       "%s%s = $%u", k ? " AND " : "",
		                       d != NULL ? d->cols[k] : "id", k + 2);
	}
	r = PQexec(s->pq, sel);
	if (!pg_ok(s, r, "sealing stored secrets", &rv)) {
		PQclear(r);
		return (rv);
	}
	for (int i = 0; rv == 0 && i < PQntuples(r); i++) {
		unsigned char *b;
		size_t         n;
		pgargs         a = {0};

		if (PQgetisnull(r, i, (int)nkey) ||
		    (b = PQunescapeBytea((const unsigned char *)PQgetvalue(
		                                 r, i, (int)nkey),
		                         &n)) == NULL) {
			continue;
		}
		plain = seal_is_sealed(b, n) ? NULL : strndup((char *)b, n);
		PQfreemem(b);
		if (plain == NULL) {
			continue; /* sealed already (or out of memory) */
		}
		at = (size_t)snprintf(aad, sizeof(aad), "%s", table);
		for (unsigned k = 0; k < nkey && at < sizeof(aad); k++) {
			at += (size_t)snprintf(aad + at, sizeof(aad) - at,
			                       "\x1f%s",
			                       PQgetvalue(r, i, (int)k));
		}
		rv = pg_arg_secret(s, &a, aad, plain);
		free(plain);
		for (unsigned k = 0; rv == 0 && k < nkey; k++) {
			pg_arg_text(&a, PQgetvalue(r, i, (int)k));
		}
		if (rv == 0) {
			u = PQexecParams(s->pq, upd, a.n, NULL, a.v, a.len,
			                 a.fmt, 0);
			pg_ok(s, u, "sealing stored secrets", &rv);
			PQclear(u);
		}
		pg_args_free(&a);
	}
	PQclear(r);
	return (rv);
}

int
pg_seal_all(store *s, const uint8_t *check, size_t n)
{
	PGresult *r  = PQexec(s->pq, "BEGIN");
	int       rv = 0;

	if (!pg_ok(s, r, "sealing stored secrets", &rv)) {
		PQclear(r);
		return (rv);
	}
	PQclear(r);
	rv = seal_column(s, "mcp_clients", NULL, 1, "config");
	for (int t = 0; rv == 0 && t < STORE_NTABLES; t++) {
		const tabledef *d = &store_tables[t];
		for (int c = 0; rv == 0 && d->cols[c] != NULL; c++) {
			if ((d->sealed & (1u << c)) != 0) {
				rv = seal_column(s, d->name, d, d->nkey,
				                 d->cols[c]);
			}
		}
	}
	if (rv == 0) {
		rv = pg_meta_put(s, "seal_check", check, n);
	}
	r = PQexec(s->pq, rv == 0 ? "COMMIT" : "ROLLBACK");
	if (rv == 0) {
		pg_ok(s, r, "sealing stored secrets", &rv);
	}
	PQclear(r);
	return (rv);
}
