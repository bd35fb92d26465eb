/*
 * client_impl.h - the client actor's private state, shared by its files:
 * actor.c (dispatch, state, last_failure, stream, view), conn.c (dials,
 * make-before-break, generation), check.c (health checks), call.c (tool
 * calls).  Everything here is touched only by the actor's thread.
 */
#ifndef ACTORS_CLIENT_IMPL_H
#define ACTORS_CLIENT_IMPL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>

#include "actors/client/client.h"
#include "codec/idmap.h"
#include "codec/lru.h"
#include "codec/strmap.h"
#include "model/names.h"
#include "persist/hash.h"
#include "transport/loop.h"
#include "transport/mcp.h"

/* What moves a client's state (cl_state_enter's table). */
typedef enum cl_cause {
	CL_BY_RESULT, /* a check, a dial, a call's transport */
	CL_BY_ADMIN,  /* disable, enable */
	CL_BY_CRED,   /* the credential's word */
	CL_BY_COUNT
} cl_cause;

/* Why a dial runs: decides what its failure does.  Every failure but an
 * add's and a discovery's is recorded as a failed connect (unstable,
 * stage connect or credential) and, sticky, feeds the backoff. */
typedef enum cl_dwhy {
	DIAL_ADD,        /* a user's add: failure is returned, not kept */
	DIAL_BOOT,       /* boot */
	DIAL_RECONNECT,  /* an explicit reconnect (or enable): no backoff */
	DIAL_BACKGROUND, /* automatic (failed check, recovery, refresh,
	                  * backoff, a call with no connection): waits for
	                  * the backoff */
	DIAL_CHECK,      /* a check found no live connection: the same */
	DIAL_DISCOVERY,  /* per-call periodic check: silent, the check
	                  * records stage tool_discovery */
} cl_dwhy;

typedef struct client client;

/* How senders wake a client actor (wait.c). */
typedef struct cl_waker {
	pthread_mutex_t mtx;   /* guards the rest */
	pthread_cond_t  cv;    /* slept on while there is no loop */
	bool            woken; /* a wake-up not yet seen */
	tp_loop        *loop;  /* the actor's loop, or NULL */
} cl_waker;

/* Counters of a client, for the daemon's /metrics (in the view). */
#define CM_STAGES          6    /* last_failure stages, in cm_stage order */
#define CL_METRICS_PUSH_MS 1000 /* counters reach the list this often */
#define CM_BUCKETS         12   /* call latency bounds (ms), then +Inf */
#define CM_RECENT          30   /* the last calls' buckets (the sparkline) */
#define CM_RECENT_S        10   /* seconds each: the last 5 minutes */
enum { CM_OK, CM_ERROR, CM_AUTH, CM_REFUSED, CM_OUTCOMES };
typedef struct cl_cmetrics {
	uint64_t transitions;             /* state transitions published */
	uint64_t checks;                  /* health checks run */
	uint64_t failures[CM_STAGES];     /* failed attempts, by stage */
	uint64_t calls[CM_OUTCOMES];      /* tool calls, by outcome */
	uint64_t buckets[CM_BUCKETS + 1]; /* calls that took <= bound */
	uint64_t sum_us;                  /* their total time */
	uint64_t recoveries[3];           /* per_call, shared, session */
	uint64_t skipped;                 /* retries skipped for safety */
	uint64_t relists;  /* tools/list after notifications/list_changed */
	uint64_t cache[2]; /* calls answered from the cache, and not */
	uint64_t pin[3];   /* tool_changes: lists held, approved, rejected */
	/* calls ended per CM_RECENT_S, oldest first; the last one is the
	 * bucket recent_end (unix seconds / CM_RECENT_S) */
	int64_t  recent_end;
	uint32_t recent_calls[CM_RECENT];
	uint32_t recent_errors[CM_RECENT]; /* of them not ok */
} cl_cmetrics;
_Static_assert(CM_STAGES == MODEL_STAGES && CM_BUCKETS == MODEL_LATENCY_BOUNDS,
               "the counters have a slot for every stage and bound");

