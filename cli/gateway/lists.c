/*
 * lists.c - what a caller of /mcp sees: the tools, prompts, resources
 * and resource templates of every client its key (and group) reaches
 * that can run calls now, merged into one server's lists and paginated.
 *
 * DESIGN: the client views (the client actors' lists, as their servers
 * gave them) are read at each list and renamed so that they stay unique
 * and route back to their client:
 *   - tools and prompts are "<client>-<name>" (client names have no '-':
 *     the first '-' splits);
 *   - resource URIs and URI templates are "mcpkeep://<client>/<uri>",
 *     the upstream's URI kept whole after the client's name (client
 *     names are URI-safe), so that "mcpkeep://fs/file:///tmp/a" reads
 *     "file:///tmp/a" of client fs; a template expands to such a URI.
 * The order is the clients' (by name), then each client's items by name
 * (tools, prompts) or URI (resources, templates).  A caller's view of a
 * kind has a digest (changes.c compares them).
 */
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/gateway/gateway.h"

static const struct {
	const char *view;   /* the client view's array */
	const char *result; /* the list result's array */
	const char *id;     /* what names an item (renamed) */
} kinds[GW_KINDS] = {
        [GW_TOOLS]     = {"tools", "tools", "name"},
        [GW_PROMPTS]   = {"prompts", "prompts", "name"},
        [GW_RESOURCES] = {"resources", "resources", "uri"},
        [GW_TEMPLATES] = {"resource_templates", "resourceTemplates",
                          "uriTemplate"},
};

/* Whether client view c serves a caller with grants (NULL: all) now: a
 * state that runs calls, and grants that reach it. */
static bool
serves(const json_t *grants, const json_t *c)
{
	const char *st = json_string_value(json_object_get(c, "state"));

	if (st == NULL || strcmp(st, "disabled") == 0 ||
	    strcmp(st, "needs_reauth") == 0 ||
	    strcmp(st, "pending_verification") == 0) {
		return (false);
	}
	return (clients_grants_allow(grants, clients_name(c), NULL));
}

/* Whether a caller with grants, through group, may use item (named
 * name) of client view c: tools each, the rest with their client. */
static bool
reaches(gw_kind k, const json_t *c, const json_t *grants, const json_t *group,
        const char *name)
{
	if (k != GW_TOOLS) {
		return (true);
	}
	return (clients_view_allows(c, name) &&
	        json_object_get(json_object_get(c, "tools_held"), name) ==
	                NULL &&
	        clients_grants_allow(grants, clients_name(c), name) &&
	        (group == NULL ||
	         clients_grants_allow(group, clients_name(c), name)));
}

static int
by_id(const void *a, const void *b, const char *id)
{
	return (strcmp(json_string_value(json_object_get(*(json_t **)a, id)),
	               json_string_value(json_object_get(*(json_t **)b, id))));
}
static int
by_name(const void *a, const void *b)
{
	return (by_id(a, b, "name"));
}
static int
by_uri(const void *a, const void *b)
{
	return (by_id(a, b, "uri"));
}
static int
by_template(const void *a, const void *b)
{
	return (by_id(a, b, "uriTemplate"));
}

/* A tool of a client that is unstable is its last good list's: its
 * _meta says since when and why (GW_META "stale_since", "stale_reason"),
 * and it is still called. */
static void
stale_mark(json_t *item, const json_t *c)
{
	json_t *since = json_object_get(c, "tools_stale_since"), *meta;

	if (since == NULL) {
		return;
	}
	meta = json_object_get(item, "_meta");
	if (!json_is_object(meta)) {
		json_object_set_new(item, "_meta", meta = json_object());
	}
	json_object_set(meta, GW_META "stale_since", since);
	json_object_set(meta, GW_META "stale_reason",
	                json_object_get(c, "tools_stale_reason"));
}

