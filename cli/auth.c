/*
 * auth.c - who may call what: the admin token and the metrics token
 * (compared in constant time, as digests), the virtual keys (kept as
 * SHA-256 digests; the set in use replaced as a whole by a reload and
 * freed by the last request that holds it), and a request's caller as
 * its route's auth_t allows it.
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/daemon.h"

/* The virtual keys in use: replaced as a whole by a reload, freed by
 * the last request that holds them. */
struct keyset {
	vkey  *keys;
	size_t n;
	int    refs; /* D.mtx */
};

static struct {
	keyset *keys; /* D.mtx */
} A;

/* ---- virtual keys ------------------------------------------------------- */

void
auth_keys_free(vkey *keys, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(keys[i].name);
		json_decref(keys[i].clients);
	}
	free(keys);
}

void
auth_keys_release(keyset *ks)
{
	bool last;

	if (ks == NULL) {
		return;
	}
	pthread_mutex_lock(&D.mtx);
	last = --ks->refs == 0;
	pthread_mutex_unlock(&D.mtx);
	if (last) {
		auth_keys_free(ks->keys, ks->n);
		free(ks);
	}
}

static void
sha256(const char *s, unsigned char out[32])
{
	unsigned int n = 32;

	EVP_Digest(s, strlen(s), out, &n, EVP_sha256(), NULL);
}

/* Sets the keys from server.virtual_keys (JSON text, or NULL: none). */
int
auth_keys_set(const char *vkeys_json, char *err, size_t errlen)
{
	json_t *a  = vkeys_json != NULL ? json_loads(vkeys_json, 0, NULL)
	                                : json_array();
	keyset *ks = calloc(1, sizeof(*ks)), *old;
	json_t *e;
	size_t  i;

	if (a == NULL || ks == NULL ||
	    (ks->keys = calloc(json_array_size(a) + 1, sizeof(vkey))) ==
	            NULL) {
		snprintf(err, errlen, "out of memory");
		json_decref(a);
		free(ks);
		return (MK_ENOMEM);
	}
	json_array_foreach(a, i, e)
	{
		vkey *k = &ks->keys[ks->n++];
		k->name =
		        strdup(json_string_value(json_object_get(e, "name")));
		k->trust = json_is_true(
		        json_object_get(e, "trust_identity_headers"));
		k->clients = json_incref(json_object_get(e, "clients"));
		k->rate    = json_number_value(
		           json_object_get(e, "calls_per_second"));
		k->burst = json_number_value(json_object_get(e, "burst"));
		k->burst = k->burst > 0 ? k->burst : k->rate > 1 ? k->rate : 1;
		k->inflight = (int)json_number_value(
		        json_object_get(e, "max_calls_in_flight"));
		sha256(json_string_value(json_object_get(e, "value")),
		       k->hash);
		/* (the value stays only in a: wiped below) */
		json_object_set_new(e, "value", json_string(""));
	}
	json_decref(a);
	ks->refs = 1;
	pthread_mutex_lock(&D.mtx);
	old    = A.keys;
	A.keys = ks;
	pthread_mutex_unlock(&D.mtx);
	auth_keys_release(old);
	return (0);
}

/* The key whose value is presented, in constant time over all of them
 * (a digest each: no length leaks either), or NULL; *ks then holds the
 * set (keyset_release). */
static const vkey *
key_of(const char *presented, keyset **ksp)
{
	unsigned char h[32];
	const vkey   *found = NULL;
	keyset       *ks;

	pthread_mutex_lock(&D.mtx);
	ks = A.keys;
	ks->refs++;
	pthread_mutex_unlock(&D.mtx);
	sha256(presented, h);
	for (size_t i = 0; i < ks->n; i++) {
		if (CRYPTO_memcmp(h, ks->keys[i].hash, 32) == 0) {
			found = &ks->keys[i];
		}
	}
	*ksp = ks;
	return (found);
}

/* Constant-time: the bearer is the secret (the admin or metrics token). */
static bool
token_is(const char *bearer, const char *secret)
{
	unsigned char a[32], b[32];

	if (bearer == NULL || secret == NULL) {
		return (false);
	}
	sha256(bearer, a);
	sha256(secret, b);
	return (CRYPTO_memcmp(a, b, 32) == 0);
}

/* ---- the caller -----------------------------------------------------------
 */

/* Who calls: the admin token, a virtual key, or
 * nobody; refuses (answers, false) those the route does not allow. */
/* A refusal at admission: a JSON-RPC error on /mcp, else {"error"}. */
static void
refuse(req *r, unsigned status, const char *msg)
{
	if (r->route->auth == AUTH_MCP) {
		answer_rpc_error(r, status, NULL, -32001, msg);
	} else {
		answer_error(r, status, msg);
	}
}

