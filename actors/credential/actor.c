/*
 * actor.c - the credential actor: dispatch, the clients it knows, tokens,
 * the store, and telling client actors (see credential.h).
 *
 * DESIGN: one thread.  Its wait is its tp_loop's (curl multi), so token
 * and metadata exchanges run beside the inbox.  Tokens live in memory;
 * every change is written to the store by ask (durable) - a rotated
 * refresh token must never be lost, or the next refresh spends a dead
 * one.  Secrets never reach a log line, an error text or a reply but the
 * header asked for.
 */
#include <assert.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors/client/client_msg.h"
#include "actors/credential/cred_impl.h"
#include "actors/kernel/log.h"
#include "actors/persister_msg.h"
#include "codec/errors.h"
#include "codec/mp.h"
#include "codec/text.h"

#define TOKEN_SENTINEL "token expired" /* an inactive shared token */

int64_t
cr_now(void)
{
	return ((int64_t)time(NULL));
}

int64_t
cr_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

/* ---- clients ------------------------------------------------------------ */

cclient *
cr_client(cr_self *cr, const char *id_or_name)
{
	strmap_ent *e = strmap_get(&cr->clients, id_or_name);

	if (e != NULL) {
		return ((cclient *)((char *)e - offsetof(cclient, ent)));
	}
	e = strmap_get(&cr->names, id_or_name);
	return (e != NULL ? (cclient *)((char *)e - offsetof(cclient, nent))
	                  : NULL);
}

static void
client_destroy(cclient *c)
{
	cr_disc_free(c->disc);
	free(c->id);
	free(c->name);
	free(c->url);
	json_decref(c->oauth);
	json_decref(c->exchange);
	json_decref(c->keys);
	json_decref(c->meta);
	free(c);
}

static void
client_free(cr_self *cr, cclient *c)
{
	strmap_del(&cr->clients, &c->ent);
	strmap_del(&cr->names, &c->nent);
	client_destroy(c);
}

/* ---- tokens ------------------------------------------------------------- */

static void
token_destroy(token *t)
{
	cr_refresh_stop(t);
	free(t->key);
	free(t->client_id);
	free(t->mode);
	free(t->identity);
	text_secret_free(t->access);
	text_secret_free(t->refresh);
	text_secret_free(t->prior);
	free(t->scopes);
	free(t);
}

void
cr_token_free(cr_self *cr, token *t)
{
	cr_lru_drop(cr, t);
	strmap_del(&cr->tokens, &t->ent);
	cr->ntokens--;
	token_destroy(t);
}

void
cr_token_key(char *buf, size_t len, const char *client, const char *mode,
             const char *identity)
{
	snprintf(buf, len, "%s\x1f%s\x1f%s", client, mode, identity);
}

token *
cr_token(cr_self *cr, const char *client, const char *mode,
         const char *identity, bool create)
{
	char        key[CR_TOKEN_KEY_MAX];
	strmap_ent *e;
	token      *t;

	cr_token_key(key, sizeof(key), client, mode, identity);
	if ((e = strmap_get(&cr->tokens, key)) != NULL) {
		return ((token *)e);
	}
	if (!create || (t = calloc(1, sizeof(*t))) == NULL) {
		return (NULL);
	}
	t->key       = strdup(key);
	t->client_id = strdup(client);
	t->mode      = strdup(mode);
	t->identity  = strdup(identity);
	t->cr        = cr;
	t->ent.key   = t->key;
	if (t->key == NULL || t->client_id == NULL || t->mode == NULL ||
	    t->identity == NULL || strmap_put(&cr->tokens, &t->ent) != 0) {
		free(t->key);
		free(t->client_id);
		free(t->mode);
		free(t->identity);
		free(t);
		return (NULL);
	}
	cr->ntokens++;
	if (cr_callers_mode(mode)) {
		t->cache = true; /* bounded: in the LRU, filled on demand */
		cr_lru_touch(cr, t);
	}
	return (t);
}

static void
stored(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	if (status != 0) {
		/* the persister reported its failure; the write is queued */
		char *why = kn_error_text(data, len);
		KN_WARN("credential", "a credential is not on disk yet: %s",
		        why != NULL ? why : codec_strerror(status));
		free(why);
	}
}

