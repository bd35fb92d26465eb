/*
 * http.c - the daemon's HTTP server (libmicrohttpd): admission, budgets,
 * who may call what (the admin token, virtual keys, the metrics token),
 * and the answers.
 *
 * DESIGN: libmicrohttpd runs its connections on a small pool of threads
 * (epoll), which must never block.  Each request is taken apart once
 * its headers are in, and refused there when it must be - before a byte
 * of its body is read:
 *   Host       must name this daemon (its listen address, the loopback
 *              names of a loopback address, or an allowed origin's
 *              host): 421 otherwise - a DNS-rebound page names its own;
 *   Origin     when a browser sends one, this daemon's own origin or one
 *              of server.allowed_origins: 403 otherwise;
 *   Content-Type  application/json on every request that can change
 *              state (POST, PUT, DELETE): 415 otherwise - no HTML form
 *              and no "simple" cross-origin fetch can send it;
 *   the route  404 / 405; then who calls (auth_t: the admin token, a
 *              virtual key, or nobody), 401 / 403;
 *   the size   a Content-Length over BODY_MAX is 413 at once; a chunked
 *              body is read up to BODY_MAX and dropped past it (413);
 *   a budget   each lane has its own (admin API, data plane, probes):
 *              503 with Retry-After past it, so that no caller of one
 *              lane can lock another out.
 * Connections are bounded (total and per address: closed past it), idle
 * ones closed after a timeout, and each has a fixed memory pool (headers
 * past it: 431).  A request that passed is suspended and queued to its
 * lane's workers (or run at once when it never blocks); its answer
 * queues the response and resumes it.  The admin token, virtual keys and
 * a caller's bearer are secrets: compared in constant time, wiped when
 * freed, never logged (the access log has the path, never the query: an
 * OAuth callback's query carries the code).
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/daemon.h"

#define BODY_DROP_MAX (16 * BODY_MAX) /* past it, the connection closes */
#define MEMORY_POOL   (64 * 1024)     /* per connection: headers */
#define THREADS       2               /* libmicrohttpd's pool */
#define HOSTS_MAX     16

enum { PH_NEW, PH_BODY, PH_RUN };

typedef struct lane {
	req           *head, *tail; /* the queue (D.mtx) */
	pthread_cond_t cv;          /* work queued, or stopping */
	int            n;           /* in the works: its budget's count */
	int            max;         /* the budget */
} lane;

/* The virtual keys in use: replaced as a whole by a reload, freed by
 * the last request that holds them. */
struct keyset {
	vkey  *keys;
	size_t n;
	int    refs; /* D.mtx */
};
typedef struct keyset keyset;

static struct {
	struct MHD_Daemon *mhd;
	lane               lanes[LANES];
	pthread_t          workers[LANES][WORKERS];
	bool               started; /* the workers run */
	bool               stopping;
	int                inflight;         /* admitted, not yet answered */
	uint64_t           requests;         /* answered */
	uint64_t           busy;             /* refused for a budget */
	char              *hosts[HOSTS_MAX]; /* Host values accepted */
	size_t             nhosts;
	bool               any_ip_host; /* a wildcard listen: IP hosts */
	char               port[8];
	char             **origins; /* allowed besides our own */
	keyset            *keys;    /* D.mtx */
} H;

/* ---- small things --------------------------------------------------------
 */

void
secret_free(char *s)
{
	if (s != NULL) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

int64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

static const char *
header(const req *r, const char *name)
{
	const char *v =
	        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);

	return (v != NULL && *v != '\0' ? v : NULL);
}

static char *
header_dup(const req *r, const char *name)
{
	const char *v = header(r, name);

	return (v != NULL ? strdup(v) : NULL);
}

/* The decoded value of query parameter name (malloc'd), or NULL.  A
 * query with %00 never gets here (admit refuses it). */
