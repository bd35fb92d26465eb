/*
 * headers.c - per_user_headers credentials: the admin's
 * verified sample and every caller's own header values - kept (callers'
 * in the LRU cr->hlru), sealed in the store, restored; the header flow
 * that asks a caller for them (a submit_url, stored, expiring after
 * CR_FLOW_TTL_S); and a caller's ask answered from them (see user.c).
 */
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "actors/credential/cred_impl.h"
#include "actors/kernel/log.h"
#include "codec/errors.h"
#include "codec/mp.h"
#include "codec/text.h"
#include "persist/store.h"

#define HFLOW_TTL_S CR_FLOW_TTL_S

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

void
cr_hcred_drop(cr_self *cr, hcred *h)
{
	lru_remove(&cr->hlru, &h->lru);
	strmap_del(&cr->hcreds, &h->ent);
	hcred_free(h);
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
			cr_hcred_drop(cr, HCRED_OF(l));
		}
	}
}

/* Sets (creating) the header credential; takes headers. */
hcred *
cr_hcred_set(cr_self *cr, const char *client, const char *mode,
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
			        "a stored header credential is incomplete: skipped");
			continue;
		}
		(void)cr_hcred_set(cr, cl, mo, id, copy);
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
			snprintf(
			        why, len,
			        "header %.100s is not one of the per_user_header_keys of MCP client %s",
			        name, c->name);
			goto bad;
		}
		if (!json_is_string(v) || *json_string_value(v) == '\0' ||
		    strpbrk(json_string_value(v), "\r\n") != NULL) {
			snprintf(
			        why, len,
			        "header %.100s needs a non-empty one-line value",
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
	cr_headers_msg m = {.headers = (char *)headers, .use_ms = -1};

	kn_reply_msg(kn_actor_kernel(cr->self), corr, 0,
	             CODEC_OF(cr_headers_msg, &m));
}

#define HFLOW_OF(l) ((hflow *)((char *)(l)-offsetof(hflow, q)))

static void
hflow_free(hflow *f)
{
	free(f->client_id);
	free(f->mode);
	free(f->identity);
	free(f->by);
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
	cr_flow_count(cr, f->client_id, f->by, true, 1);
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
		cr_flow_count(cr, f->client_id, f->by, true, -1);
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
            const char *by, uint64_t corr)
{
	hflow  *f;
	json_t *row, *x;
	char    submit[256];

	if (cr_flow_room(cr, c, by, true, corr) != 0) {
		return; /* answered */
	}
	f = calloc(1, sizeof(*f));
	if (f == NULL || oa_random_state(f->id) != 0 ||
	    (f->client_id = strdup(c->id)) == NULL ||
	    (f->mode = strdup(mode)) == NULL ||
	    (f->identity = strdup(identity)) == NULL ||
	    (by != NULL && (f->by = strdup(by)) == NULL)) {
		if (f != NULL) {
			hflow_free(f);
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
	cr_auth_reply(
	        cr, corr, c, "headers", x,
	        "submit your own header values for this MCP client first");
	json_decref(x);
}

void
cr_headers_get(cr_self *cr, cclient *c, const cr_ask *a, uint64_t corr,
               bool filled)
{
	const char *mode = a->mode, *identity = a->identity;
	bool        admin = strcmp(mode, "admin") == 0;
	hcred      *h;

	if ((h = hcred_get(cr, c->id, mode, identity)) != NULL) {
		hcred_touch(cr, h);
		reply_headers(cr, corr, h->headers); /* force: a no-op */
	} else if (!admin && !filled) {
		cr_ask fa  = *a;
		fa.subject = NULL;
		cr_fill_start(cr, c, STORE_HEADER_CREDENTIALS, &fa, corr);
	} else if (admin) {
		cr_reply_error(
		        cr, corr, MK_ESTATE, "none",
		        "MCP client %s has no verified header sample: verify-headers first",
		        c->name);
	} else {
		header_flow(cr, c, mode, identity, a->by, corr);
	}
}

/* ---- admin verification and caller submissions
 * -------------------------------
 */

typedef struct verified {
	cr_self *cr;
	uint64_t corr;
	char    *client_id; /* admin: the client told, or NULL */
	char    *client;    /* the credential's client, mode, identity */
	char    *mode;
	char    *identity;
	char    *was; /* its header lines before, or NULL: none */
	char     flow[OA_STATE_LEN + 1]; /* the caller's flow, or "" */
} verified;

static void
verified_free(verified *v)
{
	free(v->client_id);
	free(v->client);
	free(v->mode);
	free(v->identity);
	text_secret_free(v->was);
	free(v);
}

/* The store answered a submitted header credential: on disk, it is
 * answered ok and the caller's flow is used up; refused, it goes back to
 * what it was, the flow stays for another try, and the store's why is
 * the answer (MK_ESTORE: nothing of it is stored, nor will be). */
static void
on_verified(kn_actor *self, void *arg, int status, const void *data,
            size_t len)
{
	verified *v = arg;
	hflow    *f = v->flow[0] != '\0'
	           ? (hflow *)strmap_get(&v->cr->hflows, v->flow)
	           : NULL;
	hcred    *h;

	if (f != NULL && status == 0) {
		hflow_drop(v->cr, f, false);
	} else if (f != NULL) {
		f->storing = false;
	}
	if (status != 0) {
		h = hcred_get(v->cr, v->client, v->mode, v->identity);
		if (v->was != NULL) {
			(void)cr_hcred_set(v->cr, v->client, v->mode,
			                   v->identity, v->was);
			v->was = NULL; /* taken */
		} else if (h != NULL) {
			cr_hcred_drop(v->cr, h);
		}
		if (data != NULL) {
			kn_reply_corr(kn_actor_kernel(self), v->corr, status,
			              data, len);
		} else {
			kn_reply_error(kn_actor_kernel(self), v->corr, status,
			               "%s", codec_strerror(status));
		}
		verified_free(v);
		return;
	}
	if (v->client_id != NULL) { /* (first: cr_notify) */
		cr_notify(v->cr, v->client_id, "active", NULL);
	}
	kn_reply_corr(kn_actor_kernel(self), v->corr, 0, CODEC_EMPTY,
	              CODEC_EMPTY_LEN);
	verified_free(v);
}

/* Stores (client, mode, identity)'s header lines; answers corr when on
 * disk, then (admin) tells the client or (f: the caller's flow) ends the
 * flow. */
static void
store_headers(cr_self *cr, cclient *c, const char *mode, const char *identity,
              char *lines, hflow *f, uint64_t corr)
{
	hcred    *h = hcred_get(cr, c->id, mode, identity);
	verified *v = calloc(1, sizeof(*v));
	int       rv;

	if (v != NULL) {
		v->was      = h != NULL ? strdup(h->headers) : NULL;
		v->client   = strdup(c->id);
		v->mode     = strdup(mode);
		v->identity = strdup(identity);
	}
	h = cr_hcred_set(cr, c->id, mode, identity, lines);
	if (h == NULL || v == NULL || v->client == NULL || v->mode == NULL ||
	    v->identity == NULL) {
		if (v != NULL) {
			verified_free(v);
		}
		cr_reply_error(cr, corr, MK_ENOMEM, NULL, "out of memory");
		return;
	}
	if (f != NULL) {
		memcpy(v->flow, f->id, sizeof(v->flow));
		f->storing = true;
	}
	v->cr        = cr;
	v->corr      = corr;
	v->client_id = strcmp(mode, "admin") == 0 ? strdup(c->id) : NULL;
	cr->ticket   = 1; /* acknowledged: refused, out of the queue */
	rv           = hcred_store(cr, h, on_verified, v);
	cr->ticket   = 0;
	if (rv != 0) {
		on_verified(cr->self, v, MK_ENOMEM, NULL, 0);
	}
}

/* The headers object a message's text holds, or NULL. */
static json_t *
headers_of(const char *text)
{
	return (text != NULL ? json_loads(text, 0, NULL) : NULL);
}

int
cr_on_verify_headers(kn_actor *self, cr_self *cr, kn_msg *msg,
                     cr_verify_headers_msg *m)
{
	uint64_t corr = kn_defer(msg);
	char     why[300], *lines;
	cclient *c;

	const char *who   = m->client;
	json_t     *given = headers_of(m->headers);

	if ((c = who != NULL ? cr_client(cr, who) : NULL) == NULL) {
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "no MCP client %.200s",
		               who != NULL ? who : "(none given)");
	} else if (c->auth != CFG_AUTH_PER_USER_HEADERS) {
		cr_reply_error(
		        cr, corr, MK_EINVAL, NULL,
		        "MCP client %s uses auth_type %s: verify-headers applies to per_user_headers",
		        c->name, cfg_auth_name(c->auth));
	} else if ((lines = header_lines(c, given, why, sizeof(why))) ==
	           NULL) {
		cr_reply_error(cr, corr, MK_EINVAL, NULL, "%s", why);
	} else {
		store_headers(cr, c, "admin", "", lines, NULL, corr);
	}
	json_decref(given);
	return (0);
}

/* f is the flow of m's caller: its client (by id or name) and identity
 * are the ones that started it. */
static bool
hflow_is_callers(cr_self *cr, const hflow *f, const cr_submit_headers_msg *m)
{
	cclient *c = m->client != NULL ? cr_client(cr, m->client) : NULL;

	return (c != NULL && strcmp(c->id, f->client_id) == 0 &&
	        m->mode != NULL && strcmp(m->mode, f->mode) == 0 &&
	        m->identity != NULL && strcmp(m->identity, f->identity) == 0);
}

int
cr_on_submit_headers(kn_actor *self, cr_self *cr, kn_msg *msg,
                     cr_submit_headers_msg *m)
{
	uint64_t corr = kn_defer(msg);
	char     why[300], *lines;
	hflow   *f;
	cclient *c;

	const char *fid   = m->session_id;
	json_t     *given = headers_of(m->headers);

	f = fid != NULL ? (hflow *)strmap_get(&cr->hflows, fid) : NULL;
	if (f == NULL || f->expires_at <= cr_now()) {
		cr_reply_error(cr, corr, MK_EINVAL, NULL,
		               "unknown, used or expired header session");
	} else if (!hflow_is_callers(cr, f, m)) {
		/* another caller's, or another client's: as if none (it
		 * stays its own caller's) */
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "no such header session for this caller");
	} else if (f->storing) {
		cr_reply_error(
		        cr, corr, MK_EBUSY, NULL,
		        "this header session's values are being stored; try again when that answered");
	} else if ((c = cr_client(cr, f->client_id)) == NULL) {
		cr_reply_error(cr, corr, MK_ENOENT, NULL,
		               "the session's MCP client is gone");
		hflow_drop(cr, f, false);
	} else if ((lines = header_lines(c, given, why, sizeof(why))) ==
	           NULL) {
		cr_reply_error(cr, corr, MK_EINVAL, NULL, "%s", why);
	} else {
		/* the flow ends once the values are on disk */
		store_headers(cr, c, f->mode, f->identity, lines, f, corr);
	}
	json_decref(given);
	return (0);
}

void
cr_headers_fini(cr_self *cr)
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
}
