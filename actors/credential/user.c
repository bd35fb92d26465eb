/*
 * user.c - per-user credentials (SPEC section 6): per_user_headers,
 * per_user_oauth and token_exchange, each with two independent paths -
 * the admin's discovery credential (mode "admin", retained from the
 * bootstrap) and every caller's own (mode user, vk or session, keyed by
 * identity, never used for another).  A caller without a usable one gets
 * mcp_auth_required and the tool does not run.
 *
 * DESIGN: header credentials and header flows are kept here and stored
 * (sealed); OAuth tokens of callers are tokens like the shared one (their
 * flows are OAuth flows for the identity); exchanged tokens are a cache
 * only: an LRU (cr->lru_max entries) keyed by identity mode, identity,
 * client and the first 16 hex of SHA-256 of the subject token, valid for
 * expires_in - 30 s (5 min when absent).  The admin's exchange keeps its
 * subject token as the token's refresh token, so a refresh re-exchanges.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/kernel/log.h"
#include "actors/persister.h"
#include "codec/errors.h"
#include "codec/mp.h"
#include "codec/text.h"
#include "persist/store.h"

#define HFLOW_TTL_S CR_FLOW_TTL_S

static void hcred_touch(cr_self *cr, hcred *h);
static void fill_start(cr_self *cr, cclient *c, int table, const char *mode,
                       const char *identity, const char *subject, bool force,
                       uint64_t corr);

/* ---- mcp_auth_required ------------------------------------------------ */

void
cr_auth_reply(cr_self *cr, uint64_t corr, const cclient *c, const char *kind,
              json_t *extra, const char *message)
{
	json_t     *p = json_pack("{s:s, s:s, s:s, s:s}", "kind", kind,
	                          "mcp_client_id", c->id, "mcp_client_name",
	                          c->name, "message", message);
	const char *k;
	json_t     *v;
	char       *text;
	mp_w        w;

	json_object_foreach(extra, k, v)
	{
		json_object_set(p, k, v);
	}
	text = json_dumps(p, JSON_COMPACT);
	json_decref(p);
	mp_w_init(&w);
	mp_map(&w, 2);
	mp_kv_str(&w, "error", message);
	mp_kv_str(&w, "auth_required", text != NULL ? text : "{}");
	kn_reply_corr(kn_actor_kernel(cr->self), corr, MK_EAUTH, w.sb.data,
	              w.sb.size);
	mp_w_fini(&w);
	free(text);
}

/* ---- header credentials ---------------------------------------------------
 */

static hcred *
hcred_get(cr_self *cr, const char *client, const char *mode,
          const char *identity)
{
	char key[512];

	snprintf(key, sizeof(key), "%s\x1f%s\x1f%s", client, mode, identity);
	return ((hcred *)strmap_get(&cr->hcreds, key));
}

static void
hcred_free(hcred *h)
{
	/* (unlinked from its LRU by its owner) */
	free(h->key);
	free(h->client_id);
	free(h->mode);
	free(h->identity);
	text_secret_free(h->headers);
	free(h);
}

static void
hcred_drop(cr_self *cr, hcred *h)
{
	lru_remove(&cr->hlru, &h->lru);
	strmap_del(&cr->hcreds, &h->ent);
	hcred_free(h);
}

/* Sets (creating) the header credential; takes headers. */
static hcred *
hcred_set(cr_self *cr, const char *client, const char *mode,
          const char *identity, char *headers)
{
	hcred *h = hcred_get(cr, client, mode, identity);
	char   key[512];

	if (h == NULL) {
		snprintf(key, sizeof(key), "%s\x1f%s\x1f%s", client, mode,
		         identity);
		if ((h = calloc(1, sizeof(*h))) == NULL ||
		    (h->key = strdup(key)) == NULL ||
		    (h->client_id = strdup(client)) == NULL ||
		    (h->mode = strdup(mode)) == NULL ||
		    (h->identity = strdup(identity)) == NULL) {
			if (h != NULL) {
				h->headers = NULL;
				hcred_free(h);
			}
			text_secret_free(headers);
			return (NULL);
		}
		h->ent.key = h->key;
		(void)strmap_put(&cr->hcreds, &h->ent);
	}
	text_secret_free(h->headers);
	h->headers = headers;
	hcred_touch(cr, h);
	return (h);
}