/* One of the lists beside the tools (lists.c). */
typedef struct cl_list {
	client       *cl;    /* owner */
	mcp_list_kind kind;  /* which */
	json_t       *items; /* as the server listed them, or NULL: none */
	bool          out;   /* a list request is out */
	bool          again; /* asked again meanwhile */
} cl_list;

/* A sticky connection. */
typedef struct cl_sconn {
	client          *cl;       /* owner */
	mcp_session     *s;        /* the session */
	uint64_t         gen;      /* generation it serves */
	int              inflight; /* calls running on it */
	bool             draining; /* replaced: freed when inflight is 0 */
	bool             closing;  /* being freed: calls must not free it */
	struct cl_sconn *next;     /* draining list */
} cl_sconn;

/* A connect (sticky) or a discovery (per-call) in progress. */
typedef struct cl_dial {
	client   *cl;      /* owner */
	uint64_t  seq;     /* its number (cl->dial_seq) */
	cl_sconn *c;       /* the new connection (its session) */
	cl_dwhy   why;     /* see cl_dwhy */
	uint64_t  gen0;    /* the client's generation at the start */
	uint64_t  timer;   /* overall deadline */
	bool      listing; /* initialize done, tools/list sent */
	bool      ended;   /* dial_end ran: callbacks fired while it frees
	                    * the session see it over */
	int64_t  t0;       /* its start (monotonic ns) */
	tr_span *span;     /* its span, or NULL */
} cl_dial;

/* An ask waiting for a dial's outcome. */
typedef struct cl_waiter {
	uint64_t          corr; /* the deferred ask */
	uint32_t          type; /* its message type (how to answer) */
	struct cl_waiter *next;
} cl_waiter;

/* A tool call. */
typedef struct cl_call {
	client *cl;        /* owner */
	char   *mode;      /* per-user: the caller's identity mode */
	char   *identity;  /* and identity */
	char   *subject;   /* token_exchange: its token (secret) */
	char   *requester; /* who answers for its sign-ins, or NULL */
	void (*progress)(void *arg, double progress, double total,
	                 const char *message); /* the caller's, or NULL */
	void           *parg;                  /* its argument */
	char           *trace[2]; /* traceparent, tracestate, or NULL */
	tr_span        *span;     /* its span, or NULL (tracing off) */
	tr_span        *rspan;    /* its recovery's, until the retry goes */
	char            tp[TR_PARENT_LEN]; /* the traceparent it sends */
	char           *cred;  /* per-user: its header lines (secret) */
	char          **hdrs;  /* config headers + cred lines, or NULL */
	struct cl_call *unext; /* waiting for the same identity */
	char           *auth;  /* MK_EAUTH: the mcp_auth_required payload */
	char           *step_scope; /* a step-up for these scopes, or NULL */
	bool            pc;         /* runs per-call (its own session) */
	bool            force; /* per-user: ask for a refreshed credential */
	bool            recovered; /* a recovery ran (at most one per call) */
	bool            reissued; /* sent again after its connection was cut */
	bool            cached;   /* answered from the result cache */
	bool skipped;         /* its retry was skipped: not safe to repeat */
	bool sent;            /* its tools/call went out (before: never ran, so
	                       * always safe to send again) */
	int64_t  sent_id;     /* the JSON-RPC id it last went out with */
	uint64_t cred_sum;    /* per-call: the shared credential it opened
	                       * with (cl_cred_sum), 0 none */
	const char     *path; /* the recovery's path, or NULL */
	mcp_error      *orig; /* the failure it recovers from */
	uint64_t        gen;  /* sticky: the connection generation it ran on */
	uint64_t        rtimer; /* sticky recovery: the caller's wait */
	int64_t         t0;     /* when it arrived (monotonic ns) */
	struct cl_call *rnext;  /* waiting for the recovery's reconnect */
	uint64_t        corr;   /* the deferred ask */
	char           *tool;   /* tool name (a prompt's, a resource's URI) */
	int (*input)(void *arg, const char *request_id, const char *method,
	             const char *params); /* its server requests' taker */
	void           *iarg;             /* and its argument */
	int             kind;     /* CL_CALL_TOOL, _PROMPT, _RESOURCE */
	json_t         *args;     /* arguments object */
	int64_t         deadline; /* monotonic ns */
	cl_sconn       *on;       /* sticky: the connection it runs on */
	mcp_session    *s;        /* per-call: its own session */
	struct cl_call *next;     /* queue while waiting for a connection */
	struct cl_call *pnext;    /* per-call: the client's running calls */
	struct cl_call *pprev;
	bool            done; /* call_finish ran: a callback fired while
	                       * it frees the session sees it over */
	uint64_t ticket;      /* the caller's name for it, 0: none */
	int64_t  rid;         /* its tools/call's request id while out, 0 */
	char     idem[40];    /* its idempotency key, "" none (recover.c) */
	bool     idem_meta;   /* sent as _meta.idempotencyKey too */
	char    *cancelled;   /* the caller gave up: why (sent no more) */
	bool     slotted;     /* holds one of max_concurrent_calls' slots */
	uint64_t htimer;      /* waiting for a slot: its deadline's timer */
} cl_call;

