/*
 * cred.c - the client actor's side of credentials: what it tells the
 * credential actor about itself, the header it asks for before each
 * connection (sticky dial, per-call call, discovery), and what it does
 * when its credential changes (authorized, refreshed, dead, rotated).
 *
 * DESIGN: an `oauth` client holds the last header it was given (cl->cred)
 * only to open connections; it uses it as it is for as long as the
 * credential actor said (use_ms: until that actor would refresh it) and
 * asks again before every new connection after that, so the credential
 * actor decides - from memory at once, or after one refresh shared by
 * every asker - and a dead credential is known without a network call.  A
 * reply that comes back after the thing that asked for it was dropped (a dial
 * superseded, the client closing) finds nothing.
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actors/client/client_impl.h"
#include "actors/credential/credential_msg.h"
#include "actors/kernel/clock.h"
#include "actors/kernel/log.h"
#include "codec/errors.h"
#include "codec/mp.h"
#include "codec/text.h"

#define CRED_ASK_MS 30000 /* a refresh with its retries fits in it */

bool
cl_cred_needed(const client *cl)
{
	return (cl->cr != NULL &&
	        (cl->cfg->auth == CFG_AUTH_OAUTH ||
	         cfg_auth_per_user(cl->cfg->auth)));
}

/* Whose credential a connection of this client opens with: the shared
 * token, or (per-user) the admin's discovery credential. */
static const char *
conn_mode(const client *cl)
{
	return (cfg_auth_per_user(cl->cfg->auth) ? "admin" : "shared");
}

char **
cl_cred_lines(client *cl, char *cred)
{
	size_t n = 0, k = 0;
	char **v;

	while (cl->cfg->headers != NULL && cl->cfg->headers[n] != NULL) {
		n++;
	}
	for (const char *p = cred; *p != '\0'; p++) {
		k += *p == '\n';
	}
	if ((v = calloc(n + k + 2, sizeof(char *))) == NULL) {
		return (NULL);
	}
	if (n > 0) {
		memcpy(v, cl->cfg->headers, n * sizeof(char *));
	}
	for (char *p = cred, *nl;; p = nl + 1) {
		v[n++] = p;
		if ((nl = strchr(p, '\n')) == NULL) {
			break;
		}
		*nl = '\0';
	}
	return (v);
}

void
cl_cred_register(client *cl)
{
	cr_register_msg m;

	if (cl->cr == NULL) {
		return;
	}
	json_t *k = json_object_get(cl->cfg->raw, "per_user_header_keys");
	m         = (cr_register_msg) {
	                .id       = cl->cfg->id,
	                .name     = cl->cfg->name,
	                .auth     = (char *)cfg_auth_name(cl->cfg->auth),
	                .sticky   = cl->cfg->sticky,
	                .url      = cl->cfg->url,
	                .oauth    = cl->cfg->oauth != NULL
	                           ? json_dumps(cl->cfg->oauth, JSON_COMPACT)
	                           : NULL,
	                .exchange = cl->cfg->exchange != NULL
	                        ? json_dumps(cl->cfg->exchange, JSON_COMPACT)
	                        : NULL,
	                .keys     = k != NULL ? json_dumps(k, JSON_COMPACT) : NULL,
        };
	if (kn_tell_msg(cl->cr, cl->self, MSG_CR_REGISTER,
	                CODEC_OF(cr_register_msg, &m)) != 0) {
		KN_ERROR("client", "%s: the credential actor is unreachable",
		         cl->cfg->name);
	}
	text_secret_free(m.oauth);
	text_secret_free(m.exchange);
	free(m.keys);
}

void
cl_cred_forget(client *cl)
{
	cr_id_msg m = {.id = cl->cfg->id};

	if (cl->cr == NULL) {
		return;
	}
	(void)kn_tell_msg(cl->cr, cl->self, MSG_CR_FORGET,
	                  CODEC_OF(cr_id_msg, &m));
}

/* Replaces the header lines connections are opened with ("\n" between
 * lines, as the credential actor gives them). */
static void
set_cred(client *cl, const char *headers)
{
	if (cl->cred != NULL) {
		OPENSSL_cleanse(cl->cred, strlen(cl->cred));
		free(cl->cred);
	}
	free(cl->hdrs);
	cl->cred = headers != NULL ? strdup(headers) : NULL;
	cl->hdrs = cl->cred != NULL ? cl_cred_lines(cl, cl->cred) : NULL;
}

uint64_t
cl_cred_sum(const client *cl)
{
	return (cl->cred != NULL ? strmap_hash(cl->cred) : 0);
}

/* The connection credential died (or was rotated). */
static void
cred_dead(client *cl, const char *message)
{
	if (cfg_auth_per_user(cl->cfg->auth)) {
		/* callers keep working; only discovery pauses */
		(void)cl_failure(cl, "credential", message);
		cl->admin_dead = true;
		set_cred(cl, NULL);
		cl_transition(cl);
		return;
	}
	cl_reauth(cl, message);
}

void
cl_cred_clear(client *cl)
{
	set_cred(cl, NULL);
}

