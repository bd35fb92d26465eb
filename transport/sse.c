/*
 * sse.c - the legacy HTTP+SSE transport (MCP 2024-11-05).
 *
 * DESIGN: one long GET carries the server's event stream.  Its first
 * `endpoint` event names (usually relatively) the URL to POST messages to;
 * the connection is open once it arrives.  POSTs are answered 202 and the
 * JSON-RPC answers come back as `message` events on the stream, so a POST
 * only reports transport failures; a request whose answer never arrives
 * is timed out by the session.  The endpoint must be on the stream's own
 * origin, so the connection's headers (credentials) never leave it.
 * Events are parsed in curl's write callback and delivered from a
 * deferred loop step, as in http.c.  Losing the stream is MCP_E_LOST.
 * The stream lives for days: its events are limited in size and in rate
 * (MCP_STREAM_RATE, MCP_STREAM_BURST), never in number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec/jsonrpc.h"
#include "mcpkeep.h"
#include "transport/conn.h"
#include "transport/xfer.h"

typedef struct sse_conn sse_conn;

typedef struct spost {
	tp_http       h;    /* the POST */
	sse_conn     *c;    /* owner */
	int64_t       id;   /* request id, 0 for a notification */
	struct spost *next; /* conn's list */
} spost;

struct sse_conn {
	tp_conn   base;      /* ops, loop, upcalls */
	tp_web    web;       /* GET URL, CA, headers, limit */
	tp_http   stream;    /* the GET */
	bool      streaming; /* the GET is in the loop */
	char     *endpoint;  /* resolved POST URL, once known */
	bool      announced; /* opened() was called */
	mcp_error bad;       /* a stream-level failure to report */
	bool      has_bad;   /* bad is set */
	tp_msgq   q;         /* stream messages to deliver */
	spost    *posts;     /* POSTs in flight */
	tp_defer  defer;     /* delivery step */
	int       busy;      /* upcalls on the stack */
	bool      closed;    /* close() was called */
};

static void conn_destroy(sse_conn *c);

/* Resolves ref against the stream URL; NULL unless same origin. */
static char *
resolve(const sse_conn *c, const char *ref, size_t len)
{
	CURLU                 *u    = curl_url();
	CURLU                 *base = curl_url();
	char                  *out = NULL, *ref0 = strndup(ref, len);
	char                  *a[3] = {0}, *b[3] = {0};
	static const CURLUPart parts[3] = {CURLUPART_SCHEME, CURLUPART_HOST,
	                                   CURLUPART_PORT};

	if (u == NULL || base == NULL || ref0 == NULL ||
	    curl_url_set(base, CURLUPART_URL, c->web.url, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_URL, c->web.url, 0) != CURLUE_OK ||
	    curl_url_set(u, CURLUPART_URL, ref0, 0) != CURLUE_OK) {
		goto out;
	}
	for (int i = 0; i < 3; i++) {
		curl_url_get(u, parts[i], &a[i], CURLU_DEFAULT_PORT);
		curl_url_get(base, parts[i], &b[i], CURLU_DEFAULT_PORT);
		if (a[i] == NULL || b[i] == NULL || strcmp(a[i], b[i]) != 0) {
			goto out;
		}
	}
	char *tmp = NULL;
	if (curl_url_get(u, CURLUPART_URL, &tmp, 0) == CURLUE_OK) {
		out = strdup(tmp);
		curl_free(tmp);
	}
out:
	for (int i = 0; i < 3; i++) {
		curl_free(a[i]);
		curl_free(b[i]);
	}
	curl_url_cleanup(u);
	curl_url_cleanup(base);
	free(ref0);
	return (out);
}

static int
on_stream_event(tp_http *h, const codec_sse_event *ev)
{
	sse_conn *c = (sse_conn *)((char *)h - offsetof(sse_conn, stream));

	if (strcmp(ev->type, "endpoint") == 0) {
		if (c->endpoint == NULL &&
		    (c->endpoint = resolve(c, ev->data, ev->data_len)) ==
		            NULL &&
		    !c->has_bad) {
			mcp_error_set(
			        &c->bad, MCP_E_PROTOCOL,
			        "SSE endpoint event names no URL on the stream's own origin");
			c->has_bad = true;
		}
	} else if (strcmp(ev->type, "message") == 0) {
		tp_msgq_parse(&c->q, ev->data, ev->data_len, c->web.max_body);
	}
	tp_loop_defer(c->base.loop, &c->defer);
	return (0);
}

/* Delivery step: opened, then stream messages, then a stream failure. */
static void
run_deferred(void *arg)
{
	sse_conn *c = arg;
	json_t   *m;

	c->busy++;
	if (!c->announced && (c->endpoint != NULL || c->has_bad)) {
		c->announced = true;
		c->base.up.opened(c->base.up.arg,
		                  c->endpoint ? NULL : &c->bad);
		c->has_bad = c->endpoint == NULL ? false : c->has_bad;
	}
	while (!c->closed && c->endpoint != NULL &&
	       (m = tp_msgq_pop(&c->q)) != NULL) {
		c->base.up.message(c->base.up.arg, m, 0);
		json_decref(m);
	}
	if (!c->closed && c->has_bad && c->announced) {
		c->has_bad = false;
		c->base.up.lost(c->base.up.arg, &c->bad);
	}
	c->busy--;
	if (c->closed && c->busy == 0) {
		conn_destroy(c);
	}
}

