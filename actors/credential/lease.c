/*
 * lease.c - one refresh per token across the nodes of a cluster (a
 * shared store; see persist/store.h: Refresh leases).  A rotating refresh
 * token dies when spent twice, so before a refresh request the token's
 * row is leased:
 *   taken      the row is read again first: when another node refreshed
 *              it meanwhile its tokens are taken, and no request is sent;
 *              else the refresh is sent, and its tokens written back
 *              only while the lease is still this node's (its fencing
 *              generation), which releases it;
 *   not taken  another node refreshes: this one waits for its write (the
 *              store tells every node: MSG_CR_ROW_CHANGED), looking at
 *              the row again every CR_LEASE_POLL_MS meanwhile, and takes
 *              the tokens when they come - at most as long as a
 *              refresh with its retries runs (CR_REFRESH_MAX_MS), then
 *              the waiting asks fail; a node that died holding the lease
 *              loses it when it expires;
 *   no store   (it cannot be reached) the refresh goes on without one;
 *              if it is refused as spent (invalid_grant), another node
 *              may have spent it first, also without a lease: nothing is
 *              stored (a dead row written over the winner's would end
 *              every node), the asks fail, and once the store is back
 *              the row is looked at (every CR_UNSURE_POLL_MS): another
 *              node's tokens are taken when they come within CR_LEASE_MS
 *              (a write that waited for the store lands), else the
 *              refresh is sent again under the lease, and a refusal then
 *              is final.
 * A lease lasts one exchange and a margin (CR_LEASE_MS); each retry of a
 * failed request takes it again first, so a node that dies holding it
 * keeps the others waiting at most that long, and a retry never runs
 * past its lease.
 * A token another node wrote is read again here even when no refresh
 * waits for it (an authorization or a refresh elsewhere), so every node
 * holds the newest.  Exchanged tokens are never stored: not leased.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/credential/cred_impl.h"
#include "actors/kernel/log.h"
#include "actors/persister_msg.h"
#include "codec/errors.h"
#include "codec/text.h"

/* What an answer of the persister comes back to: the token by key (it
 * may be gone meanwhile). */
typedef struct lctx {
	cr_self *cr;
	char    *key;  /* the token's cr->tokens key */
	bool     take; /* a take's answer (else a row read) */
	json_t  *make; /* {client_id, mode, identity}: a token this node does
	                * not hold yet, made when its row is found; or NULL */
} lctx;

static json_t *
key_of(const token *t)
{
	return (json_pack("{s:s, s:s, s:s}", "client_id", t->client_id, "mode",
	                  t->mode, "identity", t->identity));
}

static lctx *
lctx_new(cr_self *cr, const char *key, bool take)
{
	lctx *x = calloc(1, sizeof(*x));

	if (x != NULL && (x->key = strdup(key)) == NULL) {
		free(x);
		return (NULL);
	}
	if (x != NULL) {
		x->cr   = cr;
		x->take = take;
	}
	return (x);
}

static void
lctx_free(lctx *x)
{
	json_decref(x->make);
	free(x->key);
	free(x);
}

/* Sends a lease op; fn gets x (NULL: a tell-like ask, answer dropped). */
static int
lease_ask(cr_self *cr, const char *op, json_t *row, int64_t gen,
          kn_reply_fn fn, void *x)
{
	ps_lease_msg m = {.op     = (char *)op,
	                  .table  = "oauth_tokens",
	                  .gen    = gen,
	                  .ttl_ms = CR_LEASE_MS};
	int          rv;

	if (cr->ps == NULL ||
	    (m.row = row != NULL ? json_dumps(row, JSON_COMPACT) : NULL) ==
	            NULL) {
		return (MK_ENOMEM);
	}
	rv = kn_ask_async_msg(cr->self, cr->ps, MSG_PS_LEASE,
	                      CODEC_OF(ps_lease_msg, &m), 30000, fn, x);
	text_secret_free(m.row);
	return (rv);
}

static void
on_dropped(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	if (status != 0) {
		KN_DEBUG("credential",
		         "a refresh lease not released (it "
		         "expires): %s",
		         codec_strerror(status));
	}
}

/* Releases the lease of gen on t's row, unwritten. */
static void
drop(cr_self *cr, const token *t, int64_t gen)
{
	json_t *k = key_of(t);

	if (k != NULL) {
		(void)lease_ask(cr, "drop", k, gen, on_dropped, NULL);
		json_decref(k);
	}
}

void
cr_lease_release(token *t)
{
	if (t->lease_gen > 0) {
		drop(t->cr, t, t->lease_gen);
	}
	t->lease_gen = 0;
}

