/*
 * user.c - per-user credentials: per_user_headers,
 * per_user_oauth and token_exchange, each with two independent paths -
 * the admin's discovery credential (mode "admin", retained from the
 * bootstrap) and every caller's own (mode user, vk or session, keyed by
 * identity, never used for another).  A caller without a usable one gets
 * mcp_auth_required and the tool does not run.  This file: a caller's
 * ask routed by auth type (per_user_oauth's answered here),
 * mcp_auth_required, the caches of callers' credentials (their LRU
 * bounds, eviction) and their fills from the store.
 *
 * DESIGN: header credentials and header flows are kept (headers.c) and
 * stored (sealed); OAuth tokens of callers are tokens like the shared one
 * (their flows are OAuth flows for the identity); exchanged tokens
 * (exchange.c) are a cache only: an LRU (cr->lru_max entries) keyed by
 * identity mode, identity, client and the first 16 hex of SHA-256 of the
 * subject token, valid for expires_in - 30 s (5 min when absent).  The
 * admin's exchange keeps its subject token as the token's refresh token,
 * so a refresh re-exchanges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/persister_msg.h"
#include "codec/mp.h"
#include "codec/text.h"
#include "persist/store.h"

/* ---- mcp_auth_required ------------------------------------------------ */

void
cr_auth_reply(cr_self *cr, uint64_t corr, const cclient *c, const char *kind,
              json_t *extra, const char *message)
{
	json_t        *p = json_pack("{s:s, s:s, s:s, s:s}", "kind", kind,
	                             "mcp_client_id", c->id, "mcp_client_name",
	                             c->name, "message", message);
	const char    *k;
	json_t        *v;
	cr_refused_msg m = {.error = (char *)message};

	json_object_foreach(extra, k, v)
	{
		json_object_set(p, k, v);
	}
	char *text      = json_dumps(p, JSON_COMPACT);
	m.auth_required = text != NULL ? text : "{}";
	json_decref(p);
	kn_reply_msg(kn_actor_kernel(cr->self), corr, MK_EAUTH,
	             CODEC_OF(cr_refused_msg, &m));
	free(text);
}

/* ---- the caches ----------------------------------------------------------
 */

bool
cr_callers_mode(const char *mode)
{
	return (strcmp(mode, "user") == 0 || strcmp(mode, "vk") == 0 ||
	        strcmp(mode, "session") == 0);
}

#define TOKEN_OF(l) ((token *)((char *)(l)-offsetof(token, lru)))

void
cr_lru_drop(cr_self *cr, token *t)
{
	if (t->cache) {
		lru_remove(&cr->tlru, &t->lru);
	}
}

/* Over the bound, the least recently used go (never one in use, nor
 * the one just touched). */
void
cr_lru_touch(cr_self *cr, token *t)
{
	lru_link *l, *newer;

	if (!t->cache) {
		return;
	}
	lru_touch(&cr->tlru, &t->lru);
	for (l = lru_oldest(&cr->tlru); l != NULL && cr->tlru.n > cr->tlru.max;
	     l = newer) {
		token *v = TOKEN_OF(l);
		newer    = lru_newer(&cr->tlru, l);
		if (v != t && v->state == TOK_IDLE) {
			cr_token_free(cr, v);
		}
	}
}

/* Whether an entry matches an eviction's (NULL: any) fields. */
static bool
matches(const char *client, const char *mode, const char *identity,
        const char *hash, const char *e_client, const char *e_mode,
        const char *e_identity)
{
	size_t il = identity != NULL ? strlen(identity) : 0;

	if ((client != NULL && strcmp(client, e_client) != 0) ||
	    (mode != NULL && strcmp(mode, e_mode) != 0)) {
		return (false);
	}
	/* an exchange entry's identity is "identity\x1fhash" */
	if (identity != NULL && strcmp(identity, e_identity) != 0 &&
	    !(strncmp(identity, e_identity, il) == 0 &&
	      e_identity[il] == '\x1f')) {
		return (false);
	}
	if (hash != NULL) {
		const char *sep = strchr(e_identity, '\x1f');
		return (sep != NULL && strcmp(sep + 1, hash) == 0);
	}
	return (true);
}

/* Drops the cached callers' credentials that match (explicit: the
 * generation moves, so a fill in flight is discarded).  Returns how
 * many went. */
