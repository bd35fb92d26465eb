/*
 * daemon.h - the parts of `mcpkeep serve`, split by concern:
 *   serve.c    options, boot, reload, signals, drain
 *   http.c     the libmicrohttpd server: admission, budgets, lanes
 *   auth.c     who may call: the tokens, virtual keys, a request's caller
 *   limits.c   each virtual key's limits, every call's accounting
 *   answer.c   a request's headers and query, the answers
 *   routes.c   the one table of method, path, lane, auth and handler
 *   page.c     the status page and its CSP, the probes
 *   clients.c  the client views, what a virtual key reaches, the list,
 *              the admin API's client handlers
 *   flows.c    the credential flows' handlers
 *   calls.c    tool calls
 *   metrics.c  GET /metrics
 *   events.c   GET /api/events: the state stream as Server-Sent Events
 *   gateway/   /mcp: the daemon as one MCP server (gateway/gateway.h)
 * The daemon embeds the runtime through include/mcpkeep.h only.
 */
#ifndef CLI_DAEMON_H
#define CLI_DAEMON_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "mcpkeep.h"

#define BODY_MAX (1024 * 1024) /* bytes of a request body */
#define WORKERS  4             /* threads per lane */

/* Work waits in lanes, each with its own workers and budget, so that
 * none starves another: the admin API (a reconnect can block for a
 * whole connect, 30 s), the data plane (tool calls and a caller's own
 * credential flows: key holders), the operator's probes, and the OAuth
 * callback (anyone's: its state is the credential). */
enum {
	LANE_ADMIN,    /* the admin API */
	LANE_DATA,     /* tool calls, a caller's own credential flows */
	LANE_PROBE,    /* /readyz, /metrics, the client metadata */
	LANE_CALLBACK, /* the anonymous OAuth callback */
	LANES,
	LANE_INLINE = -1
};

/* Who may call a route. */
typedef enum auth {
	AUTH_OPEN,    /* anyone: the page, /healthz, /readyz, the OAuth
	               * callback (its state is the credential) */
	AUTH_METRICS, /* server.metrics_token (or the admin token) when
	               * one is set, else anyone */
	AUTH_READ,    /* the admin, or any virtual key (its clients) */
	AUTH_CALL,    /* the admin, or a key allowing the client; nobody
	               * else unless on loopback with no keys configured */
	AUTH_MCP,     /* AUTH_CALL, the key also as a bearer token (an MCP
	               * client's way); refusals are JSON-RPC errors */
	AUTH_ADMIN,   /* the admin token (anyone on loopback when none) */
} auth_t;

/* A virtual key (server.virtual_keys): its value is kept only as a
 * SHA-256 digest, compared in constant time. */
typedef struct vkey {
	char         *name;     /* the identity of its calls (mode vk) */
	unsigned char hash[32]; /* SHA-256 of the value */
	json_t       *clients;  /* client name (or "*") -> tools or ["*"] */
	bool          trust;    /* trust_identity_headers */
	double        rate;     /* calls_per_second, 0: no limit */
	double        burst;    /* its bucket's size */
	int           inflight; /* max_calls_in_flight, 0: no limit */
} vkey;

typedef struct req    req;
typedef struct route  route;
typedef struct keyset keyset; /* the virtual keys in use (auth.c) */

/* A handler: id is the path's {id} segment, or NULL; body the JSON
 * object sent, or NULL. */
typedef void (*handler_fn)(req *r, const char *id, json_t *body);

struct route {
	const char *method; /* GET, POST, PUT, DELETE */
	const char *path;   /* "*" stands for one {id} segment */
	int         lane;   /* LANE_*, or LANE_INLINE: never blocks */
	auth_t      auth;
	handler_fn  fn;
	bool        direct; /* counted on its lane, but runs at once on
	                     * libmicrohttpd's thread (no worker hop): it
	                     * hands the request to an actor and is answered
	                     * from the completion; what would block there,
	                     * it hands to a worker (http_to_worker) */
};