int
cr_persist(cr_self *cr, const char *table, json_t *row, bool del,
           kn_reply_fn fn, void *arg)
{
	ps_row_msg put = {.table = (char *)table, .ticket = cr->ticket};
	ps_key_msg key = {.table = (char *)table, .ticket = cr->ticket};
	int        rv;

	if (cr->ps == NULL) {
		if (fn != NULL) {
			fn(cr->self, arg, 0, NULL, 0);
		}
		return (0);
	}
	if ((put.row = key.key = json_dumps(row, JSON_COMPACT)) == NULL) {
		return (MK_ENOMEM);
	}
	rv = kn_ask_async_msg(cr->self, cr->ps,
	                      del ? MSG_PS_ROW_DEL : MSG_PS_ROW_PUT,
	                      del ? &ps_key_msg_fields : &ps_row_msg_fields,
	                      del ? (const void *)&key : (const void *)&put,
	                      30000, fn != NULL ? fn : stored, arg);
	text_secret_free(put.row);
	return (rv);
}

void
cr_unpersist(cr_self *cr, const char *table, json_t *key)
{
	ps_key_msg m = {.table = (char *)table};

	if (cr->ps == NULL ||
	    (m.key = json_dumps(key, JSON_COMPACT)) == NULL) {
		return;
	}
	(void)kn_tell_msg(cr->ps, cr->self, MSG_PS_ROW_DEL,
	                  CODEC_OF(ps_key_msg, &m));
	text_secret_free(m.key);
}

json_t *
cr_token_row(const token *t)
{
	return (json_pack(
	        "{s:s, s:s, s:s, s:s, s:s?, s:s, s:s?, s:I, s:I, s:s}",
	        "client_id", t->client_id, "mode", t->mode, "identity",
	        t->identity, "access_token", t->access, "refresh_token",
	        t->refresh, "token_type", "Bearer", "scopes", t->scopes,
	        "expires_at", (json_int_t)(t->expires_ms / 1000),
	        "last_refreshed", (json_int_t)t->refreshed, "status",
	        t->active ? "active" : "needs_reauth"));
}

void
cr_token_store(cr_self *cr, token *t)
{
	json_t *row;

	if (t->ephemeral || t->access == NULL) {
		return; /* an exchange result lives in memory only */
	}
	row = cr_token_row(t);
	if (row == NULL ||
	    cr_persist(cr, "oauth_tokens", row, false, NULL, NULL) != 0) {
		KN_ERROR("credential", "%s: a token could not be stored",
		         t->client_id);
	}
	json_decref(row);
}

/* Restores stored tokens (rows of oauth_tokens). */
static void
tokens_restore(cr_self *cr, json_t *rows)
{
	size_t  i;
	json_t *r;

	json_array_foreach(rows, i, r)
	{
		const char *client = cr_str(r, "client_id");
		const char *mode   = cr_str(r, "mode");
		const char *id     = cr_str(r, "identity");
		const char *acc    = cr_str(r, "access_token");
		token      *t;

		if (mode != NULL && cr_callers_mode(mode)) {
			continue; /* callers' tokens are filled on demand */
		}

		if (client == NULL || mode == NULL || id == NULL ||
		    acc == NULL ||
		    (t = cr_token(cr, client, mode, id, true)) == NULL) {
			KN_WARN("credential",
			        "a stored token row is incomplete: skipped");
			continue;
		}
		t->access      = strdup(acc);
		const char *rt = cr_str(r, "refresh_token");
		t->refresh     = rt != NULL ? strdup(rt) : NULL;
		const char *sc = cr_str(r, "scopes");
		t->scopes      = sc != NULL ? strdup(sc) : NULL;
		cr_token_restore(t, r);
		const char *st = cr_str(r, "status");
		t->active      = st != NULL && strcmp(st, "active") == 0;
	}
}

/* ---- telling client actors --------------------------------------------- */

void
cr_notify(cr_self *cr, const char *client_id, const char *status,
          const char *message)
{
	cclient    *c = cr_client(cr, client_id);
	kn_actor   *a;
	char        name[KN_NAME_MAX];
	cl_cred_msg m = {.status  = (char *)status,
	                 .message = (char *)(message != NULL ? message : "")};

	if (c == NULL) {
		return;
	}
	snprintf(name, sizeof(name), CLIENT_PREFIX "%s", c->name);
	if (kn_lookup(kn_actor_kernel(cr->self), name, &a) != 0) {
		return;
	}
	(void)kn_tell_msg(a, cr->self, MSG_CL_CRED, CODEC_OF(cl_cred_msg, &m));
	kn_actor_release(&a);
}

/* ---- replies -------------------------------------------------------------
 */

void
cr_reply_error(cr_self *cr, uint64_t corr, int status, const char *why,
               const char *fmt, ...)
{
	char           text[1024];
	va_list        ap;
	cr_refused_msg m = {.error = text, .why = (char *)why};

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	kn_reply_msg(kn_actor_kernel(cr->self), corr, status,
	             CODEC_OF(cr_refused_msg, &m));
}