/* Calls waiting for a slot of max_concurrent_calls, at most this many
 * per client (more are refused at once, MK_EBUSY). */
#define CL_HELD_MAX 1000

/* Calls in flight at once to a server over the network, at most: the
 * rest of the connections a loop opens to one host (TP_HOST_CONNS_MAX)
 * are kept for the connect, the checks and the listings (call.c). */
#define CL_NET_CALLS_MAX (TP_HOST_CONNS_MAX - 4)

/* A server's request waiting for the host (input.c). */
#define CL_INPUTS_MAX 32 /* per client; more are refused at once */
typedef struct cl_input {
	client          *cl;      /* owner */
	char             id[24];  /* "in-<n>": the host's name for it */
	mcp_session     *s;       /* the session it came on */
	uint64_t         token;   /* its token there */
	unsigned         kind;    /* CL_IN_* */
	bool             relayed; /* its call's caller has it, not the host */
	json_t          *params;  /* as the server sent them */
	uint64_t         timer;   /* its expiry */
	int64_t          expires; /* monotonic ns */
	struct cl_input *next;    /* the client's list */
} cl_input;

/* A health check in progress.  Ended (cl->chk no longer points at it)
 * while its request is out, it stays allocated until that request's
 * callback, which frees it. */
typedef struct cl_check {
	client  *cl;      /* owner */
	uint64_t corr;    /* the supervisor's deferred ask */
	int      phase;   /* 0 ping, 1 tools/list */
	int      attempt; /* retries used */
	uint64_t timer;   /* backoff timer */
	uint64_t gen0;    /* generation at the start */
	bool     busy;    /* its ping or tools/list is out */
	bool     ended;   /* finished or aborted */
} cl_check;