/* A request in the works. */
struct req {
	struct MHD_Connection *conn;
	const route           *route;
	char                  *method; /* GET, POST, ... */
	char                  *path;   /* without the query */
	char                  *query;  /* after '?', or "" */
	char                  *body;   /* what came, NUL-terminated */
	size_t                 len;    /* its length */
	size_t                 cap;    /* its allocation */
	size_t                 over;   /* bytes dropped past BODY_MAX */
	char                  *id;     /* the path's {id} (malloc'd) */
	/* the caller */
	bool           admin;      /* holds the admin token (or none is set) */
	const vkey    *key;        /* the virtual key it presented, or NULL */
	struct keyset *keys;       /* the set key lives in (held) */
	char          *id_user;    /* X-MCP-User-Id, when honoured */
	char          *id_session; /* X-MCP-Session-Id, when honoured */
	char          *bearer;     /* a token-exchange subject (secret) */
	char          *trace[2];   /* a tool call's traceparent, tracestate */
	char          *session_out; /* an Mcp-Session-Id to answer, or NULL */
	bool           mcp_modern;  /* a 2026-07-28 request on /mcp */
	/* its progress */
	int         phase;     /* http.c's */
	int         lane;      /* the budget it counts against, or -1 */
	bool        busy;      /* refused for a budget: Retry-After */
	bool        boot;      /* /readyz while booting: Retry-After */
	bool        close;     /* its connection closes after the answer */
	bool        suspended; /* waits for a worker or a callback */
	bool        answered;  /* a response is queued */
	int64_t     t0;        /* arrival, monotonic ns (access log) */
	struct sub *sub;       /* GET /api/events: the subscriber */
	json_t     *parsed; /* its body, handed to a worker (http_to_worker) */
	bool        on_worker; /* runs on a worker */
	struct req *next;      /* lane queue */
};

/* What every part reads: set at start, some of it by a reload. */
typedef struct daemon {
	mk_runtime     *rt;
	pthread_mutex_t mtx;           /* guards what follows (and http.c's) */
	pthread_cond_t  cv;            /* a request answered (the drain) */
	char           *token;         /* the admin token, or NULL (secret) */
	char           *metrics_token; /* or NULL (secret) */
	vkey           *keys;          /* server.virtual_keys */
	json_t *client_metadata; /* GET /oauth/client-metadata.json, or NULL
	                          * (server.client_metadata_url; at start) */
	size_t   nkeys;
	bool     loopback;   /* serving a loopback address only */
	bool     booting;    /* until the boot logged its outcome */
	uint64_t reloads[2]; /* SIGHUPs applied, refused */
} daemon_t;

extern daemon_t D;

/* http.c */
typedef struct http_opts {
	const char  *listen;     /* host:port */
	const char **origins;    /* server.allowed_origins, NULL-terminated */
	int          max[LANES]; /* requests in the works per lane */
	int          conns;      /* connections at once */
	int          conns_ip;   /* ... from one address */
	int          idle_s;     /* idle connections closed after */
	int          header_s;   /* a request's headers whole within */
	int          body_s;     /* its body within, after its headers */
} http_opts;

int  http_start(const http_opts *o, char *err, size_t errlen);
void http_quiesce(void); /* stop accepting */
/* http_to_worker: a direct route's handler, on libmicrohttpd's thread,
 * hands r (its body kept) to its lane's workers, which run the handler
 * again; true when handed (or answered: the daemon is stopping), false
 * when r already runs on a worker (the handler goes on). */
bool http_to_worker(req *r, json_t *body);
int  http_drain(int ms); /* waits for answers; returns those left */
void http_stop(void);    /* after the runtime closed */
void http_stats(uint64_t *requests, int *inflight, uint64_t *busy);
void http_answered(req *r); /* counted out (a stream) */

/* conns.c: deadlines for a request's headers and body, each address's
 * share, the reserve (see its DESIGN).  libmicrohttpd takes conns +
 * CONNS_RESERVE connections, conns_ip + CONNS_RESERVE_IP from one
 * address; the ones past the shares serve the admin token and loopback
 * probes only.  conns_notify is libmicrohttpd's notify-connection
 * callback; the others are called from its threads with a connection it
 * holds.  Never block but on a short lock. */
#define CONNS_RESERVE    32           /* slots past --max-connections */
#define CONNS_RESERVE_IP 8            /* ... past --max-connections-per-ip */
int  conns_start(const http_opts *o); /* the sweeper: 0 or errno */
void conns_stop(void);                /* after libmicrohttpd stopped */
void conns_notify(void *cls, struct MHD_Connection *c, void **ctx,
                  enum MHD_ConnectionNotificationCode code);
void conns_headers_in(struct MHD_Connection *c, bool body);
void conns_body_in(struct MHD_Connection *c);
void conns_request_done(struct MHD_Connection *c);
/* whether c took a reserve slot; *loopback: it comes from loopback */
bool conns_reserved(struct MHD_Connection *c, bool *loopback);
void conns_stats(uint64_t *late, uint64_t *evicted);

/* answer.c */
void answer(req *r, unsigned status, const char *ctype, const char *body);
void answer_json(req *r, unsigned status, json_t *j);
void answer_error(req *r, unsigned status, const char *msg);
/* answer_rpc_error: a JSON-RPC error answer to request id (NULL: null) */
void     answer_rpc_error(req *r, unsigned status, json_t *id, int code,
                          const char *msg);