/* Appends client view c's items of kind k, renamed and sorted, to out. */
static void
add_client(json_t *out, gw_kind k, const json_t *c, const json_t *grants,
           const json_t *group)
{
	static int (*const cmp[GW_KINDS])(const void *, const void *) = {
	        NULL, by_name, by_uri, by_template};
	const char *cn = clients_name(c), *id = kinds[k].id;
	json_t     *list = json_object_get(c, kinds[k].view), **items, *it;
	size_t      i, n = 0;

	if (json_array_size(list) == 0 ||
	    (items = malloc(json_array_size(list) * sizeof(*items))) == NULL) {
		return;
	}
	json_array_foreach(list, i, it)
	{
		const char *v = json_string_value(json_object_get(it, id));
		char       *nv;
		if (v == NULL || !reaches(k, c, grants, group, v) ||
		    asprintf(&nv,
		             k == GW_TOOLS || k == GW_PROMPTS ? "%s-%s"
		                                              : GW_URI "%s/%s",
		             cn, v) < 0) {
			continue;
		}
		json_t *copy = json_copy(it);
		json_object_set_new(copy, id, json_string(nv));
		free(nv);
		stale_mark(copy, c);
		items[n++] = copy;
	}
	if (k != GW_TOOLS) { /* (a view's tools come sorted by name) */
		qsort(items, n, sizeof(items[0]), cmp[k]);
	}
	for (i = 0; i < n; i++) {
		json_array_append_new(out, items[i]);
	}
	free(items);
}

json_t *
gw_items(const json_t *all, gw_kind k, const json_t *grants,
         const json_t *group)
{
	json_t *out = json_array(), *c;
	size_t  i;

	json_array_foreach(all, i, c)
	{
		if (out != NULL && serves(grants, c) &&
		    (group == NULL ||
		     clients_grants_allow(group, clients_name(c), NULL))) {
			add_client(out, k, c, grants, group);
		}
	}
	return (out);
}

void
gw_digest(const json_t *items, unsigned char out[32])
{
	char *text = json_dumps(items, JSON_COMPACT | JSON_SORT_KEYS);

	SHA256((const unsigned char *)(text != NULL ? text : ""),
	       text != NULL ? strlen(text) : 0, out);
	free(text);
}

bool
gw_resource_split(const char *uri, char client[65], const char **rest)
{
	const char *p, *slash;

	if (uri == NULL || strncmp(uri, GW_URI, strlen(GW_URI)) != 0) {
		return (false);
	}
	p     = uri + strlen(GW_URI);
	slash = strchr(p, '/');
	if (slash == NULL || slash == p || slash - p >= 65 ||
	    slash[1] == '\0') {
		return (false);
	}
	memcpy(client, p, (size_t)(slash - p));
	client[slash - p] = '\0';
	*rest             = slash + 1;
	return (true);
}

void
gw_list(req *r, const json_t *group, const char *sid, json_t *id,
        json_t *params, gw_kind k)
{
	const char *cursor =
	        json_string_value(json_object_get(params, "cursor"));
	char         *end  = NULL;
	long          from = cursor != NULL ? strtol(cursor, &end, 10) : 0;
	json_t       *all, *items, *page;
	unsigned char digest[32];

	if (cursor != NULL && (end == cursor || *end != '\0' || from < 0)) {
		answer_rpc_error(
		        r, 200, id, -32602,
		        "Invalid params: not a cursor this server gave");
		return;
	}
	all   = clients_all(false);
	items = all != NULL
	        ? gw_items(all, k, r->key != NULL ? r->key->clients : NULL,
	                   group)
	        : NULL;
	json_decref(all);
	if (items == NULL || (page = json_array()) == NULL) {
		json_decref(items);
		answer_rpc_error(r, 200, id, -32603, "out of memory");
		return;
	}
	/* what it saw: a later change is told on its stream */
	gw_digest(items, digest);
	if (sid != NULL) {
		(void)gw_session_seen(sid, k, digest);
	}
	for (long i = from;
	     i < from + GW_PAGE && (size_t)i < json_array_size(items); i++) {
		json_array_append(page, json_array_get(items, (size_t)i));
	}
	json_t *res = json_pack("{s:o}", kinds[k].result, page);
	if (r->mcp_modern) {
		/* 2026-07-28: how long it may be cached, and by whom (the
		 * list depends on the caller's key) */
		json_object_set_new(res, "ttlMs",
		                    json_integer(GW_TTL_LIST_MS));
		json_object_set_new(res, "cacheScope", json_string("private"));
	}
	if (json_array_size(items) > (size_t)(from + GW_PAGE)) {
		char next[32];
		snprintf(next, sizeof(next), "%ld", from + GW_PAGE);
		json_object_set_new(res, "nextCursor", json_string(next));
	}
	json_decref(items);
	gw_result(r, id, res);
}