struct client {
	kn_actor   *self;        /* this actor */
	cfg_client *cfg;         /* config (owned) */
	kn_actor   *sv;          /* supervisor (held) */
	kn_actor   *ps;          /* persister (held), or NULL */
	bool        unsaved;     /* the config is not in the store yet */
	uint64_t    ticket;      /* the API change the next config write is
	                          * part of (persister.h), 0: none */
	json_t *undo;            /* the stored config the last API change
	                          * replaced (cfg_client_stored), or NULL */
	kn_stream  *stream;      /* state stream */
	const char *node_id;     /* instance id */
	int64_t     sync_ms;     /* effective tool_sync_interval */
	int64_t     exec_ms;     /* effective tool_execution_timeout */
	int         def_changes; /* the global tool_changes */
	int64_t     def_sync_ms; /* the global defaults, for updates */
	int64_t     def_exec_ms;
	tp_loop    *loop;      /* this thread's curl multi + fds, while
	                        * it has network work (wait.c) */
	cl_waker wk;           /* how senders wake this actor */
	uint64_t loop_timer;   /* frees a loop that was still busy */
	cl_state state;        /* see the diagram */
	bool     announced;    /* the first state went out on the stream */
	cl_state shown;        /* the state last published */
	bool     lf_set;       /* last_failure present */
	char     lf_stage[16]; /* its stage */
	char    *lf_message;   /* normalised message */
	char     lf_at[32];    /* RFC 3339, this attempt */
	char     lf_since[32]; /* RFC 3339, first of the run */
	uint64_t gen;          /* connection generation */
	json_t  *tools;        /* the server's tools, as listed */
	json_t  *history;      /* its last transitions (CL_HISTORY_MAX),
	                        * oldest first, or NULL: none yet */
	json_t *approved;      /* tool_changes hold/block: the tools approved,
	                        * by name, or NULL: none yet (pin.c) */
	json_t *pin_held;      /* the list's tools held back: name ->
	                        * {fields: [...]} or {new: true}, or NULL */
	char     approved_digest[TOOLS_HASH_HEX]; /* the approved list's */
	char     rejected[TOOLS_HASH_HEX]; /* the list now, when rejected */
	bool     pin_known;   /* the approval is read (or there is no store) */
	bool     pin_reading; /* the store is asked for it */
	bool     pin_waits;   /* the first connect waits for it: */
	bool     pin_boot;    /* (a boot's) */
	uint64_t pin_corr;    /* (its deferred ask) */
	uint64_t pin_gen;     /* bumped by every decision: a read begun
	                       * before one is stale */
	strmap  cache;        /* results kept (cache.c): key -> cl_centry */
	lru     cache_lru;    /* the same, least recently used last */
	size_t  cache_bytes;  /* their results' bytes */
	json_t *versions;     /* its tool lists' versions of this run
	                       * (STORE_TOOL_VERSIONS), oldest first, or
	                       * NULL: none yet (versions.c) */
	char       hash[TOOLS_HASH_HEX]; /* their content hash, "" none */
	cl_sconn  *live;         /* the sticky connection serving calls */
	cl_sconn  *draining;     /* replaced ones finishing their calls */
	cl_dial   *dial;         /* the dial in progress, or NULL */
	cl_waiter *waiters;      /* asks answered when the dial ends */
	cl_call   *queued;       /* calls waiting for a connection */
	cl_check  *chk;          /* the check in progress, or NULL */
	bool       relisting;    /* a list_changed relist is out */
	bool       relist_again; /* another notice came meanwhile */
	unsigned   fails;        /* connects failed (or lost) in a row */
	unsigned   empties;      /* empty lists in a row while it had tools */
	int64_t    retry_ns;     /* no automatic connect before this */
	uint64_t   retry_timer;  /* the backoff's own connect, or 0 */
	uint32_t   rnd;          /* its jitter state */
	int64_t    soon_ns;      /* when check_soon last started one */
	uint64_t   soon_timer;   /* check_soon's deferred one, or 0 */
	unsigned   calls;        /* calls in flight (both modes) */
	cl_call   *pcalls;       /* per-call calls running (their sessions) */
	kn_actor  *cr;           /* the credential actor (held), or NULL */
	char      *cred;         /* the credential's header line, or NULL */
	char      *step_scope;   /* CRED_STEP's scopes (the last 403's) */
	char     **hdrs;       /* config headers + cred (borrowed), or NULL */
	uint64_t   dial_seq;   /* numbers dials, for late credential replies */
	int64_t    cred_due;   /* monotonic ns: asked again after; 0 never */
	struct fetch *fetches; /* waiting for the credential ask in flight */
	bool          fetching; /* that ask is out */
	struct cl_call
	        *recovering; /* calls waiting for a recovery's reconnect */
	bool     rec_active; /* a recovery's refresh + reconnect is running */
	uint64_t rec_seq;    /* numbers recoveries: a late refresh of an
	                      * aborted one is dropped */
	cl_cmetrics m;       /* counters for /metrics */
	uint64_t    mtimer;  /* their push to the supervisor, 0: none due */
	cl_cmetrics msent;   /* the counters the supervisor has */
	unsigned    msent_fails; /* and the fails it has */
	bool        admin_dead;  /* per-user: the admin's discovery credential
	                          * died (needs_reauth projection) */
	strmap ufetch;           /* per-user: identity -> calls waiting for its
	                          * credential (one ask per identity) */
	unsigned       maxconn;  /* idle connections curl may keep */
	const cl_host *host;     /* what the host offers its servers */
	tr_tracer     *tracer;   /* spans' exporter, or NULL */
	mcp_era        era;      /* what the last session found (era.c) */
	char           version[16];    /* its protocol version, "" unknown */
	char           checked_at[32]; /* its last check's end, "" none */
	int64_t        ttl_ms;         /* the tool list's ttlMs, 0 none */
	char    listed_hash[TOOLS_HASH_HEX]; /* of the last list as sent */
	cl_list lists[MCP_LIST_KINDS];       /* prompts, resources, resource
	                                      * templates ([MCP_LIST_TOOLS]:
	                                      * unused, tools are above) */
	cl_sconn *lconn;   /* per-call: a discovery's session, open while
	                    * its lists come (lists.c), or NULL */
	unsigned  lwait;   /* how many of them are still out */
	idmap     tickets; /* ticket -> its call (cl_call), to cancel */
	unsigned  slots;   /* calls holding a slot (max_concurrent_calls) */
	cl_call  *held;    /* calls waiting for one, oldest first */
	cl_call  *held_tail;
	unsigned  nheld;     /* how many */
	uint64_t  kick;      /* the timer that admits them, 0: none */
	bool      held_off;  /* closing: no more admissions */
	cl_input *inputs;    /* server requests waiting for the host */
	unsigned  ninputs;   /* how many */
	uint64_t  input_seq; /* numbers them */
};