static unsigned
evict(cr_self *cr, const char *client, const char *mode, const char *identity,
      const char *hash)
{
	lru_link *l, *newer;
	unsigned  n = 0;

	cr->gen++;
	for (l = lru_oldest(&cr->tlru); l != NULL; l = newer) {
		token *t = TOKEN_OF(l);
		newer    = lru_newer(&cr->tlru, l);
		if (matches(client, mode, identity, hash, t->client_id,
		            t->mode, t->identity) &&
		    t->state == TOK_IDLE) {
			cr_token_free(cr, t);
			n++;
		}
	}
	for (l = lru_oldest(&cr->hlru); l != NULL && hash == NULL; l = newer) {
		hcred *h = HCRED_OF(l);
		newer    = lru_newer(&cr->hlru, l);
		if (matches(client, mode, identity, NULL, h->client_id,
		            h->mode, h->identity)) {
			cr_hcred_drop(cr, h);
			n++;
		}
	}
	cr->evicted += n;
	return (n);
}

void
cr_evict_client(cr_self *cr, const char *client)
{
	(void)evict(cr, client, NULL, NULL, NULL);
}

/* ---- fills from the store
 * ---------------------------------------------------
 */

/* An ask waiting for a fill. */
typedef struct fillw {
	uint64_t      corr;
	bool          force;
	char         *subject;
	char         *by;
	struct fillw *next;
} fillw;

static void
fillw_free(fillw *w)
{
	text_secret_free(w->subject);
	free(w->by);
	free(w);
}

typedef struct fill {
	strmap_ent ent;    /* key: table, client, mode, identity */
	char      *key;    /* owns ent.key */
	cr_self   *cr;     /* owner */
	char      *client; /* whose */
	char      *mode;
	char      *identity;
	int        table;   /* STORE_OAUTH_TOKENS or _HEADER_CREDENTIALS */
	uint64_t   gen0;    /* cr->gen at the start */
	fillw     *waiting; /* asks to run again once it is in */
} fill;

static void
fill_free(fill *f)
{
	free(f->key);
	free(f->client);
	free(f->mode);
	free(f->identity);
	free(f);
}

/* A row from the store: into the cache (tokens or header credentials). */
static void
fill_insert(cr_self *cr, fill *f, json_t *row)
{
	const char *v;

	if (f->table == STORE_HEADER_CREDENTIALS) {
		v          = cr_str(row, "headers");
		char *copy = v != NULL ? strdup(v) : NULL;
		if (copy != NULL) {
			(void)cr_hcred_set(cr, f->client, f->mode, f->identity,
			                   copy);
		}
		return;
	}
	token *t = cr_token(cr, f->client, f->mode, f->identity, true);
	if (t == NULL || (v = cr_str(row, "access_token")) == NULL) {
		return;
	}
	t->access  = strdup(v);
	v          = cr_str(row, "refresh_token");
	t->refresh = v != NULL ? strdup(v) : NULL;
	v          = cr_str(row, "scopes");
	t->scopes  = v != NULL ? strdup(v) : NULL;
	cr_token_restore(t, row);
	v         = cr_str(row, "status");
	t->active = v != NULL && strcmp(v, "active") == 0;
}

static void
on_fill(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	fill        *f     = arg;
	cr_self     *cr    = f->cr;
	bool         raced = cr->gen != f->gen0;
	cclient     *c     = cr_client(cr, f->client);
	ps_found_msg found;
	fillw       *w;

	strmap_del(&cr->fills, &f->ent);
	if (status == 0 && !raced &&
	    ps_found_msg_unpack(data, len, &found) == 0) {
		json_t *row = found.row != NULL
		        ? json_loads(found.row, 0, NULL)
		        : NULL;
		if (row != NULL) {
			fill_insert(cr, f, row);
		}
		json_decref(row);
		ps_found_msg_clear(&found);
	}
	while ((w = f->waiting) != NULL) {
		f->waiting = w->next;
		if (c == NULL) {
			cr_reply_error(cr, w->corr, MK_ENOENT, NULL,
			               "the MCP client is gone");
		} else {
			/* raced an eviction: what it read may be stale - read
			 * again; else look again, without another fill */
			cr_ask a = {.mode     = f->mode,
			            .identity = f->identity,
			            .subject  = w->subject,
			            .by       = w->by,
			            .force    = w->force};
			cr_user_get(cr, c, &a, w->corr, !raced);
		}
		fillw_free(w);
	}
	fill_free(f);
}

/* Fills the caller's entry from the store (one read per key at a time),
 * then runs the ask again. */