static void
on_put(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	ps_leased_msg m;
	char         *client = arg;

	if (status != 0) {
		KN_WARN("credential",
		        "%s: the refreshed token is not stored yet: %s",
		        client, codec_strerror(status));
	} else if (ps_leased_msg_unpack(data, len, &m) == 0) {
		if (!m.written) {
			KN_WARN("credential",
			        "%s: the refresh lease expired before its tokens were written: another node took it over",
			        client);
		}
		ps_leased_msg_clear(&m);
	}
	free(client);
}

void
cr_lease_put(cr_self *cr, token *t)
{
	json_t *row    = cr_token_row(t);
	char   *client = strdup(t->client_id);

	if (row == NULL || client == NULL ||
	    lease_ask(cr, "put", row, t->lease_gen, on_put, client) != 0) {
		KN_ERROR("credential",
		         "%s: a refreshed token could not be stored",
		         t->client_id);
		free(client);
	}
	json_decref(row);
	t->lease_gen = 0;
}

/* Takes row's tokens (another node's).  Returns whether they differ
 * from what t held. */
static bool
adopt(token *t, const json_t *row)
{
	const char *acc = cr_str(row, "access_token");
	const char *ref = cr_str(row, "refresh_token");
	const char *sc  = cr_str(row, "scopes");
	bool        was = t->active;
	bool        changed;

	if (acc == NULL) {
		return (false);
	}
	changed = t->access == NULL || strcmp(acc, t->access) != 0 ||
	        (ref == NULL) != (t->refresh == NULL) ||
	        (ref != NULL && strcmp(ref, t->refresh) != 0) ||
	        was !=
	                (strcmp(cr_str(row, "status") ? cr_str(row, "status")
	                                              : "",
	                        "active") == 0);
	if (!changed) {
		return (false);
	}
	text_secret_free(t->access);
	text_secret_free(t->refresh);
	t->access  = strdup(acc);
	t->refresh = ref != NULL ? strdup(ref) : NULL;
	free(t->scopes);
	t->scopes = sc != NULL ? strdup(sc) : NULL;
	t->active = cr_str(row, "status") != NULL &&
	        strcmp(cr_str(row, "status"), "active") == 0;
	cr_token_restore(t, row);
	return (true);
}

/* The answer to a take: the refresh, the other node's tokens, or a
 * wait.  Unsure (a refresh without a lease was refused as spent): the row
 * is looked at until it changes or CR_LEASE_MS passes, the lease kept
 * meanwhile (the other unsure nodes wait on it). */
static void
on_taken(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	lctx         *x    = arg;
	cr_self      *cr   = x->cr;
	token        *t    = (token *)strmap_get(&cr->tokens, x->key);
	bool          mine = t != NULL && t->take == x;
	ps_leased_msg m    = {0};
	bool          unsure;
	json_t       *row;

	lctx_free(x);
	if (status == 0) {
		(void)ps_leased_msg_unpack(data, len, &m);
	}
	if (!mine) {
		/* gone, or stopped meanwhile: let the lease go */
		if (m.gen > 0 && t != NULL) {
			drop(cr, t, m.gen);
		}
		ps_leased_msg_clear(&m);
		return;
	}
	assert_token_state(t);
	t->take = NULL;
	unsure  = t->state == TOK_UNSURE;
	if (status != 0 && unsure) {
		t->lease_polls = 0;
		(void)cr_tok_enter(t, TOK_UNSURE, CR_UNSURE_POLL_MS,
		                   "the store still away");
		return;
	}
	if (status != 0) {
		KN_WARN("credential",
		        "%s: no refresh lease (%s): refreshing without one",
		        t->client_id, codec_strerror(status));
		cr_refresh_send(cr, t);
		return;
	}
	if (m.gen > 0) {
		t->lease_gen = m.gen; /* released when the refresh ends */
	}
	row = m.row != NULL ? json_loads(m.row, 0, NULL) : NULL;
	if (row != NULL && t->prior != NULL &&
	    (cr_str(row, "refresh_token") == NULL ||
	     strcmp(cr_str(row, "refresh_token"), t->prior) != 0)) {
		/* another node refreshed (or reauthorized) it meanwhile */
		KN_DEBUG("credential",
		         "%s: another node's refreshed token taken",
		         t->client_id);
		adopt(t, row);
		cr_refresh_done(cr, t, true);
	} else if (m.gen > 0 && unsure &&
	           t->lease_polls++ * CR_UNSURE_POLL_MS < CR_LEASE_MS) {
		/* unchanged: a write held back may still land */
		(void)cr_tok_enter(t, TOK_UNSURE, CR_UNSURE_POLL_MS,
		                   "the row unchanged yet");
	} else if (m.gen > 0) {
		if (unsure) {
			KN_INFO("credential",
			        "%s: no other node refreshed the token: refreshing again, under the lease",
			        t->client_id);
		}
		t->lease_polls = 0;
		cr_refresh_send(cr, t);
	} else if (t->lease_polls++ * CR_LEASE_POLL_MS > CR_REFRESH_MAX_MS) {
		cr_refresh_done(cr, t, false);
	} else {
		/* another node's refresh: its write is told, or looked for */
		(void)cr_tok_enter(t, unsure ? TOK_UNSURE : TOK_PEER,
		                   CR_LEASE_POLL_MS, "another node's lease");
	}
	json_decref(row);
	ps_leased_msg_clear(&m);
}