/* lists.c: the prompts, resources and templates.  cl_lists_fetch asks
 * the live connection for the prompts and/or the resources and
 * templates (a new connection: both; a list_changed: its own);
 * cl_lists_view adds them to a view. */
void cl_lists_init(client *cl);
void cl_lists_fetch(client *cl, bool prompts, bool resources);
/* cl_lists_adopt: a per-call client's discovery session c lists them;
 * true when it keeps c (freed once they are in), false when the caller
 * frees it (none to ask, or the last discovery's are still out). */
bool cl_lists_adopt(client *cl, cl_sconn *c);
void cl_lists_view(client *cl, json_t *view);
void cl_lists_fini(client *cl);

/* conn.c: cl_conn_free frees a connection that serves no calls. */
void cl_conn_free(cl_sconn *c);

/* actor.c */
/* cl_state_enter is the one way cl->state changes: true when the
 * table in actor.c allows it (refused and, but for a result meeting an
 * authoritative state, logged as a bug otherwise).  It publishes
 * nothing: cl_transition does. */
bool cl_state_enter(client *cl, cl_state to, cl_cause by);
void cl_set_state(client *cl, cl_state s); /* by an admin */
void cl_fail(client *cl, cl_state s, const char *stage, const char *message);
/* Records a failed attempt as last_failure (and counts it); false when
 * out of memory. */
bool cl_failure(client *cl, const char *stage, const char *message);
void cl_pass(client *cl);
void cl_set_tools(client *cl, json_t *tools);
void cl_push_view(client *cl);
/* A client's transitions kept for GET .../history (state.c). */
#define CL_HISTORY_MAX 50

/* cache.c: the result cache of read-only tools (cache_results).
 * cl_cache_answer answers c from it (true: c is finished and freed);
 * cl_cache_put keeps an ok result of c; cl_cache_listed clears it for a
 * new list (warning of configured tools it may not keep); cl_cache_clear
 * empties it.  cl_cache_refuses says why cfg (a change of cl's config)
 * cannot be taken: its cache_results names a tool the server lists now
 * without readOnlyHint and idempotentHint (one it has not listed yet is
 * warned of when it is). */
typedef struct cl_centry cl_centry;
bool                     cl_cache_answer(client *cl, cl_call *c);
void cl_cache_put(client *cl, const cl_call *c, const char *result);
void cl_cache_listed(client *cl);
void cl_cache_clear(client *cl);
bool cl_cache_refuses(const client *cl, const cfg_client *cfg, char *why,
                      size_t len);

