/*
 * resume.c - streams that break off (2025-11-25 "Resumability and
 * Redelivery"), and the standalone GET stream.
 *
 * Each POST keeps the id of the last complete event of its stream and the
 * server's retry: time.  A stream that ends before its response (the
 * server closed it to poll, or the network dropped it) is not a cancel:
 * after the retry time the POST turns into a GET with Last-Event-ID on
 * which the server replays the rest, again and again while each stream
 * brings a new event; a stream with no event id fails its request as
 * before.  A sticky session also listens on the standalone GET stream
 * (http_listen), for the server's own notifications and requests: a 405
 * (or an answer that is not a stream) means the server offers none; a
 * stream that ends is opened again after the retry time, with the last
 * event id; one that fails backs off; a 404 means the session is gone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcpkeep.h"
#include "transport/http_impl.h"

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
	http_link(c, p);
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
bool
http_may_resume(http_conn *c, post *p, bool failed, mcp_error *e)
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
void
http_resume_failed(const post *p, mcp_error *e)
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

/* Starts p again as a GET: a resumption (Last-Event-ID) of its stream,
 * or the standalone stream.  0 or MK_ENOMEM. */
static int
resume(http_conn *c, post *p)
{
	struct curl_slist *hdrs = http_headers(c, false, NULL);
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

int64_t
http_ticker_next(void *arg)
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
void
http_ticker_expire(void *arg, int64_t now)
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
		http_unlink(c, p);
		if (p->id != 0) {
			mcp_error_set(
			        &e, MCP_E_LOCAL,
			        "cannot resume the stream of request %lld",
			        (long long)p->id);
			c->base.up.failed(c->base.up.arg, p->id, &e);
		}
		http_post_free(c, p);
	}
	c->busy--;
	http_settle(c);
}

/* The standalone GET stream ended (or never began): open it again after
 * the server's retry time, back off after a failure, stop for good when
 * the server offers none, tell the session when its session is gone. */
void
http_listen_done(http_conn *c, post *p, CURLcode rc)
{
	mcp_error e;
	bool failed = tp_http_error(&p->h, rc, c->session_id[0] != '\0', &e);
	long status = tp_http_status(&p->h);
	int64_t wait;

	c->busy++;
	if (!http_deliver(c, p)) {
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
		http_post_free(c, p);
	}
	http_settle(c);
}

/* Opens the standalone GET stream (once, after initialize). */
void
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
	if (tp_http_init(&p->h, c->web.url, NULL, false, 0, c->web.ca_bundle,
	                 c->web.max_body, http_post_done) != 0) {
		http_post_destroy(p);
		return;
	}
	tp_http_stream(&p->h, c->stream_rate, c->stream_burst);
	p->h.on_event = http_on_event;
	c->listen     = p;
	http_link(c, p);
	if (resume(c, p) != 0) {
		http_unlink(c, p);
		http_post_free(c, p);
	}
}
