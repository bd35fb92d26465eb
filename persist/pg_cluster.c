/*
 * pg_cluster.c - what the nodes of a cluster tell each other through the
 * PostgreSQL store (see store.h: The cluster): the clients they change
 * (LISTEN/NOTIFY), their heartbeats and their own state of each client,
 * read back as the live nodes' (seen within 3 of their intervals, by the
 * server's clock, so the nodes' clocks do not matter).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"
#include "persist/store_impl.h"

int
pg_listen(store *s, int *fd)
{
	int rv;

	s->pq_listen = true;
	if ((rv = pg_ready(s)) != 0 ||
	    (rv = pg_exec(s, "listening",
	                  "LISTEN " STORE_CHANNEL
	                  "; LISTEN " STORE_STATES_CHANNEL
	                  "; LISTEN " STORE_ROWS_CHANNEL)) != 0) {
		*fd = -1;
		return (rv);
	}
	s->pq_resync = false;
	*fd          = PQsocket(s->pq);
	return (0);
}

/* One notification: on STORE_CHANNEL {"op": "put"|"del", "id", "node"},
 * on STORE_STATES_CHANNEL the node's id.  A node's own are not told. */
static int
told(store *s, const PGnotify *n, store_change_fn fn, void *arg)
{
	json_t     *o;
	const char *op, *id, *node;
	int         rv = 0;

	if (strcmp(n->relname, STORE_STATES_CHANNEL) == 0) {
		return (s->node != NULL && strcmp(n->extra, s->node) == 0
		                ? 0
		                : fn(arg, STORE_NODE_STATES, n->extra));
	}
	o = json_loads(n->extra, 0, NULL);
	if (strcmp(n->relname, STORE_ROWS_CHANNEL) == 0) {
		/* {"table", "key": {its key columns}, "node"}: told on as
		 * {"table", "key"} */
		node         = json_string_value(json_object_get(o, "node"));
		bool another = node != NULL &&
		        (s->node == NULL || strcmp(node, s->node) != 0);
		json_object_del(o, "node");
		char *what = json_dumps(o, JSON_COMPACT);
		if (another && what != NULL &&
		    json_string_value(json_object_get(o, "table")) != NULL &&
		    json_is_object(json_object_get(o, "key"))) {
			rv = fn(arg, STORE_ROW_CHANGED, what);
		}
		free(what);
		json_decref(o);
		return (rv);
	}
	op   = json_string_value(json_object_get(o, "op"));
	id   = json_string_value(json_object_get(o, "id"));
	node = json_string_value(json_object_get(o, "node"));
	if (op != NULL && id != NULL && node != NULL &&
	    (s->node == NULL || strcmp(node, s->node) != 0)) {
		rv = fn(arg,
		        strcmp(op, "del") == 0 ? STORE_CLIENT_DEL
		                               : STORE_CLIENT_PUT,
		        id);
	}
	json_decref(o);
	return (rv);
}

int
pg_changes(store *s, store_change_fn fn, void *arg, bool *resync, int *fd)
{
	PGnotify *n;
	int       rv = 0;

	*fd = -1;
	if (s->pq == NULL || PQstatus(s->pq) != CONNECTION_OK ||
	    PQconsumeInput(s->pq) == 0) {
		/* lost: made again (and LISTENing) when the server is back */
		PQfinish(s->pq);
		s->pq       = NULL;
		s->pq_ready = false;
		if ((rv = pg_ready(s)) != 0) {
			return (rv);
		}
	}
	while (rv == 0 && (n = PQnotifies(s->pq)) != NULL) {
		rv = told(s, n, fn, arg);
		PQfreemem(n);
	}
	*resync      = s->pq_resync;
	s->pq_resync = false;
	*fd          = PQsocket(s->pq);
	return (rv);
}

/* ---- heartbeats and states ---------------------------------------------- */