char *
query_get(const char *query, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = query; p != NULL && *p != '\0';) {
		const char *amp = strchr(p, '&');
		size_t      len = amp != NULL ? (size_t)(amp - p) : strlen(p);
		if (len > n && strncmp(p, name, n) == 0 && p[n] == '=') {
			/* form encoding: '+' is a space (a '+' is %2B) */
			char *raw = strndup(p + n + 1, len - n - 1), *v;
			for (char *c = raw; c != NULL && *c != '\0'; c++) {
				*c = *c == '+' ? ' ' : *c;
			}
			v = raw != NULL
			        ? curl_easy_unescape(NULL, raw, 0, NULL)
			        : NULL;
			free(raw);
			if (v == NULL) {
				return (NULL);
			}
			/* (curl's memory goes back to curl) */
			raw = strdup(v);
			curl_free(v);
			return (raw);
		}
		p = amp != NULL ? amp + 1 : NULL;
	}
	return (NULL);
}

/* ---- virtual keys ------------------------------------------------------- */

void
keys_free(vkey *keys, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(keys[i].name);
		json_decref(keys[i].clients);
	}
	free(keys);
}

static void
keyset_release(keyset *ks)
{
	bool last;

	if (ks == NULL) {
		return;
	}
	pthread_mutex_lock(&D.mtx);
	last = --ks->refs == 0;
	pthread_mutex_unlock(&D.mtx);
	if (last) {
		keys_free(ks->keys, ks->n);
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
keys_set(const char *vkeys_json, char *err, size_t errlen)
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
		sha256(json_string_value(json_object_get(e, "value")),
		       k->hash);
		/* (the value stays only in a: wiped below) */
		json_object_set_new(e, "value", json_string(""));
	}
	json_decref(a);
	ks->refs = 1;
	pthread_mutex_lock(&D.mtx);
	old    = H.keys;
	H.keys = ks;
	pthread_mutex_unlock(&D.mtx);
	keyset_release(old);
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
	ks = H.keys;
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

/* ---- answers ------------------------------------------------------------ */

static void
add_headers(struct MHD_Response *res, const req *r, const char *ctype)
{
	MHD_add_response_header(res, "Content-Type", ctype);
	MHD_add_response_header(res, "Cache-Control", "no-store");
	MHD_add_response_header(res, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(res, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(res, "X-Frame-Options", "DENY");
	MHD_add_response_header(res, "Content-Security-Policy",
	                        strncmp(ctype, "text/html", 9) == 0
	                                ? page_csp()
	                                : "default-src 'none'; "
	                                  "frame-ancestors 'none'");
	if (r->busy || r->boot) {
		MHD_add_response_header(res, "Retry-After", "1");
	}
}

/* Counts r out: answered, or streaming.  (Before the caller has the
 * answer: one that sends its next request the moment this one is
 * answered finds the room free.) */
void
http_answered(req *r)
{
	pthread_mutex_lock(&D.mtx);
	if (r->lane >= 0) {
		H.lanes[r->lane].n--;
		r->lane = -1;
	}
	H.inflight--;
	H.requests++;
	pthread_cond_broadcast(&D.cv);
	pthread_mutex_unlock(&D.mtx);
	r->answered = true;
}

/* Answers r with status and body (a JSON, HTML or text), from any
 * thread; r is not touched after (it may be freed at once). */
void
answer(req *r, unsigned status, const char *ctype, const char *body)
{
	struct MHD_Response *res;
	bool                 suspended = r->suspended;

	/* The access log: the path only.  The daemon's own failures (500;
	 * 503 but for busy and booting, which come in floods or are
	 * expected) at warn, the rest at debug. */
	bool own = status == 500 || (status == 503 && !r->busy && !r->boot);
	mk_log(own ? MK_LOG_WARN : MK_LOG_DEBUG, "http", "%s %s %u %.1f ms",
	       r->method != NULL ? r->method : "-",
	       r->path != NULL ? r->path : "-", status,
	       (double)(mono_ns() - r->t0) / 1e6);
	http_answered(r);
	res = MHD_create_response_from_buffer(strlen(body), (void *)body,
	                                      MHD_RESPMEM_MUST_COPY);
	if (res != NULL) {
		add_headers(res, r, ctype);
		(void)MHD_queue_response(r->conn, status, res);
		MHD_destroy_response(res);
	}
	if (suspended) {
		MHD_resume_connection(r->conn); /* (r may be gone after) */
	}
}

void
answer_json(req *r, unsigned status, json_t *j)
{
	char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

	answer(r, text != NULL ? status : 500, "application/json",
	       text != NULL ? text : "{\"error\":\"out of memory\"}");
	free(text);
	json_decref(j);
}

void
answer_error(req *r, unsigned status, const char *msg)
{
	answer_json(r, status, json_pack("{s:s}", "error", msg));
}

/* The HTTP status of an API failure. */
unsigned
status_of(int rc)
{
	switch (rc) {
	case MK_EINVAL:
	case MK_ESTATE:
	case MK_ETOOBIG:
		return (400);
	case MK_EAUTH:
		return (401);
	case MK_ENOENT:
		return (404);
	case MK_EEXIST:
	case MK_EBUSY:
		return (409);
	case MK_EUPSTREAM:
		return (502);
	case MK_ETIMEDOUT:
		return (504);
	case MK_ECLOSED:
		return (503);
	default:
		return (500);
	}
}

/* Answers an API call's outcome: ok (with j, or {}) or its error. */
void
answer_api(req *r, int rc, char *err, unsigned ok, json_t *j)
{
	if (rc == 0) {
		answer_json(r, ok, j != NULL ? j : json_object());
	} else {
		json_decref(j);
		answer_error(r, status_of(rc),
		             err != NULL ? err : mk_strerror(rc));
	}
	mk_free(err);
}

void
http_stats(uint64_t *requests, int *inflight, uint64_t *busy)
{
	pthread_mutex_lock(&D.mtx);
	*requests = H.requests;
	*inflight = H.lanes[LANE_ADMIN].n + H.lanes[LANE_DATA].n;
	*busy     = H.busy;
	pthread_mutex_unlock(&D.mtx);
}

/* ---- admission ---------------------------------------------------------- */

/* Host names this daemon: one of the accepted values, or - on a
 * wildcard listen - an IP literal with our port. */
static bool
host_ok(const char *host)
{
	for (size_t i = 0; i < H.nhosts; i++) {
		if (strcasecmp(host, H.hosts[i]) == 0) {
			return (true);
		}
	}
	if (H.any_ip_host) {
		char          ip[64];
		const char   *colon = strrchr(host, ':');
		unsigned char a[16];
		size_t        n;
		if (colon == NULL || strcmp(colon + 1, H.port) != 0 ||
		    (n = (size_t)(colon - host)) >= sizeof(ip)) {
			return (false);
		}
		if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
			snprintf(ip, sizeof(ip), "%.*s", (int)n - 2, host + 1);
			return (inet_pton(AF_INET6, ip, a) == 1);
		}
		snprintf(ip, sizeof(ip), "%.*s", (int)n, host);
		return (inet_pton(AF_INET, ip, a) == 1);
	}
	return (false);
}

/* Origin (when sent) is ours - http:// and the Host it asked - or an
 * allowed one. */
static bool
origin_ok(const char *origin, const char *host)
{
	if (strncmp(origin, "http://", 7) == 0 &&
	    strcasecmp(origin + 7, host) == 0) {
		return (true);
	}
	for (size_t i = 0; H.origins != NULL && H.origins[i] != NULL; i++) {
		if (strcasecmp(origin, H.origins[i]) == 0) {
			return (true);
		}
	}
	return (false);
}

static bool
is_json_type(const char *ct)
{
	size_t n = strlen("application/json");

	return (ct != NULL && strncasecmp(ct, "application/json", n) == 0 &&
	        (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' '));
}

/* Who calls: the admin token, a virtual key, or
 * nobody; refuses (answers, false) those the route does not allow. */
static bool
caller(req *r, keyset **ks)
{
	const char *authz = header(r, "Authorization");
	const char *vk    = header(r, "X-MCP-Virtual-Key");
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
	keys = H.keys != NULL && H.keys->n > 0;
	pthread_mutex_unlock(&D.mtx);
	if (vk != NULL && (r->key = key_of(vk, ks)) == NULL) {
		answer_error(r, 401, "the virtual key is not valid");
		return (false);
	}
	switch (r->route->auth) {
	case AUTH_OPEN:
		return (true);
	case AUTH_METRICS:
		if (!metrics_ok) {
			answer_error(r, 401,
			             "this endpoint needs the metrics token "
			             "(Authorization: Bearer ...)");
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
			answer_error(r, 401,
			             "this endpoint needs the admin token "
			             "(Authorization: Bearer ...)");
		}
		return (r->admin);
	case AUTH_READ:
		/* a key sees its clients only, whatever else it holds */
		r->admin = r->key == NULL && (none || is_admin);
		if (!r->admin && r->key == NULL) {
			answer_error(
			        r, 401,
			        "this endpoint needs the admin token or a "
			        "virtual key");
			return (false);
		}
		return (true);
	case AUTH_CALL:
		r->admin = r->key == NULL && is_admin;
		/* nobody: only on loopback with no keys configured */
		if (r->key == NULL && !r->admin && (keys || !D.loopback)) {
			answer_error(r, 401,
			             "a tool call needs a virtual key "
			             "(X-MCP-Virtual-Key) or the admin token "
			             "(Authorization: Bearer ...)");
			return (false);
		}
		/* the identity: a key's name, unless it trusts the
		 * headers of the gateway in front of it */
		if (r->key == NULL || r->key->trust) {
			r->id_user    = header_dup(r, "X-MCP-User-Id");
			r->id_session = header_dup(r, "X-MCP-Session-Id");
		}
		/* a bearer that is not the admin token is the caller's own
		 * token (the subject of a token exchange) */
		if (bearer != NULL && !is_admin) {
			r->bearer = strdup(bearer);
		}
		return (true);
	}
	return (false);
}

/* Takes a request apart once its headers are in; false when it was
 * answered (refused) there. */
static bool
admit(req *r, keyset **ks)
{
	const char *host   = header(r, "Host");
	const char *origin = header(r, "Origin");
	const char *clen   = header(r, "Content-Length");
	bool        other  = false;

	if (r->method == NULL || r->path == NULL || r->query == NULL) {
		answer_error(r, 500, "out of memory");
		return (false);
	}
	if (host == NULL || !host_ok(host)) {
		answer_error(r, 421,
		             "the Host header does not name this daemon "
		             "(its listen address, or a host of "
		             "server.allowed_origins)");
		return (false);
	}
	if (origin != NULL && !origin_ok(origin, host)) {
		answer_error(r, 403,
		             "cross-origin request refused: the Origin is "
		             "neither this daemon's nor in "
		             "server.allowed_origins");
		return (false);
	}
	if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0 &&
	    !is_json_type(header(r, "Content-Type"))) {
		answer_error(r, 415,
		             "a request that can change state needs "
		             "Content-Type: application/json");
		return (false);
	}
	if (strstr(r->query, "%00") != NULL) {
		answer_error(r, 400, "the query has a NUL byte (%00)");
		return (false);
	}
	if ((r->route = route_find(r->method, r->path, &r->id, &other)) ==
	    NULL) {
		if (other) {
			answer_error(r, 405, "method not allowed");
		} else {
			answer_error(r, 404, "no such endpoint");
		}
		return (false);
	}
	if (!caller(r, ks)) {
		return (false);
	}
	if (clen != NULL && strtoull(clen, NULL, 10) > BODY_MAX) {
		char msg[64];
		snprintf(msg, sizeof(msg), "the request body is over %d bytes",
		         BODY_MAX);
		answer_error(r, 413, msg);
		return (false);
	}
	/* every request holds memory until answered: past its lane's
	 * budget, refuse rather than queue without end */
	int k = r->route->lane;
	if (k >= 0) {
		pthread_mutex_lock(&D.mtx);
		r->busy = H.lanes[k].n >= H.lanes[k].max;
		H.busy += r->busy;
		if (!r->busy) {
			H.lanes[k].n++;
			r->lane = k;
		}
		int max = H.lanes[k].max;
		pthread_mutex_unlock(&D.mtx);
		if (r->busy) {
			char msg[96];
			snprintf(msg, sizeof(msg),
			         "the daemon is busy: %d requests in the "
			         "works; retry later",
			         max);
			answer_error(r, 503, msg);
			return (false);
		}
	}
	return (true);
}

/* Body bytes: kept up to BODY_MAX, dropped past it (413 at the end);
 * false closes the connection (a body without end). */
static bool
take(req *r, const char *data, size_t n)
{
	if (r->over > 0 || r->len + n > BODY_MAX) {
		r->over += n;
		return (r->over <= BODY_DROP_MAX);
	}
	if (r->len + n + 1 > r->cap) {
		size_t cap = r->cap == 0 ? 4096 : r->cap;
		while (cap < r->len + n + 1) {
			cap *= 2;
		}
		cap = cap > BODY_MAX + 1 ? BODY_MAX + 1 : cap; /* (enough) */
		char *nb = realloc(r->body, cap);
		if (nb == NULL) {
			r->over += n;
			return (true);
		}
		r->body = nb;
		r->cap  = cap;
	}
	memcpy(r->body + r->len, data, n);
	r->len += n;
	r->body[r->len] = '\0';
	return (true);
}

/* Runs r's handler (on a worker, or inline for what never blocks). */
static void
run(req *r)
{
	json_t      *body = NULL;
	json_error_t je;

	if (r->len > 0 &&
	    (body = json_loadb(r->body, r->len, 0, &je)) == NULL) {
		/* (where, not jansson's text: it quotes the body) */
		char msg[96];
		snprintf(msg, sizeof(msg),
		         "the body is not valid JSON (line %d, column %d)",
		         je.line, je.column);
		answer_error(r, 400, msg);
		return;
	}
	if (body != NULL && !json_is_object(body)) {
		json_decref(body);
		answer_error(r, 400, "the body must be a JSON object");
		return;
	}
	r->route->fn(r, r->id, body);
	json_decref(body);
}

static void *
worker(void *arg)
{
	lane *l = arg;
	req  *r;

	for (;;) {
		pthread_mutex_lock(&D.mtx);
		while (l->head == NULL && !H.stopping) {
			pthread_cond_wait(&l->cv, &D.mtx);
		}
		if ((r = l->head) == NULL) {
			pthread_mutex_unlock(&D.mtx);
			return (NULL);
		}
		if ((l->head = r->next) == NULL) {
			l->tail = NULL;
		}
		pthread_mutex_unlock(&D.mtx);
		run(r);
	}
}

/* Queues r to its lane (suspended until answered) or runs it now. */
static void
dispatch(req *r)
{
	int k = r->route->lane;

	if (k < 0) {
		run(r);
		return;
	}
	pthread_mutex_lock(&D.mtx);
	if (H.stopping) {
		/* (a kept-alive connection's next request: no worker) */
		pthread_mutex_unlock(&D.mtx);
		answer_error(r, 503, "the daemon is stopping");
		return;
	}
	/* suspended before a worker can see it: its answer resumes it */
	r->suspended = true;
	MHD_suspend_connection(r->conn);
	lane *l = &H.lanes[k];
	if (l->tail != NULL) {
		l->tail->next = r;
	} else {
		l->head = r;
	}
	l->tail = r;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&D.mtx);
}

