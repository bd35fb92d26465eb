/*
 * http.c - the Streamable HTTP transport (MCP 2025-03-26 and later).
 *
 * DESIGN: every message is one POST on the loop's curl multi handle, so
 * many requests run at once over curl's pool of keep-alive connections.
 * The answer is a JSON body or an SSE stream (progress notifications, then
 * the result; server-everything primes it with an empty event).  Messages
 * parsed inside curl's write callback are queued on their POST and handed
 * to the session from a deferred step of the loop, where the session may
 * close the connection.  The session id comes from the initialize
 * answer's Mcp-Session-Id header; close sends DELETE with it and frees the
 * conn when that finishes (or when the loop is freed).
 *
 * Streams resume (2025-11-25 "Resumability and Redelivery"): each POST
 * keeps the id of the last complete event of its stream and the
 * server's retry: time.  A stream that ends before its response (the
 * server closed it to poll, or the network dropped it) is not a cancel:
 * after the retry time the POST turns into a GET with Last-Event-ID on
 * which the server replays the rest, again and again while each stream
 * brings a new event; a stream with no event id fails its request as
 * before.  A sticky session also listens on the standalone GET stream
 * (listen()), for the server's own notifications and requests: a 405
 * (or an answer that is not a stream) means the server offers none; a
 * stream that ends is opened again after the retry time, with the last
 * event id; one that fails backs off; a 404 means the session is gone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "mcpkeep.h"
#include "transport/conn.h"
#include "transport/xfer.h"

#define DELETE_TIMEOUT_MS 5000
#define SPARE_MAX         64 /* at most this many finished POSTs kept for reuse */
#define EVENT_ID_MAX      256   /* bytes of a Last-Event-ID we resume with */
#define RETRY_DEFAULT_MS  1000  /* reconnect wait when the server gave none */
#define RETRY_MIN_MS      50    /* a retry: 0 loops no faster than this */
#define RETRY_MAX_MS      60000 /* nor does a retry: wait longer than this */
#define RESUME_STALE_MAX  3     /* resumptions in a row without an event */
#define LISTEN_BACKOFF_MS 1000  /* first wait after a failed GET stream */

typedef struct http_conn http_conn;

/* One POST, its resumption, the standalone GET stream, or the closing
 * DELETE. */
typedef struct post {
	tp_http      h;          /* the exchange */
	http_conn   *c;          /* owner */
	int64_t      id;         /* request id; 0 for a notification */
	bool         answered;   /* a response with our id was delivered */
	bool         got;        /* the handle did a GET: not kept for reuse */
	bool         waiting;    /* out of the loop until resume_at */
	int64_t      resume_at;  /* monotonic ns */
	int          timeout_ms; /* the request's (curl's backstop) */
	int64_t      retry_ms;   /* the server's latest retry:, or -1 */
	unsigned     stale;      /* resumptions in a row without an event */
	char         last_id[EVENT_ID_MAX]; /* last complete event's id */
	tp_msgq      q;    /* parsed messages not yet delivered */
	struct post *prev; /* conn's list */
	struct post *next; /* conn's list */
} post;

struct http_conn {
	tp_conn            base;      /* ops, loop, upcalls */
	char              *url;       /* endpoint */
	char              *ca_bundle; /* or NULL */
	struct curl_slist *headers;   /* per-connection headers (template) */
	size_t             max_body;  /* bytes per message */
	char      session_id[256];    /* Mcp-Session-Id, "" before init */
	char      version[32];        /* MCP-Protocol-Version, "" before */
	post     *posts;              /* POSTs in flight */
	tp_defer  defer;              /* delivers queued messages */
	tp_owned  owned;              /* while closing: the loop owns us */
	post     *deleting;           /* the DELETE in flight */
	post     *listen;             /* the standalone GET stream, or NULL */
	int       listen_backoff;     /* ms: the next wait after a failure */
	bool      listen_off;         /* the server offers no GET stream */
	bool      modern;             /* 2026-07-28: no session, no resuming */
	uint32_t  stream_rate;        /* the GET stream's events/s */
	uint32_t  stream_burst;       /* and at once */
	unsigned  nwaiting;           /* posts waiting to resume */
	tp_ticker ticker;             /* their resume_at */
	struct curl_slist *req_hdrs;  /* every request's headers, built once
	                               * per session id / version */
	struct curl_slist **retired;  /* older req_hdrs, still borrowed by
	                               * POSTs in flight; freed at the end */
	unsigned nretired;            /* entries in retired */
	post    *spare;               /* finished POSTs kept for reuse */
	unsigned nspare;              /* entries in spare */
	unsigned nposts;              /* POSTs in flight */
	unsigned peak;                /* most POSTs in flight at once: the
	                               * spares kept (an idle client keeps
	                               * few curl handles and their buffers) */
	int  busy;                    /* upcalls on the stack */
	bool closed;                  /* close() was called */
};

