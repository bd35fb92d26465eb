/*
 * rows.c - what the SQLite store holds: clients and their tool lists,
 * and the credential tables' rows (see store.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcpkeep.h"
#include "persist/store_impl.h"

/* Runs a prepared write statement to completion. */
static int
step_done(store *s, sqlite3_stmt *q, const char *what)
{
	int rc = sqlite3_step(q);

	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	/* a row the schema refuses will never be written: not retried */
	return (rc == SQLITE_DONE ? 0 : sq_fail_db(s, what));
}

int
sq_client_put(store *s, const char *id, const char *name,
              const char *config_json)
{
	sqlite3_stmt *q = s->st[ST_CLIENT_PUT];
	char          aad[STORE_ERR_MAX];
	int           rv;

	store_client_aad(aad, sizeof(aad), id);
	sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, name, -1, SQLITE_STATIC);
	if ((rv = sq_bind_secret(s, q, 3, aad, config_json)) != 0) {
		sqlite3_clear_bindings(q);
		return (rv);
	}
	sqlite3_bind_int64(q, 4, (sqlite3_int64)time(NULL));
	return (step_done(s, q, "writing a client"));
}

int
sq_client_del(store *s, const char *id)
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
sq_tools_put(store *s, const char *client_id, const char *hash,
             const char *tools_json, const char *added, bool *written)
{
	sqlite3_stmt *q = s->st[ST_TOOLS_HASH];
	int           rc, same;
	char         *versions = NULL;

	sqlite3_bind_text(q, 1, client_id, -1, SQLITE_STATIC);
	rc   = sqlite3_step(q);
	same = rc == SQLITE_ROW &&
	        strcmp((const char *)sqlite3_column_text(q, 0), hash) == 0;
	if (!same) {
		const char *was = rc == SQLITE_ROW
		        ? (const char *)sqlite3_column_text(q, 1)
		        : NULL;
		versions = store_versions_add(was, added, STORE_TOOL_VERSIONS);
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		free(versions);
		return (sq_fail_db(s, "reading a tool-list hash"));
	}
	if (same) {
		return (0); /* unchanged: never written */
	}
	if (versions == NULL) {
		return (store_failf(s, MK_ENOMEM, "out of memory"));
	}
	q = s->st[ST_TOOLS_PUT];
	sqlite3_bind_text(q, 1, client_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 2, hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(q, 3, tools_json, -1, SQLITE_STATIC);
	sqlite3_bind_int64(q, 4, (sqlite3_int64)time(NULL));
	sqlite3_bind_text(q, 5, versions, -1, SQLITE_STATIC);
	if ((rc = step_done(s, q, "writing a tool list")) == 0) {
		*written = true;
	}
	free(versions);
	return (rc);
}

int
sq_tool_versions(store *s, const char *client_id, char **json)
{
	sqlite3_stmt *q = s->st[ST_TOOLS_HASH];
	int           rc;

	sqlite3_bind_text(q, 1, client_id, -1, SQLITE_STATIC);
	rc    = sqlite3_step(q);
	*json = store_versions_add(
	        rc == SQLITE_ROW ? (const char *)sqlite3_column_text(q, 1)
	                         : NULL,
	        NULL, STORE_TOOL_VERSIONS);
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		free(*json);
		*json = NULL;
		return (sq_fail_db(s, "reading tool-list versions"));
	}
	return (*json != NULL ? 0
	                      : store_failf(s, MK_ENOMEM, "out of memory"));
}

int
sq_clients_each(store *s, store_client_fn fn, void *arg, unsigned *skipped)
{
	sqlite3_stmt *q = s->st[ST_CLIENTS_EACH];
	int           rc, rv = 0;

	while (rv == 0 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		const char *id   = (const char *)sqlite3_column_text(q, 0);
		const char *name = (const char *)sqlite3_column_text(q, 1);
		char        aad[STORE_ERR_MAX], *config;

		store_client_aad(aad, sizeof(aad), id);
		if ((rv = sq_column_secret(s, q, 2, aad, &config)) != 0 ||
		    config == NULL) {
			rv = store_client_skip(s, rv, id, name, skipped);
			continue;
		}
		rv = fn(arg, id, name, config,
		        (const char *)sqlite3_column_text(q, 3),
		        (const char *)sqlite3_column_text(q, 4));
		free(config);
	}
	if (rv == 0 && rc != SQLITE_DONE) {
		rv = sq_fail_db(s, "reading clients");
	}
	sqlite3_reset(q);
	return (rv);
}

