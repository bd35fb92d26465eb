/*
 * tables.c - what both backends store, by name: the row tables'
 * definitions (credentials, tool approvals), their keys, and the
 * additional data a sealed value is bound to (see store.h: Sealing).
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "mcpkeep.h"
#include "persist/store_impl.h"

const tabledef store_tables[STORE_NTABLES] = {
        [STORE_OAUTH_CONFIGS]      = {.name   = "oauth_configs",
                                      .cols   = {"id", "client_id", "config"},
                                      .nkey   = 1,
                                      .sealed = 1u << 2,
                                      .stamp  = "updated_at",
                                      .told   = true},
        [STORE_OAUTH_TOKENS]       = {.name   = "oauth_tokens",
                                      .cols   = {"client_id", "mode", "identity",
                                                 "access_token", "refresh_token",
                                                 "token_type", "scopes", "expires_at",
                                                 "last_refreshed", "status"},
                                      .nkey   = 3,
                                      .sealed = 1u << 3 | 1u << 4,
                                      .stamp  = "updated_at",
                                      .told   = true,
                                      .leased = true},
        [STORE_OAUTH_FLOWS]        = {.name   = "oauth_flows",
                                      .cols   = {"state", "client_id", "mode",
                                                 "identity", "pkce_verifier",
                                                 "redirect_uri", "status", "expires_at",
                                                 "data"},
                                      .nkey   = 1,
                                      .sealed = 1u << 4,
                                      .stamp  = "created_at",
                                      .stamp_on_insert = true},
        [STORE_HEADER_CREDENTIALS] = {.name = "header_credentials",
                                      .cols = {"client_id", "mode", "identity",
                                               "headers", "status"},
                                      .nkey = 3,
                                      .sealed = 1u << 3,
                                      .stamp  = "updated_at"},
        [STORE_HEADER_FLOWS]       = {.name = "header_flows",
                                      .cols = {"id", "client_id", "mode", "identity",
                                               "status", "expires_at", "data"},
                                      .nkey = 1,
                                      .stamp           = "created_at",
                                      .stamp_on_insert = true},
        [STORE_TOOL_APPROVALS]     = {.name   = "tool_approvals",
                                      .cols   = {"client_id", "digest", "tools",
                                                 "rejected"},
                                      .nkey   = 1,
                                      .sealed = 1u << 1 | 1u << 2 | 1u << 3,
                                      .stamp  = "updated_at",
                                      .told   = true},
};

int
store_table_find(const char *name)
{
	for (int t = 0; t < STORE_NTABLES; t++) {
		if (strcmp(store_tables[t].name, name) == 0) {
			return (t);
		}
	}
	return (-1);
}

const char *
store_table_name(store_table t)
{
	return (store_tables[t].name);
}

int
store_row_key(store_table t, json_t *row, char *buf, size_t len)
{
	const tabledef *d  = &store_tables[t];
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

int
store_col_index(const tabledef *d, const char *name)
{
	for (int c = 0; d->cols[c] != NULL; c++) {
		if (strcmp(d->cols[c], name) == 0) {
			return (c);
		}
	}
	return (-1);
}

void
store_key_list(const tabledef *d, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (unsigned k = 0; k < d->nkey && at < len; k++) {
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
		                       k ? ", " : "", d->cols[k]);
	}
}

void
store_client_aad(char *aad, size_t len, const char *id)
{
	snprintf(aad, len, "mcp_clients\x1f%s", id);
}

int
store_unopened(store *s, int rv, const char *table, const char *key,
               const char *col)
{
	if (rv == MK_EINVAL) {
		return (store_failf(
		        s, MK_EPROTO,
		        "%s row %s: %s is not sealed, in a sealed store (written around mcpkeep): refused",
		        table, key, col));
	}
	return (store_failf(
	        s, MK_EPROTO,
	        "%s row %s: %s does not open with this key (tampered, or moved from another row)",
	        table, key, col));
}

int
store_client_skip(store *s, int rv, const char *id, const char *name,
                  unsigned *skipped)
{
	if (rv == MK_EINVAL) {
		store_failf(
		        s, MK_EPROTO,
		        "mcp_clients row %s (client %s): config is not sealed, in a sealed store (written around mcpkeep): refused",
		        id, name);
	} else {
		store_failf(
		        s, MK_EPROTO,
		        "client %s: its stored config does not open with this key (tampered, or moved from another row)",
		        name);
	}
	(*skipped)++;
	return (rv == MK_ENOMEM ? rv : 0);
}

void
store_sql_lists(const tabledef *d, char mark, store_sql *q)
{
	size_t nc = 0, nv = 0, ns = 0, nw = 0;

	memset(q, 0, sizeof(*q));
	for (q->n = 0; d->cols[q->n] != NULL; q->n++) {
		const char *c = d->cols[q->n];
		unsigned    i = q->n;

		nc += (size_t)snprintf(q->cols + nc, sizeof(q->cols) - nc,
		                       "%s%s", i ? ", " : "", c);
		nv += (size_t)snprintf(q->vals + nv, sizeof(q->vals) - nv,
		                       "%s%c%u", i ? ", " : "", mark, i + 1);
		if (i < d->nkey) {
			nw += (size_t)snprintf(q->where + nw,
			                       sizeof(q->where) - nw,
			                       "%s%s = %c%u", i ? " AND " : "",
			                       c, mark, i + 1);
		} else {
			ns += (size_t)snprintf(
			        q->set + ns, sizeof(q->set) - ns,
			        "%s%s = excluded.%s", ns ? ", " : "", c, c);
		}
	}
	if (!d->stamp_on_insert) {
		snprintf(q->set + ns, sizeof(q->set) - ns,
		         ", %s = excluded.%s", d->stamp, d->stamp);
	}
	store_key_list(d, q->keys, sizeof(q->keys));
}

int
store_key_cols(store *s, const tabledef *d, json_t *key, const char **v)
{
	assert(d->nkey <= STORE_KEY_MAX);
	for (unsigned k = 0; k < d->nkey; k++) {
		v[k] = json_string_value(json_object_get(key, d->cols[k]));
		if (v[k] == NULL) {
			return (store_failf(s, MK_EINVAL,
			                    "%s: key column %s missing",
			                    d->name, d->cols[k]));
		}
	}
	return (0);
}

int
store_key_bind(store *s, store_table t, json_t *key,
               void (*bind)(void *arg, unsigned k, const char *v), void *arg)
{
	const tabledef *d = &store_tables[t];
	const char     *v[STORE_KEY_MAX];

	if (store_key_cols(s, d, key, v) != 0) {
		return (MK_EINVAL);
	}
	for (unsigned k = 0; k < d->nkey; k++) {
		bind(arg, k, v[k]);
	}
	return (0);
}