void
cr_answer_token(cr_self *cr, token *t, uint64_t corr)
{
	char           hdr[8192];
	cr_headers_msg m = {.headers = hdr};

	if (!t->active) {
		cr_reply_error(
		        cr, corr, MK_ESTATE, "needs_reauth",
		        TOKEN_SENTINEL
		        ": the credential of MCP client %s must be reauthorized",
		        t->client_id);
		return;
	}
	snprintf(hdr, sizeof(hdr), "Authorization: Bearer %s", t->access);
	m.use_ms = cr_token_use_ms(t);
	kn_reply_msg(kn_actor_kernel(cr->self), corr, 0,
	             CODEC_OF(cr_headers_msg, &m));
	OPENSSL_cleanse(hdr, sizeof(hdr));
}

/* ---- messages ------------------------------------------------------------
 */

static int
on_register(kn_actor *self, cr_self *cr, kn_msg *msg, cr_register_msg *reg)
{
	char    *id, *name, *auth, *url;
	cclient *c;
	json_t  *o;

	id          = reg->id; /* ours now */
	name        = reg->name;
	auth        = reg->auth;
	url         = reg->url;
	bool sticky = reg->sticky;
	assert(id != NULL && name != NULL && auth != NULL);
	o = reg->oauth != NULL ? json_loads(reg->oauth, 0, NULL) : NULL;
	json_t *xo = reg->exchange != NULL ? json_loads(reg->exchange, 0, NULL)
	                                   : NULL;
	json_t *ko = reg->keys != NULL ? json_loads(reg->keys, 0, NULL) : NULL;
	reg->id = reg->name = reg->auth = reg->url = NULL;
	if ((c = cr_client(cr, id)) != NULL) {
		bool rotated = !json_equal(c->oauth, o) &&
		        !(c->oauth == NULL && o == NULL);
		if (strcmp(c->name, name) != 0) {
			strmap_del(&cr->names, &c->nent);
			free(c->name);
			c->name     = name;
			c->nent.key = c->name;
			name        = NULL;
			(void)strmap_put(&cr->names, &c->nent);
		}
		if (rotated) {
			/* a new OAuth config: what was granted under the old
			 * one is void (rotation) */
			json_decref(c->meta);
			c->meta  = NULL;
			token *t = cr_token(cr, id, "shared", "", false);
			if (t != NULL && t->active) {
				t->active = false;
				cr_token_store(cr, t);
				cr_notify(
				        cr, id, "rotated",
				        "credential was rotated and must be reauthorized");
			}
		}
		json_decref(c->oauth);
		c->oauth = o;
		json_decref(c->exchange);
		c->exchange = xo;
		json_decref(c->keys);
		c->keys = ko;
		free(c->url);
		c->url    = url;
		c->sticky = sticky;
		free(id);
		free(name);
		free(auth);
		return (0);
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		KN_ERROR("credential", "out of memory: client %s unknown",
		         name);
		free(id);
		free(name);
		free(auth);
		free(url);
		json_decref(o);
		json_decref(xo);
		json_decref(ko);
		return (0);
	}
	c->exchange = xo;
	c->keys     = ko;
	c->id       = id;
	c->name     = name;
	c->url      = url;
	c->oauth    = o;
	c->sticky   = sticky;
	c->cr       = cr;
	c->ent.key  = c->id;
	c->nent.key = c->name;
	for (int a = CFG_AUTH_NONE; a <= CFG_AUTH_TOKEN_EXCHANGE; a++) {
		if (strcmp(cfg_auth_name((cfg_auth)a), auth) == 0) {
			c->auth = (cfg_auth)a;
		}
	}
	free(auth);
	(void)strmap_put(&cr->clients, &c->ent);
	(void)strmap_put(&cr->names, &c->nent);
	/* the stored endpoint set, if the config it came from is the same */
	json_t *m = json_object_get(cr->saved, c->id);
	if (m != NULL) {
		json_t *was = json_object_get(m, "configured");
		if (json_equal(was, c->oauth) ||
		    (json_is_null(was) && c->oauth == NULL)) {
			c->meta = json_incref(m);
			/* its stored tokens are refreshed ahead from now on */
			const char *modes[] = {"shared", "admin"};
			for (int i = 0; i < 2; i++) {
				token *t = cr_token(cr, c->id, modes[i], "",
				                    false);
				if (t != NULL) {
					cr_refresh_ahead(cr, t);
				}
			}
		} else {
			token *t = cr_token(cr, c->id, "shared", "", false);
			KN_WARN("credential",
			        "%s: its OAuth config changed while the runtime was down: the stored credential is void",
			        c->name);
			if (t != NULL && t->active) {
				t->active = false;
				cr_token_store(cr, t);
			}
		}
		json_object_del(cr->saved, c->id);
	}
	return (0);
}