static void post_free(http_conn *c, post *p);
static void conn_destroy(http_conn *c);

static void
link_post(http_conn *c, post *p)
{
	if (++c->nposts > c->peak) {
		c->peak = c->nposts;
	}
	p->prev = NULL;
	p->next = c->posts;
	if (c->posts != NULL) {
		c->posts->prev = p;
	}
	c->posts = p;
}

static void
unlink_post(http_conn *c, post *p)
{
	if (p->waiting) {
		p->waiting = false;
		c->nwaiting--;
	}
	if (p == c->listen) {
		c->listen = NULL;
	}
	c->nposts--;
	if (p->prev != NULL) {
		p->prev->next = p->next;
	} else if (c->posts == p) {
		c->posts = p->next;
	}
	if (p->next != NULL) {
		p->next->prev = p->prev;
	}
	p->prev = p->next = NULL;
}

static int
on_event(tp_http *h, const codec_sse_event *ev)
{
	post *p = (post *)h;

	if (strcmp(ev->type, "message") == 0) {
		tp_msgq_parse(&p->q, ev->data, ev->data_len, p->c->max_body);
		tp_loop_defer(p->c->base.loop, &p->c->defer);
	}
	return (0);
}

/* Hands p's queued messages to the session.  Returns false when the
 * session closed the conn meanwhile. */
static bool
deliver(http_conn *c, post *p)
{
	json_t *m;

	while (!c->closed && (m = tp_msgq_pop(&p->q)) != NULL) {
		json_t *id = json_object_get(m, "id");

		if (p->id != 0 && json_is_integer(id) &&
		    json_integer_value(id) == p->id &&
		    json_object_get(m, "method") == NULL) {
			p->answered = true;
		}
		c->base.up.message(c->base.up.arg, m);
		json_decref(m);
	}
	return (!c->closed);
}

static void
run_deferred(void *arg)
{
	http_conn *c = arg;

	c->busy++;
	for (post *p = c->posts, *n; p != NULL && !c->closed; p = n) {
		n = p->next; /* p stays linked while delivering */
		deliver(c, p);
	}
	c->busy--;
	if (c->closed && c->busy == 0 && c->deleting == NULL) {
		conn_destroy(c);
	}
}

/* An event id we can send back: visible ASCII and spaces, not too long. */
static bool
usable_id(const char *id)
{
	size_t n = strlen(id);

	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)id[i] < 0x20 ||
		    (unsigned char)id[i] > 0x7e) {
			return (false);
		}
	}
	return (n > 0 && n < EVENT_ID_MAX);
}

/* Keeps what p's stream said about resuming it: its retry: time and the
 * id of its last complete event.  True when that id is a new one. */
static bool
note_stream(post *p)
{
	const char *id;

	if (!p->h.sse_mode) {
		return (false);
	}
	if (p->h.sse.retry_ms >= 0) {
		p->retry_ms = p->h.sse.retry_ms;
	}
	id = codec_sse_last_id(&p->h.sse);
	if (id[0] == '\0' || strcmp(id, p->last_id) == 0) {
		return (false);
	}
	if (!usable_id(id)) {
		p->last_id[0] = '\0'; /* the old one would replay twice */
		return (false);
	}
	snprintf(p->last_id, sizeof(p->last_id), "%s", id);
	return (true);
}

