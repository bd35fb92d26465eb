/*
 * xfer.h - one HTTP exchange with an MCP server, shared by the Streamable
 * HTTP and the legacy SSE transports: curl easy setup, header capture with
 * limits, a body kept whole (JSON, error text) or fed to the SSE parser,
 * and the mapping of outcomes to mcp_error kinds.  Internal to transport/.
 *
 * Limits on an event-stream body: each event's size (the body limit);
 * for a response (a POST's answer: progress, then the result) at most
 * TP_RESPONSE_EVENTS_MAX events in total; for a long-lived stream
 * (tp_http_stream: legacy SSE's GET) no total but a rate.
 */
#ifndef TP_XFER_H
#define TP_XFER_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>

#include "codec/sse.h"
#include "transport/error.h"
#include "transport/loop.h"

#define TP_HEADER_LINE_MAX     8192        /* bytes in one response header */
#define TP_HEADERS_MAX         (64 * 1024) /* bytes of response headers */
#define TP_ERRBODY_MAX         4096        /* bytes of a non-2xx body kept */
#define TP_RESPONSE_EVENTS_MAX 100000      /* SSE events in one response */

/* The limit that aborted an exchange. */
typedef enum tp_limit {
	TP_LIMIT_NONE,    /* none */
	TP_LIMIT_HEADERS, /* a header line, or the headers in all */
	TP_LIMIT_BODY,    /* the body kept whole */
	TP_LIMIT_EVENT,   /* one SSE line or event's data */
	TP_LIMIT_EVENTS,  /* SSE events in one response */
	TP_LIMIT_RATE,    /* SSE events per second on a stream */
} tp_limit;

typedef struct tp_http tp_http;

/* Called for each SSE event of a text/event-stream body (inside curl's
 * write callback: queue work, do not remove transfers).  Non-zero aborts
 * the transfer. */
typedef int (*tp_http_event_fn)(tp_http *h, const codec_sse_event *ev);

struct tp_http {
	tp_xfer            x;                       /* loop transfer; x.easy */
	struct curl_slist *hdrs;                    /* request headers */
	bool               own_hdrs;                /* hdrs is ours to free */
	char               errbuf[CURL_ERROR_SIZE]; /* curl's detail */
	int       sock_errno; /* why socket() failed (curl does not say) */
	size_t    max_body;   /* body limit (bytes) */
	size_t    hdr_bytes;  /* response header bytes so far */
	tp_limit  limit;      /* a limit was hit: aborted */
	uint64_t  max_events; /* SSE events in all; 0: none */
	uint32_t  ev_rate;    /* SSE events per second; 0: none */
	uint32_t  ev_burst;   /* SSE events at once above it */
	bool      sse_mode;   /* body is an event stream */
	bool      started;    /* first body byte seen */
	codec_sse sse;        /* parser (sse_mode) */
	tp_http_event_fn on_event;      /* SSE events, or NULL */
	char            *out;           /* a once-POST's body (its copy) */
	size_t           out_len;       /* its bytes */
	size_t           out_off;       /* read by libcurl so far */
	char            *body;          /* kept body (not sse_mode) */
	size_t           body_len;      /* bytes in body */
	size_t           body_cap;      /* allocated body */
	char content_type[128];         /* response Content-Type, lowercase */
	char session_id[256];           /* Mcp-Session-Id response header */
	char www_auth[MCP_WWWAUTH_MAX]; /* WWW-Authenticate */
};

/*
 * tp_http_init sets up h->x.easy for url with the given headers ("Name:
 * value"; taken over when own, else borrowed and must outlive h), a total
 * timeout (0: none, for streams), ca_bundle (NULL: system) and the body
 * limit.  done is the loop's completion callback.  Returns 0 or
 * MK_ENOMEM.
 */
int tp_http_init(tp_http *h, const char *url, struct curl_slist *hdrs,
                 bool own, int timeout_ms, const char *ca_bundle,
                 size_t max_body, void (*done)(tp_xfer *, CURLcode));

/*
 * tp_http_stream makes h a long-lived event stream: no total of events,
 * but at most rate events per second on average and burst at once
 * (both non-zero, rate at most 10^9).  Call it before the exchange
 * starts.
 */
void tp_http_stream(tp_http *h, uint32_t rate, uint32_t burst);

/*
 * tp_http_rearm readies a finished exchange for another request to the
 * same URL, keeping its curl handle (and curl's state with it): new
 * headers (as in init) and timeout; the response state is cleared.
 * Returns 0 or MK_ENOMEM.
 */
int tp_http_rearm(tp_http *h, struct curl_slist *hdrs, bool own,
                  int timeout_ms);

/* tp_http_post makes h a POST of json (copied) and starts it in l.
 * Returns 0 or MK_ENOMEM. */
int tp_http_post(tp_http *h, tp_loop *l, const char *json, size_t len);

/*
 * tp_http_post_once is tp_http_post for a request not safe to run twice:
 * libcurl never sends it twice.  (libcurl sends a request again, unasked,
 * when the kept-alive connection it reused dies before any answer - one
 * the server may have run.)  The body is read through a callback that
 * cannot rewind, so that resend fails instead (CURLE_SEND_FAIL_REWIND:
 * the outcome is unknown); and only a connection used within the last
 * second is reused, one that no server's idle timeout has closed in
 * between, so that this stays rare.  A hot client's calls reuse its
 * connections; before, each opened its own.
 */
int tp_http_post_once(tp_http *h, tp_loop *l, const char *json, size_t len);

/* tp_http_fini frees h's resources (after it left the loop). */
void tp_http_fini(tp_http *h);

/* tp_http_status is the response code, 0 if none. */
long tp_http_status(tp_http *h);

/*
 * tp_http_error describes a finished exchange that did not succeed: the
 * curl result, the HTTP status (401/403 auth, 404 or a session-gone body
 * when had_session, other non-2xx), or a limit (MCP_E_PROTOCOL, its
 * message naming the limit and its value).  Returns false when the
 * exchange succeeded (2xx, CURLE_OK) and leaves e alone.
 */
bool tp_http_error(tp_http *h, CURLcode rc, bool had_session, mcp_error *e);

/* A FIFO of parsed incoming messages, filled inside curl callbacks and
 * emptied from a deferred step of the loop. */
typedef struct tp_qmsg tp_qmsg;
typedef struct tp_msgq {
	tp_qmsg *head; /* oldest */
	tp_qmsg *tail; /* newest */
} tp_msgq;

/* tp_msgq_parse parses one JSON text (a message, or a batch of them) onto
 * q.  Text that is not JSON or exceeds max is dropped: the request it
 * answered then fails as unanswered. */
void tp_msgq_parse(tp_msgq *q, const char *text, size_t len, size_t max);

/* tp_msgq_pop takes the oldest message (the caller owns it), or NULL. */
json_t *tp_msgq_pop(tp_msgq *q);

/* tp_msgq_clear drops everything queued. */
void tp_msgq_clear(tp_msgq *q);

/* tp_slist_add appends "name: value" lines; NULL list on failure (the
 * old list is freed). */
struct curl_slist *tp_slist_add(struct curl_slist *l, const char *line);
struct curl_slist *tp_slist_addv(struct curl_slist *l,
                                 const char *const *lines);

#endif /* TP_XFER_H */
