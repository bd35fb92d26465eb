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
 * Streams that break off resume, and a sticky session listens on the
 * standalone GET stream: both in resume.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "mcpkeep.h"
#include "transport/http_impl.h"

static void conn_destroy(http_conn *c);

void
http_link(http_conn *c, post *p)
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

void
http_unlink(http_conn *c, post *p)
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

int
http_on_event(tp_http *h, const codec_sse_event *ev)
{
	post *p = (post *)h;

	if (strcmp(ev->type, "message") == 0) {
		tp_msgq_parse(&p->q, ev->data, ev->data_len,
		              p->c->web.max_body);
		tp_loop_defer(p->c->base.loop, &p->c->defer);
	}
	return (0);
}

/* Hands p's queued messages to the session.  Returns false when the
 * session closed the conn meanwhile. */
bool
http_deliver(http_conn *c, post *p)
{
	json_t *m;

	while (!c->closed && (m = tp_msgq_pop(&p->q)) != NULL) {
		json_t *id = json_object_get(m, "id");

		if (p->id != 0 && json_is_integer(id) &&
		    json_integer_value(id) == p->id &&
		    json_object_get(m, "method") == NULL) {
			p->answered = true;
		}
		c->base.up.message(c->base.up.arg, m, p->id);
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
		http_deliver(c, p);
	}
	c->busy--;
	http_settle(c);
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

void
http_post_done(tp_xfer *x, CURLcode rc)
{
	post      *p         = (post *)x;
	http_conn *c         = p->c;
	bool       listening = p == c->listen;
	mcp_error  e;
	bool       failed;

	http_unlink(c, p);
	if (p == c->deleting) {
		c->deleting = NULL;
		http_post_free(c, p);
		if (c->busy == 0) {
			conn_destroy(c);
		}
		return;
	}
	if (listening) {
		http_listen_done(c, p, rc);
		return;
	}
	failed = tp_http_error(&p->h, rc, c->session_id[0] != '\0', &e);
	if (!failed && !p->h.sse_mode) {
		tp_msgq_parse(&p->q, p->h.body, p->h.body_len,
		              c->web.max_body);
	} else if (failed && e.kind == MCP_E_HTTP && e.http_status >= 400 &&
	           e.http_status < 500 && rpc_error_for(p)) {
		/* a JSON-RPC error for this request (2026-07-28 answers them
		 * with 400): the session reads it like any answer */
		tp_msgq_parse(&p->q, p->h.body, p->h.body_len,
		              c->web.max_body);
		failed = false;
	}
	if (!failed && p->h.session_id[0] != '\0' &&
	    c->session_id[0] == '\0') {
		snprintf(c->session_id, sizeof(c->session_id), "%s",
		         p->h.session_id);
	}
	c->busy++;
	if (http_deliver(c, p) && p->id != 0 && !p->answered) {
		if (http_may_resume(c, p, failed, &e)) {
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
			http_resume_failed(p, &e);
		}
		c->base.up.failed(c->base.up.arg, p->id, &e);
	}
	c->busy--;
	http_post_free(c, p);
	http_settle(c);
}

void
http_post_destroy(post *p)
{
	tp_msgq_clear(&p->q);
	tp_http_fini(&p->h);
	free(p);
}

/* Takes p out of the loop and keeps it for reuse, or frees it. */
void
http_post_free(http_conn *c, post *p)
{
	tp_loop_remove(c->base.loop, &p->h.x);
	if (c->closed || c->nspare >= c->peak || c->nspare == SPARE_MAX ||
	    p == c->deleting || p->got || p->h.x.easy == NULL) {
		http_post_destroy(p);
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
struct curl_slist *
http_headers(http_conn *c, bool body, const char *const *extra)
{
	struct curl_slist *l = NULL;
	char               line[320];

	for (struct curl_slist *h = c->web.headers; h != NULL; h = h->next) {
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
		c->req_hdrs = http_headers(c, true, NULL);
	}
	hdrs = own ? http_headers(c, true, extra) : c->req_hdrs;
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
		rv = tp_http_init(&p->h, c->web.url, hdrs, own, backstop,
		                  c->web.ca_bundle, c->web.max_body,
		                  http_post_done);
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
		http_post_destroy(p);
		return (NULL);
	}
	p->h.on_event = http_on_event;
	return (p);
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
	if ((c->base.once
	             ? tp_http_post_once(&p->h, c->base.loop, json, len)
	             : tp_http_post(&p->h, c->base.loop, json, len)) != 0) {
		http_post_free(c, p);
		return (MK_ENOMEM);
	}
	http_link(c, p);
	return (0);
}

static void
http_abort(tp_conn *base, int64_t id)
{
	http_conn *c = (http_conn *)base;
	post      *p = c->posts;

	while (p != NULL && p->id != id) {
		p = p->next;
	}
	if (p != NULL) {
		http_unlink(c, p);
		http_post_free(c, p);
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

/* Frees the finished POSTs kept for reuse (their curl handles and
 * buffers). */
static void
spares_free(http_conn *c)
{
	post *p;

	while ((p = c->spare) != NULL) {
		c->spare = p->next;
		http_post_destroy(p);
	}
	c->nspare = 0;
}

/* The loop rests: an idle session keeps no curl handle (the next
 * request makes one, as it makes a connection). */
static void
http_rest(void *arg)
{
	spares_free(arg);
}

static void
conn_destroy(http_conn *c)
{
	post *p;

	while ((p = c->posts) != NULL) {
		http_unlink(c, p);
		http_post_free(c, p);
	}
	spares_free(c);
	tp_loop_undefer(c->base.loop, &c->defer);
	tp_loop_ticker_del(c->base.loop, &c->ticker);
	tp_loop_disown(c->base.loop, &c->owned);
	curl_slist_free_all(c->req_hdrs);
	for (unsigned i = 0; i < c->nretired; i++) {
		curl_slist_free_all(c->retired[i]);
	}
	free(c->retired);
	tp_web_fini(&c->web);
	free(c);
}

/* Frees c once it is closed and nothing is left on the stack or in
 * flight. */
void
http_settle(http_conn *c)
{
	if (c->closed && c->busy == 0 && c->deleting == NULL) {
		conn_destroy(c);
	}
}

static void
http_close(tp_conn *base)
{
	http_conn         *c = (http_conn *)base;
	struct curl_slist *hdrs;
	post              *p;

	c->closed = true;
	while ((p = c->posts) != NULL) {
		http_unlink(c, p);
		http_post_free(c, p);
	}
	/* Tell the server the session is over; best effort. */
	if (c->session_id[0] != '\0' &&
	    (hdrs = http_headers(c, false, NULL)) != NULL &&
	    (p = calloc(1, sizeof(*p))) != NULL) {
		p->c = c;
		if (tp_http_init(&p->h, c->web.url, hdrs, true,
		                 DELETE_TIMEOUT_MS, c->web.ca_bundle,
		                 TP_ERRBODY_MAX, http_post_done) == 0) {
			curl_easy_setopt(p->h.x.easy, CURLOPT_CUSTOMREQUEST,
			                 "DELETE");
			if (tp_loop_add(c->base.loop, &p->h.x) == 0) {
				c->deleting = p;
				http_link(c, p);
				tp_loop_own(c->base.loop, &c->owned);
				return;
			}
		}
		http_post_free(c, p);
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
	http_settle(c);
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
	c->base.ops    = &http_ops;
	c->base.loop   = l;
	c->base.up     = *up;
	c->owned       = (tp_owned) {.kill = conn_kill, .arg = c};
	c->defer       = (tp_defer) {.fn = announce, .arg = c};
	c->ticker      = (tp_ticker) {.next   = http_ticker_next,
	                              .expire = http_ticker_expire,
	                              .rest   = http_rest,
	                              .arg    = c};
	c->stream_rate = cfg->stream_rate ? cfg->stream_rate : MCP_STREAM_RATE;
	c->stream_burst =
	        cfg->stream_burst ? cfg->stream_burst : MCP_STREAM_BURST;
	c->listen_backoff = LISTEN_BACKOFF_MS;
	if (tp_web_init(&c->web, cfg) != 0) {
		conn_destroy(c);
		return (MK_ENOMEM);
	}
	tp_loop_defer(l, &c->defer);
	tp_loop_ticker_add(l, &c->ticker);
	*cp = &c->base;
	return (0);
}