/* Stores h; fn (may be NULL) hears when it is on disk. */
static int
hcred_store(cr_self *cr, hcred *h, kn_reply_fn fn, void *arg)
{
	json_t *row = json_pack("{s:s, s:s, s:s, s:s, s:s}", "client_id",
	                        h->client_id, "mode", h->mode, "identity",
	                        h->identity, "headers", h->headers, "status",
	                        "active");
	int     rv  = row != NULL
	             ? cr_persist(cr, "header_credentials", row, false, fn, arg)
	             : MK_ENOMEM;

	json_decref(row);
	return (rv);
}

void
cr_hcreds_restore(cr_self *cr, json_t *rows)
{
	size_t  i;
	json_t *r;

	json_array_foreach(rows, i, r)
	{
		const char *cl = cr_str(r, "client_id");
		const char *mo = cr_str(r, "mode");
		const char *id = cr_str(r, "identity");
		const char *hd = cr_str(r, "headers");
		char       *copy;

		if (mo != NULL && cr_callers_mode(mo)) {
			continue; /* callers' are filled on demand */
		}
		if (cl == NULL || mo == NULL || id == NULL || hd == NULL ||
		    (copy = strdup(hd)) == NULL) {
			KN_WARN("credential",
			        "a stored header credential is "
			        "incomplete: skipped");
			continue;
		}
		(void)hcred_set(cr, cl, mo, id, copy);
	}
}

/*
 * Checks a submitted headers object against the client's declared keys:
 * every key declared, none missing, each a non-empty string.  Gives the
 * lines (malloc'd) or NULL with why.
 */
static char *
header_lines(const cclient *c, json_t *given, char *why, size_t len)
{
	size_t      i, n = 0, cap = 0;
	json_t     *k;
	const char *name;
	json_t     *v;
	char       *out = NULL;

	if (!json_is_object(given)) {
		snprintf(why, len, "the header values must be a JSON object");
		return (NULL);
	}
	json_object_foreach(given, name, v)
	{
		bool declared = false;
		json_array_foreach(c->keys, i, k)
		{
			declared |= json_is_string(k) &&
			        strcasecmp(json_string_value(k), name) == 0;
		}
		if (!declared) {
			snprintf(why, len,
			         "header %.100s is not one of the "
			         "per_user_header_keys "
			         "of MCP client %s",
			         name, c->name);
			goto bad;
		}
		if (!json_is_string(v) || *json_string_value(v) == '\0' ||
		    strpbrk(json_string_value(v), "\r\n") != NULL) {
			snprintf(why, len,
			         "header %.100s needs a non-empty one-line "
			         "value",
			         name);
			goto bad;
		}
		size_t add = strlen(name) + strlen(json_string_value(v)) + 4;
		char  *no  = realloc(out, cap + add);
		if (no == NULL) {
			snprintf(why, len, "out of memory");
			goto bad;
		}
		out = no;
		n += (size_t)snprintf(out + n, add, "%s%s: %s", n ? "\n" : "",
		                      name, json_string_value(v));
		cap += add;
	}
	json_array_foreach(c->keys, i, k)
	{
		if (json_is_string(k) &&
		    json_object_get(given, json_string_value(k)) == NULL) {
			bool found = false;
			json_object_foreach(given, name, v)
			{
				found |= strcasecmp(name,
				                    json_string_value(k)) == 0;
			}
			if (!found) {
				snprintf(why, len, "header %.100s is missing",
				         json_string_value(k));
				goto bad;
			}
		}
	}
	if (out == NULL) {
		snprintf(why, len, "MCP client %s declares no header keys",
		         c->name);
	}
	return (out);
bad:
	text_secret_free(out);
	return (NULL);
}

static void
reply_headers(cr_self *cr, uint64_t corr, const char *headers)
{
	mp_w w;

	mp_w_init(&w);
	mp_map(&w, 2);
	mp_kv_str(&w, "headers", headers);
	mp_kv_int(&w, "use_ms", -1);
	kn_reply_corr(kn_actor_kernel(cr->self), corr, 0, w.sb.data,
	              w.sb.size);
	OPENSSL_cleanse(w.sb.data, w.sb.size);
	mp_w_fini(&w);
}