void     answer_api(req *r, int rc, char *err, unsigned ok, json_t *j);
unsigned answer_status_of(int rc);
/* http_header: r's header name (libmicrohttpd's memory, r's lifetime),
 * NULL when absent or empty; http_header_dup a malloc'd copy.  Never
 * block; libmicrohttpd's threads, while r is being admitted. */
const char *http_header(const req *r, const char *name);
char       *http_header_dup(const req *r, const char *name);
/* The request's headers whose names start with prefix (any case), as
 * {the rest of the name: value} (new reference; NULL: out of memory). */
json_t *http_headers_with(const req *r, const char *prefix);
/* http_field: the string field key of body (a request's JSON object),
 * body's memory, or NULL.  Never blocks; a handler's worker. */
const char *http_field(json_t *body, const char *key);
int64_t     answer_mono_ns(void);

/* auth.c */
int  auth_keys_set(const char *vkeys_json, char *err, size_t errlen);
void auth_keys_free(vkey *keys, size_t n);
/* auth_keys_release drops a hold on ks (NULL: none), freeing it with the
 * last; takes D.mtx briefly.  Any thread (libmicrohttpd's when a request
 * ends). */
void auth_keys_release(keyset *ks);
/* auth_keys_ensure sets an empty set when none is set yet (0, or MK_ENOMEM
 * with err); auth_keys_stop drops the set in use.  Never block; the main
 * thread, at http_start and http_stop. */
int  auth_keys_ensure(char *err, size_t errlen);
void auth_keys_stop(void);
/* auth_keys_grants: the keys in use hold the key of digest hash, with
 * clients as its grants.  Takes D.mtx briefly; any thread. */
bool auth_keys_grants(const unsigned char hash[32], const json_t *clients);
/* auth_keys_holds: the keys in use hold the key of digest hash;
 * auth_keys_clients its grants now (a copy: json_decref), NULL when none holds
 * it.  Take D.mtx briefly; any thread. */
bool    auth_keys_holds(const unsigned char hash[32]);
json_t *auth_keys_clients(const unsigned char hash[32]);
/* http_caller decides who calls r (the admin token, a virtual key, or
 * nobody), as r's route allows: false when it answered r (refused).
 * *ks holds the key set r->key lives in (auth_keys_release).  Takes D.mtx
 * briefly, never blocks; libmicrohttpd's threads, at admission. */
bool http_caller(req *r, keyset **ks);

/* limits.c: each virtual key's calls per second (a token bucket of
 * burst, refilled at calls_per_second) and calls in flight, kept by
 * key name across reloads.  limits_take admits one call of r's key (0;
 * none: always) or says why not (LIMIT_RATE: *retry_ms until a token;
 * LIMIT_INFLIGHT), counting the refusal; limits_done ends an admitted
 * one.  limits_metrics appends their series.  Any thread, never block
 * but on a short lock. */
enum { LIMIT_OK, LIMIT_RATE, LIMIT_INFLIGHT };
int  limits_take(const vkey *k, int64_t *retry_ms);
void limits_done(const char *name); /* the key's name, or NULL */
/* limits_why: the refusal's text for key k (buf) */
const char *limits_why(const vkey *k, int limit, int64_t retry_ms, char *buf,
                       size_t len);
/* limits_usage_record counts one call of caller (call_caller) to client's
 * tool with its outcome and
 * duration; limits_metrics writes the limits' and the calls' series */
enum {
	USAGE_OK,
	USAGE_TOOL_ERROR,
	USAGE_UPSTREAM_ERROR,
	USAGE_AUTH_REQUIRED,
	USAGE_REFUSED,
	USAGE_CANCELLED, /* its caller gave it up */
	USAGE_OUTCOMES
};
void        limits_usage_record(const char *caller, const char *client,
                                const char *tool, int outcome, double ms);
const char *limits_outcome_name(int outcome);
void        limits_metrics(FILE *f);

/* routes.c */
const route *route_find(const char *method, const char *path, char **id,
                        bool *other_method);

/* The handlers of the table (handler_fn): each answers r once.  They run
 * on a worker of their route's lane, and may block there (the runtime's
 * calls); a LANE_INLINE one, and a direct one, runs on libmicrohttpd's
 * thread and never blocks. */

/* page.c: GET / (inline), /healthz (inline), /readyz (probe lane: asks
 * the runtime's stats, up to 2 s) */
int         page_init(void); /* the status page's CSP */
const char *page_csp(void);
void        route_page(req *r, const char *id, json_t *body);
void        route_healthz(req *r, const char *id, json_t *body);
void        route_client_metadata(req *r, const char *id, json_t *body);
void        route_readyz(req *r, const char *id, json_t *body);

/* clients.c: the list (a key's clients only), add and update, remove,
 * and reconnect / disable / enable / refresh-tools by the path's last
 * part; admin lane */
bool clients_key_allows(const vkey *k, const char *client, const char *tool);
/* clients_grants_allow: clients_key_allows of a key's grants (NULL: every
 * client) */
