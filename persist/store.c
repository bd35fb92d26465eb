/*
 * store.c - the store's handle: errors, open and close, and the calls of
 * store.h, each handed to the backend the location names (sqlite.c,
 * pg.c).
 */
#include <libpq-fe.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"
#include "persist/store_impl.h"

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

bool
store_is_url(const char *location)
{
	return (strncmp(location, "postgresql://", 13) == 0 ||
	        strncmp(location, "postgres://", 11) == 0);
}

void
store_display(const char *location, char *buf, size_t len)
{
	PQconninfoOption *o;
	const char       *user = NULL, *host = NULL, *port = NULL, *db = NULL;

	if (!store_is_url(location)) {
		snprintf(buf, len, "%s", location);
		return;
	}
	/* the URL as libpq reads it, rebuilt without its password (or any
	 * other parameter) */
	if ((o = PQconninfoParse(location, NULL)) == NULL) {
		snprintf(buf, len, "postgresql://(unreadable URL)");
		return;
	}
	for (PQconninfoOption *p = o; p->keyword != NULL; p++) {
		const char **to = strcmp(p->keyword, "user") == 0 ? &user
		        : strcmp(p->keyword, "host") == 0         ? &host
		        : strcmp(p->keyword, "port") == 0         ? &port
		        : strcmp(p->keyword, "dbname") == 0       ? &db
		                                                  : NULL;
		if (to != NULL && p->val != NULL && *p->val != '\0') {
			*to = p->val;
		}
	}
	snprintf(buf, len, "postgresql://%s%s%s%s%s/%s", user ? user : "",
	         user ? "@" : "", host ? host : "", port ? ":" : "",
	         port ? port : "", db ? db : "");
	PQconninfoFree(o);
}

store *
store_new(const char *location, const store_ops *ops, char *err, size_t errlen)
{
	char   name[STORE_ERR_MAX / 2];
	store *s;

	store_display(location, name, sizeof(name));
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->path = strdup(name)) == NULL ||
	    (s->url = strdup(location)) == NULL) {
		if (s != NULL) {
			free(s->path);
		}
		free(s);
		snprintf(err, errlen, "out of memory");
		return (NULL);
	}
	s->ops = ops;
	return (s);
}

int
store_open(store **sp, const char *location, store_mode mode,
           const char *secret, char *err, size_t errlen)
{
	store *s;
	int    rv;

	*sp = NULL;
	if ((s = store_new(location,
	                   store_is_url(location) ? &store_pg_ops
	                                          : &store_sqlite_ops,
	                   err, errlen)) == NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = s->ops->open(s, mode)) != 0 ||
	    (rv = store_key_setup(s, mode != STORE_RW, secret)) != 0) {
		snprintf(err, errlen, "%s", s->err);
		store_close(&s);
		return (rv);
	}
	*sp = s;
	return (0);
}

void
store_close(store **sp)
{
	store *s;

	if (sp == NULL || (s = *sp) == NULL) {
		return;
	}
	*sp = NULL;
	s->ops->close(s);
	OPENSSL_cleanse(&s->key, sizeof(s->key));
	if (s->url != NULL) {
		/* a URL may carry a password */
		OPENSSL_cleanse(s->url, strlen(s->url));
	}
	free(s->url);
	free(s->path);
	free(s->node);
	free(s);
}

/* ---- the cluster: PostgreSQL only ------------------------------------- */

static bool
shared(store *s)
{
	if (s->ops != &store_pg_ops) {
		store_failf(s, MK_EINVAL, "not a PostgreSQL store");
		return (false);
	}
	return (true);
}

int
store_set_node(store *s, const char *node_id)
{
	free(s->node);
	return ((s->node = strdup(node_id)) != NULL ? 0 : MK_ENOMEM);
}

int
store_listen(store *s, int *fd)
{
	return (shared(s) ? pg_listen(s, fd) : MK_EINVAL);
}

int
store_changes(store *s, store_change_fn fn, void *arg, bool *resync, int *fd)
{
	*resync = false;
	return (shared(s) ? pg_changes(s, fn, arg, resync, fd) : MK_EINVAL);
}

int
store_client_get(store *s, const char *id, store_client_fn fn, void *arg)
{
	return (shared(s) ? pg_client_get(s, id, fn, arg) : MK_EINVAL);
}