#define HFLOW_OF(l) ((hflow *)((char *)(l)-offsetof(hflow, q)))

static void
hflow_free(hflow *f)
{
	free(f->client_id);
	free(f->mode);
	free(f->identity);
	free(f);
}

/* Adds f (its fields set) to the map, the queue and its client's count. */
static void
hflow_add(cr_self *cr, hflow *f)
{
	f->ent.key = f->id;
	(void)strmap_put(&cr->hflows, &f->ent);
	cr->nhflows++;
	lru_touch(&cr->hflowq, &f->q); /* the newest expires last */
	f->counted = true;
	cr_flow_count(cr, f->client_id, true, 1);
}

/* Drops f from memory and the store. */
static void
hflow_drop(cr_self *cr, hflow *f, bool expired)
{
	json_t *key = json_pack("{s:s}", "id", f->id);

	if (expired) {
		cr_unpersist(cr, "header_flows", key);
	} else {
		(void)cr_persist(cr, "header_flows", key, true, NULL, NULL);
	}
	json_decref(key);
	lru_remove(&cr->hflowq, &f->q);
	if (f->counted) {
		cr_flow_count(cr, f->client_id, true, -1);
	}
	strmap_del(&cr->hflows, &f->ent);
	cr->nhflows--;
	hflow_free(f);
}

int64_t
cr_hflows_sweep(cr_self *cr, int *max)
{
	int64_t   now = cr_now();
	lru_link *l;

	while (*max > 0 && (l = lru_oldest(&cr->hflowq)) != NULL &&
	       HFLOW_OF(l)->expires_at <= now) {
		cr->swept++;
		(*max)--;
		hflow_drop(cr, HFLOW_OF(l), true);
	}
	l = lru_oldest(&cr->hflowq);
	return (l != NULL ? HFLOW_OF(l)->expires_at : 0);
}

void
cr_hflows_restore(cr_self *cr, json_t *rows)
{
	size_t  i;
	json_t *r;

	cr_rows_by_expiry(rows);
	json_array_foreach(rows, i, r)
	{
		const char *id  = cr_str(r, "id");
		const char *cl  = cr_str(r, "client_id");
		const char *mo  = cr_str(r, "mode");
		const char *who = cr_str(r, "identity");
		hflow      *f;

		if (id == NULL || cl == NULL || mo == NULL || who == NULL ||
		    strlen(id) != OA_STATE_LEN) {
			KN_WARN("credential",
			        "a stored header flow is incomplete: skipped");
			continue;
		}
		if ((f = calloc(1, sizeof(*f))) == NULL ||
		    (f->client_id = strdup(cl)) == NULL ||
		    (f->mode = strdup(mo)) == NULL ||
		    (f->identity = strdup(who)) == NULL) {
			if (f != NULL) {
				hflow_free(f);
			}
			continue;
		}
		memcpy(f->id, id, OA_STATE_LEN + 1);
		f->expires_at =
		        json_integer_value(json_object_get(r, "expires_at"));
		hflow_add(cr, f); /* the expired go at the first sweep */
	}
}

/* A caller's header flow: stored, answered as mcp_auth_required. */
static void
header_flow(cr_self *cr, cclient *c, const char *mode, const char *identity,
            uint64_t corr)
{
	hflow  *f;
	json_t *row, *x;
	char    submit[256];

	if (cr_flow_room(cr, c, true, corr) != 0) {
		return; /* answered */
	}
	f = calloc(1, sizeof(*f));
	if (f == NULL || oa_random_state(f->id) != 0 ||
	    (f->client_id = strdup(c->id)) == NULL ||
	    (f->mode = strdup(mode)) == NULL ||
	    (f->identity = strdup(identity)) == NULL) {
		if (f != NULL) {
			free(f->client_id);
			free(f->mode);
			free(f);
		}
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	f->expires_at = cr_now() + HFLOW_TTL_S;
	hflow_add(cr, f);
	cr_sweep_arm(cr, CR_SWEEP_BATCH);
	row = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "id", f->id,
	                "client_id", f->client_id, "mode", f->mode, "identity",
	                f->identity, "status", "pending", "expires_at",
	                (json_int_t)f->expires_at);
	(void)cr_persist(cr, "header_flows", row, false, NULL, NULL);
	json_decref(row);
	snprintf(submit, sizeof(submit),
	         "/api/mcp/client/%s/submit-headers?session_id=%s", c->id,
	         f->id);
	x = json_pack("{s:s, s:s, s:O}", "submit_url", submit, "session_id",
	              f->id, "required_header_keys",
	              c->keys != NULL ? c->keys : json_array());
	cr_auth_reply(cr, corr, c, "headers", x,
	              "submit your own header values for this MCP client "
	              "first");
	json_decref(x);
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
#define HCRED_OF(l) ((hcred *)((char *)(l)-offsetof(hcred, lru)))

static void hcred_drop(cr_self *cr, hcred *h);

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
		if (v != t && v->req == NULL && v->waiters == NULL &&
		    v->retry == 0) {
			cr_token_free(cr, v);
		}
	}
}

