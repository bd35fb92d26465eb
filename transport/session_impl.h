/*
 * session_impl.h - the MCP session's private state, shared by its files:
 * session.c (lifetime, the pending-request table, deadlines, incoming
 * messages, initialize) and request.c (ping, tools/list and its paging,
 * tools/call, cancel, tool hints).  Everything here runs on the loop's
 * thread (mcp.h) and never blocks.
 */
#ifndef TP_SESSION_IMPL_H
#define TP_SESSION_IMPL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "codec/idmap.h"
#include "codec/jsonrpc.h"
#include "transport/conn.h"
#include "transport/mcp.h"

typedef enum sstate {
	ST_CONNECTING,   /* the transport is opening */
	ST_INITIALIZING, /* initialize sent */
	ST_READY,        /* requests allowed */
	ST_FAILED,       /* closed or failed: nothing more happens */
} sstate;

typedef enum pkind {
	P_INIT,     /* initialize */
	P_PING,     /* ping (2026-07-28: server/discover) */
	P_LIST,     /* a list (pend.list), possibly one of several pages */
	P_CALL,     /* tools/call, prompts/get, resources/read (pend.method) */
	P_DISCOVER, /* server/discover: which era the server speaks */
	P_LISTEN,   /* subscriptions/listen (2026-07-28): no deadline */
} pkind;

/* A request waiting for its answer. */
typedef struct pend {
	int64_t         id;         /* JSON-RPC id (also the progressToken) */
	pkind           kind;       /* what it is */
	const char     *method;     /* P_CALL: its method (static) */
	mcp_list_kind   list;       /* P_LIST: which */
	int64_t         deadline;   /* monotonic ns */
	int             timeout_ms; /* what the deadline came from */
	mcp_result_fn   fn;         /* completion */
	void           *arg;        /* completion argument */
	mcp_progress_fn progress;   /* tools/call progress, or NULL */
	void           *parg;       /* progress argument */
	json_t         *items;      /* P_LIST: items gathered so far */
	unsigned        pages;      /* P_LIST: pages fetched */
	size_t          bytes;      /* P_LIST: bytes of items and cursors */
	json_t         *cursors;    /* P_LIST: cursors seen (object keys) */
	char          **headers; /* P_LIST: per-request headers, for pages */
	json_t         *params;  /* what it was last sent with (a page's,
	                          * a retry's), for a resend */
	json_t *tool;            /* P_CALL: the tool's definition, or NULL */
	char   *trace[2];        /* traceparent, tracestate, or NULL */
	int64_t ttl_ms;          /* P_LIST: the smallest ttlMs, or -1 */
	bool    reissued;        /* 2026-07-28: resent once after its
	                          * stream broke */
	unsigned rounds;         /* input_required answers so far */
	unsigned inputs;         /* its input requests the owner has */
	json_t  *responses;      /* their answers, by key */
	json_t  *state;          /* the server's requestState, or NULL */
	bool     handing;        /* its inputs are being handed out */
	char    *refused;        /* meanwhile one was refused: why */
} pend;

/* A server request the owner answers (mcp_respond): a JSON-RPC request
 * of the server's (id), or one input of an input_required result (p,
 * key). */
typedef struct inbound {
	json_t *id;  /* the server's request id, or NULL */
	pend   *p;   /* the request waiting for the input, or NULL */
	char   *key; /* the input's key in inputRequests */
} inbound;

struct mcp_session {
	sstate       st;          /* see mcp.h */
	tp_loop     *loop;        /* where everything runs */
	tp_conn     *conn;        /* the transport */
	mcp_handlers h;           /* owner's callbacks */
	int          timeout_ms;  /* default request timeout */
	size_t       max_message; /* bytes per message */
	char        *client_name; /* clientInfo */
	char        *client_version;
	int64_t      next_id;     /* last request id used */
	idmap        pending;     /* id -> pend */
	tp_ticker    ticker;      /* request deadlines */
	char         version[16]; /* negotiated protocolVersion */
	json_t      *server_info; /* serverInfo from initialize */
	json_t      *server_caps; /* and its capabilities */
	int          depth;       /* upcalls in progress on the stack */
	int64_t      cause;       /* mcp_session_cause, during a request */
	int          doomed;      /* freed during an upcall: free at depth 0 */
	bool         listen;      /* open the server's stream once ready */
	json_t      *caps;        /* client capabilities declared */
	idmap        inbound;     /* token -> inbound */
	uint64_t     next_token;  /* last token given out */
	mcp_era      era;         /* asked for; then found */
	bool         modern;      /* speaking 2026-07-28 */
	bool         http;        /* over Streamable HTTP (headers) */
	int64_t      relisten_at; /* subscriptions/listen again then, or 0 */
	int          listen_wait; /* ms before the next one after a failure */
	int64_t      listen_id;   /* the subscriptions/listen request's id */
};