/* pin.c: tool_changes.  cl_pin_mode is the client's (its config's, else
 * the global one); cl_pin_start reads the stored approval again
 * (MSG_CL_APPROVALS: another node decided); cl_pin_wait reads it before
 * the client's first connect, which goes on (cl_connect_go) once it is
 * read: true when it waits; cl_pin_listed holds back what a new list changed;
 * cl_pin_config takes the list on a config change (mode_was: the mode
 * before it); cl_pin_refuses says why a tool may not be called (why), or
 * false; cl_tool_hints gives a tool's annotations, those of a held tool
 * untrusted (the defaults): false when the list has no such tool;
 * cl_pin_view marks the view; cl_on_decide answers MSG_CL_DECIDE. */
int  cl_pin_mode(const client *cl);
void cl_pin_start(client *cl, bool again);
bool cl_pin_wait(client *cl, uint64_t corr, bool boot);
void cl_pin_listed(client *cl);
void cl_pin_config(client *cl, int mode_was);
bool cl_pin_refuses(client *cl, const char *tool, char *why, size_t len);
bool cl_tool_hints(const client *cl, const char *tool, mcp_hints *h);
void cl_pin_view(const client *cl, json_t *v);

/* versions.c: cl_version_new makes the version the list tools (hash)
 * makes after the one the client has: {digest, at, count, diff, first
 * (no list before it)},
 * borrowed (kept in cl->versions), or NULL out of memory.  cl_on_versions
 * answers MSG_CL_VERSIONS. */
json_t *cl_version_new(client *cl, json_t *tools, const char *hash);
/* cl_snapshot publishes the state the client is in (a "state" event
 * whose old_state is its state, snapshot true). */
void cl_snapshot(client *cl);
void cl_persist_config(client *cl);
void cl_save_once(client *cl);
void cl_reply_ok(client *cl, uint64_t corr);
/* state.c: the state the view shows (a per-user needs_reauth overlays
 * healthy and unstable); the view as JSON (new reference); MSG_CL_METRICS
 * answered.  Actor thread. */
cl_state cl_shown_state(const client *cl);
/* cl_counted: a counter changed; the counters reach the supervisor within
 * CL_METRICS_PUSH_MS (one push for every change meanwhile). */
void cl_counted(client *cl);
/* cl_metrics_text: the counters as JSON text (malloc'd, or NULL), noted
 * as the ones the supervisor has (the caller sends them there). */
char   *cl_metrics_text(client *cl);
json_t *cl_view_json(client *cl);
void    cl_reply_state(client *cl, uint64_t corr);
int     cl_status_of(const mcp_error *e);

/* conn.c: a waiter is (corr, type) answered by type; corr 0 with
 * type MSG_NONE is the running check's own, type MSG_CL_RECONNECT with
 * corr 0 none */
/* actor.c: the first connect goes on (the approval is read). */
void cl_connect_go(client *cl, uint64_t corr, bool boot);

void cl_dial_start(client *cl, cl_dwhy why, uint64_t corr, uint32_t type);
void cl_conn_config(const client *cl, mcp_config *mc);
void cl_conn_release(client *cl, cl_sconn *c);
/* a server's log message (arg: the client), at DEBUG */
void cl_server_log(void *arg, mcp_session *s, const char *level,
                   const char *logger, const char *text);
void cl_conn_call_done(client *cl, cl_sconn *c);
/* ends the dial, the connections and their calls; bumps the generation
 * (whatever is in flight is stale); safe to call again */
void cl_conn_close_all(client *cl);
/* drops the waiters a check registered on the dial (it ended) */
void cl_dial_forget_check(client *cl);
/* reconnect backoff: a connect failed or a connection was lost (the
 * next automatic connect waits, full jitter, 1 s doubling to 5 min);
 * backoff_reset cancels the wait, and with forget (a passing check) the
 * count; backoff_active: automatic connects wait now */
void cl_backoff_fail(client *cl);
void cl_backoff_reset(client *cl, bool forget);
bool cl_backoff_active(const client *cl);
bool cl_conn_usable(const client *cl);

