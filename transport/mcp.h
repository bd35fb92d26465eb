/*
 * mcp.h - an asynchronous MCP client session over stdio, Streamable HTTP
 * or legacy HTTP+SSE, driven by a tp_loop on its owner's thread.
 *
 * DESIGN: everything runs on the loop's thread; callbacks are called from
 * inside tp_loop_wait (or from mcp_session_free, with MCP_E_CANCELLED).
 * Many requests may be in flight on one session; responses are matched by
 * id, in any order.  Every request has a deadline.  A leaf: no logging,
 * errors are returned as mcp_error for the caller to log.
 *
 * Session states:
 *
 *   CONNECTING --opened--> INITIALIZING --initialize ok--> READY
 *        |                      |                            |
 *        +-------error----------+-------> FAILED <--lost-----+
 *
 * READY sends notifications/initialized before on_ready runs.  FAILED
 * fails every pending request; the owner frees the session.
 */
#ifndef TP_MCP_H
#define TP_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/error.h"
#include "transport/loop.h"

#define MCP_PROTOCOL_LATEST "2025-11-25" /* the newest with initialize */
#define MCP_PROTOCOL_MODERN "2026-07-28" /* stateless: per-request _meta */
/* The 2026-07-28 revision's own JSON-RPC errors: a server that answers
 * one speaks it (basic/index "Error Codes"). */
#define MCP_E_HEADER_MISMATCH     (-32020)
#define MCP_E_MISSING_CAPABILITY  (-32021)
#define MCP_E_UNSUPPORTED_VERSION (-32022)
#define MCP_MRTR_ROUNDS           8 /* input_required answers per request */
#define MCP_TIMEOUT_DEFAULT_MS    30000
/* Limits on a tools/list, beyond which it fails: tools, pages, and bytes
 * of the tools (as compact JSON) and page cursors together.  8 MiB keeps
 * a client's view (its tools and config) within one 16 MiB message. */
#define MCP_MAX_TOOLS       10000
#define MCP_MAX_PAGES       1000
#define MCP_MAX_TOOLS_BYTES ((size_t)8 * 1024 * 1024)
/* The other lists (prompts, resources, resource templates): items and
 * bytes each, so that all four stay within the view's message. */
#define MCP_MAX_ITEMS      10000
#define MCP_MAX_LIST_BYTES ((size_t)2 * 1024 * 1024)
/* The legacy SSE stream's rate limit: events per second on average, and
 * at once above it (a busy server's answers and progress stay far below;
 * a server stuck in a loop is cut off within seconds).  Each event is
 * also limited in size (max_message); there is no total. */
#define MCP_STREAM_RATE  10000
#define MCP_STREAM_BURST 50000

typedef enum mcp_conn_type {
	MCP_CONN_HTTP,  /* Streamable HTTP */
	MCP_CONN_SSE,   /* legacy HTTP+SSE */
	MCP_CONN_STDIO, /* a child process */
} mcp_conn_type;

/* Which era of MCP to speak.  AUTO tries the modern one first
 * (server/discover) and falls back to initialize on any answer that is
 * not a modern server's (versioning.mdx "Backward Compatibility");
 * MODERN and LEGACY are a previous session's finding, kept by the owner
 * (MODERN sends no probe: the first request goes at once). */
typedef enum mcp_era {
	MCP_ERA_AUTO = 0,
	MCP_ERA_LEGACY, /* initialize: 2025-11-25 and earlier */
	MCP_ERA_MODERN, /* 2026-07-28: stateless */
} mcp_era;

/* How to reach a server.  Copied by mcp_session_open. */
typedef struct mcp_config {
	mcp_conn_type      type;      /* transport */
	const char        *url;       /* http/sse endpoint */
	const char *const *headers;   /* "Name: value", NULL-terminated */
	const char        *ca_bundle; /* PEM file; NULL: system store */
	const char        *command;   /* stdio: program (PATH lookup) */
	const char *const *args;      /* stdio: argv[1..], NULL-terminated */
	const char *const *envs;      /* stdio: "NAME" (inherit) or
	                               * "NAME=value", NULL-terminated */
	size_t      max_message;      /* bytes per message; 0: 16 MiB */
	int         timeout_ms;       /* default per request; 0: 30 s */
	const char *client_name;      /* clientInfo.name; NULL: mcpkeep */
	const char *client_version;   /* NULL: MCPKEEP_VERSION */
	uint32_t    stream_rate;      /* sse, http GET stream: events/s;
	                               * 0: MCP_STREAM_RATE */
	uint32_t    stream_burst;     /* at once; 0: MCP_STREAM_BURST */
	const char *capabilities;     /* the client capabilities declared,
	                               * a JSON object's text; NULL: {} */
	mcp_era era;                  /* see mcp_era */
	bool    listen;               /* http: once ready, listen on the
	                               * standalone GET stream (a sticky
	                               * session; a per-call one needs none) */
} mcp_config;

