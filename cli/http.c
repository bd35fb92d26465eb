/*
 * http.c - the daemon's HTTP server (libmicrohttpd): admission, budgets
 * and lanes, libmicrohttpd's callbacks, start and stop.  Who may call
 * what (the admin token, virtual keys, the metrics token) is auth.c's,
 * the answers answer.c's.
 *
 * DESIGN: libmicrohttpd runs its connections on a small pool of threads
 * (epoll), which must never block.  Each request is taken apart once
 * its headers are in, and refused there when it must be - before a byte
 * of its body is read:
 *   framing    the body's length told one way: Content-Length (once) or
 *              Transfer-Encoding: chunked - 400 for both or two
 *              Content-Lengths, 501 for another coding, and the
 *              connection closed - else a proxy in front and this
 *              daemon disagree on where the next request starts;
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
 *   a budget   each lane has its own (admin API, data plane, probes,
 *              the OAuth callback): 503 with Retry-After past it, so
 *              that no caller of one lane can lock another out.
 * What libmicrohttpd refuses itself - a malformed request line, header
 * or chunk framing, headers or a chunk line past the memory pool - it
 * answers with its own HTML page: 0.9.75 has no hook for those bodies.
 * Connections are bounded (total and per address; a reserve past both
 * for the admin token and loopback probes), a request's headers and
 * body have deadlines from their first byte, idle connections are
 * closed after a timeout (conns.c), and each has a fixed memory pool
 * (headers past it: 431).  A request that passed is suspended and queued to
 * its lane's workers, or run at once: an inline route's (never blocks, no
 * budget), and a direct route's (counted on its lane; it hands the request
 * to an actor, which answers from the completion: one hop, no worker); its
 * answer queues the response and resumes it.  The admin token, virtual keys
 * and a caller's bearer are secrets: compared in constant time, wiped when
 * freed, never logged (the access log has the path, never the query: an OAuth
 * callback's query carries the code).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
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
#define THREADS_MIN   2               /* libmicrohttpd's pool: a thread */
#define THREADS_MAX   64              /* per core, within these */
#define HOSTS_MAX     16

enum { PH_NEW, PH_BODY, PH_RUN };

typedef struct lane {
	req           *head, *tail; /* the queue (D.mtx) */
	pthread_cond_t cv;          /* work queued, or stopping */
	int            n;           /* in the works: its budget's count */
	int            max;         /* the budget */
} lane;

static struct {
	struct MHD_Daemon *mhd;
	atomic_bool closing; /* new connections refused (http_quiesce) */
	lane        lanes[LANES];
	pthread_t   workers[LANES][WORKERS];
	bool        started; /* the workers run */
	bool        stopping;
	int         inflight;         /* admitted, not yet answered */
	uint64_t    requests;         /* answered */
	uint64_t    busy;             /* refused for a budget */
	char       *hosts[HOSTS_MAX]; /* Host values accepted */
	size_t      nhosts;
	bool        any_ip_host; /* a wildcard listen: IP hosts */
	char        port[8];
	char      **origins; /* allowed besides our own */
} H;

/* ---- budgets ------------------------------------------------------------ */

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