void
cr_lease_take(cr_self *cr, token *t)
{
	json_t *k = key_of(t);
	lctx   *x = lctx_new(cr, t->key, true);

	if (t->state != TOK_UNSURE) {
		(void)cr_tok_enter(t, TOK_LEASING, -1, "a lease asked");
	}
	t->take = x;
	if (k == NULL || x == NULL ||
	    lease_ask(cr, "take", k, 0, on_taken, x) != 0) {
		if (x != NULL) {
			lctx_free(x);
		}
		t->take = NULL;
		cr_lease_release(t);
		cr_refresh_send(cr, t); /* without one, this time */
	}
	json_decref(k);
}

void
cr_lease_unsure(cr_self *cr, token *t)
{
	KN_WARN("credential",
	        "%s: the token refresh sent while the store was away was refused as spent: another node may have refreshed it; looking at the store's row when it is back",
	        t->client_id);
	t->attempt     = 0;
	t->lease_polls = 0;
	(void)cr_tok_enter(t, TOK_UNSURE, CR_UNSURE_POLL_MS,
	                   "refused as spent, without a lease");
}

/* The row another node wrote, read: taken when it differs. */
static void
on_row(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	lctx        *x  = arg;
	cr_self     *cr = x->cr;
	token       *t  = (token *)strmap_get(&cr->tokens, x->key);
	ps_found_msg m  = {0};
	json_t      *row, *k = x->make;
	bool         was;

	if (status != 0 || ps_found_msg_unpack(data, len, &m) != 0) {
		ps_found_msg_clear(&m);
		lctx_free(x);
		return;
	}
	row = m.row != NULL ? json_loads(m.row, 0, NULL) : NULL;
	ps_found_msg_clear(&m);
	if (t == NULL && row != NULL && k != NULL &&
	    cr_client(cr, cr_str(k, "client_id")) != NULL) {
		/* a token written while this node did not listen */
		t = cr_token(cr, cr_str(k, "client_id"), cr_str(k, "mode"),
		             cr_str(k, "identity"), true);
	}
	lctx_free(x);
	if (t == NULL || t->state == TOK_REFRESHING || t->take != NULL) {
		json_decref(row);
		return;
	}
	was = t->active && t->access != NULL;
	if (row != NULL && adopt(t, row)) {
		KN_DEBUG("credential", "%s: a token another node wrote",
		         t->client_id);
		cr_refresh_ahead(cr, t);
		if (!cr_callers_mode(t->mode)) {
			/* its client lets go of the header it holds */
			cr_notify(cr, t->client_id,
			          !t->active    ? "needs_reauth"
			                  : was ? "refreshed"
			                        : "active",
			          NULL);
		}
	}
	json_decref(row);
}

/* An OAuth config another node wrote (its discovery, its registration):
 * this node's client takes it when its configured part is this one's. */
void
cr_meta_take(cr_self *cr, const void *data, size_t len)
{
	ps_found_msg m = {0};
	json_t      *row, *meta;
	cclient     *c;

	if (ps_found_msg_unpack(data, len, &m) != 0) {
		ps_found_msg_clear(&m);
		return;
	}
	row  = m.row != NULL ? json_loads(m.row, 0, NULL) : NULL;
	meta = cr_str(row, "config") != NULL
	        ? json_loads(cr_str(row, "config"), 0, NULL)
	        : NULL;
	c    = cr_str(row, "id") != NULL ? cr_client(cr, cr_str(row, "id"))
	                                 : NULL;
	if (c != NULL && json_is_object(meta) && c->disc == NULL &&
	    !json_equal(meta, c->meta)) {
		json_t *was = json_object_get(meta, "configured");
		if (json_equal(was, c->oauth) ||
		    (json_is_null(was) && c->oauth == NULL)) {
			KN_DEBUG("credential",
			         "%s: an OAuth config another node "
			         "discovered",
			         c->name);
			json_decref(c->meta);
			c->meta = json_incref(meta);
		}
	}
	json_decref(meta);
	json_decref(row);
	ps_found_msg_clear(&m);
}

