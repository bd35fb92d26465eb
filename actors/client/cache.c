/*
 * cache.c - the opt-in result cache of a client's read-only tools
 * (cache_results: tool -> ttl): a call of such a tool, annotated
 * readOnlyHint and idempotentHint by the server, is answered from a
 * result of the same list version, tool, arguments (canonical JSON) and
 * caller's identity younger than its ttl, without the upstream.  Bounded
 * in entries and bytes (the least recently used go first); a new list
 * version (or a list_changed, which lists again) clears it, as does a
 * config change.  Hits and misses are counted for /metrics.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"

#define CACHE_MAX       1024              /* entries per client */
#define CACHE_BYTES     (8 * 1024 * 1024) /* results' bytes per client */
#define CACHE_ONE_BYTES (1024 * 1024)     /* a result kept at most */
#define CACHE_KEY_HEX   65

struct cl_centry {
	lru_link   link; /* in cl->cache_lru: first, the container */
	strmap_ent ent;  /* in cl->cache, key its key */
	char       key[CACHE_KEY_HEX];
	char      *result;  /* the CallToolResult, JSON text */
	size_t     bytes;   /* its length */
	int64_t    expires; /* monotonic ns */
};

/* The ttl (ms) of c's tool when its results may be kept, else 0: named
 * in cache_results and annotated read-only and idempotent now. */
static int64_t
ttl_of(client *cl, const cl_call *c)
{
	json_t   *ttl = json_object_get(cl->cfg->cache, c->tool);
	mcp_hints h;

	if (c->kind != CL_CALL_TOOL || ttl == NULL ||
	    !cl_tool_hints(cl, c->tool, &h)) {
		return (0);
	}
	return (h.read_only && h.idempotent ? json_integer_value(ttl) : 0);
}

/* c's key: SHA-256 of the list's hash, the tool, the canonical arguments
 * and the caller's identity (a per-user client's results are its
 * callers' own). */
static bool
key_of(client *cl, const cl_call *c, char key[CACHE_KEY_HEX])
{
	char *args =
	        json_dumps(c->args != NULL ? c->args : json_null(),
	                   JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	unsigned char md[32];
	unsigned int  n = 0;
	EVP_MD_CTX   *x = EVP_MD_CTX_new();
	bool          ok;

	ok = args != NULL && x != NULL &&
	        EVP_DigestInit_ex(x, EVP_sha256(), NULL) &&
	        EVP_DigestUpdate(x, cl->hash, strlen(cl->hash) + 1) &&
	        EVP_DigestUpdate(x, c->tool, strlen(c->tool) + 1) &&
	        EVP_DigestUpdate(x, args, strlen(args) + 1) &&
	        EVP_DigestUpdate(x, c->mode ? c->mode : "",
	                         c->mode ? strlen(c->mode) + 1 : 1) &&
	        EVP_DigestUpdate(x, c->identity ? c->identity : "",
	                         c->identity ? strlen(c->identity) : 0) &&
	        EVP_DigestFinal_ex(x, md, &n) && n == sizeof(md);
	EVP_MD_CTX_free(x);
	free(args);
	for (unsigned i = 0; ok && i < 32; i++) {
		snprintf(key + 2 * i, 3, "%02x", md[i]);
	}
	return (ok);
}

static void
drop(client *cl, cl_centry *e)
{
	lru_remove(&cl->cache_lru, &e->link);
	strmap_del(&cl->cache, &e->ent);
	cl->cache_bytes -= e->bytes;
	free(e->result);
	free(e);
}

void
cl_cache_clear(client *cl)
{
	lru_link *l;

	while ((l = lru_oldest(&cl->cache_lru)) != NULL) {
		drop(cl, (cl_centry *)l);
	}
}

bool
cl_cache_answer(client *cl, cl_call *c)
{
	char        key[CACHE_KEY_HEX];
	strmap_ent *se;
	cl_centry  *e;
	json_t     *result;

	if (ttl_of(cl, c) == 0 || !key_of(cl, c, key)) {
		return (false);
	}
	if ((se = strmap_get(&cl->cache, key)) != NULL) {
		e = STRMAP_OF(se, cl_centry, ent);
		if (kn_now_ns() < e->expires &&
		    (result = json_loads(e->result, 0, NULL)) != NULL) {
			lru_touch(&cl->cache_lru, &e->link);
			cl->m.cache[0]++;
			c->cached = true;
			cl_call_finish(cl, c, NULL, result);
			json_decref(result);
			return (true);
		}
		drop(cl, e); /* expired */
	}
	cl->m.cache[1]++;
	cl_counted(cl);
	return (false);
}

void
cl_cache_put(client *cl, const cl_call *c, const char *result)
{
	int64_t     ttl = ttl_of(cl, c);
	size_t      n   = strlen(result);
	char        key[CACHE_KEY_HEX];
	strmap_ent *se;
	cl_centry  *e;

	if (ttl == 0 || c->cached || n > CACHE_ONE_BYTES ||
	    !key_of(cl, c, key)) {
		return;
	}
	if ((se = strmap_get(&cl->cache, key)) != NULL) {
		drop(cl, STRMAP_OF(se, cl_centry, ent));
	}
	while (cl->cache_lru.n >= CACHE_MAX ||
	       (cl->cache_lru.n > 0 && cl->cache_bytes + n > CACHE_BYTES)) {
		drop(cl, (cl_centry *)lru_oldest(&cl->cache_lru));
	}
	if ((e = calloc(1, sizeof(*e))) == NULL ||
	    (e->result = strdup(result)) == NULL) {
		free(e);
		return;
	}
	memcpy(e->key, key, sizeof(key));
	e->ent.key = e->key;
	e->bytes   = n;
	e->expires = kn_now_ns() + ttl * KN_NS_PER_MS;
	if (strmap_put(&cl->cache, &e->ent) != 0) {
		free(e->result);
		free(e);
		return;
	}
	lru_touch(&cl->cache_lru, &e->link);
	cl->cache_bytes += n;
}

bool
cl_cache_refuses(const client *cl, const cfg_client *cfg, char *why,
                 size_t len)
{
	const char *tool;
	json_t     *ttl, *t;
	mcp_hints   h;

	json_object_foreach(cfg->cache, tool, ttl)
	{
		if ((t = cl_tool_named(cl, tool)) == NULL) {
			continue;
		}
		mcp_tool_hints(t, &h);
		if (!h.read_only || !h.idempotent) {
			snprintf(
			        why, len,
			        "client \"%s\": cache_results: tool %.100s is "
			        "not annotated readOnlyHint and idempotentHint "
			        "by its server: its results cannot be kept",
			        cfg->name, tool);
			return (true);
		}
	}
	return (false);
}

void
cl_cache_listed(client *cl)
{
	const char *tool;
	json_t     *ttl, *t;
	mcp_hints   h;

	cl_cache_clear(cl); /* results of an older list */
	json_object_foreach(cl->cfg->cache, tool, ttl)
	{
		if ((t = cl_tool_named(cl, tool)) == NULL) {
			continue;
		}
		mcp_tool_hints(t, &h);
		if (!h.read_only || !h.idempotent) {
			KN_WARN("client",
			        "%s: cache_results: tool %s is not annotated "
			        "readOnlyHint and idempotentHint: its results "
			        "are not kept",
			        cl->cfg->name, tool);
		}
	}
}
