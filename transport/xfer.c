/*
 * xfer.c - one HTTP exchange (see xfer.h).
 */
#include "transport/xfer.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "codec/jsonrpc.h"
#include "mcpkeep.h"
#include "transport/conn.h"

#define CURL_MAXAGE_DEFAULT 118L /* libcurl's own reuse age, seconds */

struct curl_slist *
tp_slist_add(struct curl_slist *l, const char *line)
{
	struct curl_slist *n = curl_slist_append(l, line);

	if (n == NULL) {
		curl_slist_free_all(l);
	}
	return (n);
}

struct curl_slist *
tp_slist_addv(struct curl_slist *l, const char *const *lines)
{
	for (size_t i = 0; lines != NULL && lines[i] != NULL; i++) {
		if ((l = tp_slist_add(l, lines[i])) == NULL) {
			return (NULL);
		}
	}
	return (l);
}

int
tp_web_init(tp_web *w, const mcp_config *cfg)
{
	w->max_body =
	        cfg->max_message ? cfg->max_message : CODEC_JR_MAX_DEFAULT;
	w->url       = strdup(cfg->url);
	w->ca_bundle = cfg->ca_bundle ? strdup(cfg->ca_bundle) : NULL;
	w->headers   = NULL;
	if (w->url == NULL || (cfg->ca_bundle && w->ca_bundle == NULL) ||
	    (cfg->headers != NULL && cfg->headers[0] != NULL &&
	     (w->headers = tp_slist_addv(NULL, cfg->headers)) == NULL)) {
		return (MK_ENOMEM);
	}
	return (0);
}

void
tp_web_fini(tp_web *w)
{
	curl_slist_free_all(w->headers);
	free(w->url);
	free(w->ca_bundle);
	*w = (tp_web) {0};
}

/* Copies a header's value (trimmed, cut to cap) when name matches. */
static bool
header_value(const char *line, size_t len, const char *name, char *out,
             size_t cap, bool lower)
{
	size_t n = strlen(name), i, j = 0;

	if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':') {
		return (false);
	}
	for (i = n + 1; i < len && (line[i] == ' ' || line[i] == '\t'); i++) {
	}
	while (len > i && isspace((unsigned char)line[len - 1])) {
		len--;
	}
	for (; i < len && j + 1 < cap; i++) {
		out[j++] = lower ? (char)tolower((unsigned char)line[i])
		                 : line[i];
	}
	out[j] = '\0';
	return (true);
}

static size_t
on_header(char *buf, size_t size, size_t n, void *arg)
{
	tp_http *h   = arg;
	size_t   len = size * n;

	h->hdr_bytes += len;
	if (len > TP_HEADER_LINE_MAX || h->hdr_bytes > TP_HEADERS_MAX) {
		h->limit = TP_LIMIT_HEADERS;
		return (0); /* aborts the transfer */
	}
	if (len == 2 && h->x.lasting && h->x.loop != NULL) {
		/* the headers' end: a stream without a deadline holds its
		 * connection (the loop's cache counts it on top) */
		long st = tp_http_status(h);
		if (st >= 200 && st < 300 &&
		    strncmp(h->content_type, "text/event-stream", 17) == 0) {
			tp_loop_lasting(h->x.loop, &h->x);
		}
	}
	if (len >= 5 && strncmp(buf, "HTTP/", 5) == 0) {
		/* a new response (e.g. after 100 Continue): start over */
		h->content_type[0] = h->www_auth[0] = '\0';
		return (len);
	}
	if (!header_value(buf, len, "content-type", h->content_type,
	                  sizeof(h->content_type), true) &&
	    !header_value(buf, len, "mcp-session-id", h->session_id,
	                  sizeof(h->session_id), false)) {
		header_value(buf, len, "www-authenticate", h->www_auth,
		             sizeof(h->www_auth), false);
	}
	return (len);
}

static bool
keep(tp_http *h, const char *buf, size_t len, size_t limit)
{
	if (h->body_len + len > limit) {
		return (false);
	}
	if (h->body_len + len + 1 > h->body_cap) {
		size_t ncap = (h->body_len + len + 1) * 2;
		char  *nb   = realloc(h->body, ncap);
		if (nb == NULL) {
			return (false);
		}
		h->body     = nb;
		h->body_cap = ncap;
	}
	memcpy(h->body + h->body_len, buf, len);
	h->body_len += len;
	h->body[h->body_len] = '\0';
	return (true);
}

static int
sse_event(void *arg, const codec_sse_event *ev)
{
	tp_http *h = arg;

	return (h->on_event != NULL ? h->on_event(h, ev) : 0);
}