void
http_stats(uint64_t *requests, int *inflight, uint64_t *busy)
{
	pthread_mutex_lock(&D.mtx);
	*requests = H.requests;
	*inflight = H.lanes[LANE_ADMIN].n + H.lanes[LANE_DATA].n +
	        H.lanes[LANE_CALLBACK].n;
	*busy = H.busy;
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

/* A request's framing headers: how many, and the last coding. */
typedef struct framing {
	int         clen;   /* Content-Length headers */
	int         te;     /* Transfer-Encoding headers */
	const char *coding; /* the last Transfer-Encoding's value */
} framing;

static enum MHD_Result
framing_count(void *cls, enum MHD_ValueKind kind, const char *key,
              const char *value)
{
	framing *f = cls;

	if (strcasecmp(key, "Content-Length") == 0) {
		f->clen++;
	} else if (strcasecmp(key, "Transfer-Encoding") == 0) {
		f->te++;
		f->coding = value;
	}
	return (MHD_YES);
}

/* The body's length is told one way only; false when it was answered
 * (refused), its connection closed after the answer (libmicrohttpd
 * reads no more of it). */
static bool
framing_ok(req *r)
{
	framing     f   = {0};
	unsigned    st  = 400;
	const char *why = NULL;

	(void)MHD_get_connection_values(r->conn, MHD_HEADER_KIND,
	                                framing_count, &f);
	if (f.clen > 0 && f.te > 0) {
		why = "the request has both Content-Length and Transfer-Encoding";
	} else if (f.clen > 1) {
		why = "the request has more than one Content-Length";
	} else if (f.te > 1 ||
	           (f.te == 1 && strcasecmp(f.coding, "chunked") != 0)) {
		st  = 501;
		why = "a Transfer-Encoding other than chunked is not supported";
	}
	if (why != NULL) {
		r->close = true;
		answer_error(r, st, why);
	}
	return (why == NULL);
}

/* A connection past its address's (or the daemon's) share serves the
 * admin token and loopback probes only, once: false when r was refused
 * (503, closed). */
static bool
reserve_ok(req *r)
{
	bool loopback;

	if (!conns_reserved(r->conn, &loopback)) {
		return (true);
	}
	r->close = true;
	if (r->admin ||
	    (loopback &&
	     (strcmp(r->route->path, "/healthz") == 0 ||
	      strcmp(r->route->path, "/readyz") == 0))) {
		return (true);
	}
	r->busy = true;
	answer_error(
	        r, 503,
	        "too many connections from this address (--max-connections-per-ip) or in all (--max-connections): the spare ones serve the admin token and loopback probes only");
	return (false);
}

/* Takes a request apart once its headers are in; false when it was
 * answered (refused) there. */
static bool
admit(req *r, keyset **ks)
{
	const char *host   = http_header(r, "Host");
	const char *origin = http_header(r, "Origin");
	const char *clen   = http_header(r, "Content-Length");
	bool        other  = false;

	if (r->method == NULL || r->path == NULL || r->query == NULL) {
		answer_error(r, 500, "out of memory");
		return (false);
	}
	if (!framing_ok(r)) {
		return (false);
	}
	if (host == NULL || !host_ok(host)) {
		answer_error(
		        r, 421,
		        "the Host header does not name this daemon (its listen address, or a host of server.allowed_origins)");
		return (false);
	}
	if (origin != NULL && !origin_ok(origin, host)) {
		answer_error(
		        r, 403,
		        "cross-origin request refused: the Origin is neither this daemon's nor in server.allowed_origins");
		return (false);
	}
	/* (an MCP client ends its session with a DELETE without a body: a
	 * method no page can send cross-origin without a preflight) */
	if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0 &&
	    !(strcmp(r->method, "DELETE") == 0 &&
	      (strcmp(r->path, "/mcp") == 0 ||
	       strncmp(r->path, "/mcp/", 5) == 0)) &&
	    !is_json_type(http_header(r, "Content-Type"))) {
		answer_error(
		        r, 415,
		        "a request that can change state needs Content-Type: application/json");
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
	if (!http_caller(r, ks)) {
		return (false);
	}
	if (!reserve_ok(r)) {
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
			snprintf(
			        msg, sizeof(msg),
			        "the daemon is busy: %d requests in the works; retry later",
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
	json_t      *body = r->parsed;
	json_error_t je;

	r->parsed = NULL; /* (taken) */
	if (body == NULL && r->len > 0 &&
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

	(void)pthread_setname_np(pthread_self(), "http-worker");
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
		r->on_worker = true;
		run(r);
	}
}

/* Queues r (suspended) to lane k's workers; false when the daemon is
 * stopping (no worker takes it).  D.mtx. */
static bool
enqueue(req *r, int k)
{
	lane *l = &H.lanes[k];

	if (H.stopping) {
		return (false);
	}
	r->next = NULL;
	if (l->tail != NULL) {
		l->tail->next = r;
	} else {
		l->head = r;
	}
	l->tail = r;
	pthread_cond_signal(&l->cv);
	return (true);
}

bool
http_to_worker(req *r, json_t *body)
{
	bool queued;

	if (r->on_worker || !r->route->direct) {
		return (false);
	}
	/* the worker's own copy: jansson's values are not shared across
	 * threads (this one drops body when the handler returns) */
	if (body != NULL && (r->parsed = json_deep_copy(body)) == NULL) {
		answer_error(r, 500, "out of memory");
		return (true);
	}
	pthread_mutex_lock(&D.mtx);
	queued = enqueue(r, r->route->lane);
	pthread_mutex_unlock(&D.mtx);
	if (!queued) {
		json_decref(r->parsed);
		r->parsed = NULL;
		answer_error(r, 503, "the daemon is stopping");
	}
	return (true);
}

/* Queues r to its lane (suspended until answered) or runs it now: a
 * LANE_INLINE route as it is, a direct one suspended. */
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
	/* suspended before a worker (or the actor a direct one is handed
	 * to) can answer: its answer resumes it */
	r->suspended = true;
	MHD_suspend_connection(r->conn);
	if (r->route->direct) {
		pthread_mutex_unlock(&D.mtx);
		run(r); /* (r may be gone after) */
		return;
	}
	(void)enqueue(r, k); /* (not stopping: looked at above) */
	pthread_mutex_unlock(&D.mtx);
}

/* ---- libmicrohttpd's callbacks ------------------------------------------ */

/* A new connection: refused once the daemon stops (http_quiesce). */
static enum MHD_Result
on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
	(void)cls;
	(void)addr;
	(void)len;
	return (atomic_load(&H.closing) ? MHD_NO : MHD_YES);
}

/* A request's start (its raw URI, before any decoding): its req. */
static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	req        *r = calloc(1, sizeof(*r));
	const char *q = strchr(uri, '?');

	if (r == NULL) {
		return (NULL);
	}
	r->t0    = answer_mono_ns();
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
		conns_headers_in(c,
		                 http_header(r, "Content-Length") != NULL ||
		                         http_header(r, "Transfer-Encoding") !=
		                                 NULL);
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
		conns_body_in(c);
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

	conns_request_done(c);
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
	auth_keys_release(r->keys);
	if (r->body != NULL) {
		OPENSSL_cleanse(r->body, r->len); /* (may carry secrets) */
		free(r->body);
	}
	mk_free_secret(r->bearer);
	free(r->method);
	free(r->path);
	free(r->query);
	free(r->id);
	free(r->id_user);
	free(r->id_session);
	free(r->trace[0]);
	free(r->trace[1]);
	free(r->session_out);
	json_decref(r->parsed);
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

/* libmicrohttpd's threads: one per core (a direct request's parsing and
 * hand-off run there), within THREADS_MIN and THREADS_MAX. */
static unsigned
pool_size(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);

	return (cores < THREADS_MIN           ? THREADS_MIN
	                : cores > THREADS_MAX ? THREADS_MAX
	                                      : (unsigned)cores);
}

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
	if (auth_keys_ensure(err, errlen) != 0) {
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
	if ((rv = conns_start(o)) != 0) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "cannot start: %s", strerror(rv));
		return (-1);
	}
	H.started = true;
	atomic_store(&H.closing, false);
	H.mhd = MHD_start_daemon(
	        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
	                MHD_USE_TURBO | MHD_USE_ERROR_LOG |
	                (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
	        0, on_accept, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR,
	        ai->ai_addr, MHD_OPTION_THREAD_POOL_SIZE, pool_size(),
	        MHD_OPTION_CONNECTION_LIMIT,
	        (unsigned)(o->conns + CONNS_RESERVE),
	        MHD_OPTION_PER_IP_CONNECTION_LIMIT,
	        (unsigned)(o->conns_ip + CONNS_RESERVE_IP),
	        MHD_OPTION_NOTIFY_CONNECTION, conns_notify, NULL,
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

/* Not MHD_quiesce_daemon: with an epoll thread pool it takes the
 * listening socket out of each worker's epoll set from this thread while
 * a worker may be taking it out too, and libmicrohttpd 0.9.75 aborts the
 * process when its own removal finds it gone (daemon.c:5531).  The
 * listening socket stays; what it accepts is closed at once
 * (on_accept). */
void
http_quiesce(void)
{
	atomic_store(&H.closing, true);
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
	conns_stop();
	for (size_t i = 0; i < H.nhosts; i++) {
		free(H.hosts[i]);
	}
	H.nhosts = 0;
	for (size_t i = 0; H.origins != NULL && H.origins[i] != NULL; i++) {
		free(H.origins[i]);
	}
	free(H.origins);
	H.origins = NULL;
	auth_keys_stop();
}