void
cl_reauth(client *cl, const char *message)
{
	if (cl->state == CS_DISABLED) {
		return; /* authoritative; the credential's state shows later */
	}
	cl_check_abort(cl);
	cl_conn_close_all(cl);
	cl_call_run_queued(cl, "the MCP client needs reauthorization");
	cl_call_drop_held(cl, "the MCP client needs reauthorization", false);
	set_cred(cl, NULL);
	(void)cl_failure(cl, "credential", message);
	(void)cl_state_enter(cl, CS_REAUTH, CL_BY_CRED);
	cl_transition(cl);
	cl_loop_release(cl); /* no fds until reauthorized */
}

/* One wait for the header; the first one asks, the rest join it. */
typedef struct fetch {
	cl_cred_fn    fn;
	void         *arg;
	uint64_t      seq; /* what asked: checked by fn's owner */
	struct fetch *next;
} fetch;

/* The credential actor's answer to MSG_CR_GET, read: ok when status is
 * 0, no else (the other is zero); a success without headers is
 * MK_EPROTO.  answer_clear frees it. */
typedef struct answer {
	int            status;
	cr_headers_msg ok;
	cr_refused_msg no;
} answer;

static void
answer_get(answer *a, int status, const void *data, size_t len)
{
	(void)cr_headers_msg_unpack(status == 0 ? data : NULL, len, &a->ok);
	(void)cr_refused_msg_unpack(status != 0 ? data : NULL, len, &a->no);
	a->status = status == 0 && a->ok.headers == NULL ? MK_EPROTO : status;
}

/* What failed, for the caller's error. */
static const char *
answer_error(const answer *a)
{
	return (a->no.error != NULL               ? a->no.error
	                : a->status == MK_ECLOSED ? "the runtime is closing"
	                                          : codec_strerror(a->status));
}

static void
answer_clear(answer *a)
{
	cr_headers_msg_clear(&a->ok);
	cr_refused_msg_clear(&a->no);
}

static void
on_header(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	client *cl = arg;
	fetch  *f;
	answer  a;

	answer_get(&a, status, data, len);
	if (status == 0) {
		cl->cred_due = a.ok.use_ms < 0
		        ? 0
		        : kn_now_ns() + a.ok.use_ms * KN_NS_PER_MS;
	}
	if (a.status == 0) {
		set_cred(cl, a.ok.headers);
	}
	cl->fetching = false;
	if (a.no.why != NULL && strcmp(a.no.why, "needs_reauth") == 0 &&
	    cl->state != CS_REAUTH) {
		cred_dead(cl,
		          a.no.error != NULL ? a.no.error
		                             : "credential rejected");
	}
	while ((f = cl->fetches) != NULL) {
		cl->fetches = f->next;
		f->fn(cl, f->arg, f->seq, a.status, answer_error(&a));
		free(f);
	}
	answer_clear(&a);
}

/* An ask's deadline: the caller's (ns, 0: none) or CRED_ASK_MS. */
static int
ask_ms(int64_t deadline)
{
	int64_t left = (deadline - kn_now_ns()) / KN_NS_PER_MS;

	return (deadline == 0 || left > CRED_ASK_MS ? CRED_ASK_MS
	                : left < 1                  ? 1
	                                            : (int)left);
}

void
cl_cred_fetch(client *cl, int how, cl_cred_fn fn, void *arg, uint64_t seq)
{
	cl_cred_fetch_until(cl, how, fn, arg, seq, 0);
}

void
cl_cred_fetch_until(client *cl, int how, cl_cred_fn fn, void *arg,
                    uint64_t seq, int64_t deadline)
{
	fetch *f;

	/* a header still good is used as it is (until the moment the
	 * credential actor would refresh it): no ask at all */
	if (how != CRED_FORCE && how != CRED_STEP && !cl->fetching &&
	    cl->cred != NULL &&
	    (how == CRED_PEEK || cl->cred_due == 0 ||
	     cl->cred_due > kn_now_ns())) {
		fn(cl, arg, seq, 0, NULL);
		return;
	}
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		fn(cl, arg, seq, MK_ENOMEM, "out of memory");
		return;
	}
	f->fn       = fn;
	f->arg      = arg;
	f->seq      = seq;
	f->next     = cl->fetches;
	cl->fetches = f;
	if (cl->fetching) {
		return; /* one ask per client at a time: joined */
	}
	cr_get_msg m = {.id       = cl->cfg->id,
	                .mode     = (char *)conn_mode(cl),
	                .identity = "",
	                .force    = how == CRED_FORCE,
	                .peek     = how == CRED_PEEK,
	                .scope    = how == CRED_STEP ? cl->step_scope : NULL};
	cl->fetching = true;
	if (kn_ask_async_msg(cl->self, cl->cr, MSG_CR_GET,
	                     CODEC_OF(cr_get_msg, &m), ask_ms(deadline),
	                     on_header, cl) != 0) {
		on_header(cl->self, cl, MK_ECLOSED, NULL, 0);
	}
}