int
store_heartbeat(store *s, int interval_ms)
{
	return (shared(s) ? pg_heartbeat(s, interval_ms) : MK_EINVAL);
}

int
store_node_state(store *s, const char *client_id, const char *state,
                 const char *failure)
{
	return (shared(s) ? pg_node_state(s, client_id, state, failure)
	                  : MK_EINVAL);
}

int
store_node_states(store *s, store_state_fn fn, void *arg)
{
	return (shared(s) ? pg_node_states(s, fn, arg) : MK_EINVAL);
}

int
store_node_leave(store *s)
{
	return (shared(s) ? pg_node_leave(s) : MK_EINVAL);
}

int
store_lease_take(store *s, store_table t, json_t *key, int ttl_ms,
                 int64_t *gen, json_t **row)
{
	*gen = 0;
	*row = NULL;
	return (shared(s) ? pg_lease_take(s, t, key, ttl_ms, gen, row)
	                  : MK_EINVAL);
}

int
store_lease_put(store *s, store_table t, json_t *row, int64_t gen,
                bool *written)
{
	*written = false;
	return (shared(s) ? pg_lease_put(s, t, row, gen, written) : MK_EINVAL);
}

int
store_lease_drop(store *s, store_table t, json_t *key, int64_t gen)
{
	return (shared(s) ? pg_lease_drop(s, t, key, gen) : MK_EINVAL);
}

int
store_flow_claim(store *s, const char *state, json_t **row)
{
	*row = NULL;
	return (shared(s) ? pg_flow_claim(s, state, row) : MK_EINVAL);
}

/* ---- the calls, handed to the backend ----------------------------------- */

int
store_version(store *s, int *version)
{
	return (s->ops->version(s, version));
}

int
store_begin(store *s, bool durable)
{
	return (s->ops->begin(s, durable));
}

int
store_commit(store *s)
{
	return (s->ops->commit(s));
}

void
store_rollback(store *s)
{
	s->ops->rollback(s);
}

int
store_client_put(store *s, const char *id, const char *name,
                 const char *config_json)
{
	return (s->ops->client_put(s, id, name, config_json));
}

int
store_client_del(store *s, const char *id)
{
	return (s->ops->client_del(s, id));
}

int
store_tools_put(store *s, const char *client_id, const char *hash,
                const char *tools_json, const char *added, bool *written)
{
	int rv;

	*written = false;
	if ((rv = s->ops->tools_put(s, client_id, hash, tools_json, added,
	                            written)) == 0 &&
	    *written) {
		s->tool_writes++;
	}
	return (rv);
}

_Static_assert(STORE_TOOL_VERSIONS == 20, "pg_rows.c's tools_put keeps 20");

char *
store_versions_add(const char *versions, const char *added, size_t max)
{
	json_t *all = versions != NULL ? json_loads(versions, 0, NULL) : NULL;
	json_t *add = added != NULL ? json_loads(added, 0, NULL) : NULL, *v;
	size_t  i;
	char   *out;

	if (!json_is_array(all)) {
		json_decref(all);
		all = json_array();
	}
	json_array_foreach(add, i, v)
	{
		if (json_is_object(v)) {
			json_array_append(all, v);
		}
	}
	json_decref(add);
	while (json_array_size(all) > max) {
		json_array_remove(all, 0);
	}
	out = all != NULL ? json_dumps(all, JSON_COMPACT) : NULL;
	json_decref(all);
	return (out);
}

int
store_tool_versions(store *s, const char *client_id, char **json)
{
	*json = NULL;
	return (s->ops->tool_versions(s, client_id, json));
}

int
store_clients_each(store *s, store_client_fn fn, void *arg, unsigned *skipped)
{
	*skipped = 0;
	return (s->ops->clients_each(s, fn, arg, skipped));
}

int
store_row_put(store *s, store_table t, json_t *row)
{
	return (s->ops->row_put(s, t, row));
}

int
store_row_del(store *s, store_table t, json_t *key)
{
	return (s->ops->row_del(s, t, key));
}

int
store_row_get(store *s, store_table t, json_t *key, json_t **row)
{
	*row = NULL;
	return (s->ops->row_get(s, t, key, row));
}

int
store_rows_each(store *s, store_table t, store_row_fn fn, void *arg,
                unsigned *skipped)
{
	*skipped = 0;
	return (s->ops->rows_each(s, t, fn, arg, skipped));
}
