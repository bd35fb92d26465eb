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
#include "transport/conn.h"
#include "transport/mcp.h"

typedef enum sstate {
	ST_CONNECTING,   /* the transport is opening */
	ST_INITIALIZING, /* initialize sent */
	ST_READY,        /* requests allowed */
	ST_FAILED,       /* closed or failed: nothing more happens */
} sstate;

typedef enum pkind {
	P_INIT, /* initialize */
	P_PING, /* ping */
	P_LIST, /* tools/list, possibly one of several pages */
	P_CALL, /* tools/call */
} pkind;

/* A request waiting for its answer. */
typedef struct pend {
	int64_t         id;         /* JSON-RPC id (also the progressToken) */
	pkind           kind;       /* what it is */
	int64_t         deadline;   /* monotonic ns */
	int             timeout_ms; /* what the deadline came from */
	mcp_result_fn   fn;         /* completion */
	void           *arg;        /* completion argument */
	mcp_progress_fn progress;   /* tools/call progress, or NULL */
	void           *parg;       /* progress argument */
	json_t         *tools;      /* P_LIST: tools gathered so far */
	unsigned        pages;      /* P_LIST: pages fetched */
	size_t          bytes;      /* P_LIST: bytes of tools and cursors */
	json_t         *cursors;    /* P_LIST: cursors seen (object keys) */
	char          **headers; /* P_LIST: per-request headers, for pages */
} pend;

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
	int          depth;       /* upcalls in progress on the stack */
	int          doomed;      /* freed during an upcall: free at depth 0 */
	bool         listen;      /* open the server's stream once ready */
	json_t      *caps;        /* client capabilities declared */
	idmap        inbound;     /* token -> the server request's id */
	uint64_t     next_token;  /* last token given out */
};

/* session_pend_free frees p (out of the table, not completed). */
void session_pend_free(pend *p);

/* session_complete calls p's fn with err or result (borrowed) and frees
 * p, which is already out of the table. */
void session_complete(mcp_session *s, pend *p, const mcp_error *err,
                      json_t *result);

/* session_method_of: the JSON-RPC method of a request of kind k. */
const char *session_method_of(pkind k);

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

#endif /* TP_SESSION_IMPL_H */