/* Relinks p to start again, as a GET, after ms. */
static void
wait_resume(http_conn *c, post *p, int64_t ms)
{
	link_post(c, p);
	p->waiting   = true;
	p->resume_at = tp_now_ns() + ms * 1000000;
	c->nwaiting++;
}

/* How long the server asked us to wait before reconnecting. */
static int64_t
retry_wait(const post *p)
{
	int64_t ms = p->retry_ms >= 0 ? p->retry_ms : RETRY_DEFAULT_MS;

	return (ms < RETRY_MIN_MS           ? RETRY_MIN_MS
	                : ms > RETRY_MAX_MS ? RETRY_MAX_MS
	                                    : ms);
}

/* A request's stream ended before its response: true when it resumes
 * (then e is unused), else e says why it cannot. */
static bool
may_resume(http_conn *c, post *p, bool failed, mcp_error *e)
{
	bool fresh = note_stream(p);

	if (c->modern) { /* 2026-07-28: not resumable */
		if (p->h.sse_mode && p->h.limit == TP_LIMIT_NONE) {
			mcp_error_set(
			        e, MCP_E_LOST,
			        "the response stream of request %lld ended before its result",
			        (long long)p->id);
		}
		return (false);
	}
	/* only a stream that was running (2xx, event stream) breaks off; a
	 * limit, a refused GET, a missing id are the request's end */
	if ((failed && (!p->h.sse_mode || p->h.limit != TP_LIMIT_NONE)) ||
	    p->last_id[0] == '\0') {
		return (false);
	}
	p->stale = fresh ? 0 : p->stale + 1;
	if (p->stale > RESUME_STALE_MAX) {
		mcp_error_set(
		        e, MCP_E_PROTOCOL,
		        "the server's stream for request %lld ended %u times without a new event",
		        (long long)p->id, p->stale);
		return (false);
	}
	wait_resume(c, p, retry_wait(p));
	return (true);
}

/* A resumption failed: the request's stream is lost, e says how. */
static void
resume_failed(const post *p, mcp_error *e)
{
	char why[MCP_ERRMSG_MAX];
	int  status = e->http_status;

	snprintf(why, sizeof(why), "%s", e->message);
	mcp_error_set(
	        e, MCP_E_LOST,
	        "the stream of request %lld broke off and resuming it failed: %s",
	        (long long)p->id, why);
	e->http_status = status;
}

/* p's error body is a JSON-RPC error answering p's request. */
static bool
rpc_error_for(const post *p)
{
	json_t *j  = p->h.body != NULL
	         ? json_loadb(p->h.body, p->h.body_len, 0, NULL)
	         : NULL;
	json_t *id = json_object_get(j, "id");
	bool    ok = json_is_object(json_object_get(j, "error")) &&
	        json_is_integer(id) && json_integer_value(id) == p->id;

	json_decref(j);
	return (ok);
}

static void listen_done(http_conn *c, post *p, CURLcode rc);