static void
hcred_touch(cr_self *cr, hcred *h)
{
	lru_link *l, *newer;

	if (!cr_callers_mode(h->mode)) {
		return; /* the admin's sample stays */
	}
	lru_touch(&cr->hlru, &h->lru);
	for (l = lru_oldest(&cr->hlru); l != NULL && cr->hlru.n > cr->hlru.max;
	     l = newer) {
		newer = lru_newer(&cr->hlru, l);
		if (HCRED_OF(l) != h) {
			hcred_drop(cr, HCRED_OF(l));
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
		    t->req == NULL && t->waiters == NULL && t->retry == 0) {
			cr_token_free(cr, t);
			n++;
		}
	}
	for (l = lru_oldest(&cr->hlru); l != NULL && hash == NULL; l = newer) {
		hcred *h = HCRED_OF(l);
		newer    = lru_newer(&cr->hlru, l);
		if (matches(client, mode, identity, NULL, h->client_id,
		            h->mode, h->identity)) {
			hcred_drop(cr, h);
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
	struct fillw *next;
} fillw;

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
			(void)hcred_set(cr, f->client, f->mode, f->identity,
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
	fill    *f     = arg;
	cr_self *cr    = f->cr;
	bool     raced = cr->gen != f->gen0;
	cclient *c     = cr_client(cr, f->client);
	char    *text  = NULL;
	mp_r     r;
	fillw   *w;

	strmap_del(&cr->fills, &f->ent);
	if (status == 0 && !raced) {
		mp_r_open(&r, data, len);
		text = mp_dup_str(mp_get(&r, "row"));
		mp_r_close(&r);
		json_t *row = text != NULL ? json_loads(text, 0, NULL) : NULL;
		if (row != NULL) {
			fill_insert(cr, f, row);
		}
		json_decref(row);
		text_secret_free(text);
	}
	while ((w = f->waiting) != NULL) {
		f->waiting = w->next;
		if (c == NULL) {
			cr_reply_error(cr, w->corr, MK_ENOENT, NULL,
			               "the MCP client is gone");
		} else {
			/* raced an eviction: what it read may be stale - read
			 * again; else look again, without another fill */
			cr_user_get(cr, c, f->mode, f->identity, w->subject,
			            w->force, w->corr, !raced);
		}
		text_secret_free(w->subject);
		free(w);
	}
	fill_free(f);
}

/* Fills the caller's entry from the store (one read per key at a time),
 * then runs the ask again. */
static void
fill_start(cr_self *cr, cclient *c, int table, const char *mode,
           const char *identity, const char *subject, bool force,
           uint64_t corr)
{
	char    key[512];
	fill   *f;
	fillw  *w = calloc(1, sizeof(*w));
	json_t *k;
	char   *text;
	mp_w    m;

	snprintf(key, sizeof(key), "%d\x1f%s\x1f%s\x1f%s", table, c->id, mode,
	         identity);
	if (w == NULL ||
	    (subject != NULL && (w->subject = strdup(subject)) == NULL)) {
		free(w);
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	w->corr  = corr;
	w->force = force;
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
		text_secret_free(w->subject);
		free(w);
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
		on_fill(cr->self, f, 0, "\x80", 1); /* no store: nothing */
		return;
	}
	k    = json_pack("{s:s, s:s, s:s}", "client_id", c->id, "mode", mode,
	                 "identity", identity);
	text = k != NULL ? json_dumps(k, JSON_COMPACT) : NULL;
	json_decref(k);
	ps_row_pack(&m, store_table_name((store_table)table), "key",
	            text != NULL ? text : "{}");
	free(text);
	if (kn_ask_async(cr->self, cr->ps, MSG_PS_ROW_GET, m.sb.data,
	                 m.sb.size, 30000, on_fill, f) != 0) {
		on_fill(cr->self, f, MK_ECLOSED, NULL, 0);
	}
	mp_w_fini(&m);
}

/* The cache identity of (identity, subject): identity, then 16 hex of
 * SHA-256 of the subject token. */
static void
cache_identity(const char *identity, const char *subject, char *out,
               size_t len)
{
	uint8_t      md[32];
	unsigned int n;

	EVP_Digest(subject, strlen(subject), md, &n, EVP_sha256(), NULL);
	snprintf(out, len, "%s\x1f%02x%02x%02x%02x%02x%02x%02x%02x", identity,
	         md[0], md[1], md[2], md[3], md[4], md[5], md[6], md[7]);
}

/* ---- the caller's credential
 * ------------------------------------------------
 */

void
cr_user_get(cr_self *cr, cclient *c, const char *mode, const char *identity,
            const char *subject, bool force, uint64_t corr, bool filled)
{
	bool   admin = strcmp(mode, "admin") == 0;
	token *t;
	hcred *h;

	switch (c->auth) {
	case CFG_AUTH_PER_USER_HEADERS:
		if ((h = hcred_get(cr, c->id, mode, identity)) != NULL) {
			hcred_touch(cr, h);
			reply_headers(cr, corr,
			              h->headers); /* force: a no-op */
		} else if (!admin && !filled) {
			fill_start(cr, c, STORE_HEADER_CREDENTIALS, mode,
			           identity, NULL, force, corr);
		} else if (admin) {
			cr_reply_error(cr, corr, MK_ESTATE, "none",
			               "MCP client %s has no verified header "
			               "sample: verify-headers first",
			               c->name);
		} else {
			header_flow(cr, c, mode, identity, corr);
		}
		return;
	case CFG_AUTH_PER_USER_OAUTH:
		t = cr_token(cr, c->id, mode, identity, false);
		if (t == NULL && !admin && !filled) {
			fill_start(cr, c, STORE_OAUTH_TOKENS, mode, identity,
			           NULL, force, corr);
		} else if (t == NULL || (!t->active && !admin)) {
			if (admin) {
				cr_reply_error(
				        cr, corr, MK_ESTATE, "none",
				        "MCP client %s has no admin "
				        "credential: initiate-verification "
				        "first",
				        c->name);
			} else {
				cr_flow_for(cr, c, mode, identity, corr, true);
			}
		} else if (!t->active) {
			cr_answer_token(cr, t, corr);
		} else {
			cr_lru_touch(cr, t);
			cr_token_use(cr, t, force, corr);
		}
		return;
	default: /* CFG_AUTH_TOKEN_EXCHANGE */
		break;
	}
	if (admin) {
		t = cr_token(cr, c->id, "admin", "", false);
		if (t == NULL) {
			cr_reply_error(
			        cr, corr, MK_ESTATE, "none",
			        "MCP client %s has no admin credential: "
			        "verify-exchange first",
			        c->name);
		} else if (!t->active) {
			cr_answer_token(cr, t, corr);
		} else {
			cr_token_use(cr, t, force, corr);
		}
		return;
	}
	if (subject == NULL || *subject == '\0') {
		json_t *x = json_pack("{s:b}", "subject_token_missing", 1);
		cr_auth_reply(
		        cr, corr, c, "exchange", x,
		        "this MCP client exchanges the caller's own access "
		        "token: send it (Authorization: Bearer)");
		json_decref(x);
		return;
	}
	char ci[512];
	cache_identity(identity, subject, ci, sizeof(ci));
	if ((t = cr_token(cr, c->id, mode, ci, false)) == NULL) {
		if ((t = cr_token(cr, c->id, mode, ci, true)) == NULL ||
		    (t->refresh = strdup(subject)) == NULL) {
			cr_reply_error(cr, corr, MK_ENOMEM, NULL,
			               "out of memory");
			return;
		}
		t->ephemeral = true; /* cached, never stored */
		t->active    = true;
	}
	cr_lru_touch(cr, t);
	if (!t->active) {
		json_t *x = json_pack("{s:s}", "exchange_error", t->err);
		cr_auth_reply(cr, corr, c, "exchange", x,
		              "the authorization server rejected the exchange "
		              "of your token");
		json_decref(x);
	} else {
		/* a cache hit, or an exchange, single-flight */
		cr_token_use(cr, t, force, corr);
	}
}

/* ---- admin verification and caller submissions
 * -------------------------------
 */

typedef struct verified {
	cr_self *cr;
	uint64_t corr;
	char    *client_id;
} verified;

static void
on_verified(kn_actor *self, void *arg, int status, const void *data,
            size_t len)
{
	verified *v = arg;

	if (status != 0) {
		KN_WARN("credential",
		        "a header credential is not on disk yet: %s",
		        codec_strerror(status));
	}
	kn_reply_corr(kn_actor_kernel(self), v->corr, 0, "\x80", 1);
	if (v->client_id != NULL) {
		cr_notify(v->cr, v->client_id, "active", NULL);
	}
	free(v->client_id);
	free(v);
}

/* Stores (client, mode, identity)'s header lines; answers corr when on
 * disk, then (admin) tells the client. */
static void
store_headers(cr_self *cr, cclient *c, const char *mode, const char *identity,
              char *lines, uint64_t corr)
{
	hcred    *h = hcred_set(cr, c->id, mode, identity, lines);
	verified *v = calloc(1, sizeof(*v));

	if (h == NULL || v == NULL) {
		free(v);
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	v->cr        = cr;
	v->corr      = corr;
	v->client_id = strcmp(mode, "admin") == 0 ? strdup(c->id) : NULL;
	if (hcred_store(cr, h, on_verified, v) != 0) {
		on_verified(cr->self, v, MK_ENOMEM, NULL, 0);
	}
}

/* Reads a message of {key: text, "headers": json object text}. */
static json_t *
headers_msg(kn_msg *msg, const char *key, char **value)
{
	char   *text;
	json_t *given;
	mp_r    r;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	*value = mp_dup_str(mp_get(&r, key));
	text   = mp_dup_str(mp_get(&r, "headers"));
	mp_r_close(&r);
	given = text != NULL ? json_loads(text, 0, NULL) : NULL;
	text_secret_free(text);
	return (given);
}

void
cr_verify_headers(cr_self *cr, kn_msg *msg)
{
	uint64_t corr = kn_defer(msg);
	char    *who, why[300], *lines;
	cclient *c;
	json_t  *given = headers_msg(msg, "client", &who);

	if ((c = who != NULL ? cr_client(cr, who) : NULL) == NULL) {
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "no MCP client %.200s",
		               who != NULL ? who : "(none given)");
	} else if (c->auth != CFG_AUTH_PER_USER_HEADERS) {
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "MCP client %s uses auth_type %s: verify-headers "
		        "applies to per_user_headers",
		        c->name, cfg_auth_name(c->auth));
	} else if ((lines = header_lines(c, given, why, sizeof(why))) ==
	           NULL) {
		cr_reply_error(cr, corr, MK_EINVAL, NULL, "%s", why);
	} else {
		store_headers(cr, c, "admin", "", lines, corr);
	}
	json_decref(given);
	free(who);
}

void
cr_submit_headers(cr_self *cr, kn_msg *msg)
{
	uint64_t corr = kn_defer(msg);
	char    *fid, why[300], *lines;
	hflow   *f;
	cclient *c;
	json_t  *given = headers_msg(msg, "session_id", &fid);

	f = fid != NULL ? (hflow *)strmap_get(&cr->hflows, fid) : NULL;
	if (f == NULL || f->expires_at <= cr_now()) {
		cr_reply_error(cr, corr, MK_EINVAL, NULL,
		               "unknown, used or expired header session");
	} else if ((c = cr_client(cr, f->client_id)) == NULL) {
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "the session's MCP client is gone");
	} else if ((lines = header_lines(c, given, why, sizeof(why))) ==
	           NULL) {
		cr_reply_error(cr, corr, MK_EINVAL, NULL, "%s", why);
		f = NULL; /* kept: the caller may try again */
	} else {
		store_headers(cr, c, f->mode, f->identity, lines, corr);
	}
	if (f != NULL) {
		hflow_drop(cr, f, false);
	}
	json_decref(given);
	free(fid);
}