int
cl_on_cred(kn_actor *self, client *cl, kn_msg *msg, cl_cred_msg *m)
{
	const char *status = m->status, *message = m->message;

	if (status == NULL) {
		/* internal: always set */
	} else if (strcmp(status, "active") == 0) {
		/* authorized (bootstrap or reauthorize): connect now */
		if (cl->admin_dead && cl->state != CS_PENDING) {
			cl->admin_dead = false; /* repaired: discover again */
			cl_dial_start(cl, DIAL_RECONNECT, 0, MSG_CL_RECONNECT);
		} else if (cl->state == CS_PENDING || cl->state == CS_REAUTH) {
			cl->admin_dead = false;
			KN_INFO("client",
			        "%s: credential authorized; connecting",
			        cl->cfg->name);
			/* the connect decides */
			(void)cl_state_enter(cl, CS_UNSTABLE, CL_BY_CRED);
			cl_dial_start(cl, DIAL_RECONNECT, 0, MSG_CL_RECONNECT);
		}
	} else if (strcmp(status, "refreshed") == 0) {
		set_cred(cl,
		         NULL); /* the next connection asks for the new one */
		/* a sticky session keeps the header it opened with: move to
		 * one with the new token, make-before-break */
		if (cl->cfg->sticky && cl->live != NULL &&
		    (cl->state == CS_HEALTHY || cl->state == CS_UNSTABLE)) {
			cl_dial_start(cl, DIAL_BACKGROUND, 0,
			              MSG_CL_RECONNECT);
		}
	} else {
		/* needs_reauth, rotated */
		cred_dead(cl,
		          message != NULL && *message != '\0'
		                  ? message
		                  : "credential must be reauthorized");
	}
	return (0);
}

/* ---- a per-user caller's credential --------------------------------------
 */

/* Calls waiting for one identity's credential. */
typedef struct ugroup {
	strmap_ent ent;   /* key: mode, identity, subject */
	char      *key;   /* owns ent.key (secret: holds the subject) */
	cl_call   *calls; /* waiting */
	cl_cred_fn fn;    /* what each gets */
	client    *cl;    /* owner */
} ugroup;

static void
on_user(kn_actor *self, void *arg, int status, const void *data, size_t len)
{
	ugroup  *g  = arg;
	client  *cl = g->cl;
	cl_call *c;
	answer   a;

	answer_get(&a, status, data, len);
	strmap_del(&cl->ufetch, &g->ent);
	while ((c = g->calls) != NULL) {
		g->calls = c->unext;
		c->unext = NULL;
		if (c->cred != NULL) { /* a recovery's second fetch */
			OPENSSL_cleanse(c->cred, strlen(c->cred));
			free(c->cred);
			free(c->hdrs);
			c->cred = NULL;
			c->hdrs = NULL;
		}
		if (a.status == 0 &&
		    (c->cred = strdup(a.ok.headers)) != NULL) {
			c->hdrs = cl_cred_lines(cl, c->cred);
		} else if (a.no.auth_required != NULL) {
			c->auth = strdup(a.no.auth_required);
		}
		g->fn(cl, c, 0, a.status, answer_error(&a));
	}
	answer_clear(&a);
	OPENSSL_cleanse(g->key, strlen(g->key));
	free(g->key);
	free(g);
}

void
cl_cred_fetch_user(client *cl, cl_call *c, cl_cred_fn fn)
{
	char    key[8192];
	ugroup *g;

	snprintf(key, sizeof(key), "%s\x1f%s\x1f%d\x1f%s\x1f%s", c->mode,
	         c->identity, c->force, c->subject != NULL ? c->subject : "",
	         c->step_scope != NULL ? c->step_scope : "");
	if ((g = (ugroup *)strmap_get(&cl->ufetch, key)) != NULL) {
		c->unext = g->calls; /* one ask per identity at a time */
		g->calls = c;
		OPENSSL_cleanse(key, sizeof(key));
		return;
	}
	if ((g = calloc(1, sizeof(*g))) == NULL ||
	    (g->key = strdup(key)) == NULL) {
		free(g);
		OPENSSL_cleanse(key, sizeof(key));
		fn(cl, c, 0, MK_ENOMEM, "out of memory");
		return;
	}
	OPENSSL_cleanse(key, sizeof(key));
	g->ent.key = g->key;
	g->calls   = c;
	g->fn      = fn;
	g->cl      = cl;
	(void)strmap_put(&cl->ufetch, &g->ent);
	cr_get_msg m = {.id       = cl->cfg->id,
	                .mode     = c->mode,
	                .identity = c->identity,
	                .force    = c->force,
	                .subject  = c->subject,
	                .scope    = c->step_scope,
	                .by       = c->requester};
	c->force     = false;
	if (kn_ask_async_msg(
	            cl->self, cl->cr, MSG_CR_GET, CODEC_OF(cr_get_msg, &m),
	            ask_ms(c->recovered ? c->deadline : 0), on_user, g) != 0) {
		on_user(cl->self, g, MK_ECLOSED, NULL, 0);
	}
}

void
cl_cred_fini(client *cl)
{
	/* groups still waiting were answered MK_ECLOSED by the kernel before
	 * fini (their asks' callbacks ran) */
	strmap_fini(&cl->ufetch);
}