/* The first body byte: a 2xx event stream gets its parser. */
static int
body_start(tp_http *h)
{
	long status = tp_http_status(h);

	h->started  = true;
	h->sse_mode = status >= 200 && status < 300 &&
	        strncmp(h->content_type, "text/event-stream", 17) == 0;
	if (h->sse_mode) {
		codec_sse_limits lim = {
		        .max_line   = h->max_body + 64,
		        .max_data   = h->max_body,
		        .max_events = h->max_events,
		        .rate       = h->ev_rate,
		        .burst      = h->ev_burst,
		        .now_ns     = tp_now_ns,
		};
		return (codec_sse_init(&h->sse, &lim));
	}
	return (0);
}

/* The limit a failed feed hit, if it was one. */
static tp_limit
sse_limit(const codec_sse *p)
{
	switch (codec_sse_failure(p)) {
	case CODEC_SSE_LINE:
	case CODEC_SSE_DATA:
		return (TP_LIMIT_EVENT);
	case CODEC_SSE_EVENTS:
		return (TP_LIMIT_EVENTS);
	case CODEC_SSE_RATE:
		return (TP_LIMIT_RATE);
	default:
		return (TP_LIMIT_NONE);
	}
}

static size_t
on_body(char *buf, size_t size, size_t n, void *arg)
{
	tp_http *h   = arg;
	size_t   len = size * n;
	long     status;

	if (!h->started && body_start(h) != 0) {
		return (0); /* out of memory: abort */
	}
	if (h->sse_mode) {
		if (codec_sse_feed(&h->sse, buf, len, sse_event, h) != 0) {
			h->limit = sse_limit(&h->sse);
			return (0);
		}
		return (len);
	}
	status = tp_http_status(h);
	if (!keep(h, buf, len,
	          status >= 200 && status < 300 ? h->max_body
	                                        : TP_ERRBODY_MAX)) {
		if (status >= 200 && status < 300) {
			h->limit = TP_LIMIT_BODY;
			return (0);
		}
		return (len); /* an error body: the start is enough */
	}
	return (len);
}

/* curl's socket(2), keeping errno: EMFILE is this process's limit, not
 * the server's refusal, and curl reports both as CURLE_COULDNT_CONNECT. */
static curl_socket_t
open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
	tp_http      *h = arg;
	curl_socket_t s =
	        socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);

	if (s == CURL_SOCKET_BAD) {
		h->sock_errno = errno;
	}
	return (s);
}

int
tp_http_init(tp_http *h, const char *url, struct curl_slist *hdrs, bool own,
             int timeout_ms, const char *ca_bundle, size_t max_body,
             void (*done)(tp_xfer *, CURLcode))
{
	CURL *e;

	memset(h, 0, sizeof(*h));
	h->hdrs       = hdrs;
	h->own_hdrs   = own;
	h->max_body   = max_body;
	h->max_events = TP_RESPONSE_EVENTS_MAX;
	h->x.done     = done;
	if ((e = h->x.easy = curl_easy_init()) == NULL) {
		return (MK_ENOMEM);
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_PRIVATE, &h->x);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
	curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, h);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	h->x.lasting = timeout_ms == 0;
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	/* 8 KiB, not 16: thousands of idle clients keep their handles */
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 8192L);
	if (ca_bundle != NULL) {
		curl_easy_setopt(e, CURLOPT_CAINFO, ca_bundle);
	}
	return (0);
}

void
tp_http_stream(tp_http *h, uint32_t rate, uint32_t burst)
{
	h->max_events = 0;
	h->ev_rate    = rate;
	h->ev_burst   = burst;
}