/* ---- libmicrohttpd's callbacks ------------------------------------------ */

/* A request's start (its raw URI, before any decoding): its req. */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	req        *r = calloc(1, sizeof(*r));
	const char *q = strchr(uri, '?');

	if (r == NULL) {
		return (NULL);
	}
	r->t0    = mono_ns();
	r->lane  = -1;
	r->conn  = c;
	r->path  = q != NULL ? strndup(uri, (size_t)(q - uri)) : strdup(uri);
	r->query = strdup(q != NULL ? q + 1 : "");
	pthread_mutex_lock(&D.mtx);
	H.inflight++;
	pthread_mutex_unlock(&D.mtx);
	return (r);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url,
           const char *method, const char *version, const char *data,
           size_t *size, void **ctx)
{
	req    *r  = *ctx;
	keyset *ks = NULL;

	if (r == NULL) {
		return (MHD_NO); /* (out of memory: closed) */
	}
	switch (r->phase) {
	case PH_NEW:
		r->conn   = c;
		r->method = strdup(method);
		r->phase  = PH_BODY;
		if (!admit(r, &ks)) {
			r->phase = PH_RUN;
		}
		r->keys = ks; /* (held while r->key is in use) */
		return (MHD_YES);
	case PH_BODY:
		if (*size != 0) {
			bool more = take(r, data, *size);
			*size     = 0;
			return (more ? MHD_YES : MHD_NO);
		}
		r->phase = PH_RUN;
		if (r->over > 0) {
			char msg[64];
			snprintf(msg, sizeof(msg),
			         "the request body is over %d bytes",
			         BODY_MAX);
			answer_error(r, 413, msg);
		} else {
			dispatch(r);
		}
		return (MHD_YES);
	default:
		/* answered (refused) before its body: what still comes is
		 * dropped */
		*size = 0;
		return (MHD_YES);
	}
}