void
cr_verify_exchange(cr_self *cr, kn_msg *msg)
{
	uint64_t corr = kn_defer(msg);
	char    *who, *subject;
	cclient *c;
	token   *t;
	mp_r     r;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	who     = mp_dup_str(mp_get(&r, "client"));
	subject = mp_dup_str(mp_get(&r, "subject"));
	mp_r_close(&r);
	if ((c = who != NULL ? cr_client(cr, who) : NULL) == NULL) {
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "no MCP client %.200s",
		               who != NULL ? who : "(none given)");
	} else if (c->auth != CFG_AUTH_TOKEN_EXCHANGE) {
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "MCP client %s uses auth_type %s: verify-exchange "
		        "applies to token_exchange",
		        c->name, cfg_auth_name(c->auth));
	} else if (subject == NULL || *subject == '\0') {
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "verify-exchange needs the admin's subject token");
	} else if ((t = cr_token(cr, c->id, "admin", "", true)) == NULL) {
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
	} else {
		/* the subject is retained as what a refresh re-exchanges */
		cr_refresh_stop(t);
		text_secret_free(t->refresh);
		text_secret_free(t->access);
		t->access  = NULL;
		t->refresh = subject;
		subject    = NULL;
		t->active  = true;
		cr_refresh_join(cr, t, corr);
	}
	text_secret_free(subject);
	free(who);
}