static void
on_meta(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	if (status == 0) {
		cr_meta_take(arg, data, len);
	}
}

/* Reads the token row k keys, answered to on_row with x (freed there, or
 * here when it cannot be asked). */
static void
read_row(cr_self *cr, const json_t *k, lctx *x)
{
	char      *text = json_dumps(k, JSON_COMPACT);
	ps_key_msg q    = {.table = "oauth_tokens", .key = text};

	if (text == NULL || cr->ps == NULL ||
	    kn_ask_async_msg(cr->self, cr->ps, MSG_PS_ROW_GET,
	                     CODEC_OF(ps_key_msg, &q), 30000, on_row,
	                     x) != 0) {
		lctx_free(x);
	}
	free(text);
}

/* Reads client id's OAuth config row (another node's discovery or
 * registration), taken by on_meta. */
static void
look_meta(cr_self *cr, const char *id)
{
	json_t    *k    = json_pack("{s:s}", "id", id);
	char      *text = k != NULL ? json_dumps(k, JSON_COMPACT) : NULL;
	ps_key_msg q    = {.table = "oauth_configs", .key = text};

	if (text != NULL && cr->ps != NULL) {
		(void)kn_ask_async_msg(cr->self, cr->ps, MSG_PS_ROW_GET,
		                       CODEC_OF(ps_key_msg, &q), 30000,
		                       on_meta, cr);
	}
	free(text);
	json_decref(k);
}

/* Looks at the row of a token of this node's client k names ({client_id,
 * mode, identity}): a refresh waiting on the lease looks now; else the
 * row is read, taken by on_row when it differs.  A token this node does
 * not hold is made now when the row is known to exist (told), else
 * (a resync) when the read finds it. */
static void
look_token(cr_self *cr, json_t *k, bool told)
{
	bool   make = !cr_callers_mode(cr_str(k, "mode"));
	token *t;
	lctx  *x;

	if (cr_str(k, "client_id") == NULL || cr_str(k, "mode") == NULL ||
	    cr_str(k, "identity") == NULL ||
	    cr_client(cr, cr_str(k, "client_id")) == NULL) {
		return; /* not a client of this node's */
	}
	t = cr_token(cr, cr_str(k, "client_id"), cr_str(k, "mode"),
	             cr_str(k, "identity"), make && told);
	if (t == NULL && make && !told) {
		char key[CR_TOKEN_KEY_MAX];
		cr_token_key(key, sizeof(key), cr_str(k, "client_id"),
		             cr_str(k, "mode"), cr_str(k, "identity"));
		if ((x = lctx_new(cr, key, false)) != NULL) {
			x->make = json_incref(k);
			read_row(cr, k, x);
		}
	} else if (t != NULL && t->timer != 0 &&
	           (t->state == TOK_PEER || t->state == TOK_UNSURE)) {
		/* the refresh it waited for: look now */
		assert_token_state(t);
		kn_timer_cancel(cr->self, t->timer);
		t->timer = 0;
		cr_lease_take(cr, t);
	} else if (t != NULL && t->state != TOK_REFRESHING &&
	           t->take == NULL &&
	           (x = lctx_new(cr, t->key, false)) != NULL) {
		read_row(cr, k, x);
	}
}

int
cr_on_row_changed(kn_actor *self, cr_self *cr, kn_msg *msg,
                  cr_row_changed_msg *m)
{
	json_t     *w, *k;
	const char *table;

	w     = m->key != NULL ? json_loads(m->key, 0, NULL) : NULL;
	table = cr_str(w, "table");
	k     = json_object_get(w, "key");
	if (table != NULL && strcmp(table, "oauth_configs") == 0) {
		if (cr_str(k, "id") != NULL) {
			look_meta(cr, cr_str(k, "id"));
		}
	} else {
		look_token(cr, k, true);
	}
	json_decref(w);
	return (0);
}

static void
resync_one(strmap_ent *e, void *arg)
{
	cclient    *c  = STRMAP_OF(e, cclient, ent);
	cr_self    *cr = arg;
	const char *mode;
	json_t     *k;

	if (c->auth != CFG_AUTH_OAUTH && c->auth != CFG_AUTH_PER_USER_OAUTH) {
		return;
	}
	mode = c->auth == CFG_AUTH_OAUTH ? "shared" : "admin";
	if (c->disc == NULL) {
		look_meta(cr, c->id);
	}
	if ((k = json_pack("{s:s, s:s, s:s}", "client_id", c->id, "mode", mode,
	                   "identity", "")) != NULL) {
		look_token(cr, k, false);
		json_decref(k);
	}
}

void
cr_resync(cr_self *cr)
{
	strmap_each(&cr->clients, resync_one, cr);
}
