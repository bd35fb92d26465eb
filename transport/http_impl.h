/*
 * http_impl.h - the Streamable HTTP transport's private state, shared by
 * its files: http.c (the conn, its POSTs, delivery, close) and resume.c
 * (streams that break off and resume, the standalone GET stream).
 * Everything here runs on the loop's thread.
 */
#ifndef TP_HTTP_IMPL_H
#define TP_HTTP_IMPL_H

#include <stdbool.h>
#include <stdint.h>

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
	tp_conn   base;              /* ops, loop, upcalls */
	tp_web    web;               /* endpoint, CA, headers, limit */
	char      session_id[256];   /* Mcp-Session-Id, "" before init */
	char      version[32];       /* MCP-Protocol-Version, "" before */
	post     *posts;             /* POSTs in flight */
	tp_defer  defer;             /* delivers queued messages */
	tp_owned  owned;             /* while closing: the loop owns us */
	post     *deleting;          /* the DELETE in flight */
	post     *listen;            /* the standalone GET stream, or NULL */
	int       listen_backoff;    /* ms: the next wait after a failure */
	bool      listen_off;        /* the server offers no GET stream */
	bool      modern;            /* 2026-07-28: no session, no resuming */
	uint32_t  stream_rate;       /* the GET stream's events/s */
	uint32_t  stream_burst;      /* and at once */
	unsigned  nwaiting;          /* posts waiting to resume */
	tp_ticker ticker;            /* their resume_at */
	struct curl_slist *req_hdrs; /* every request's headers, built once
	                              * per session id / version */
	struct curl_slist **retired; /* older req_hdrs, still borrowed by
	                              * POSTs in flight; freed at the end */
	unsigned nretired;           /* entries in retired */
	post    *spare;              /* finished POSTs kept for reuse */
	unsigned nspare;             /* entries in spare */
	unsigned nposts;             /* POSTs in flight */
	unsigned peak;               /* most POSTs in flight at once: the
	                              * spares kept (an idle client keeps
	                              * few curl handles and their buffers) */
	int  busy;                   /* upcalls on the stack */
	bool closed;                 /* close() was called */
};

/* http.c */
void               http_link(http_conn *c, post *p);
void               http_unlink(http_conn *c, post *p);
int                http_on_event(tp_http *h, const codec_sse_event *ev);
bool               http_deliver(http_conn *c, post *p);
void               http_post_done(tp_xfer *x, CURLcode rc);
void               http_post_destroy(post *p);
void               http_post_free(http_conn *c, post *p);
void               http_settle(http_conn *c);
struct curl_slist *http_headers(http_conn *c, bool body,
                                const char *const *extra);

/* resume.c */
bool    http_may_resume(http_conn *c, post *p, bool failed, mcp_error *e);
void    http_resume_failed(const post *p, mcp_error *e);
void    http_listen_done(http_conn *c, post *p, CURLcode rc);
void    http_listen(tp_conn *base);
int64_t http_ticker_next(void *arg);
void    http_ticker_expire(void *arg, int64_t now);

#endif /* TP_HTTP_IMPL_H */