/* session_pend_free frees p (out of the table, not completed). */
void session_pend_free(pend *p);

/* session_complete calls p's fn with err or result (borrowed) and frees
 * p, which is already out of the table. */
void session_complete(mcp_session *s, pend *p, const mcp_error *err,
                      json_t *result);

/* session_method_of: the JSON-RPC method of request p. */
const char *session_method_of(const pend *p);

/* session_send_request gives p its id and deadline, enters it in the
 * table and sends it with params (borrowed) and headers.  Returns 0 or
 * an MK_ code (p then out of the table, the caller's). */
int session_send_request(mcp_session *s, pend *p, json_t *params,
                         const char *const *headers);

/* session_send_notification sends method with params (borrowed), best
 * effort. */
void session_send_notification(mcp_session *s, const char *method,
                               json_t *params);

/* session_on_page takes a tools/list page (request.c): p is out of the
 * table; it is entered again for the next page, or completed. */
void session_on_page(mcp_session *s, pend *p, json_t *result);

/* session_finish_upcall: after an upcall, a free requested inside it
 * (mcp_session_free from a callback) happens now. */
void session_finish_upcall(mcp_session *s);

/* session_ready: the session is READY; tells the owner. */
void session_ready(mcp_session *s);

/* session_initialize sends initialize (the legacy era). */
void session_initialize(mcp_session *s);

/* session_fail: the session cannot go on (fails every request). */
void session_fail(mcp_session *s, const mcp_error *err);

/* inbound.c: the server's request m (ping answered; the rest the
 * owner's, see mcp_handlers), its log message (params of
 * notifications/message) */
void session_on_request(mcp_session *s, codec_jr_msg *m);
void session_on_log(mcp_session *s, json_t *params);

/* session_answer sends the answer to the server's request id: result
 * (borrowed), or the error code and message. */
int session_answer(mcp_session *s, json_t *id, json_t *result, int code,
                   const char *message);

/* ---- modern.c: the 2026-07-28 revision ---- */

/* modern_params: params (borrowed, may be NULL) with the per-request
 * _meta added (a new object), or NULL. */
json_t *modern_params(const mcp_session *s, json_t *params,
                      const char *traceparent, const char *tracestate);

/* modern_headers: the HTTP headers of a request - Mcp-Method, Mcp-Name,
 * the tool's Mcp-Param-* - then extra; a NULL-terminated malloc'd
 * vector (text_strv_free), or NULL. */
char **modern_headers(const char *method, json_t *params, json_t *tool,
                      const char *const *extra);

/* modern_error: code is one only a 2026-07-28 server sends. */
bool modern_error(int64_t code);

/* modern_probe_result / modern_probe_error: server/discover's answer
 * decides the era: READY (modern), initialize (legacy), or a failure. */
void modern_probe_result(mcp_session *s, json_t *result);
void modern_probe_error(mcp_session *s, const mcp_error *err);

/* modern_input_required: a tools/call answered input_required: its
 * inputs go to the owner (p back in the table meanwhile, under its
 * deadline); the retry follows their answers. */
void modern_input_required(mcp_session *s, pend *p, json_t *result);

/* modern_input_answered: the owner's answer to an input (ib out of the
 * table, freed here; result NULL: refused, message why). */
void modern_input_answered(mcp_session *s, inbound *ib, json_t *result,
                           const char *message);

/* modern_drop_inputs: p ends: its inputs the owner still has are gone. */
void modern_drop_inputs(mcp_session *s, pend *p);

/* modern_listen / modern_listen_ended: subscriptions/listen, opened
 * once ready and again (after a wait) when it ends. */
void modern_listen(mcp_session *s);
void modern_listen_ended(mcp_session *s);

/* modern_ours: a notification's subscriptionId, when it has one, names
 * this session's subscriptions/listen. */
bool modern_ours(const mcp_session *s, json_t *params);

#endif /* TP_SESSION_IMPL_H */