typedef struct mcp_session mcp_session;

typedef enum mcp_event {
	MCP_EV_TOOLS_CHANGED,     /* notifications/tools/list_changed */
	MCP_EV_PROMPTS_CHANGED,   /* notifications/prompts/list_changed */
	MCP_EV_RESOURCES_CHANGED, /* notifications/resources/list_changed */
	MCP_EV_LOST,              /* the connection is gone (err says why) */
} mcp_event;

/* Session-level callbacks; arg is the owner's.
 *
 * request: a request of the server's the session does not answer itself
 * (it answers ping; the owner gets elicitation/create,
 * sampling/createMessage, roots/list, ...).  Returning 0 takes it: the
 * owner answers it once with mcp_respond(s, token, ...), or, when the
 * session is freed first, gone(token) runs from inside mcp_session_free.
 * Non-zero (or no request handler) refuses it at once: -32601.  params
 * are borrowed for the call.  At most MCP_INBOUND_MAX wait at once; more
 * are refused (-32603). */
typedef struct mcp_handlers {
	void (*ready)(void *arg, mcp_session *s, const mcp_error *err);
	void (*event)(void *arg, mcp_session *s, mcp_event ev,
	              const mcp_error *err);
	void *arg;
	int (*request)(void *arg, mcp_session *s, uint64_t token,
	               const char *method, json_t *params);
	void (*gone)(void *arg, mcp_session *s, uint64_t token);
	/* the server's notifications/message (logging): its level, logger
	 * ("" when none) and data as text (JSON when not a string), cut at
	 * MCP_LOG_MAX bytes; the server's words: never trust them */
	void (*log)(void *arg, mcp_session *s, const char *level,
	            const char *logger, const char *text);
} mcp_handlers;

#define MCP_LOG_MAX 1024 /* bytes of a server's log message passed on */

#define MCP_INBOUND_MAX 64 /* server requests waiting for the owner */

/* Per-request callbacks.  result is borrowed for the call; err is NULL on
 * success. */
typedef void (*mcp_result_fn)(void *arg, const mcp_error *err, json_t *result);
typedef void (*mcp_progress_fn)(void *arg, double progress, double total,
                                const char *message);

typedef struct mcp_req_opts {
	int                timeout_ms; /* 0: the session's default */
	mcp_progress_fn    progress; /* tools/call: sets _meta.progressToken */
	void              *progress_arg;
	const char *const *headers; /* extra per-request HTTP headers */
	json_t *tool; /* tools/call: the tool's definition (2026-07-28 over
	               * HTTP: its x-mcp-header parameters become headers);
	               * borrowed, may be NULL */
	const char *traceparent; /* W3C trace context for _meta (2026-07-28),
	                          * or NULL */
	const char *tracestate;
	const char *idempotency_key; /* tools/call: sent as
	                              * _meta.idempotencyKey, or NULL */
} mcp_req_opts;

/* Parsed tool annotations with the MCP defaults. */
typedef struct mcp_hints {
	bool read_only;   /* readOnlyHint, default false */
	bool destructive; /* destructiveHint, default true */
	bool idempotent;  /* idempotentHint, default false */
	bool open_world;  /* openWorldHint, default true */
} mcp_hints;

/*
 * mcp_session_open starts connecting; h->ready runs once, later, with the
 * outcome.  Returns 0, or MK_EINVAL (config), MK_ENOMEM, MK_ESYS with
 * *sp NULL (no callback will run).
 */
int mcp_session_open(mcp_session **sp, tp_loop *l, const mcp_config *cfg,
                     const mcp_handlers *h);

/*
 * mcp_session_free fails every pending request with MCP_E_CANCELLED,
 * starts the transport's graceful close (HTTP DELETE; stdio: close stdin,
 * then SIGTERM, then SIGKILL; reaped) which finishes in the loop, and
 * nulls *sp.  No callback of this session runs after it returns.
 */
void mcp_session_free(mcp_session **sp);

/* Requests.  Each returns 0 and later calls fn exactly once, or returns
 * an MK_ code (MK_EINVAL when the session is not READY) and never calls
 * fn.  *idp (may be NULL) gets the request id for mcp_cancel. */
int mcp_ping(mcp_session *s, const mcp_req_opts *o, mcp_result_fn fn,
             void *arg, int64_t *idp);