bool
http_caller(req *r, keyset **ks)
{
	const char *authz = http_header(r, "Authorization");
	const char *vk    = http_header(r, "X-MCP-Virtual-Key");
	const char *bearer =
	        authz != NULL && strncasecmp(authz, "Bearer ", 7) == 0
	        ? authz + 7
	        : NULL;
	bool none, is_admin, metrics_ok, keys;

	pthread_mutex_lock(&D.mtx);   /* (a reload replaces the tokens) */
	none       = D.token == NULL; /* (on loopback only: serve.c) */
	is_admin   = token_is(bearer, D.token);
	metrics_ok = D.metrics_token == NULL || is_admin ||
	        token_is(bearer, D.metrics_token);
	keys = A.keys != NULL && A.keys->n > 0;
	pthread_mutex_unlock(&D.mtx);
	if (vk != NULL && (r->key = key_of(vk, ks)) == NULL) {
		refuse(r, 401, "the virtual key is not valid");
		return (false);
	}
	switch (r->route->auth) {
	case AUTH_OPEN:
		return (true);
	case AUTH_METRICS:
		if (!metrics_ok) {
			answer_error(
			        r, 401,
			        "this endpoint needs the metrics token (Authorization: Bearer ...)");
		}
		return (metrics_ok);
	case AUTH_ADMIN:
		if (r->key != NULL && !is_admin) {
			/* (a key never opens the admin API, even where
			 * no admin token is set) */
			answer_error(
			        r, 403,
			        "a virtual key may not use the admin API");
			return (false);
		}
		r->admin = none || is_admin;
		if (!r->admin) {
			answer_error(
			        r, 401,
			        "this endpoint needs the admin token (Authorization: Bearer ...)");
		}
		return (r->admin);
	case AUTH_READ:
		/* a key sees its clients only, whatever else it holds */
		r->admin = r->key == NULL && (none || is_admin);
		if (!r->admin && r->key == NULL) {
			answer_error(
			        r, 401,
			        "this endpoint needs the admin token or a virtual key");
			return (false);
		}
		return (true);
	case AUTH_MCP:
		/* an MCP client sends its key as a bearer token; it is never
		 * a token-exchange subject here */
		if (r->key == NULL && bearer != NULL && !is_admin &&
		    (r->key = key_of(bearer, ks)) == NULL) {
			refuse(r, 401,
			       "the bearer token is neither a virtual key nor the admin token");
			return (false);
		}
		bearer = NULL; /* the rest as a tool call's: */
		               /* FALLTHROUGH */
	case AUTH_CALL:
		r->admin = r->key == NULL && is_admin;
		/* nobody: only on loopback with no keys configured */
		if (r->key == NULL && !r->admin && (keys || !D.loopback)) {
			refuse(r, 401,
			       r->route->auth == AUTH_MCP
			               ? "/mcp needs a virtual key (Authorization: Bearer or X-MCP-Virtual-Key) or the admin token"
			               : "a tool call needs a virtual key (X-MCP-Virtual-Key) or the admin token (Authorization: Bearer ...)");
			return (false);
		}
		/* the identity: a key's name, unless it trusts the
		 * headers of the gateway in front of it */
		if (r->key == NULL || r->key->trust) {
			r->id_user    = http_header_dup(r, "X-MCP-User-Id");
			r->id_session = http_header_dup(r, "X-MCP-Session-Id");
		}
		/* a bearer that is not the admin token is the caller's own
		 * token (the subject of a token exchange) */
		if (bearer != NULL && !is_admin) {
			r->bearer = strdup(bearer);
		}
		/* its trace context, for a 2026-07-28 server (the runtime
		 * drops what is not W3C Trace Context) */
		r->trace[0] = http_header_dup(r, "traceparent");
		r->trace[1] = http_header_dup(r, "tracestate");
		return (true);
	}
	return (false);
}

/* The key of digest hash in the set in use, or NULL.  D.mtx. */
static const vkey *
held(const unsigned char hash[32])
{
	for (size_t i = 0; A.keys != NULL && i < A.keys->n; i++) {
		if (CRYPTO_memcmp(hash, A.keys->keys[i].hash, 32) == 0) {
			return (&A.keys->keys[i]);
		}
	}
	return (NULL);
}

bool
auth_keys_holds(const unsigned char hash[32])
{
	pthread_mutex_lock(&D.mtx);
	bool h = held(hash) != NULL;
	pthread_mutex_unlock(&D.mtx);
	return (h);
}

json_t *
auth_keys_clients(const unsigned char hash[32])
{
	json_t *c = NULL;

	pthread_mutex_lock(&D.mtx);
	const vkey *k = held(hash);
	if (k != NULL) {
		c = json_deep_copy(k->clients);
	}
	pthread_mutex_unlock(&D.mtx);
	return (c);
}

bool
auth_keys_grants(const unsigned char hash[32], const json_t *clients)
{
	pthread_mutex_lock(&D.mtx);
	const vkey *k = held(hash);
	bool same     = k != NULL && json_equal((json_t *)clients, k->clients);
	pthread_mutex_unlock(&D.mtx);
	return (same);
}

int
auth_keys_ensure(char *err, size_t errlen)
{
	return (A.keys == NULL ? auth_keys_set(NULL, err, errlen) : 0);
}

void
auth_keys_stop(void)
{
	auth_keys_release(A.keys);
	A.keys = NULL;
}