void
cr_void_tokens(cr_self *cr, cclient *c, const char *why)
{
	static const char *const modes[] = {"shared", "admin"};

	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		token *t = cr_token(cr, c->id, modes[i], "", false);
		if (t != NULL && t->active) {
			cr_refresh_stop(t);
			t->active = false;
			cr_token_store(cr, t);
		}
	}
	cr_evict_client(cr, c->id);
	cr_notify(cr, c->id, "needs_reauth", why);
}

static int
on_forget(kn_actor *self, cr_self *cr, kn_msg *msg, cr_id_msg *m)
{
	const char *id;
	cclient    *c;

	id = m->id;
	if (id != NULL && (c = cr_client(cr, id)) != NULL) {
		/* its tokens go (the store drops them with the client) */
		token *t;
		while ((t = cr_token(cr, id, "shared", "", false)) != NULL) {
			cr_token_free(cr, t);
		}
		while ((t = cr_token(cr, id, "admin", "", false)) != NULL) {
			cr_token_free(cr, t);
		}
		cr_evict_client(cr, id);
		client_free(cr, c);
	}
	return (0);
}

static int
on_get(kn_actor *self, cr_self *cr, kn_msg *msg, cr_get_msg *m)
{
	uint64_t    corr = kn_defer(msg);
	const char *id, *mode, *identity;
	cclient    *c;
	token      *t;

	id       = m->id;
	mode     = m->mode;
	identity = m->identity;
	c        = id != NULL ? cr_client(cr, id) : NULL;
	if (c != NULL && m->scope != NULL) {
		cr_step_up(cr, c, mode != NULL ? mode : "shared",
		           identity != NULL ? identity : "", m->scope, corr);
		return (0);
	}
	if (c != NULL && cfg_auth_per_user(c->auth)) {
		/* a peek is the admin's (discovery) credential */
		cr_ask a = {.mode = m->peek || mode == NULL ? "admin" : mode,
		            .identity = m->peek || identity == NULL ? ""
		                                                    : identity,
		            .subject  = m->subject,
		            .by       = m->by,
		            .force    = m->force};
		cr_user_get(cr, c, &a, corr, false);
		return (0);
	}
	if (c != NULL && cr_client_credentials(c)) {
		cr_cc_get(cr, c, m->force, corr);
		return (0);
	}
	t = id != NULL ? cr_token(cr, id, mode ? mode : "shared",
	                          identity ? identity : "", false)
	               : NULL;
	if (t == NULL) {
		cr_reply_error(
		        cr, corr, MK_ESTATE, "none",
		        "MCP client %s has no authorized credential yet",
		        id ? id : "?");
	} else if (!t->active || m->peek) {
		cr_answer_token(cr, t, corr); /* no network */
	} else {
		cr_token_use(cr, t, m->force, corr);
	}
	return (0);
}