static void
on_done(void *cls, struct MHD_Connection *c, void **ctx,
        enum MHD_RequestTerminationCode toe)
{
	req *r = *ctx;

	if (r == NULL) {
		return;
	}
	*ctx = NULL;
	if (!r->answered) {
		/* (closed before an answer: counted out here) */
		pthread_mutex_lock(&D.mtx);
		if (r->lane >= 0) {
			H.lanes[r->lane].n--;
		}
		H.inflight--;
		pthread_cond_broadcast(&D.cv);
		pthread_mutex_unlock(&D.mtx);
	}
	events_close(r);
	keyset_release(r->keys);
	if (r->body != NULL) {
		OPENSSL_cleanse(r->body, r->len); /* (may carry secrets) */
		free(r->body);
	}
	secret_free(r->bearer);
	free(r->method);
	free(r->path);
	free(r->query);
	free(r->id);
	free(r->id_user);
	free(r->id_session);
	free(r);
}

static void
on_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	mk_log(MK_LOG_DEBUG, "http", "libmicrohttpd: %s", line);
}

/* ---- start and stop ----------------------------------------------------- */

static void
host_add(const char *h)
{
	if (H.nhosts < HOSTS_MAX) {
		H.hosts[H.nhosts++] = strdup(h);
	}
}