bool clients_grants_allow(const json_t *grants, const char *client,
                          const char *tool);
/* clients_view_allows: whether client view c's tools_to_execute allows tool */
bool        clients_view_allows(const json_t *c, const char *tool);
json_t     *clients_all(bool metrics); /* every view (new reference) */
const char *clients_name(const json_t *view);
/* route_key_refuses: true (answered 403) when r's virtual key may not
 * reach client id (and tool, when not NULL); blocks on the runtime's
 * list to resolve an id.  A handler's worker. */
bool route_key_refuses(req *r, const char *id, const char *tool);
void route_clients_list(req *r, const char *id, json_t *body);
void route_status(req *r, const char *id, json_t *body);
void route_client_history(req *r, const char *id, json_t *body);
void route_client_tool_versions(req *r, const char *id, json_t *body);
void route_calls(req *r, const char *id, json_t *body);
void route_tools_approve(req *r, const char *id, json_t *body);
void route_tools_reject(req *r, const char *id, json_t *body);
void route_client_write(req *r, const char *id, json_t *body);
void route_client_remove(req *r, const char *id, json_t *body);
void route_lifecycle(req *r, const char *id, json_t *body);

/* inputs.c: the servers' requests waiting for a person (admin lane) */
void route_inputs_list(req *r, const char *id, json_t *body);
void route_input_answer(req *r, const char *id, json_t *body);

/* flows.c: reauthorize and initiate-verification, complete-oauth,
 * verify-headers, verify-exchange and the OAuth callback (admin lane);
 * submit-headers and user-oauth (data lane) */
void route_authorize(req *r, const char *id, json_t *body);
void route_complete_oauth(req *r, const char *id, json_t *body);
void route_verify_headers(req *r, const char *id, json_t *body);
void route_verify_exchange(req *r, const char *id, json_t *body);
void route_oauth_callback(req *r, const char *id, json_t *body);
void route_submit_headers(req *r, const char *id, json_t *body);
void route_user_oauth(req *r, const char *id, json_t *body);

/* calls.c: POST /api/mcp/tool/execute (data lane; answered from the
 * call's callback, on a runtime thread) */
/* route_identity: the identity of r's per-user calls and its *mode
 * ("user", "session", "vk"; NULL and NULL: none); r's memory.  Never
 * blocks; a handler's worker. */
const char *route_identity(const req *r, const char **mode);
/* gateway/: POST and DELETE /mcp (data lane) */
void route_mcp(req *r, const char *id, json_t *body);
void route_mcp_end(req *r, const char *id, json_t *body);
void route_mcp_stream(req *r, const char *id, json_t *body); /* inline */
/* route_requester: who answers for the sign-ins r may start (its virtual
 * key's name), or NULL */
const char *route_requester(const req *r);
void        route_tool_execute(req *r, const char *id, json_t *body);
/* call_outcome: a call's USAGE_* outcome; call_audit logs its one INFO
 * audit line (key name, client, tool, outcome, duration, trace id; never
 * a key or an argument) and counts it (limits_usage_record) */
int  call_outcome(int rc, const mk_result *res);
void call_audit(const req *r, const char *client, const char *tool,
                int outcome, int64_t t0);
/* call_caller names r's caller for the audit line and the metrics: its
 * key's name, "(admin)" or "(anonymous)" (r's memory, or static);
 * call_audit_as is call_audit of a caller so named and its traceparent
 * (NULL: none), for a call that outlives its request */
const char *call_caller(const req *r);
void call_audit_as(const char *caller, const char *trace, const char *client,
                   const char *tool, int outcome, int64_t t0);

/* metrics.c */
void route_metrics(req *r, const char *id, json_t *body);

/* events.c */
int  events_start(const char *stream_url);
void events_stop(void);
void events_open(req *r, const char *id, json_t *body);
void events_close(req *r); /* r ended: its subscriber goes */
/* events_revoke ends the streams whose credential a reload rotated out:
 * the admin's when admin (its token changed), and each key's that the
 * keys in use no longer hold with the same clients; returns how many.
 * Never blocks (takes the events' lock, then D.mtx); the main thread,
 * after auth_keys_set. */
int events_revoke(bool admin);
/* events_open_mcp answers r (GET /mcp, on libmicrohttpd's thread) with
 * the SSE stream of gateway session; events_notify queues one JSON-RPC
 * message (JSON text) on that session's stream: how many took it. */
int events_open_mcp(req *r, const char *session); /* 0: opened */
int events_notify(const char *session, const char *json);
/* events_end_mcp ends session's stream (the session ended). */
void events_end_mcp(const char *session);

/* The seven states a client can be in (mk_state_name). */
#define NSTATES 7

#endif /* CLI_DAEMON_H */