void
cr_fill_start(cr_self *cr, cclient *c, int table, const cr_ask *a,
              uint64_t corr)
{
	const char *mode = a->mode, *identity = a->identity;
	char        key[512];
	fill       *f;
	fillw      *w = calloc(1, sizeof(*w));
	json_t     *k;
	char       *text;

	snprintf(key, sizeof(key), "%d\x1f%s\x1f%s\x1f%s", table, c->id, mode,
	         identity);
	if (w == NULL ||
	    (a->subject != NULL &&
	     (w->subject = strdup(a->subject)) == NULL) ||
	    (a->by != NULL && (w->by = strdup(a->by)) == NULL)) {
		if (w != NULL) {
			fillw_free(w);
		}
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	w->corr  = corr;
	w->force = a->force;
	if ((f = (fill *)strmap_get(&cr->fills, key)) != NULL) {
		w->next    = f->waiting; /* single flight */
		f->waiting = w;
		return;
	}
	if ((f = calloc(1, sizeof(*f))) == NULL ||
	    (f->key = strdup(key)) == NULL ||
	    (f->client = strdup(c->id)) == NULL ||
	    (f->mode = strdup(mode)) == NULL ||
	    (f->identity = strdup(identity)) == NULL) {
		if (f != NULL) {
			fill_free(f);
		}
		fillw_free(w);
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	f->ent.key = f->key;
	f->cr      = cr;
	f->table   = table;
	f->gen0    = cr->gen;
	f->waiting = w;
	(void)strmap_put(&cr->fills, &f->ent);
	cr->nfills++;
	if (cr->ps == NULL) {
		on_fill(cr->self, f, 0, CODEC_EMPTY,
		        CODEC_EMPTY_LEN); /* none */
		return;
	}
	k    = json_pack("{s:s, s:s, s:s}", "client_id", c->id, "mode", mode,
	                 "identity", identity);
	text = k != NULL ? json_dumps(k, JSON_COMPACT) : NULL;
	json_decref(k);
	ps_key_msg m = {.table = (char *)store_table_name((store_table)table),
	                .key   = text != NULL ? text : "{}"};
	if (kn_ask_async_msg(cr->self, cr->ps, MSG_PS_ROW_GET,
	                     CODEC_OF(ps_key_msg, &m), 30000, on_fill,
	                     f) != 0) {
		on_fill(cr->self, f, MK_ECLOSED, NULL, 0);
	}
	free(text);
}

/* ---- the caller's credential
 * ------------------------------------------------
 */

void
cr_user_get(cr_self *cr, cclient *c, const cr_ask *a, uint64_t corr,
            bool filled)
{
	const char *mode = a->mode, *identity = a->identity;
	bool        admin = strcmp(mode, "admin") == 0;
	token      *t;

	switch (c->auth) {
	case CFG_AUTH_PER_USER_HEADERS:
		cr_headers_get(cr, c, a, corr, filled);
		return;
	case CFG_AUTH_PER_USER_OAUTH:
		t = cr_token(cr, c->id, mode, identity, false);
		if (t == NULL && !admin && !filled) {
			cr_ask fa  = *a;
			fa.subject = NULL;
			cr_fill_start(cr, c, STORE_OAUTH_TOKENS, &fa, corr);
		} else if (t == NULL || (!t->active && !admin)) {
			if (admin) {
				cr_reply_error(
				        cr, corr, MK_ESTATE, "none",
				        "MCP client %s has no admin credential: initiate-verification first",
				        c->name);
			} else {
				cr_flow_for(cr, c, mode, identity, a->by, corr,
				            true);
			}
		} else if (!t->active) {
			cr_answer_token(cr, t, corr);
		} else {
			cr_lru_touch(cr, t);
			cr_token_use(cr, t, a->force, corr);
		}
		return;
	default: /* CFG_AUTH_TOKEN_EXCHANGE */
		cr_exchange_get(cr, c, mode, identity, a->subject, a->force,
		                corr);
		return;
	}
}

void
cr_user_fini(cr_self *cr)
{
	strmap_ent *e;
	uint64_t    id;

	cr_headers_fini(cr);
	while ((e = idmap_pop(&cr->fills.m, &id)) != NULL) {
		for (strmap_ent *n; e != NULL; e = n) {
			n = e->next;
			fill_free((fill *)e);
		}
	}
	strmap_fini(&cr->fills);
}

int
cr_on_evict(kn_actor *self, cr_self *cr, kn_msg *msg, cr_evict_msg *m)
{
	const char *client, *mode, *identity, *subject;
	char        hash[600];

	client     = m->client;
	mode       = m->mode;
	identity   = m->identity;
	subject    = m->subject;
	cclient *c = client != NULL ? cr_client(cr, client) : NULL;
	if (client != NULL && c == NULL) {
		kn_reply_error(kn_actor_kernel(cr->self), kn_defer(msg),
		               MK_ENOENT, "no MCP client %.200s", client);
	} else {
		if (subject != NULL) {
			/* by token: the entries exchanged from it */
			cr_cache_identity("", subject, hash, sizeof(hash));
		}
		cr_evicted_msg out = {
		        .evicted = evict(cr, c != NULL ? c->id : NULL, mode,
		                         identity,
		                         subject != NULL ? hash + 1 : NULL)};
		kn_reply_msg(kn_actor_kernel(cr->self), kn_defer(msg), 0,
		             CODEC_OF(cr_evicted_msg, &out));
	}
	return (0);
}