void
cr_user_fini(cr_self *cr)
{
	strmap_ent *e;
	uint64_t    id;

	while ((e = idmap_pop(&cr->hcreds.m, &id)) != NULL) {
		for (strmap_ent *n; e != NULL; e = n) {
			n = e->next;
			hcred_free((hcred *)e);
		}
	}
	while ((e = idmap_pop(&cr->hflows.m, &id)) != NULL) {
		for (strmap_ent *n; e != NULL; e = n) {
			n = e->next;
			hflow_free((hflow *)e);
		}
	}
	strmap_fini(&cr->hcreds);
	strmap_fini(&cr->hflows);
	while ((e = idmap_pop(&cr->fills.m, &id)) != NULL) {
		for (strmap_ent *n; e != NULL; e = n) {
			n = e->next;
			fill_free((fill *)e);
		}
	}
	strmap_fini(&cr->fills);
}

void
cr_evict(cr_self *cr, kn_msg *msg)
{
	char    *client, *mode, *identity, *subject, hash[600];
	unsigned n;
	mp_r     r;
	mp_w     w;

	mp_r_open(&r, msg->env.payload, msg->env.payload_len);
	client   = mp_dup_str(mp_get(&r, "client"));
	mode     = mp_dup_str(mp_get(&r, "mode"));
	identity = mp_dup_str(mp_get(&r, "identity"));
	subject  = mp_dup_str(mp_get(&r, "subject"));
	mp_r_close(&r);
	cclient *c = client != NULL ? cr_client(cr, client) : NULL;
	if (client != NULL && c == NULL) {
		kn_reply_error(kn_actor_kernel(cr->self), kn_defer(msg),
		               MK_ENOENT, "no MCP client %.200s", client);
	} else {
		if (subject != NULL) {
			/* by token: the entries exchanged from it */
			cache_identity("", subject, hash, sizeof(hash));
		}
		n = evict(cr, c != NULL ? c->id : NULL, mode, identity,
		          subject != NULL ? hash + 1 : NULL);
		mp_w_init(&w);
		mp_map(&w, 1);
		mp_kv_int(&w, "evicted", n);
		kn_reply(cr->self, msg, 0, w.sb.data, w.sb.size);
		mp_w_fini(&w);
	}
	free(client);
	free(mode);
	free(identity);
	text_secret_free(subject);
}