static void
stream_done(tp_xfer *x, CURLcode rc)
{
	sse_conn *c = (sse_conn *)((char *)x - offsetof(sse_conn, stream));
	mcp_error e;

	c->streaming = false;
	if (!tp_http_error(&c->stream, rc, false, &e)) {
		mcp_error_set(&e, MCP_E_LOST,
		              "SSE stream closed by the server");
	} else if (c->announced && e.kind != MCP_E_AUTH) {
		mcp_error was = e; /* it was up: it is lost */
		mcp_error_set(&e, MCP_E_LOST, "SSE stream lost: %s",
		              was.message);
		e.http_status = was.http_status;
	}
	if (!c->has_bad) {
		c->bad     = e;
		c->has_bad = true;
	}
	run_deferred(c);
}

static void
spost_free(sse_conn *c, spost *p)
{
	tp_loop_remove(c->base.loop, &p->h.x);
	tp_http_fini(&p->h);
	free(p);
}

static void
spost_unlink(sse_conn *c, spost *p)
{
	for (spost **pp = &c->posts; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			return;
		}
	}
}

static void
post_done(tp_xfer *x, CURLcode rc)
{
	spost    *p = (spost *)x;
	sse_conn *c = p->c;
	mcp_error e;

	spost_unlink(c, p);
	if (tp_http_error(&p->h, rc, false, &e) && p->id != 0 && !c->closed) {
		c->busy++;
		c->base.up.failed(c->base.up.arg, p->id, &e);
		c->busy--;
	}
	spost_free(c, p);
	if (c->closed && c->busy == 0) {
		conn_destroy(c);
	}
}

static int
sse_send(tp_conn *base, int64_t id, const char *json, size_t len,
         int timeout_ms, const char *const *headers)
{
	sse_conn          *c = (sse_conn *)base;
	struct curl_slist *hdrs;
	spost             *p;

	if (c->closed || c->endpoint == NULL) {
		return (MK_ECLOSED);
	}
	if ((hdrs = tp_slist_add(NULL, "Content-Type: application/json")) ==
	    NULL) {
		return (MK_ENOMEM);
	}
	for (struct curl_slist *h = c->web.headers; h != NULL; h = h->next) {
		if ((hdrs = tp_slist_add(hdrs, h->data)) == NULL) {
			return (MK_ENOMEM);
		}
	}
	if ((hdrs = tp_slist_addv(hdrs, headers)) == NULL) {
		return (MK_ENOMEM);
	}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		curl_slist_free_all(hdrs);
		return (MK_ENOMEM);
	}
	p->c  = c;
	p->id = id;
	if (tp_http_init(&p->h, c->endpoint, hdrs, true, timeout_ms + 1000,
	                 c->web.ca_bundle, TP_ERRBODY_MAX, post_done) != 0) {
		spost_free(c, p);
		return (MK_ENOMEM);
	}
	if ((c->base.once
	             ? tp_http_post_once(&p->h, c->base.loop, json, len)
	             : tp_http_post(&p->h, c->base.loop, json, len)) != 0) {
		spost_free(c, p);
		return (MK_ENOMEM);
	}
	p->next  = c->posts;
	c->posts = p;
	return (0);
}

static void
sse_abort(tp_conn *base, int64_t id)
{
	sse_conn *c = (sse_conn *)base;

	for (spost *p = c->posts; p != NULL; p = p->next) {
		if (p->id == id) {
			spost_unlink(c, p);
			spost_free(c, p);
			return;
		}
	}
}

static void
sse_set_version(tp_conn *base, const char *version)
{
	(void)base; /* the legacy transport sends no version header */
	(void)version;
}

static void
conn_destroy(sse_conn *c)
{
	spost *p;

	while ((p = c->posts) != NULL) {
		c->posts = p->next;
		spost_free(c, p);
	}
	if (c->streaming) {
		tp_loop_remove(c->base.loop, &c->stream.x);
	}
	tp_http_fini(&c->stream);
	tp_msgq_clear(&c->q);
	tp_loop_undefer(c->base.loop, &c->defer);
	tp_web_fini(&c->web);
	free(c->endpoint);
	free(c);
}

static void
sse_close(tp_conn *base)
{
	sse_conn *c = (sse_conn *)base;

	c->closed = true;
	if (c->busy == 0) {
		conn_destroy(c); /* closing the stream ends the session */
	}
}

static const tp_conn_ops sse_ops = {
        .send        = sse_send,
        .abort       = sse_abort,
        .set_version = sse_set_version,
        .close       = sse_close,
};

int
tp_sse_open(tp_conn **cp, tp_loop *l, const mcp_config *cfg,
            const tp_conn_up *up)
{
	struct curl_slist *hdrs = NULL;
	sse_conn          *c;

	*cp = NULL;
	if (cfg->url == NULL) {
		return (MK_EINVAL);
	}
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		return (MK_ENOMEM);
	}
	c->base.ops  = &sse_ops;
	c->base.loop = l;
	c->base.up   = *up;
	c->defer     = (tp_defer) {.fn = run_deferred, .arg = c};
	if (tp_web_init(&c->web, cfg) != 0 ||
	    (hdrs = tp_slist_add(NULL, "Accept: text/event-stream")) == NULL ||
	    (hdrs = tp_slist_addv(hdrs, cfg->headers)) == NULL ||
	    tp_http_init(&c->stream, c->web.url, hdrs, true, 0,
	                 c->web.ca_bundle, c->web.max_body,
	                 stream_done) != 0) {
		conn_destroy(c);
		return (MK_ENOMEM);
	}
	c->stream.on_event = on_stream_event;
	tp_http_stream(&c->stream,
	               cfg->stream_rate ? cfg->stream_rate : MCP_STREAM_RATE,
	               cfg->stream_burst ? cfg->stream_burst
	                                 : MCP_STREAM_BURST);
	if (tp_loop_add(l, &c->stream.x) != 0) {
		conn_destroy(c);
		return (MK_ENOMEM);
	}
	c->streaming = true;
	*cp          = &c->base;
	return (0);
}