/* The lists a server may hold. */
typedef enum mcp_list_kind {
	MCP_LIST_TOOLS,     /* tools/list: "tools" */
	MCP_LIST_PROMPTS,   /* prompts/list: "prompts" */
	MCP_LIST_RESOURCES, /* resources/list: "resources" */
	MCP_LIST_TEMPLATES, /* resources/templates/list: "resourceTemplates" */
} mcp_list_kind;
#define MCP_LIST_KINDS 4
/* The method and the result's array of list kind k. */
const char *mcp_list_method(mcp_list_kind k);
const char *mcp_list_key(mcp_list_kind k);
/* result: {"<key>": [...all pages...]}, and "ttlMs" (the smallest of the
 * pages', 2026-07-28) when the server gave one; every page within the
 * limits above (tools: MCP_MAX_TOOLS, the others MCP_MAX_ITEMS). */
int mcp_list(mcp_session *s, mcp_list_kind k, const mcp_req_opts *o,
             mcp_result_fn fn, void *arg, int64_t *idp);
int mcp_list_tools(mcp_session *s, const mcp_req_opts *o, mcp_result_fn fn,
                   void *arg, int64_t *idp);
/* arguments borrowed; result is the CallToolResult as the server sent it
 * (isError, content, structuredContent kept). */
int mcp_call_tool(mcp_session *s, const char *name, json_t *arguments,
                  const mcp_req_opts *o, mcp_result_fn fn, void *arg,
                  int64_t *idp);

/* prompts/get (arguments: an object of strings, borrowed, may be NULL)
 * and resources/read; result is the server's, an object. */
int mcp_get_prompt(mcp_session *s, const char *name, json_t *arguments,
                   const mcp_req_opts *o, mcp_result_fn fn, void *arg,
                   int64_t *idp);
int mcp_read_resource(mcp_session *s, const char *uri, const mcp_req_opts *o,
                      mcp_result_fn fn, void *arg, int64_t *idp);

/* mcp_respond answers the server's request token (see mcp_handlers):
 * with result (borrowed), or when it is NULL with the JSON-RPC error
 * code and message.  0, MK_ENOENT (not waiting: answered, or never
 * taken), MK_ECLOSED (the session failed; nothing sent) or MK_ENOMEM. */
int mcp_respond(mcp_session *s, uint64_t token, json_t *result, int code,
                const char *message);

/* mcp_cancel gives up on request id: sends notifications/cancelled and
 * calls its fn with MCP_E_CANCELLED now (fn may free the session: s is
 * not to be used after, unless the caller knows it was not).  0 or
 * MK_ENOENT. */
int mcp_cancel(mcp_session *s, int64_t id, const char *reason);

/* Accessors. */
bool        mcp_session_ready(const mcp_session *s);
const char *mcp_session_version(const mcp_session *s);     /* negotiated */
json_t     *mcp_session_server_info(const mcp_session *s); /* borrowed */
/* the server's capabilities (initialize, server/discover), borrowed;
 * NULL when it gave none */
json_t  *mcp_session_server_caps(const mcp_session *s);
unsigned mcp_session_pending(const mcp_session *s);
/* during the request upcall (mcp_handlers.request): the id of this
 * session's request whose answer's stream carried it (Streamable HTTP
 * sends a server's request there when a client request caused it), or
 * 0 when it came on a stream of its own (stdio, SSE, the GET stream) */
int64_t mcp_session_cause(const mcp_session *s);

/* mcp_tool_hints reads a tool object's annotations with the defaults. */
void mcp_tool_hints(json_t *tool, mcp_hints *out);

/*
 * Idempotency keys (the MCP proposal SEP-3182, and a convention of
 * servers): a server that declares the capability tools.idempotency runs
 * the tools/call requests of one _meta.idempotencyKey once
 * (mcp_session_idempotent); a tool whose input schema has a string
 * property "idempotencyKey" or "idempotency_key" takes one in its
 * arguments (mcp_tool_key_param: that name, or NULL).
 */
bool        mcp_session_idempotent(const mcp_session *s);
const char *mcp_tool_key_param(json_t *tool);

/* mcp_session_modern: the session speaks 2026-07-28 (no initialize). */
bool mcp_session_modern(const mcp_session *s);

/* mcp_tool_headers_ok: tool's x-mcp-header annotations keep the
 * constraints of 2026-07-28's "Schema Extension" (else a client over
 * HTTP must drop the tool; why says which broke). */
bool mcp_tool_headers_ok(json_t *tool, char *why, size_t len);
/* mcp_param_headers_match: the Mcp-Param-{Name} headers a 2026-07-28
 * caller sent with a tools/call of tool with args (got: {Name: value as
 * sent}; names case-insensitive) are those tool's x-mcp-header
 * parameters make of args - each present parameter's header there with
 * its value (decoded), none for an absent one - as a server checks them
 * ("Server Validation"); false with why ("Header mismatch: ...").  A
 * tool whose annotations are invalid is not checked. */
bool mcp_param_headers_match(json_t *tool, json_t *args, json_t *got,
                             char *why, size_t len);

/* mcp_version_supported: a protocolVersion this client accepts. */
bool mcp_version_supported(const char *v);

#endif /* TP_MCP_H */
