/*
 * conn.h - what a transport offers the MCP session, and what it tells the
 * session back.  Internal to transport/.
 *
 * A conn carries JSON-RPC messages both ways over one of the three MCP
 * transports.  All calls and upcalls happen on the loop's thread.  After
 * ops->close() the session hears nothing more; the conn finishes its
 * graceful close (DELETE, child reaping) on its own and frees itself.
 */
#ifndef TP_CONN_H
#define TP_CONN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "transport/error.h"
#include "transport/loop.h"
#include "transport/mcp.h"

typedef struct tp_conn tp_conn;

/* Upcalls into the session. */
typedef struct tp_conn_up {
	/* ready to send (stdio: spawned; sse: endpoint known; http: now),
	 * or failed to become so (err set) */
	void (*opened)(void *arg, const mcp_error *err);
	/* one incoming JSON-RPC message; borrowed for the call.  cause: the
	 * id of the request whose answer's stream carried it (http), or 0 */
	void (*message)(void *arg, json_t *msg, int64_t cause);
	/* sending request id failed, or its answer can no longer come */
	void (*failed)(void *arg, int64_t id, const mcp_error *err);
	/* the whole connection is gone (stream closed, child exited) */
	void (*lost)(void *arg, const mcp_error *err);
	void *arg;
} tp_conn_up;

typedef struct tp_conn_ops {
	/* sends one serialized message; id is 0 for a notification.
	 * headers: extra "Name: value" lines for this request (http/sse),
	 * NULL-terminated, may be NULL.  Returns 0 or an MK_ code; the
	 * outcome otherwise arrives by upcall. */
	int (*send)(tp_conn *c, int64_t id, const char *json, size_t len,
	            int timeout_ms, const char *const *headers);
	/* gives up on request id: stop its transfer if it has one */
	void (*abort)(tp_conn *c, int64_t id);
	/* the negotiated MCP protocol version, sent from now on */
	void (*set_version)(tp_conn *c, const char *version);
	/* opens the stream of the server's own messages, when the transport
	 * has one apart from the answers (http: the GET stream); NULL when
	 * every message already comes on one stream (sse, stdio) */
	void (*listen)(tp_conn *c);
	/* starts the graceful close; see above */
	void (*close)(tp_conn *c);
} tp_conn_ops;

struct tp_conn {
	const tp_conn_ops *ops;  /* the transport's */
	tp_loop           *loop; /* where it runs */
	tp_conn_up         up;   /* the session's upcalls */
	bool once; /* the next send is not safe to send twice: libcurl
	            * must never send it again (http, sse:
	            * tp_http_post_once) */
};

/* What the two HTTP transports take from their config alike. */
typedef struct tp_web {
	char              *url;       /* the endpoint (sse: the GET's) */
	char              *ca_bundle; /* or NULL */
	struct curl_slist *headers;   /* per-connection headers, or NULL */
	size_t             max_body;  /* bytes per message */
} tp_web;

/* Fills w from cfg (its url set).  Returns 0 or MK_ENOMEM; either way
 * tp_web_fini frees it. */
int  tp_web_init(tp_web *w, const mcp_config *cfg);
void tp_web_fini(tp_web *w);

int tp_http_open(tp_conn **cp, tp_loop *l, const mcp_config *cfg,
                 const tp_conn_up *up);
int tp_sse_open(tp_conn **cp, tp_loop *l, const mcp_config *cfg,
                const tp_conn_up *up);
int tp_stdio_open(tp_conn **cp, tp_loop *l, const mcp_config *cfg,
                  const tp_conn_up *up);

#endif /* TP_CONN_H */