static void
post_done(tp_xfer *x, CURLcode rc)
{
	post      *p         = (post *)x;
	http_conn *c         = p->c;
	bool       listening = p == c->listen;
	mcp_error  e;
	bool       failed;

	unlink_post(c, p);
	if (p == c->deleting) {
		c->deleting = NULL;
		post_free(c, p);
		if (c->busy == 0) {
			conn_destroy(c);
		}
		return;
	}
	if (listening) {
		listen_done(c, p, rc);
		return;
	}
	failed = tp_http_error(&p->h, rc, c->session_id[0] != '\0', &e);
	if (!failed && !p->h.sse_mode) {
		tp_msgq_parse(&p->q, p->h.body, p->h.body_len, c->max_body);
	} else if (failed && e.kind == MCP_E_HTTP && e.http_status >= 400 &&
	           e.http_status < 500 && rpc_error_for(p)) {
		/* a JSON-RPC error for this request (2026-07-28 answers them
		 * with 400): the session reads it like any answer */
		tp_msgq_parse(&p->q, p->h.body, p->h.body_len, c->max_body);
		failed = false;
	}
	if (!failed && p->h.session_id[0] != '\0' &&
	    c->session_id[0] == '\0') {
		snprintf(c->session_id, sizeof(c->session_id), "%s",
		         p->h.session_id);
	}
	c->busy++;
	if (deliver(c, p) && p->id != 0 && !p->answered) {
		if (may_resume(c, p, failed, &e)) {
			c->busy--;
			return;
		}
		if (!failed && !(c->modern && p->h.sse_mode) &&
		    p->stale <= RESUME_STALE_MAX) {
			mcp_error_set(
			        &e, MCP_E_PROTOCOL,
			        "the server's answer to request %lld carried no result",
			        (long long)p->id);
		} else if (failed && p->got && e.kind != MCP_E_GONE &&
		           e.kind != MCP_E_AUTH) {
			resume_failed(p, &e);
		}
		c->base.up.failed(c->base.up.arg, p->id, &e);
	}
	c->busy--;
	post_free(c, p);
	if (c->closed && c->busy == 0 && c->deleting == NULL) {
		conn_destroy(c);
	}
}

static void
post_destroy(post *p)
{
	tp_msgq_clear(&p->q);
	tp_http_fini(&p->h);
	free(p);
}

/* Takes p out of the loop and keeps it for reuse, or frees it. */
static void
post_free(http_conn *c, post *p)
{
	tp_loop_remove(c->base.loop, &p->h.x);
	if (c->closed || c->nspare >= c->peak || c->nspare == SPARE_MAX ||
	    p == c->deleting || p->got || p->h.x.easy == NULL) {
		post_destroy(p);
		return;
	}
	tp_msgq_clear(&p->q);
	p->next  = c->spare;
	c->spare = p;
	c->nspare++;
}

/* Drops the cached request headers (the session id or version changed);
 * POSTs in flight may still borrow them. */
static void
retire_headers(http_conn *c)
{
	struct curl_slist **r;

	if (c->req_hdrs == NULL) {
		return;
	}
	r = realloc(c->retired, (c->nretired + 1) * sizeof(*r));
	if (r == NULL) {
		return; /* keep using the old list; better than a UAF */
	}
	c->retired                = r;
	c->retired[c->nretired++] = c->req_hdrs;
	c->req_hdrs               = NULL;
}

/* Builds the headers of one exchange: the connection's, then session and
 * version, then the request's own. */
static struct curl_slist *
build_headers(http_conn *c, bool body, const char *const *extra)
{
	struct curl_slist *l = NULL;
	char               line[320];

	for (struct curl_slist *h = c->headers; h != NULL; h = h->next) {
		if ((l = tp_slist_add(l, h->data)) == NULL) {
			return (NULL);
		}
	}
	if (body &&
	    ((l = tp_slist_add(l, "Content-Type: application/json")) == NULL ||
	     (l = tp_slist_add(
	              l, "Accept: application/json, text/event-stream")) ==
	             NULL)) {
		return (NULL);
	}
	if (c->session_id[0] != '\0') {
		snprintf(line, sizeof(line), "Mcp-Session-Id: %s",
		         c->session_id);
		if ((l = tp_slist_add(l, line)) == NULL) {
			return (NULL);
		}
	}
	if (c->version[0] != '\0') {
		snprintf(line, sizeof(line), "MCP-Protocol-Version: %s",
		         c->version);
		if ((l = tp_slist_add(l, line)) == NULL) {
			return (NULL);
		}
	}
	return (tp_slist_addv(l, extra));
}