/* wait.c: the kernel's wait and wake hooks; cl_loop makes the loop
 * (0, or an MK_ code with err set: MCP_E_LIMIT when out of file
 * descriptors); cl_loop_release frees it once the client is disabled
 * or needs_reauth and the loop is idle; cl_loop_free at once */
void cl_waker_init(cl_waker *w);
void cl_waker_fini(cl_waker *w);
int  cl_wait(kn_actor *self, void *state, struct pollfd *fds, unsigned nfds,
             int timeout_ms);
void cl_wake(void *arg);
int  cl_loop(client *cl, mcp_error *err);
void cl_loop_release(client *cl);
void cl_loop_free(client *cl);

/* check.c */
void cl_check_start(client *cl, uint64_t corr);
void cl_check_abort(client *cl);
/* a call failed at the transport: a check now (at most one running, one
 * a second); its result, not the call's, sets the state */
void cl_check_soon(client *cl);
void cl_check_on_dial(client *cl, const mcp_error *err);
bool cl_transient(const mcp_error *e);

/* cred.c: fn gets 0 (cl->cred set) or a status and a one-line reason;
 * seq is the caller's, to recognise a reply that came too late */
typedef void (*cl_cred_fn)(client *cl, void *arg, uint64_t seq, int status,
                           const char *err);
bool cl_cred_needed(const client *cl);
void cl_cred_register(client *cl);
void cl_cred_forget(client *cl);
void cl_cred_clear(client *cl);
enum { CRED_USE, CRED_PEEK, CRED_FORCE, CRED_STEP }; /* cred_fetch's how */
/* cl_cred_sum: a digest of the credential the client holds now (0:
 * none), to tell whether it changed since a connection opened with it */
uint64_t cl_cred_sum(const client *cl);
/* CRED_USE: a header good to use (refreshed when near expiry, as the
 * credential actor's use_ms says); CRED_PEEK: the state only (no
 * refresh); CRED_FORCE: refreshed now (or when the token's 1 s gap
 * between refreshes ends); CRED_STEP: a step-up for cl->step_scope (the
 * answer is a refusal: needs_reauth, or the step-up limit) */
void cl_cred_fetch(client *cl, int how, cl_cred_fn fn, void *arg,
                   uint64_t seq);
/* the same, the ask bounded by deadline (monotonic ns; 0: none) */
void cl_cred_fetch_until(client *cl, int how, cl_cred_fn fn, void *arg,
                         uint64_t seq, int64_t deadline);
/* the header lines of a per-user call's identity: fn as cl_cred_fn */
void cl_cred_fetch_user(client *cl, cl_call *c, cl_cred_fn fn);
/* hdrs of config headers + the '\n'-separated lines in cred (modified) */
char **cl_cred_lines(client *cl, char *cred);
void   cl_cred_fini(client *cl);
void   cl_reauth(client *cl, const char *message);
void   cl_transition(client *cl);
void   cl_cm_failure(client *cl, const char *stage);          /* counts one */
void   cl_cm_call(client *cl, const cl_call *c, int outcome); /* counts one */
void   cl_cm_outcome(client *cl, int outcome); /* one never sent */

/* recover.c: tool calls that recover from auth and session failures */
bool cl_auth_failure(const mcp_error *e);
bool cl_session_gone(const mcp_error *e);
/* the connection failed after a request went out: it may have run */
bool cl_cut(const mcp_error *e);
/* whether c may go twice: its tool is safe to repeat (read-only, not
 * destructive, or idempotent - annotations of a held tool untrusted), or
 * it carries an idempotency key (cl_call_keyed) */
bool cl_retry_safe(const client *cl, const cl_call *c);
/* cl_call_keyed gives a tools/call not safe to repeat an idempotency key
 * before its first send, where s's server declares tools.idempotency
 * (_meta) or its tool takes one (an argument): every send carries the
 * same one */
void cl_call_keyed(cl_call *c, mcp_session *s);
/* call.c: cl_call_of gives the call a server's request on session s is
 * caused by: the call out on it as request cause (the server said so:
 * mcp_session_cause; 0: it did not), or else the one call out on it
 * (when a sticky connection runs no other), else NULL. */