/* The Host values a listen address answers to. */
static void
hosts_of(const char *listen, const char **origins)
{
	const char *colon = strrchr(listen, ':');
	char        h[300], host[256];

	snprintf(H.port, sizeof(H.port), "%s", colon != NULL ? colon + 1 : "");
	snprintf(host, sizeof(host), "%.*s",
	         colon != NULL ? (int)(colon - listen) : 0, listen);
	host_add(listen);
	if (strncmp(host, "127.", 4) == 0 || strcmp(host, "localhost") == 0 ||
	    strcmp(host, "[::1]") == 0) {
		const char *names[] = {"localhost", "127.0.0.1", "[::1]"};
		for (size_t i = 0; i < 3; i++) {
			snprintf(h, sizeof(h), "%s:%s", names[i], H.port);
			host_add(h);
		}
	}
	H.any_ip_host = *host == '\0' || strcmp(host, "0.0.0.0") == 0 ||
	        strcmp(host, "[::]") == 0;
	/* an allowed origin's host:port (a name in front of this daemon) */
	for (size_t i = 0; origins != NULL && origins[i] != NULL; i++) {
		const char *o = strstr(origins[i], "://");
		if (o != NULL) {
			host_add(o + 3);
		}
	}
}

int
http_start(const http_opts *o, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
	                         .ai_flags    = AI_NUMERICSERV},
	                *ai   = NULL;
	const char *colon     = strrchr(o->listen, ':');
	char        host[256];
	size_t      n = 0;
	int         rv;

	hosts_of(o->listen, o->origins);
	while (o->origins != NULL && o->origins[n] != NULL) {
		n++;
	}
	H.origins = calloc(n + 1, sizeof(char *));
	for (size_t i = 0; H.origins != NULL && i < n; i++) {
		H.origins[i] = strdup(o->origins[i]);
	}
	if (H.keys == NULL && keys_set(NULL, err, errlen) != 0) {
		return (-1);
	}
	if (colon == NULL) {
		snprintf(err, errlen, "%s: the address needs host:port",
		         o->listen);
		return (-1);
	}
	snprintf(host, sizeof(host), "%.*s", (int)(colon - o->listen),
	         o->listen);
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		memmove(host, host + 1, strlen(host));
		host[strlen(host) - 1] = '\0';
	}
	if ((rv = getaddrinfo(*host != '\0' ? host : "0.0.0.0", colon + 1,
	                      &hints, &ai)) != 0) {
		snprintf(err, errlen, "%s: %s", o->listen, gai_strerror(rv));
		return (-1);
	}
	for (int k = 0; k < LANES; k++) {
		pthread_cond_init(&H.lanes[k].cv, NULL);
		H.lanes[k].max = o->max[k];
		for (int i = 0; i < WORKERS; i++) {
			pthread_create(&H.workers[k][i], NULL, worker,
			               &H.lanes[k]);
		}
	}
	H.started = true;
	H.mhd     = MHD_start_daemon(
	            MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
	                    MHD_USE_TURBO | MHD_USE_ERROR_LOG |
	                    (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
	            0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR,
	            ai->ai_addr, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)THREADS,
	            MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->conns,
	            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->conns_ip,
	            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->idle_s,
	            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MEMORY_POOL,
	            MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
	            MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
	            MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL, MHD_OPTION_END);
	rv = errno;
	freeaddrinfo(ai);
	if (H.mhd == NULL) {
		snprintf(err, errlen, "cannot serve %s: %s", o->listen,
		         strerror(rv != 0 ? rv : EADDRINUSE));
		return (-1);
	}
	return (0);
}