static post *
post_new(http_conn *c, int64_t id, const char *const *extra, int timeout_ms)
{
	struct curl_slist *hdrs;
	bool               own = extra != NULL && extra[0] != NULL;
	post              *p;
	int                rv;

	if (!own && c->req_hdrs == NULL) {
		c->req_hdrs = build_headers(c, true, NULL);
	}
	hdrs = own ? build_headers(c, true, extra) : c->req_hdrs;
	if (hdrs == NULL) {
		return (NULL);
	}
	/* the session enforces the deadline; curl's is a backstop (none for
	 * a request without one: subscriptions/listen) */
	int backstop = timeout_ms < 0 ? 0 : timeout_ms + 1000;

	if ((p = c->spare) != NULL) {
		c->spare = p->next;
		c->nspare--;
		rv = tp_http_rearm(&p->h, hdrs, own, backstop);
	} else if ((p = calloc(1, sizeof(*p))) != NULL) {
		rv = tp_http_init(&p->h, c->url, hdrs, own, backstop,
		                  c->ca_bundle, c->max_body, post_done);
	} else {
		if (own) {
			curl_slist_free_all(hdrs);
		}
		return (NULL);
	}
	p->c          = c;
	p->id         = id;
	p->answered   = false;
	p->timeout_ms = timeout_ms;
	p->retry_ms   = -1;
	p->stale      = 0;
	p->last_id[0] = '\0';
	p->prev = p->next = NULL;
	if (rv != 0) {
		post_destroy(p);
		return (NULL);
	}
	p->h.on_event = on_event;
	return (p);
}

/* Starts p again as a GET: a resumption (Last-Event-ID) of its stream,
 * or the standalone stream.  0 or MK_ENOMEM. */
static int
resume(http_conn *c, post *p)
{
	struct curl_slist *hdrs = build_headers(c, false, NULL);
	char               line[EVENT_ID_MAX + 16];

	if (hdrs != NULL) {
		hdrs = tp_slist_add(hdrs, "Accept: text/event-stream");
	}
	if (hdrs != NULL && p->last_id[0] != '\0') {
		snprintf(line, sizeof(line), "Last-Event-ID: %s", p->last_id);
		hdrs = tp_slist_add(hdrs, line);
	}
	if (hdrs == NULL) {
		return (MK_ENOMEM);
	}
	tp_msgq_clear(&p->q);
	(void)tp_http_rearm(&p->h, hdrs, true,
	                    p == c->listen ? 0 : p->timeout_ms + 1000);
	curl_easy_setopt(p->h.x.easy, CURLOPT_HTTPGET, 1L);
	p->got = true;
	return (tp_loop_add(c->base.loop, &p->h.x) != 0 ? MK_ENOMEM : 0);
}

static int64_t
ticker_next(void *arg)
{
	http_conn *c    = arg;
	int64_t    best = -1;

	for (post *p = c->nwaiting > 0 ? c->posts : NULL; p != NULL;
	     p       = p->next) {
		if (p->waiting && (best < 0 || p->resume_at < best)) {
			best = p->resume_at;
		}
	}
	return (best);
}

/* Resumes the streams whose wait is over. */
static void
ticker_expire(void *arg, int64_t now)
{
	http_conn *c = arg;
	mcp_error  e;

	c->busy++;
	for (post *p = c->posts, *n; p != NULL && !c->closed; p = n) {
		n = p->next;
		if (!p->waiting || p->resume_at > now) {
			continue;
		}
		p->waiting = false;
		c->nwaiting--;
		if (resume(c, p) == 0) {
			continue;
		}
		unlink_post(c, p);
		if (p->id != 0) {
			mcp_error_set(
			        &e, MCP_E_LOCAL,
			        "cannot resume the stream of request %lld",
			        (long long)p->id);
			c->base.up.failed(c->base.up.arg, p->id, &e);
		}
		post_free(c, p);
	}
	c->busy--;
	if (c->closed && c->busy == 0 && c->deleting == NULL) {
		conn_destroy(c);
	}
}

/* The standalone GET stream ended (or never began): open it again after
 * the server's retry time, back off after a failure, stop for good when
 * the server offers none, tell the session when its session is gone. */