cl_call *cl_call_of(client *cl, mcp_session *s, int64_t cause);
/* the tool of the client's list named name (borrowed), or NULL */
json_t *cl_tool_named(const client *cl, const char *name);
/* take the call over (true) when the failure is one to recover from */
bool cl_recover_per_call(client *cl, cl_call *c, const mcp_error *err);
bool cl_recover_sticky(client *cl, cl_call *c, const mcp_error *err);
/* a dial ended: calls waiting for a recovery go on, or get their error */
void cl_recover_on_dial(client *cl, const mcp_error *err);
void cl_recover_abort(client *cl, const char *why);

/* input.c: a session's handlers for the server's requests (arg: the
 * client); the host's answers and list; every request dropped */
int  cl_input_request(client *cl, mcp_session *s, uint64_t token,
                      const char *method, json_t *params);
void cl_input_gone(client *cl, mcp_session *s, uint64_t token);
void cl_input_end_all(client *cl);
/* the capabilities to declare (cl_conn_config) */
const char *cl_input_caps(const client *cl);

/* era.c: learn, forget and give the era (cl_conn_config); the
 * effective tool_sync_interval (the config's, the global one, or a
 * shorter ttlMs); a tools/list result's tools as the client keeps them
 * (a new reference; ttlMs noted) */
void    cl_era_learn(client *cl, mcp_session *s);
void    cl_era_forget(client *cl);
mcp_era cl_era(const client *cl);
void    cl_era_intervals(client *cl);
json_t *cl_era_tools(client *cl, json_t *result);

/* The handlers of the messages in other files than actor.c (their rows in
 * CL_MESSAGES, client_msg.h): call.c's cl_on_cancel gives up on the call
 * with the ticket - its request cancelled at the server, or, not sent yet,
 * never sent - and answers it MCP_E_CANCELLED (an unknown ticket, answered
 * already, is nothing). */
int cl_on_call(kn_actor *self, client *cl, kn_msg *msg, cl_call_msg *m);
int cl_on_cancel(kn_actor *self, client *cl, kn_msg *msg, cl_cancel_msg *m);
int cl_on_cred(kn_actor *self, client *cl, kn_msg *msg, cl_cred_msg *m);
int cl_on_input(kn_actor *self, client *cl, kn_msg *msg, cl_input_msg *m);
int cl_on_inputs(kn_actor *self, client *cl, kn_msg *msg, codec_no *none);
int cl_on_decide(kn_actor *self, client *cl, kn_msg *msg, cl_decide_msg *m);
int cl_on_history(kn_actor *self, client *cl, kn_msg *msg, codec_no *none);
int cl_on_metrics(kn_actor *self, client *cl, kn_msg *msg, codec_no *none);
int cl_on_versions(kn_actor *self, client *cl, kn_msg *msg, codec_no *none);

/* call.c */
/* answers the call (err, or result) and frees it */
void cl_call_finish(client *cl, cl_call *c, const mcp_error *err,
                    json_t *result);
/* per-call: a fresh session for the call; sticky: again on the live one */
void cl_call_reopen(client *cl, cl_call *c);
/* cl_call_auth_required answers a per-user call with MK_EAUTH and its
 * c->auth (the mcp_auth_required payload), err the message; frees it */
void cl_call_auth_required(client *cl, cl_call *c, const char *err);
void cl_call_rerun(client *cl, cl_call *c);
void cl_call_run_queued(client *cl, const char *failure);
/* answers every call waiting for a slot with MK_ESTATE, why (the client
 * is disabled, needs reauthorization, or closes: off stops admissions
 * for good); cl_call_kick admits waiting calls into free slots soon (the
 * limit may have risen) */
void cl_call_drop_held(client *cl, const char *why, bool off);
void cl_call_kick(client *cl);
/* ends every per-call call still running (the client is closing) */
void cl_call_end_all(client *cl, const char *why);

#endif /* ACTORS_CLIENT_IMPL_H */