int
tp_http_rearm(tp_http *h, struct curl_slist *hdrs, bool own, int timeout_ms)
{
	if (h->own_hdrs) {
		curl_slist_free_all(h->hdrs);
	}
	h->hdrs      = hdrs;
	h->own_hdrs  = own;
	h->hdr_bytes = h->body_len = 0;
	h->sse_mode = h->started = false;
	h->limit                 = TP_LIMIT_NONE;
	h->errbuf[0] = h->content_type[0] = h->session_id[0] = '\0';
	h->www_auth[0]                                       = '\0';
	codec_sse_fini(&h->sse); /* set up again if a stream comes */
	if (h->out != NULL) {    /* a once-POST's: a plain exchange again */
		free(h->out);
		h->out = NULL;
		curl_easy_setopt(h->x.easy, CURLOPT_READFUNCTION, NULL);
		curl_easy_setopt(h->x.easy, CURLOPT_READDATA, NULL);
		curl_easy_setopt(h->x.easy, CURLOPT_MAXAGE_CONN,
		                 CURL_MAXAGE_DEFAULT);
	}
	curl_easy_setopt(h->x.easy, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h->x.easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	h->x.lasting = timeout_ms == 0;
	return (0);
}

int
tp_http_post(tp_http *h, tp_loop *l, const char *json, size_t len)
{
	curl_easy_setopt(h->x.easy, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(h->x.easy, CURLOPT_COPYPOSTFIELDS, json);
	return (tp_loop_add(l, &h->x) != 0 ? MK_ENOMEM : 0);
}

/* libcurl's read of a once-POST's body: it has no rewind. */
static size_t
read_once(char *buf, size_t size, size_t n, void *arg)
{
	tp_http *h    = arg;
	size_t   left = h->out_len - h->out_off;
	size_t   k    = left < size * n ? left : size * n;

	memcpy(buf, h->out + h->out_off, k);
	h->out_off += k;
	return (k);
}

int
tp_http_post_once(tp_http *h, tp_loop *l, const char *json, size_t len)
{
	free(h->out);
	if ((h->out = malloc(len > 0 ? len : 1)) == NULL) {
		return (MK_ENOMEM);
	}
	memcpy(h->out, json, len);
	h->out_len = len;
	h->out_off = 0;
	curl_easy_setopt(h->x.easy, CURLOPT_POST, 1L);
	curl_easy_setopt(h->x.easy, CURLOPT_POSTFIELDS, NULL);
	curl_easy_setopt(h->x.easy, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(h->x.easy, CURLOPT_READFUNCTION, read_once);
	curl_easy_setopt(h->x.easy, CURLOPT_READDATA, h);
	curl_easy_setopt(h->x.easy, CURLOPT_MAXAGE_CONN, 1L);
	return (tp_loop_add(l, &h->x) != 0 ? MK_ENOMEM : 0);
}

void
tp_http_fini(tp_http *h)
{
	if (h->x.easy != NULL) {
		curl_easy_cleanup(h->x.easy);
		h->x.easy = NULL;
	}
	if (h->own_hdrs) {
		curl_slist_free_all(h->hdrs);
	}
	h->hdrs = NULL;
	codec_sse_fini(&h->sse);
	free(h->body);
	h->body = NULL;
	free(h->out);
	h->out = NULL;
}

long
tp_http_status(tp_http *h)
{
	long status = 0;

	curl_easy_getinfo(h->x.easy, CURLINFO_RESPONSE_CODE, &status);
	return (status);
}

/* len bytes of s as one printable line into out (cap bytes), at most
 * 200 of them. */
static void
printable(const char *s, size_t len, char *out, size_t cap)
{
	size_t j = 0;

	for (size_t i = 0; s != NULL && i < len && j + 1 < cap && i < 200;
	     i++) {
		unsigned char c = (unsigned char)s[i];
		out[j++]        = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	out[j] = '\0';
}

/* The start of an error body as one printable line; an HTML page (a
 * proxy's, a web server's) as its title only. */
static void
snippet(const tp_http *h, char *out, size_t cap)
{
	const char *b = h->body, *t, *end;
	size_t      n = h->body_len;

	while (b != NULL && n > 0 &&
	       (*b == ' ' || *b == '\t' || *b == '\r' || *b == '\n')) {
		b++;
		n--;
	}
	if (b == NULL || n == 0 || *b != '<' ||
	    (strncasecmp(b, "<!doctype html", 14) != 0 &&
	     strncasecmp(b, "<html", 5) != 0)) {
		printable(b, n, out, cap);
		return;
	}
	if ((t = strcasestr(b, "<title>")) != NULL &&
	    (end = strcasestr(t + 7, "</title>")) != NULL) {
		char title[128];
		printable(t + 7, (size_t)(end - t - 7), title, sizeof(title));
		snprintf(out, cap, "%s (an HTML page)", title);
	} else {
		snprintf(out, cap, "an HTML page");
	}
}

static bool
gone_body(const tp_http *h)
{
	return (h->body != NULL &&
	        (strcasestr(h->body, "No valid session ID provided") != NULL ||
	         strcasestr(h->body, "expect initialize request") != NULL ||
	         strcasestr(h->body, "session not found") != NULL));
}

/* The message of the limit that aborted h: which, and its value. */
static void
limit_error(const tp_http *h, mcp_error *e)
{
	switch (h->limit) {
	case TP_LIMIT_HEADERS:
		mcp_error_set(
		        e, MCP_E_PROTOCOL,
		        "response headers exceed their size limit (%d bytes a line, %d in all)",
		        TP_HEADER_LINE_MAX, TP_HEADERS_MAX);
		break;
	case TP_LIMIT_BODY:
		mcp_error_set(
		        e, MCP_E_PROTOCOL,
		        "response exceeds its size limit (%zu-byte body)",
		        h->max_body);
		break;
	case TP_LIMIT_EVENT:
		mcp_error_set(
		        e, MCP_E_PROTOCOL,
		        "an SSE event exceeds its size limit (%zu bytes)",
		        h->max_body);
		break;
	case TP_LIMIT_EVENTS:
		mcp_error_set(e, MCP_E_PROTOCOL,
		              "the response stream exceeded %llu events",
		              (unsigned long long)h->max_events);
		break;
	case TP_LIMIT_RATE:
		mcp_error_set(
		        e, MCP_E_PROTOCOL,
		        "the stream exceeded %u events per second (bursts of %u)",
		        (unsigned)h->ev_rate, (unsigned)h->ev_burst);
		break;
	case TP_LIMIT_NONE:
		break; /* not called */
	}
}

bool
tp_http_error(tp_http *h, CURLcode rc, bool had_session, mcp_error *e)
{
	long status = tp_http_status(h);
	char body[256];

	if (h->limit != TP_LIMIT_NONE) {
		limit_error(h, e);
		return (true);
	}
	if (rc != CURLE_OK) {
		mcp_errkind k = rc == CURLE_OPERATION_TIMEDOUT ? MCP_E_TIMEOUT
		                                               : MCP_E_CONNECT;
		if (rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR ||
		    rc == CURLE_GOT_NOTHING) {
			k = status != 0 ? MCP_E_LOST : MCP_E_CONNECT;
		}
		if (rc == CURLE_SEND_FAIL_REWIND) {
			/* (a once-POST libcurl would have sent again: its
			 * connection died after it went out, before an
			 * answer) */
			mcp_error_set(
			        e, MCP_E_CONNECT, "%s",
			        "the connection closed after the request "
			        "went out, before any answer");
			e->maybe_ran = 1;
			return (true);
		}
		if (h->sock_errno == EMFILE || h->sock_errno == ENFILE) {
			mcp_error_fd_limit(e,
			                   h->sock_errno); /* ours, not
			                                    * the server's */
			return (true);
		}
		mcp_error_set(e, k, "%s",
		              h->errbuf[0] ? h->errbuf
		                           : curl_easy_strerror(rc));
		e->http_status = (int)status;
		/* the request went out (a reply begun, or none read after
		 * it was sent): the server may have acted on it */
		e->maybe_ran = status != 0 || rc == CURLE_GOT_NOTHING ||
		        rc == CURLE_RECV_ERROR || rc == CURLE_PARTIAL_FILE ||
		        rc == CURLE_SEND_ERROR;
		return (true);
	}
	if (status >= 200 && status < 300) {
		return (false);
	}
	snippet(h, body, sizeof(body));
	if (status == 401 || status == 403) {
		mcp_error_set(e, MCP_E_AUTH, "HTTP %ld %s", status,
		              status == 401 ? "Unauthorized" : "Forbidden");
		snprintf(e->www_authenticate, sizeof(e->www_authenticate),
		         "%s", h->www_auth);
	} else if ((status == 404 && had_session) ||
	           ((status == 400 || status == 404) && gone_body(h))) {
		mcp_error_set(e, MCP_E_GONE,
		              "MCP session is gone (HTTP %ld%s%s)", status,
		              body[0] ? ": " : "", body);
	} else {
		mcp_error_set(e, MCP_E_HTTP, "HTTP %ld%s%s", status,
		              body[0] ? ": " : "", body);
	}
	e->http_status = (int)status;
	return (true);
}

struct tp_qmsg {
	json_t  *msg;  /* owned */
	tp_qmsg *next; /* FIFO */
};

static void
msgq_push(tp_msgq *q, json_t *msg)
{
	tp_qmsg *m = malloc(sizeof(*m));

	if (m == NULL) {
		json_decref(msg);
		return;
	}
	m->msg  = msg;
	m->next = NULL;
	if (q->tail != NULL) {
		q->tail->next = m;
	} else {
		q->head = m;
	}
	q->tail = m;
}

void
tp_msgq_parse(tp_msgq *q, const char *text, size_t len, size_t max)
{
	json_error_t je;
	json_t      *root;

	if (len == 0 || len > max ||
	    (root = json_loadb(text, len, 0, &je)) == NULL) {
		return;
	}
	if (json_is_array(root)) {
		size_t  i;
		json_t *m;
		json_array_foreach(root, i, m)
		{
			msgq_push(q, json_incref(m));
		}
		json_decref(root);
	} else {
		msgq_push(q, root);
	}
}

json_t *
tp_msgq_pop(tp_msgq *q)
{
	tp_qmsg *m = q->head;
	json_t  *msg;

	if (m == NULL) {
		return (NULL);
	}
	q->head = m->next;
	if (q->head == NULL) {
		q->tail = NULL;
	}
	msg = m->msg;
	free(m);
	return (msg);
}

void
tp_msgq_clear(tp_msgq *q)
{
	json_t *m;

	while ((m = tp_msgq_pop(q)) != NULL) {
		json_decref(m);
	}
}