static void
listen_done(http_conn *c, post *p, CURLcode rc)
{
	mcp_error e;
	bool failed = tp_http_error(&p->h, rc, c->session_id[0] != '\0', &e);
	long status = tp_http_status(&p->h);
	int64_t wait;

	c->busy++;
	if (!deliver(c, p)) {
		goto out;
	}
	if (!failed && !p->h.sse_mode) {
		c->listen_off = true; /* 2xx but not a stream: none offered */
	} else if (failed && e.kind == MCP_E_GONE) {
		c->base.up.lost(c->base.up.arg, &e);
		goto out;
	}
	if (failed && e.kind == MCP_E_HTTP && status >= 400 && status < 500 &&
	    status != 408 && status != 429) {
		c->listen_off =
		        true; /* 405 says so; other refusals last too */
	}
	if (c->listen_off) {
		goto out;
	}
	/* a stream that ran and brought something is polled again after
	 * retry:; one that failed, or ended empty, backs off (a server
	 * closing every stream at once is not asked 20 times a second) */
	bool brought =
	        p->h.sse_mode && (note_stream(p) || p->h.sse.events > 0);
	if (brought && (!failed || p->h.limit == TP_LIMIT_NONE)) {
		wait              = retry_wait(p);
		c->listen_backoff = LISTEN_BACKOFF_MS;
	} else {
		wait = c->listen_backoff;
		if ((c->listen_backoff *= 2) > RETRY_MAX_MS) {
			c->listen_backoff = RETRY_MAX_MS;
		}
	}
	c->listen = p;
	wait_resume(c, p, wait);
	p = NULL;
out:
	c->busy--;
	if (p != NULL) {
		post_free(c, p);
	}
	if (c->closed && c->busy == 0 && c->deleting == NULL) {
		conn_destroy(c);
	}
}

/* Opens the standalone GET stream (once, after initialize). */
static void
http_listen(tp_conn *base)
{
	http_conn *c = (http_conn *)base;
	post      *p;

	if (c->closed || c->listen != NULL || c->listen_off ||
	    (p = calloc(1, sizeof(*p))) == NULL) {
		return;
	}
	p->c        = c;
	p->retry_ms = -1;
	if (tp_http_init(&p->h, c->url, NULL, false, 0, c->ca_bundle,
	                 c->max_body, post_done) != 0) {
		post_destroy(p);
		return;
	}
	tp_http_stream(&p->h, c->stream_rate, c->stream_burst);
	p->h.on_event = on_event;
	c->listen     = p;
	link_post(c, p);
	if (resume(c, p) != 0) {
		unlink_post(c, p);
		post_free(c, p);
	}
}

static int
http_send(tp_conn *base, int64_t id, const char *json, size_t len,
          int timeout_ms, const char *const *headers)
{
	http_conn *c = (http_conn *)base;
	post      *p;

	if (c->closed) {
		return (MK_ECLOSED);
	}
	if ((p = post_new(c, id, headers, timeout_ms)) == NULL) {
		return (MK_ENOMEM);
	}
	if (tp_http_post(&p->h, c->base.loop, json, len) != 0) {
		post_free(c, p);
		return (MK_ENOMEM);
	}
	link_post(c, p);
	return (0);
}

static void
http_abort(tp_conn *base, int64_t id)
{
	http_conn *c = (http_conn *)base;

	for (post *p = c->posts; p != NULL; p = p->next) {
		if (p->id == id) {
			unlink_post(c, p);
			post_free(c, p);
			return;
		}
	}
}

static void
http_set_version(tp_conn *base, const char *version)
{
	http_conn *c = (http_conn *)base;

	snprintf(c->version, sizeof(c->version), "%s", version);
	c->modern = strcmp(version, MCP_PROTOCOL_MODERN) >= 0;
	retire_headers(c);
}

static void
conn_kill(void *arg)
{
	http_conn *c = arg;

	c->deleting = NULL; /* conn_destroy frees it with the others */
	conn_destroy(c);
}