void
http_quiesce(void)
{
	if (H.mhd != NULL) {
		MHD_socket s = MHD_quiesce_daemon(H.mhd);
		if (s != MHD_INVALID_SOCKET) {
			close(s);
		}
	}
}

int
http_drain(int ms)
{
	struct timespec ts;
	int             left;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	pthread_mutex_lock(&D.mtx);
	while (H.inflight > 0 &&
	       pthread_cond_timedwait(&D.cv, &D.mtx, &ts) == 0) {
	}
	left       = H.inflight;
	H.stopping = true;
	for (int k = 0; k < LANES; k++) {
		pthread_cond_broadcast(&H.lanes[k].cv);
	}
	pthread_mutex_unlock(&D.mtx);
	if (H.started) {
		for (int k = 0; k < LANES; k++) {
			for (int i = 0; i < WORKERS; i++) {
				pthread_join(H.workers[k][i], NULL);
			}
		}
		H.started = false;
	}
	return (left);
}

void
http_stop(void)
{
	if (H.mhd != NULL) {
		MHD_stop_daemon(H.mhd);
		H.mhd = NULL;
	}
	for (size_t i = 0; i < H.nhosts; i++) {
		free(H.hosts[i]);
	}
	H.nhosts = 0;
	for (size_t i = 0; H.origins != NULL && H.origins[i] != NULL; i++) {
		free(H.origins[i]);
	}
	free(H.origins);
	H.origins = NULL;
	keyset_release(H.keys);
	H.keys = NULL;
}