int
sq_row_put(store *s, store_table t, json_t *row)
{
	const tabledef *d = &store_tables[t];
	sqlite3_stmt   *q = s->rs[t][RS_PUT];
	const char     *k;
	json_t         *v;
	char            aad[STORE_ERR_MAX];
	int             c, rv;

	if ((rv = store_row_key(t, row, aad, sizeof(aad))) != 0) {
		return (store_failf(
		        s, rv, "%s: a key column is missing or not a string",
		        d->name));
	}
	json_object_foreach(row, k, v)
	{
		if ((c = store_col_index(d, k)) < 0) {
			return (store_failf(s, MK_EINVAL,
			                    "%s has no column %s", d->name,
			                    k));
		}
		if (json_is_string(v)) {
			if ((d->sealed & (1u << c)) != 0) {
				if ((rv = sq_bind_secret(
				             s, q, c + 1, aad,
				             json_string_value(v))) != 0) {
					sqlite3_clear_bindings(q);
					return (rv);
				}
			} else {
				sqlite3_bind_text(q, c + 1,
				                  json_string_value(v), -1,
				                  SQLITE_TRANSIENT);
			}
		} else if (json_is_integer(v) &&
		           (d->sealed & (1u << c)) == 0) {
			sqlite3_bind_int64(q, c + 1, json_integer_value(v));
		} else if (!json_is_null(v)) {
			sqlite3_clear_bindings(q);
			return (store_failf(
			        s, MK_EINVAL, "%s.%s: expected %s", d->name, k,
			        (d->sealed & (1u << c)) != 0
			                ? "a string or null (sealed)"
			                : "a string, an integer or "
			                  "null"));
		}
	}
	for (c = 0; d->cols[c] != NULL; c++) {
	}
	sqlite3_bind_int64(q, c + 1, (sqlite3_int64)time(NULL));
	return (step_done(s, q, "writing a credential row"));
}

/* A key column to its slot of q (store_key_bind). */
static void
bind_key(void *q, unsigned k, const char *v)
{
	sqlite3_bind_text(q, (int)k + 1, v, -1, SQLITE_TRANSIENT);
}

int
sq_row_del(store *s, store_table t, json_t *key)
{
	sqlite3_stmt *q = s->rs[t][RS_DEL];
	int           rv;

	if ((rv = store_key_bind(s, t, key, bind_key, q)) != 0) {
		return (rv);
	}
	return (step_done(s, q, "deleting a credential row"));
}

/* Reads the current row of a table's RS_EACH into a new object; NULL
 * with *bad set when a sealed column's value is refused (see
 * store_open_value). */
static json_t *
read_row(store *s, store_table t, sqlite3_stmt *q, int *bad)
{
	const tabledef *d   = &store_tables[t];
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
		int     rv;

		if (sqlite3_column_type(q, c) == SQLITE_NULL) {
			v = json_null();
		} else if ((d->sealed & (1u << c)) != 0) {
			/* whatever its type: a plain integer is plain too */
			if ((rv = sq_column_secret(s, q, c, aad, &text)) !=
			    0) {
				store_unopened(
				        s, rv, d->name,
				        (const char *)sqlite3_column_text(q,
				                                          0),
				        d->cols[c]);
				*bad = 1;
				json_decref(row);
				return (NULL);
			}
			v = json_string(text != NULL ? text : "");
			free(text);
		} else if (sqlite3_column_type(q, c) == SQLITE_INTEGER) {
			v = json_integer(sqlite3_column_int64(q, c));
		} else {
			v = json_string(
			        (const char *)sqlite3_column_text(q, c));
		}
		json_object_set_new(row, d->cols[c], v);
	}
	return (row);
}

int
sq_row_get(store *s, store_table t, json_t *key, json_t **row)
{
	sqlite3_stmt *q = s->rs[t][RS_GET];
	int           rc, bad, rv;

	if ((rv = store_key_bind(s, t, key, bind_key, q)) != 0) {
		return (rv);
	}
	if ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		if ((*row = read_row(s, t, q, &bad)) == NULL) {
			rv = bad ? MK_EPROTO : MK_ENOMEM;
		}
	} else if (rc != SQLITE_DONE) {
		rv = sq_fail_db(s, "reading a credential row");
	}
	sqlite3_reset(q);
	sqlite3_clear_bindings(q);
	return (rv);
}

int
sq_rows_each(store *s, store_table t, store_row_fn fn, void *arg,
             unsigned *skipped)
{
	sqlite3_stmt *q = s->rs[t][RS_EACH];
	int           rc, rv = 0, bad;

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
		rv = sq_fail_db(s, "reading credential rows");
	}
	sqlite3_reset(q);
	return (rv);
}