static const char *const statements[][2] = {
        {"hb_put",
         "INSERT INTO mk_nodes (node_id, seen_at, interval_ms) VALUES ($1, "
         "now(), $2) ON CONFLICT (node_id) DO UPDATE SET seen_at = now(), "
         "interval_ms = $2"},
        /* told when it changed (several in one transaction: told once) */
        {"ns_put",
         "WITH w AS (INSERT INTO mk_node_states (node_id, client_id, state, "
         "last_failure, updated_at) VALUES ($1, $2, $3, $4, now()) ON "
         "CONFLICT (node_id, client_id) DO UPDATE SET state = $3, "
         "last_failure = $4, updated_at = now() WHERE (mk_node_states.state, "
         "mk_node_states.last_failure) IS DISTINCT FROM ($3, $4) RETURNING "
         "1) SELECT pg_notify('" STORE_STATES_CHANNEL "', $1) FROM w"},
        {"ns_del",
         "WITH d AS (DELETE FROM mk_node_states WHERE node_id = $1 AND "
         "client_id = $2 RETURNING 1) SELECT pg_notify('" STORE_STATES_CHANNEL
         "', $1) FROM d LIMIT 1"},
        /* the live nodes' (not this one's) */
        {"ns_each",
         "SELECT s.node_id, s.client_id, s.state, s.last_failure FROM "
         "mk_node_states s JOIN mk_nodes n ON n.node_id = s.node_id WHERE "
         "s.node_id <> $1 AND n.seen_at > now() - n.interval_ms * 3 * "
         "interval '1 millisecond' ORDER BY s.client_id, s.node_id"},
        /* a lease: taken unless another node holds one unexpired */
        {"lease_take",
         "UPDATE oauth_tokens SET lease_owner = $4, lease_until = now() + "
         "$5 * interval '1 millisecond', lease_gen = lease_gen + 1 WHERE "
         "client_id = $1 AND mode = $2 AND identity = $3 AND (lease_owner "
         "IS NULL OR lease_owner = $4 OR lease_until < now()) RETURNING "
         "lease_gen"},
        {"lease_drop",
         "WITH w AS (UPDATE oauth_tokens SET lease_owner = NULL, "
         "lease_until = NULL WHERE client_id = $1 AND mode = $2 AND "
         "identity = $3 AND lease_gen = $5 AND lease_owner = $4 RETURNING "
         "1) SELECT pg_notify('" STORE_ROWS_CHANNEL "', $6) FROM w"},
        /* single use across the nodes: one claims it */
        {"flow_claim",
         "UPDATE oauth_flows SET status = 'claiming' WHERE state = $1 AND "
         "status = 'pending' RETURNING state"},
        {"node_leave",
         "WITH s AS (DELETE FROM mk_node_states WHERE node_id = $1), n AS "
         "(DELETE FROM mk_nodes WHERE node_id = $1) SELECT pg_notify('" STORE_STATES_CHANNEL
         "', $1)"},
};

int
pg_prepare_cluster(store *s)
{
	int rv;

	for (size_t i = 0; i < sizeof(statements) / sizeof(statements[0]);
	     i++) {
		if ((rv = pg_prepare(s, statements[i][0], statements[i][1])) !=
		    0) {
			return (rv);
		}
	}
	return (0);
}

/* Runs one of the statements above with text parameters. */
static int
run(store *s, const char *name, int n, const char *const *v, const char *what)
{
	int rv;

	if (s->node == NULL) {
		return (store_failf(s, MK_EINVAL, "%s: no node id set", what));
	}
	PQclear(pg_run_text(s, name, n, v, what, &rv));
	return (rv);
}

int
pg_heartbeat(store *s, int interval_ms)
{
	char        ms[16];
	const char *v[] = {s->node, ms};

	snprintf(ms, sizeof(ms), "%d", interval_ms);
	return (run(s, "hb_put", 2, v, "writing the heartbeat"));
}

int
pg_node_state(store *s, const char *client_id, const char *state,
              const char *failure)
{
	const char *v[] = {s->node, client_id, state, failure};

	return (state != NULL
	                ? run(s, "ns_put", 4, v, "writing a client's state")
	                : run(s, "ns_del", 2, v,
	                      "forgetting a client's state"));
}

int
pg_node_states(store *s, store_state_fn fn, void *arg)
{
	const char *v[] = {s->node};
	PGresult   *r;
	int         rv;

	if (s->node == NULL) {
		return (store_failf(s, MK_EINVAL, "no node id set"));
	}
	if ((r = pg_run_text(s, "ns_each", 1, v, "reading the nodes' states",
	                     &rv)) == NULL) {
		return (rv);
	}
	for (int i = 0; rv == 0 && i < PQntuples(r); i++) {
		rv = fn(arg, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
		        PQgetvalue(r, i, 2),
		        PQgetisnull(r, i, 3) ? NULL : PQgetvalue(r, i, 3));
	}
	PQclear(r);
	return (rv);
}