static void
conn_destroy(http_conn *c)
{
	post *p;

	while ((p = c->posts) != NULL) {
		unlink_post(c, p);
		post_free(c, p);
	}
	while ((p = c->spare) != NULL) {
		c->spare = p->next;
		post_destroy(p);
	}
	tp_loop_undefer(c->base.loop, &c->defer);
	tp_loop_ticker_del(c->base.loop, &c->ticker);
	tp_loop_disown(c->base.loop, &c->owned);
	curl_slist_free_all(c->req_hdrs);
	for (unsigned i = 0; i < c->nretired; i++) {
		curl_slist_free_all(c->retired[i]);
	}
	free(c->retired);
	curl_slist_free_all(c->headers);
	free(c->url);
	free(c->ca_bundle);
	free(c);
}

static void
http_close(tp_conn *base)
{
	http_conn         *c = (http_conn *)base;
	struct curl_slist *hdrs;
	post              *p;

	c->closed = true;
	while ((p = c->posts) != NULL) {
		unlink_post(c, p);
		post_free(c, p);
	}
	/* Tell the server the session is over; best effort. */
	if (c->session_id[0] != '\0' &&
	    (hdrs = build_headers(c, false, NULL)) != NULL &&
	    (p = calloc(1, sizeof(*p))) != NULL) {
		p->c = c;
		if (tp_http_init(&p->h, c->url, hdrs, true, DELETE_TIMEOUT_MS,
		                 c->ca_bundle, TP_ERRBODY_MAX,
		                 post_done) == 0) {
			curl_easy_setopt(p->h.x.easy, CURLOPT_CUSTOMREQUEST,
			                 "DELETE");
			if (tp_loop_add(c->base.loop, &p->h.x) == 0) {
				c->deleting = p;
				link_post(c, p);
				tp_loop_own(c->base.loop, &c->owned);
				return;
			}
		}
		post_free(c, p);
	}
	if (c->busy == 0) {
		conn_destroy(c);
	}
}

static const tp_conn_ops http_ops = {
        .send        = http_send,
        .abort       = http_abort,
        .set_version = http_set_version,
        .listen      = http_listen,
        .close       = http_close,
};

static void
announce(void *arg)
{
	http_conn *c = arg;

	/* Nothing to open: say so from the loop, not from inside open. */
	c->defer.fn = run_deferred;
	c->busy++;
	c->base.up.opened(c->base.up.arg, NULL);
	c->busy--;
	if (c->closed && c->busy == 0 && c->deleting == NULL) {
		conn_destroy(c);
	}
}

int
tp_http_open(tp_conn **cp, tp_loop *l, const mcp_config *cfg,
             const tp_conn_up *up)
{
	http_conn *c;

	*cp = NULL;
	if (cfg->url == NULL) {
		return (MK_EINVAL);
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		return (MK_ENOMEM);
	}
	c->base.ops  = &http_ops;
	c->base.loop = l;
	c->base.up   = *up;
	c->max_body =
	        cfg->max_message ? cfg->max_message : CODEC_JR_MAX_DEFAULT;
	c->url       = strdup(cfg->url);
	c->ca_bundle = cfg->ca_bundle ? strdup(cfg->ca_bundle) : NULL;
	c->owned     = (tp_owned) {.kill = conn_kill, .arg = c};
	c->defer     = (tp_defer) {.fn = announce, .arg = c};
	c->ticker    = (tp_ticker) {
	           .next = ticker_next, .expire = ticker_expire, .arg = c};
	c->stream_rate = cfg->stream_rate ? cfg->stream_rate : MCP_STREAM_RATE;
	c->stream_burst =
	        cfg->stream_burst ? cfg->stream_burst : MCP_STREAM_BURST;
	c->listen_backoff = LISTEN_BACKOFF_MS;
	if (c->url == NULL || (cfg->ca_bundle && c->ca_bundle == NULL) ||
	    (cfg->headers != NULL && cfg->headers[0] != NULL &&
	     (c->headers = tp_slist_addv(NULL, cfg->headers)) == NULL)) {
		conn_destroy(c);
		return (MK_ENOMEM);
	}
	tp_loop_defer(l, &c->defer);
	tp_loop_ticker_add(l, &c->ticker);
	*cp = &c->base;
	return (0);
}