void
cr_cc_get(cr_self *cr, cclient *c, bool force, uint64_t corr)
{
	token *t;

	if (c->meta == NULL || c->disc != NULL) {
		cr_disc_wait(cr, c, corr, force); /* then here again */
		return;
	}
	if ((t = cr_token(cr, c->id, "shared", "", true)) == NULL) {
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	/* a refused grant is asked again (paced by CR_GAP_MS): there is no
	 * browser to send anyone to, only the authorization server to try */
	t->active = true;
	cr_token_use(cr, t, force, corr);
}

static int
on_stats(kn_actor *self, cr_self *cr, kn_msg *msg, codec_no *none)
{
	cr_stats_msg m = {
	        .refreshes      = (int64_t)cr->refreshes,
	        .refresh_joins  = (int64_t)cr->joins,
	        .token_requests = (int64_t)cr->token_requests,
	        .tokens         = (int64_t)cr->ntokens,
	        .flows          = (int64_t)cr->nflows,
	        .header_flows   = (int64_t)cr->nhflows,
	        .swept          = (int64_t)cr->swept,
	        .exchanges      = (int64_t)cr->exchanges,
	        .fills          = (int64_t)cr->nfills,
	        .evicted        = (int64_t)cr->evicted,
	        .cached_tokens  = (int64_t)cr->tlru.n,
	        .cached_headers = (int64_t)cr->hlru.n,
	};

	return (kn_reply_msg(kn_actor_kernel(cr->self), kn_defer(msg), 0,
	                     CODEC_OF(cr_stats_msg, &m)));
}

/* ---- the actor ------------------------------------------------------------
 */

static json_t *
rows_of(const char *text)
{
	json_t *a = text != NULL ? json_loads(text, 0, NULL) : NULL;

	if (text != NULL && !json_is_array(a)) {
		KN_WARN("credential", "stored credential rows are unreadable");
	}
	return (a);
}

static int
cr_init(kn_actor *self, void *arg, void **statep)
{
	const cr_args *a = arg;
	cr_self       *cr;
	json_t        *rows;
	int            rv;

	if ((cr = calloc(1, sizeof(*cr))) == NULL) {
		return (MK_ENOMEM);
	}
	if ((rv = tp_loop_new(&cr->loop)) != 0 ||
	    (cr->redirect = strdup(a->redirect_uri != NULL
	                                   ? a->redirect_uri
	                                   : CR_REDIRECT_DEFAULT)) == NULL ||
	    (a->client_metadata_url != NULL &&
	     (cr->cimd_url = strdup(a->client_metadata_url)) == NULL)) {
		tp_loop_free(&cr->loop);
		free(cr->redirect);
		free(cr);
		return (rv != 0 ? rv : MK_ENOMEM);
	}
	cr->self = self;
	cr->ps   = a->persister != NULL ? kn_actor_hold(a->persister) : NULL;
	cr->cluster = a->cluster;
	cr->tracer  = a->tracer;
	lru_init(&cr->flowq, CR_USER_FLOWS_MAX);
	lru_init(&cr->hflowq, CR_USER_FLOWS_MAX);
	tokens_restore(cr, rows = rows_of(a->tokens));
	json_decref(rows);
	cr_flows_restore(cr, rows = rows_of(a->flows));
	json_decref(rows);
	cr_meta_restore(cr, rows = rows_of(a->configs));
	json_decref(rows);
	cr_hcreds_restore(cr, rows = rows_of(a->hcreds));
	json_decref(rows);
	cr_hflows_restore(cr, rows = rows_of(a->hflows));
	json_decref(rows);
	lru_init(&cr->tlru,
	         a->cache_max > 0 ? a->cache_max : CR_CACHE_DEFAULT);
	lru_init(&cr->hlru,
	         a->cache_max > 0 ? a->cache_max : CR_CACHE_DEFAULT);
	kn_set_wake_arg(self, cr->loop);
	*statep = cr;
	cr_sweep_arm(cr, CR_SWEEP_BATCH); /* restored flows expire too */
	return (0);
}

static void
cr_fini(kn_actor *self, void *state)
{
	cr_self    *cr = state;
	strmap_ent *e;
	uint64_t    id;

	if (cr->sweep != 0) {
		kn_timer_cancel(self, cr->sweep);
	}
	/* each map's chains, popped whole: the entries die with them */
	while ((e = idmap_pop(&cr->flows.m, &id)) != NULL) {
		for (strmap_ent *n; e != NULL; e = n) {
			n = e->next;
			cr_flow_free((flow *)e);
		}
	}
	while ((e = idmap_pop(&cr->tokens.m, &id)) != NULL) {
		for (strmap_ent *n; e != NULL; e = n) {
			n = e->next;
			token_destroy((token *)e);
		}
	}
	while ((e = idmap_pop(&cr->clients.m, &id)) != NULL) {
		for (strmap_ent *n; e != NULL; e = n) {
			n = e->next;
			client_destroy((cclient *)e);
		}
	}
	cr_user_fini(cr);
	cr_pending_fini(cr);
	strmap_fini(&cr->clients);
	strmap_fini(&cr->names);
	strmap_fini(&cr->tokens);
	strmap_fini(&cr->flows);
	tp_loop_free(&cr->loop);
	json_decref(cr->saved);
	kn_actor_release(&cr->ps);
	free(cr->redirect);
	free(cr->cimd_url);
	free(cr);
}

static int
cr_wait(kn_actor *self, void *state, struct pollfd *fds, unsigned nfds,
        int timeout_ms)
{
	cr_self *cr = state;

	return (tp_loop_wait(cr->loop, fds, nfds, timeout_ms));
}

static void
cr_wake(void *loop)
{
	tp_loop_wakeup(loop);
}

static int
on_resync(kn_actor *self, cr_self *cr, kn_msg *msg, codec_no *none)
{
	cr_resync(cr);
	return (0);
}

KN_ROUTES(cr_routes, credential_msgs, CR_MESSAGES);

const kn_actor_ops credential_ops = {
        .routes = &cr_routes,
        .init   = cr_init,
        .fini   = cr_fini,
        .wait   = cr_wait,
        .wake   = cr_wake,
};