int
pg_node_leave(store *s)
{
	const char *v[] = {s->node};

	return (run(s, "node_leave", 1, v, "leaving the cluster"));
}

/* ---- refresh leases ----------------------------------------------------- */

void
pg_told_row(store *s, store_table t, json_t *row, char *buf, size_t len)
{
	const tabledef *d   = &store_tables[t];
	json_t         *key = json_object(), *o;
	char           *text;

	for (unsigned k = 0; key != NULL && k < d->nkey; k++) {
		json_object_set(key, d->cols[k],
		                json_object_get(row, d->cols[k]));
	}
	o = json_pack("{s:s, s:o*, s:s}", "table", d->name, "key", key, "node",
	              s->node != NULL ? s->node : "");
	text = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
	snprintf(buf, len, "%s", text != NULL ? text : "{}");
	free(text);
	json_decref(o);
}

/* The leased table's key of key, checked: 0, or MK_EINVAL. */
static int
lease_key(store *s, store_table t, json_t *key, const char **v)
{
	const tabledef *d = &store_tables[t];

	if (!d->leased) {
		return (store_failf(s, MK_EINVAL, "%s has no leases",
		                    d->name));
	}
	if (s->node == NULL) {
		return (store_failf(s, MK_EINVAL, "no node id set"));
	}
	return (store_key_cols(s, d, key, v));
}

int
pg_lease_take(store *s, store_table t, json_t *key, int ttl_ms, int64_t *gen,
              json_t **row)
{
	const char *v[6];
	char        ttl[16];
	PGresult   *r;
	int         rv;

	*gen = 0;
	*row = NULL;
	if ((rv = lease_key(s, t, key, v)) != 0) {
		return (rv);
	}
	snprintf(ttl, sizeof(ttl), "%d", ttl_ms);
	v[3] = s->node;
	v[4] = ttl;
	if ((r = pg_run_text(s, "lease_take", 5, v, "taking a refresh lease",
	                     &rv)) == NULL) {
		return (rv);
	}
	if (PQntuples(r) == 1) {
		*gen = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	}
	PQclear(r);
	/* read after taking: another node may have refreshed it */
	return (pg_row_get(s, t, key, row));
}

int
pg_lease_put(store *s, store_table t, json_t *row, int64_t gen, bool *written)
{
	pgargs    a = {0};
	PGresult *r;
	char      name[32], told[STORE_ERR_MAX];
	int       rv;

	*written = false;
	if ((rv = lease_key(s, t, row, (const char *[6]) {0})) != 0 ||
	    (rv = pg_bind_row(s, t, row, &a)) != 0) {
		return (rv);
	}
	pg_arg_int(&a, (long long)gen);
	pg_arg_text(&a, s->node);
	pg_told_row(s, t, row, told, sizeof(told));
	pg_arg_text(&a, told);
	snprintf(name, sizeof(name), "t%d_fput", (int)t);
	if ((r = pg_run(s, name, &a, "writing a refreshed token", &rv)) !=
	    NULL) {
		*written = PQntuples(r) == 1;
		PQclear(r);
	}
	return (rv);
}

int
pg_lease_drop(store *s, store_table t, json_t *key, int64_t gen)
{
	const char *v[6];
	char        g[24], told[STORE_ERR_MAX];
	int         rv;

	if ((rv = lease_key(s, t, key, v)) != 0) {
		return (rv);
	}
	snprintf(g, sizeof(g), "%lld", (long long)gen);
	pg_told_row(s, t, key, told, sizeof(told));
	v[3] = s->node;
	v[4] = g;
	v[5] = told;
	return (run(s, "lease_drop", 6, v, "releasing a refresh lease"));
}

/* ---- OAuth flows -------------------------------------------------------- */

int
pg_flow_claim(store *s, const char *state, json_t **row)
{
	const char *v[] = {state};
	PGresult   *r;
	json_t     *key;
	int         rv;

	if ((r = pg_run_text(s, "flow_claim", 1, v, "claiming an OAuth flow",
	                     &rv)) == NULL) {
		return (rv);
	}
	bool mine = PQntuples(r) == 1;
	PQclear(r);
	if (!mine) {
		return (0); /* unknown, or another's */
	}
	if ((key = json_pack("{s:s}", "state", state)) == NULL) {
		return (MK_ENOMEM);
	}
	rv = pg_row_get(s, STORE_OAUTH_FLOWS, key, row);
	json_decref(key);
	return (rv);
}
