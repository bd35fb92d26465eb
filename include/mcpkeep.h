/*
 * mcpkeep.h - the public embedding API of the mcpkeep runtime.
 *
 * This is the only header an embedder includes.  Every function here is
 * safe to call from any thread unless its comment says otherwise.  Handles
 * are opaque and tagged: a call with a handle that is NULL, was never opened
 * or has been closed returns MK_EHANDLE (or does nothing, for close).
 *
 * Ownership: a buffer returned through an out-parameter belongs to the
 * caller, who releases it with mk_free(); on failure nothing is returned and
 * nothing needs releasing.
 *
 * Clients: every call that takes a client (client, name, mk_call.client)
 * takes either its name or its client_id (from its config, else generated
 * once and stored).  Both are unique, and a client whose client_id is
 * another client's name is refused at creation, so either names one
 * client.
 *
 * ABI rules: a program built against this header keeps working with a
 * later libmcpkeep.so: functions and result codes are only added.  The
 * structs the caller allocates and passes in - mk_options, mk_stats,
 * mk_event, mk_call, mk_call_how - begin with `size_t size`, the
 * caller's sizeof of the struct as its header declares it
 * (mk_options_init(&o, sizeof(o)), MK_STATS_INIT, MK_EVENT_INIT,
 * MK_CALL_INIT and MK_CALL_HOW_INIT set it); later versions only append
 * fields to them.  The library reads and writes the first `size` bytes
 * and nothing past them: options past the caller's size take their
 * defaults, counters and event fields past it are not written.  A size
 * below sizeof(size_t) or above this library's sizeof (a program built
 * against a newer header) is MK_EINVAL.  mk_result is allocated by the
 * library, whose later versions may append fields to it.  What is
 * deprecated stays, in the block at the end of this header.
 *
 * libcurl: mk_runtime_open takes one reference to libcurl's global state
 * (curl_global_init) before the runtime starts a thread, and
 * mk_runtime_close gives it back (curl_global_cleanup) after joining
 * them.  libcurl 7.84 and later (required) makes both thread-safe when
 * curl_version_info() reports CURL_VERSION_THREADSAFE - Debian 12's
 * 7.88.1 does - so an embedder need do nothing, even with threads of its
 * own running.  With a libcurl built without it (mk_runtime_open logs a
 * warning), call curl_global_init(CURL_GLOBAL_DEFAULT) before starting
 * any thread and curl_global_cleanup after the last mk_runtime_close.
 * An embedder that uses libcurl itself calls curl_global_init for its
 * own use either way: the runtime's reference is the runtime's.
 */
#ifndef MCPKEEP_H
#define MCPKEEP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MCPKEEP_VERSION "0.1.0" /* kept equal to meson's project version */

#if defined(__GNUC__)
#define MK_API __attribute__((visibility("default")))
#else
#define MK_API
#endif

/*
 * Result codes.  0 is success.  This enum is append-only: a value, once
 * released, keeps its number and meaning.
 */
typedef enum mk_err {
	MK_OK        = 0,  /* success */
	MK_EINVAL    = 1,  /* an argument or an input is invalid */
	MK_ENOMEM    = 2,  /* out of memory */
	MK_ECLOSED   = 3,  /* the runtime or the target is shutting down */
	MK_ETIMEDOUT = 4,  /* the operation's deadline passed */
	MK_ENOENT    = 5,  /* no such object (actor, client, ...) */
	MK_EEXIST    = 6,  /* an object with that name already exists */
	MK_EBUSY     = 7,  /* a conflicting operation is in progress */
	MK_EPROTO    = 8,  /* a peer or a message broke the protocol */
	MK_ESYS      = 9,  /* a system call failed (see the log for errno) */
	MK_EHANDLE   = 10, /* the handle is NULL, closed or not ours */
	MK_ETOOBIG   = 11, /* an input exceeds its size limit */
	MK_EACTOR    = 12, /* an actor's handler reported a failure */
	MK_EINTERNAL = 13, /* a bug: an invariant did not hold */
	MK_EUPSTREAM = 14, /* the MCP server or the way to it failed */
	MK_ESTATE    = 15, /* the client's state forbids it (disabled,
	                    * needs_reauth, pending_verification) */
	MK_EAUTH = 16,     /* the caller's identity has no usable
	                    * credential: mk_result.auth_required says how
	                    * to get one; the tool did not run */
	MK_ESTORE = 17,    /* the store refused or could not take a change:
	                    * nothing changed, try again once it can */
	MK_EUNKNOWN = 18,  /* a call's connection failed after it was sent
	                    * and it was not sent again (not safe to run
	                    * twice): it may or may not have run
	                    * (error_kind outcome_unknown; in
	                    * mk_calls_unknown_json) */
} mk_err;

/* Log levels, lowest first. */
typedef enum mk_log_level {
	MK_LOG_DEBUG = 0, /* per-event detail, e.g. each failed health check */
	MK_LOG_INFO  = 1, /* lifecycle and state transitions */
	MK_LOG_WARN  = 2, /* something an operator should look at */
	MK_LOG_ERROR = 3, /* a failure the runtime could not absorb */
} mk_log_level;

/*
 * mk_log writes one line to a runtime's log - the level, format (text or
 * JSON) and fd its options set - as component, so that an embedder's
 * lines sit with the runtime's.  Each runtime logs with its own settings;
 * mk_log uses those of the runtime whose thread calls it (a callback),
 * else of the most recently opened runtime still open, else the process
 * default: level info, text, fd 2.  The message is printf-formatted, cut
 * at 2 KiB, and control characters in it become spaces.  Below the level
 * (or an unknown level) it does nothing.  Any thread; blocks only on the
 * write.  Never pass it a secret.
 */
MK_API void mk_log(mk_log_level level, const char *component, const char *fmt,
                   ...) __attribute__((format(printf, 3, 4)));

/*
 * Requests of MCP servers to their client, handed to the host:
 * elicitation/create (form and URL modes), sampling/createMessage and
 * roots/list.  The runtime declares a capability to the servers only
 * for the kinds in mk_options.inputs, and refuses every other request at
 * once (JSON-RPC -32601): nothing waits for a handler that is not there.
 * A request the host takes waits until mk_input_answer answers it, at
 * most the client's tool_execution_timeout (then an elicitation is
 * answered "cancel", the rest with an error); it is published on the
 * state stream (topic "input", state "pending", then "answered",
 * "expired" or "gone" when its session closed first) and listed by
 * mk_inputs_json.  The tool call that caused it keeps its own deadline.
 * A URL elicitation whose URL may not be shown (not http(s), a user name
 * or password in it, http from an https server) is declined before the
 * host hears of it.
 */
#define MK_INPUT_ELICITATION 1u /* elicitation/create */
#define MK_INPUT_SAMPLING    2u /* sampling/createMessage */
#define MK_INPUT_ROOTS       4u /* roots/list */

typedef struct mk_input {
	const char *client_id;   /* the client it came on */
	const char *client_name; /* and its name */
	const char *request_id;  /* for mk_input_answer */
	const char *method;      /* "elicitation/create", ... */
	const char *params;      /* its params as the server sent them (JSON
	                          * text: an elicitation's mode, message,
	                          * requestedSchema or url) */
} mk_input;

/* Told of a request waiting for the host.  Runs on a runtime thread: it
 * must not block or call back into the runtime synchronously; the
 * strings are valid during the call only. */
typedef void (*mk_input_fn)(void *arg, const mk_input *in);

/*
 * Options for mk_runtime_open().  Initialise with mk_options_init() and
 * change only the fields you need (see the ABI rules above).
 */
typedef struct mk_options {
	size_t size;            /* sizeof(mk_options) as the caller's header
	                         * declares it; set by mk_options_init */
	mk_log_level log_level; /* default MK_LOG_INFO; MCPKEEP_LOG overrides
	                         * ("debug", "info", "warn", "error") */
	int log_json;           /* non-zero: one JSON object per log line */
	int log_fd;             /* where this runtime's log lines go;
	                         * default 2 (stderr) */
	size_t stack_size;      /* actor thread stack, bytes; default 256 KiB,
	                         * minimum 64 KiB */
	int ask_timeout_ms; /* deadline of the runtime's internal asks when a
	                     * call has none of its own; default 5000 */
	const char *stream_url; /* state stream; default
	                         * "inproc://mcpkeep/state" */
	const char *const
	        *stream_listen;     /* more addresses for it (tcp://,
	                             * ipc://), NULL-terminated, or NULL */
	const char *node_id;        /* this instance; default "local", or
	                             * with store_url the host's name and
	                             * the pid ("host-1234"): each node of
	                             * a cluster needs its own */
	int unstable_check_ms;      /* check interval while unstable;
	                             * default 10000 (10 s) */
	const char *store_path;     /* SQLite file for clients, their tools and
	                             * credentials (restored at open); NULL:
	                             * memory only */
	const char *encryption_key; /* seals secrets in the store: 64 hex
	                             * digits (the AES-256 key) or a
	                             * passphrase; NULL: the environment's
	                             * MCPKEEP_ENCRYPTION_KEY, else none */
	unsigned credential_cache_max; /* callers' cached tokens and header
	                                * credentials, each (LRU; the rest
	                                * is read from the store when
	                                * needed); default 4096 */
	const char
	        *oauth_redirect_uri; /* the OAuth callback the
	                              * authorization server sends codes to;
	                              * default "http://127.0.0.1:8080/
	                              * api/oauth/callback" (the daemon's) */
	int raise_fd_limit;    /* non-zero: at open, raise the process's soft
	                        * RLIMIT_NOFILE to its hard limit (each
	                        * connected client needs file descriptors; a
	                        * process-wide change, so off by default; the
	                        * daemon sets it) and log both */
	unsigned inputs;       /* MK_INPUT_* kinds the host takes (above);
	                        * default 0: none */
	mk_input_fn on_input;  /* told of each, or NULL (the stream and
	                        * mk_inputs_json tell of them too) */
	void       *input_arg; /* on_input's arg */
	const char *roots;     /* with MK_INPUT_ROOTS: the roots the
	                        * runtime answers roots/list with itself,
	                        * a JSON array text ([{"uri": "file:///...",
	                        * "name": "..."}], copied); NULL: the host
	                        * answers like the others */
	const char *store_url; /* instead of store_path: a PostgreSQL
	                        * database the nodes of a cluster share,
	                        * "postgresql://user:password@host:port/db"
	                        * (libpq's URI; its password is never
	                        * logged or shown); NULL: none */
	int cluster_heartbeat_ms; /* with store_url: how often this node
	                           * says it is alive (a node unseen for 3
	                           * is out of every view); default 5000 */
	const char *oauth_client_metadata_url; /* the URL of the host's
	                                        * client ID metadata
	                                        * document: the client_id
	                                        * of every OAuth client
	                                        * without one, at an
	                                        * authorization server
	                                        * that takes such
	                                        * documents (copied);
	                                        * NULL: none */
	const char *otlp_endpoint; /* an OpenTelemetry collector's base URL
	                            * (http:// or https://): spans of
	                            * calls, recoveries, refreshes and
	                            * connects are posted to its
	                            * /v1/traces (OTLP/HTTP, JSON), batched
	                            * and dropped (counted) rather than
	                            * waited for (copied); NULL: no
	                            * tracing */
} mk_options;

/*
 * Runtime counters, a snapshot taken by the supervisor actor.  Declare
 * with MK_STATS_INIT (it sets size; see the ABI rules above).
 */
typedef struct mk_stats {
	size_t size;               /* sizeof(mk_stats) as the caller's header
	                            * declares it; set by MK_STATS_INIT */
	uint64_t actors;           /* actors running now */
	uint64_t messages;         /* messages delivered to handlers */
	uint64_t asks;             /* asks sent */
	uint64_t late_replies;     /* replies dropped: the asker's deadline had
	                            * passed */
	uint64_t expired;          /* asks skipped: expired before handling */
	uint64_t handler_errors;   /* handlers that returned an error */
	uint64_t ticks;            /* health ticks fired */
	uint64_t tick_late_p50_us; /* how late ticks fire: median */
	uint64_t tick_late_p99_us; /* and 99th percentile (log2 buckets:
	                            * an upper bound) */
	int      store_state;      /* MK_STORE_NONE, _HEALTHY or _FAILING */
	uint64_t store_queued;     /* writes waiting for the store */
	uint64_t store_failures;   /* flushes that failed */
	uint64_t store_dropped;    /* writes the store refused (reported) */
	uint64_t store_tool_writes;  /* tool lists written since open */
	uint64_t token_refreshes;    /* OAuth refresh requests sent */
	uint64_t token_exchanges;    /* RFC 8693 exchange requests sent */
	uint64_t token_requests;     /* every token-endpoint request */
	uint64_t stream_subscribers; /* state-stream subscribers now */
	uint64_t spans_exported;     /* spans the collector took (with
	                              * otlp_endpoint) */
	uint64_t spans_dropped;      /* spans lost: the collector was down,
	                              * slow or refused them */
} mk_stats;

/* mk_stats st = MK_STATS_INIT; */
#define MK_STATS_INIT                                                         \
	{                                                                     \
		.size = sizeof(mk_stats)                                      \
	}

/* mk_stats.store_state */
enum {
	MK_STORE_NONE    = 0, /* no store_path: memory only */
	MK_STORE_HEALTHY = 1, /* writes reach the file */
	MK_STORE_FAILING = 2, /* serving from memory, retrying */
};

typedef struct mk_runtime mk_runtime;

/*
 * mk_options_init fills the first size bytes of opts with the defaults
 * and sets opts->size to size; pass sizeof(*opts).  Never blocks.
 * Returns MK_OK, or MK_EINVAL (opts NULL, or size out of range: nothing
 * written).
 */
MK_API int mk_options_init(mk_options *opts, size_t size);

/*
 * mk_runtime_open boots a runtime: logging, libcurl (see libcurl above),
 * the actor kernel, then the system actors in a fixed order.  opts may be
 * NULL for the defaults.  Blocks until every system actor has signalled
 * READY and, with a store_path, the stored clients are back.  A store that
 * cannot be written (read-only, full, locked, damaged) does not fail the
 * boot: the runtime serves from memory, reports it (mk_stats.store_state,
 * a "store" stream message) and retries.  On success *rtp owns a runtime
 * the caller releases with mk_runtime_close().
 * Returns MK_OK, MK_EINVAL (bad options or opts->size; or a store refused
 * outright: a newer schema, sealed secrets without their key or with
 * another key - the log says which), MK_ENOMEM or MK_ESYS.
 */
MK_API int mk_runtime_open(mk_runtime **rtp, const mk_options *opts);

/*
 * mk_runtime_close stops the system actors in the reverse of boot order,
 * answers every ask still in flight with MK_ECLOSED, joins every thread
 * the runtime started, gives back its libcurl reference, frees the runtime
 * and sets *rtp to NULL.  Blocks until all of that is done.  Safe with rtp
 * or *rtp NULL, and twice.  Must not be called from a thread the runtime
 * owns (an actor or a callback).
 */
MK_API void mk_runtime_close(mk_runtime **rtp);

/*
 * mk_runtime_stats asks the supervisor for the runtime's counters and, on
 * MK_OK, writes the first out->size bytes of them (out->size kept).
 * Blocks up to timeout_ms (<= 0: the runtime's ask timeout).
 * Returns MK_OK, MK_EHANDLE, MK_EINVAL (out NULL or out->size out of
 * range), MK_ETIMEDOUT or MK_ECLOSED.
 */
MK_API int mk_runtime_stats(mk_runtime *rt, mk_stats *out, int timeout_ms);

/*
 * mk_runtime_load validates a whole config.json (its
 * env. references resolved from the environment), applies its global settings
 * (as mk_runtime_configure) and boots every client in it: sticky ones connect,
 * per-call ones discover; a client that cannot connect is kept as `unstable`
 * with stage `connect`.  Nothing is applied when any part is invalid.  Blocks
 * until every first connect finished: each is bounded by 30 s, and a load
 * runs mcp.stdio_start_concurrency stdio starts and per-call discoveries
 * at once beside 256 network dials, so a large file may take many times
 * 30 s (the wait is bounded by that).  On failure *err
 * (if err is not NULL) gets a malloc'd one-line reason naming the client
 * and field.  Any thread but the runtime's own.
 * Returns MK_OK, MK_EHANDLE, MK_EINVAL, MK_EEXIST, MK_ETOOBIG, MK_ENOMEM.
 */
MK_API int mk_runtime_load(mk_runtime *rt, const char *config_json,
                           char **err);

/*
 * mk_runtime_load_async is mk_runtime_load without the wait for the
 * connects, for an embedder that must answer meanwhile (the daemon
 * serves its probes and API while the clients connect).  An invalid file
 * is refused here, nothing applied (*err as for mk_runtime_load; fn will
 * not run).  Otherwise it returns MK_OK once every client of the file
 * exists - the list view shows each while its first connect runs, in the
 * state the runtime gives it until the connect decides: `unstable`
 * without last_failure (the runtime has no "connecting" state),
 * `pending_verification` or `disabled` - and fn runs exactly once: when
 * every first connect finished (rc MK_OK, err NULL), when the load failed
 * (its code and one-line reason), or with MK_ECLOSED when the runtime is
 * closed first.  fn runs on a runtime thread (or the one closing the
 * runtime): it must not block or call into the runtime; err is valid
 * during the call only.  Blocks briefly; any thread but the runtime's
 * own.  Returns MK_OK, MK_EHANDLE, MK_EINVAL, MK_ETOOBIG, MK_ENOMEM.
 */
typedef void (*mk_load_fn)(void *arg, int rc, const char *err);
MK_API int mk_runtime_load_async(mk_runtime *rt, const char *config_json,
                                 mk_load_fn fn, void *arg, char **err);

/*
 * mk_runtime_reload applies a config.json again, as a daemon's reload
 * does: its global settings (as mk_runtime_configure), then its clients
 * as a diff against the file last given to mk_runtime_load, _load_async
 * or _reload (none before the first): a new client added (as a load
 * adds it: one that cannot connect is kept `unstable`), a changed one
 * updated to the file's config as a whole (re-dialed when a connection
 * field changed), or replaced (removed and added, a new client) when
 * its name, client_id, connection_type, connection_string or auth_type
 * changed; a vanished one removed.  Clients created through
 * mk_client_add are not the file's and stay; a file's client whose name
 * such a client holds is not applied (counted failed, tried again at
 * the next reload).  The file's env. references are resolved, as any
 * file's.  Logs "reloaded: A added, U updated, R removed, F failed"
 * (component "runtime"; a warning when F is not 0) and one line per
 * client that failed.  An invalid file changes nothing (MK_EINVAL,
 * *err as for mk_runtime_load).  Blocks until every new client's first
 * connect and every update finished (as a load's, and up to 70 s for the
 * updates); any thread but the
 * runtime's own (reloads at once apply in turn).  Returns MK_OK (also when
 * some clients failed: the log says which), MK_EHANDLE, MK_EINVAL, MK_ETOOBIG,
 * MK_ENOMEM, MK_ETIMEDOUT.
 */
MK_API int mk_runtime_reload(mk_runtime *rt, const char *config_json,
                             char **err);

/*
 * mk_runtime_configure validates a whole config.json and applies only its
 * global settings, mcp.tool_sync_interval and mcp.tool_execution_timeout
 * (default 10 min and 30 s when the file has none): to every running
 * client and to clients added later, wherever a client's config sets no
 * value of its own (a client's own value wins).  A new interval takes
 * effect at once (the next check is rescheduled); a new timeout bounds
 * the calls started from then on.  Clients are not added, changed or
 * removed (a daemon's reload runs this, then applies its clients as a
 * diff: mk_runtime_reload).  Nothing is applied when the file is
 * invalid.  Blocks briefly;
 * any thread but the runtime's own; *err as for mk_runtime_load.
 * Returns MK_OK, MK_EHANDLE, MK_EINVAL, MK_ETOOBIG, MK_ENOMEM,
 * MK_ETIMEDOUT.
 */
MK_API int mk_runtime_configure(mk_runtime *rt, const char *config_json,
                                char **err);

/*
 * OAuth for a client with auth_type oauth (server-level, one shared
 * token).  Each blocks until the credential actor answered (discovery and
 * registration may run first: up to a minute); any thread but the
 * runtime's own; *err as above; malloc'd outputs (mk_free).
 *   mk_client_initiate_verification  starts the bootstrap flow of a
 *             client in pending_verification: *authorize_url (the URL to
 *             send the admin's browser to; PKCE S256, a 32-character
 *             state that *state gets) - the flow is stored, single-use,
 *             and expires after 15 minutes
 *   mk_client_reauthorize  the same for a client whose credential died
 *             (needs_reauth); the client stays refused until completed
 *   mk_oauth_complete  the callback: exchanges code for the flow of
 *             state, stores the token and moves the client on (sticky:
 *             connects; per-call: discovers); *client_id names it
 *   mk_oauth_callback  the same from the redirect's whole query string
 *             (after the '?'): its code, state and iss (RFC 9207: when the
 *             authorization server says it sends iss, a callback without
 *             it, or with another issuer's, is refused: MK_EINVAL); an
 *             error=... answer is MK_EINVAL naming the error code
 *   mk_client_complete_oauth  the same for a flow of client (id or name:
 *             the client whose OAuth config the flow belongs to); a
 *             flow of another client is refused (MK_EINVAL) and stays
 *             usable by its own
 * Return MK_OK, MK_EHANDLE, MK_EINVAL (not an oauth client; an unknown,
 * used or expired state; a refused code), MK_ENOENT, MK_EUPSTREAM
 * (discovery or the authorization server failed), MK_ETIMEDOUT.
 */
MK_API int mk_client_initiate_verification(mk_runtime *rt, const char *client,
                                           char **authorize_url, char **state,
                                           char **err);
MK_API int mk_client_reauthorize(mk_runtime *rt, const char *client,
                                 char **authorize_url, char **state,
                                 char **err);
MK_API int mk_oauth_complete(mk_runtime *rt, const char *state,
                             const char *code, char **client_id, char **err);
MK_API int mk_oauth_callback(mk_runtime *rt, const char *query,
                             char **client_id, char **err);
/* mk_query_param is the value of parameter name of a query string ("a=1&
 * b=2", form-decoded: '+' is a space; the first one wins), malloc'd
 * (mk_free), or NULL when absent - for an embedder's own callback or
 * other handlers. */
MK_API char *mk_query_param(const char *query, const char *name);
MK_API int   mk_client_complete_oauth(mk_runtime *rt, const char *client,
                                      const char *state, const char *code,
                                      char **err);
/* mk_user_oauth_start starts a per_user_oauth caller's own flow: mode
 * "user", "vk" or "session" and its identity, requester as in mk_call
 * (or NULL); completed like the others (mk_oauth_complete).  Outputs as
 * mk_client_initiate_verification.  A client holds at most 1,000
 * callers' flows pending (expired ones are dropped): past that MK_EBUSY,
 * "too many pending authorizations for MCP client "X" (1000); try again
 * later"; a requester at most 100: "too many pending authorizations
 * started by "K" (100); try again later"; the admin's flows do not
 * count. */
MK_API int mk_user_oauth_start(mk_runtime *rt, const char *client,
                               const char *mode, const char *identity,
                               const char *requester, char **authorize_url,
                               char **state, char **err);

/*
 * The per-user auth types' two credential paths: the admin's (discovery)
 * and each caller's own.
 * Each blocks until the credential actor answered; any thread but the
 * runtime's own; *err as above.
 *   mk_client_verify_headers   per_user_headers: the admin's sample
 *             (headers_json: {"x-api-key": "..."}, exactly the client's
 *             per_user_header_keys), retained as the discovery credential;
 *             the client moves on from pending_verification
 *   mk_client_verify_exchange  token_exchange: the admin's own access
 *             token, exchanged now and retained (re-exchanged as needed)
 *             for discovery
 *   mk_user_headers_submit     a caller's own header values, for the
 *             session_id its mcp_auth_required named: client (id or name),
 *             mode ("user", "vk", "session") and identity must be the ones
 *             of the call that was told it, else MK_ENOENT ("no such
 *             header session for this caller") and the session stays its
 *             caller's; the session ends once the values are on disk (a
 *             store that refuses them, MK_ESTORE, leaves it open for
 *             another try; a second submit while one is being written is
 *             MK_EBUSY)
 * A per_user_oauth caller completes the authorize_url of its
 * mcp_auth_required with mk_oauth_complete, like the admin's bootstrap
 * (mk_client_initiate_verification).
 * Return MK_OK, MK_EHANDLE, MK_EINVAL (the wrong auth type, headers that
 * are not the declared keys, an unknown or expired session), MK_ENOENT,
 * MK_EAUTH / MK_EUPSTREAM (the exchange was refused / failed), MK_ESTORE
 * (the store cannot write: nothing changed), MK_EBUSY.
 */
MK_API int mk_client_verify_headers(mk_runtime *rt, const char *client,
                                    const char *headers_json, char **err);
MK_API int mk_client_verify_exchange(mk_runtime *rt, const char *client,
                                     const char *subject_token, char **err);
MK_API int mk_user_headers_submit(mk_runtime *rt, const char *client,
                                  const char *mode, const char *identity,
                                  const char *session_id,
                                  const char *headers_json, char **err);

/*
 * mk_credentials_evict drops cached callers' credentials: of client,
 * identity mode ("user", "vk", "session") and identity, or exchanged from
 * subject_token - each NULL for any.  They stay in the store and are read
 * from it again when next needed.  Blocks briefly; any thread but the
 * runtime's own.  *count (may be NULL) gets how many went.  Returns
 * MK_OK, MK_EHANDLE, MK_ENOENT (no such client).
 */
MK_API int mk_credentials_evict(mk_runtime *rt, const char *client,
                                const char *mode, const char *identity,
                                const char *subject_token, unsigned *count,
                                char **err);

/*
 * mk_config_get validates a whole config.json and gives one of its
 * runtime settings by path - "store.path", "server.listen",
 * "server.admin_token", "server.metrics_token",
 * "server.client_metadata_url", "server.stream_public"
 * ("true", or NULL) - with any env. reference resolved, so an embedder
 * can open the runtime with it before loading the clients.
 * "server.stream" and "server.allowed_origins" give a JSON array text of
 * strings; "server.virtual_keys" a JSON array text of {name, value,
 * clients, trust_identity_headers, calls_per_second, burst,
 * max_calls_in_flight} with the values resolved (secrets: wipe the text
 * before mk_free); "server.tool_groups" a JSON array text of {name,
 * clients}; "server.inputs" a JSON array text of "elicitation",
 * "sampling", "roots" (mk_options.inputs), and "server.roots" one of
 * {uri, name} (mk_options.roots).  Never blocks.
 * On MK_OK *value is malloc'd (mk_free), or NULL when the file does not
 * set it.  Returns MK_OK, MK_EINVAL (the file, or an unknown path: *err
 * says which), MK_ETOOBIG, MK_ENOMEM.
 */
MK_API int mk_config_get(const char *config_json, const char *path,
                         char **value, char **err);

/*
 * A config.json's runtime settings, validated and parsed once - for a
 * host that reads several (the daemon at start and on each reload):
 * mk_settings_parse as mk_config_get's validation (*out the caller's,
 * mk_settings_free; *err as mk_config_get's); mk_settings_get gives one
 * by path as mk_config_get does (MK_ENOENT: no such setting; never
 * blocks, any thread).  mk_setting_name(i) names them by index (0, 1,
 * ...; NULL past the last) and mk_setting_flags(i) says what each is:
 * MK_SETTING_AT_START, read only when the runtime (or daemon) starts -
 * a reload cannot change it; MK_SETTING_SECRET, its value holds a
 * secret (wipe it before mk_free: mk_free_secret).  -1 past the last.
 */
typedef struct mk_settings mk_settings;
#define MK_SETTING_AT_START 1
#define MK_SETTING_SECRET   2
MK_API int  mk_settings_parse(const char *config_json, mk_settings **out,
                              char **err);
MK_API int  mk_settings_get(const mk_settings *s, const char *path,
                            char **value);
MK_API void mk_settings_free(mk_settings **sp);
MK_API const char *mk_setting_name(unsigned i);
MK_API int         mk_setting_flags(unsigned i);

/*
 * mk_config_check checks a whole config.json as an operator would want
 * it, starting nothing: *report gets a malloc'd JSON array text of
 * {"level": "error" | "warning", "path" (e.g.
 * "mcp.client_configs[2].tools_to_execute"; "" for the file), "message"}
 * - each client's first error and the file's, or, for a valid file, what
 * is valid but likely wrong: a client that allows no tools, a per-call
 * client checked every few seconds, a secret written inline instead of
 * "env.NAME", an admin token shorter than 16 characters, a stdio command
 * that is not on PATH.  Never blocks (but for the PATH lookups).
 * Returns MK_OK (no error; warnings may be listed), MK_EINVAL (errors
 * listed), MK_ENOMEM.
 */
MK_API int mk_config_check(const char *config_json, char **report);

/*
 * mk_client_add adds one client from its JSON config object (an entry of
 * mcp.client_configs).  Its strings are literal: "env.X" is the text
 * "env.X" (a header value sent as written, an invalid URL), never read
 * from the environment - only a config file's references are - and it
 * stays literal in the store, after a restart.
 * Blocks until its first connect (sticky) or
 * discovery (per-call) finished and, with a store, until the client is
 * on disk (it survives a crash from then on; remove, disable, enable
 * and update below do the same).  A store that refuses or cannot write
 * the change answers MK_ESTORE ("the store cannot write: why; what to
 * do") and nothing of it is kept: the runtime is as it was before the
 * call (for the lifecycle calls too).  A sticky client that
 * cannot connect is not kept (MK_EUPSTREAM / MK_ETIMEDOUT, with the
 * reason in *err); a per-call one is kept as `unstable`.  On success *id
 * (if not NULL) gets the client id (malloc'd).  Returns MK_OK,
 * MK_EHANDLE, MK_EINVAL (the config: *err names the field), MK_EEXIST,
 * MK_EUPSTREAM, MK_ETIMEDOUT, MK_ESTORE.
 */
MK_API int mk_client_add(mk_runtime *rt, const char *config_json, char **id,
                         char **err);

/*
 * Lifecycle of one client, named by id or name.  Each blocks until the
 * client acted (reconnect and enable: until the new connection is up or
 * failed).  *err as above.
 *   remove     stops the client's actor and forgets it
 *   disable    closes its connections; state `disabled`; no checks
 *   enable     leaves `disabled` and connects again
 *   reconnect  make-before-break; joins one already running.  A per-call
 *              client answers MK_EINVAL with "client uses per-call
 *              connections; there is no persistent connection to
 *              reconnect"; a disabled one MK_ESTATE.
 * Return MK_OK, MK_EHANDLE, MK_ENOENT, or the operation's error.
 */
MK_API int mk_client_remove(mk_runtime *rt, const char *client, char **err);

/*
 * mk_client_update changes a client's config by a JSON patch (top-level
 * fields replaced, the result validated as a whole).  name, client_id,
 * connection_type, connection_string and auth_type cannot change
 * (MK_EINVAL naming the field).  A change of a connection field -
 * headers, stdio_config, needs_session_stickiness, oauth_config,
 * token_exchange, per_user_header_keys - re-dials (make-before-break for
 * a sticky client; a stdio server is restarted) and blocks until that
 * finished; while another reconnect runs it answers MK_EBUSY with
 * "reconnect or connection credential update already in progress for
 * MCP client <name>".  "disabled" disables or enables.  Other fields
 * (tools_to_execute, tool_sync_interval, tool_execution_timeout,
 * is_ping_available) apply at once, in place: the connection, its
 * generation and a stdio server's process are kept.  A field given with
 * its current value is no change.  The patch is literal where it brings
 * an "env." string: one equal to the config's at the same place keeps
 * its meaning (a file's reference still resolves: a list view's config
 * sent back changes nothing), any other is the text as given, as for
 * mk_client_add.  *err as for mk_client_add.
 */
MK_API int mk_client_update(mk_runtime *rt, const char *client,
                            const char *patch_json, char **err);
MK_API int mk_client_disable(mk_runtime *rt, const char *client, char **err);
MK_API int mk_client_enable(mk_runtime *rt, const char *client, char **err);
MK_API int mk_client_reconnect(mk_runtime *rt, const char *client, char **err);
/* mk_client_refresh_tools runs the client's health check now (its tool
 * list read again, written only if it changed).  Blocks until it ran. */
MK_API int mk_client_refresh_tools(mk_runtime *rt, const char *client,
                                   char **err);

/*
 * The fixed names the list and the counters use, by index (0, 1, ...;
 * NULL, or -1, past the last), so that an embedder exporting them needs
 * no copy: mk_state_name the seven states (healthy, unstable,
 * needs_reauth, pending_verification, disabled, error, degraded),
 * mk_stage_name the last_failure stages (the keys of the counters'
 * "failures"), mk_latency_bound_ms the upper bounds of the counters'
 * "latency_buckets" (the one after the last is +Inf).  Any thread.
 */
MK_API const char *mk_state_name(unsigned i);
MK_API const char *mk_stage_name(unsigned i);
MK_API int64_t     mk_latency_bound_ms(unsigned i);

/*
 * mk_clients_json gives the client list as JSON: {"clients": [...],
 * "count": n, "total_count": m}, clients sorted by name, each {"config"
 * (as given, secrets redacted, with its client_id - a generated one
 * too), "tools" (sorted by name), "prompts", "resources" and
 * "resource_templates" (as the server listed them; [] when it has
 * none), "state", "last_failure"
 * (when present: stage, message, at, since), "connection_mode",
 * "generation", "next_check_at" (RFC 3339: when the supervisor checks it
 * next; absent while a check runs and for a client it does not check)}.
 * filter_json (may be NULL) is an object with optional "state",
 * "connection_type", "auth_type", "search" (substring of name or id), "limit"
 * (1..100, default 25), "offset", and "metrics": true for each client's
 * counters as "metrics" (those of mk_client_metrics_json, as the client last
 * sent them: at most a second old; {} before the first), so that every
 * client's counters take one list, not an ask per client.  *out is malloc'd
 * (mk_free). Blocks briefly.  Returns MK_OK, MK_EHANDLE, MK_EINVAL,
 * MK_ETIMEDOUT.
 */
MK_API int mk_clients_json(mk_runtime *rt, const char *filter_json,
                           char **out);

/*
 * mk_client_metrics_json gives one client's counters since it started, as
 * JSON: {"transitions", "checks" (health checks run), "failures": {stage:
 * n} (failed attempts by last_failure stage), "calls": {"ok", "error",
 * "auth_required", "refused"} (tool calls by outcome; refused: rejected
 * before running - bad arguments, a disabled client, a tool not allowed),
 * "latency_buckets" (calls that took <= 5, 10, 25, 50, 100, 250, 500,
 * 1000, 2500, 5000, 10000, 30000 ms, then longer; not cumulative),
 * "latency_sum_us", "recoveries": {"per_call", "shared", "session"},
 * "retries_skipped", "recent": {"bucket_s": 10, "end" (unix seconds the
 * newest bucket ends), "calls", "errors" (30 buckets, oldest first: the
 * calls ended in each of the 5 minutes before "end", and of them those
 * not ok)}}.  *out is malloc'd (mk_free).  Blocks briefly.
 * Returns MK_OK, MK_EHANDLE, MK_EINVAL, MK_ENOENT, MK_ETIMEDOUT.
 */
MK_API int mk_client_metrics_json(mk_runtime *rt, const char *name,
                                  char **out);

/*
 * mk_client_history_json gives a client's last transitions (at most 50,
 * oldest first) as a JSON array text: {time, old_state ("(new)" for its
 * first), state, and stage and message when it had failed}.  *out is the
 * caller's (mk_free).  MK_ENOENT: no such client.  Blocks; any thread but
 * an actor's.
 */
MK_API int mk_client_history_json(mk_runtime *rt, const char *name,
                                  char **out);

/*
 * mk_client_tool_versions_json gives a client's tool-list versions (the
 * last 20, oldest first: the store's, else those of this run) as a JSON
 * array text: each change of its list {"digest" (SHA-256 of the whole
 * tool objects, canonical: the same list always hashes the same), "at"
 * (RFC 3339), "count" (tools), "first" (true: no list before it), "diff":
 * {"added": [names], "removed": [names], "changed": [{"name", "fields":
 * ["description", "inputSchema", "annotations.destructiveHint", ...]}],
 * "more": {list: how many past the first 100}} (an empty list left
 * out)}.  *out is the caller's (mk_free).  MK_ENOENT: no such client.
 * Blocks; any thread but an actor's.
 */
MK_API int mk_client_tool_versions_json(mk_runtime *rt, const char *name,
                                        char **out);

/*
 * mk_calls_unknown_json gives the ledger of calls whose outcome is unknown
 * (MK_EUNKNOWN: the connection failed after the call was sent, and it
 * was not sent again): the last 1,000, oldest first, as a JSON array
 * text of {client, tool, caller (the identity, "" the shared one), time,
 * request_id (the JSON-RPC id it went out with), error}; never its
 * arguments.  For an operator to reconcile.  *out is the caller's
 * (mk_free).  Blocks briefly.
 */
MK_API int mk_calls_unknown_json(mk_runtime *rt, char **out);

/*
 * tool_changes "hold": a client holds back each tool of its list whose
 * title, description, schemas or annotations changed since the list was
 * approved, and each new one (its view's "tools_held": {name: {"fields":
 * [...]} or {"new": true}}, "tools_pending": the list's digest); their
 * calls are refused (MK_ESTATE) and the gateway does not list them.
 * mk_client_tools_approve takes the list whose digest is given (every
 * tool then callable); mk_client_tools_reject keeps its changes refused
 * ("tools_rejected").  MK_EINVAL: the digest is not the list's now (*err
 * says which is); MK_ESTATE: the client's tool_changes is not "hold";
 * MK_ENOENT.  *err (may be NULL) is the caller's (mk_free).  Blocks.
 */
MK_API int mk_client_tools_approve(mk_runtime *rt, const char *name,
                                   const char *digest, char **err);
MK_API int mk_client_tools_reject(mk_runtime *rt, const char *name,
                                  const char *digest, char **err);

/*
 * The W3C Trace Context of a call (the values of its traceparent and
 * tracestate headers): a 2026-07-28 server gets them in the request's
 * _meta.  A traceparent that is not "00-<32 hex>-<16 hex>-<2 hex>" (ids
 * not all zero), or a tracestate over 512 bytes or with a character
 * that is not printable ASCII, is dropped: never forwarded.  Either may
 * be NULL.
 */
typedef struct mk_trace {
	const char *traceparent;
	const char *tracestate;
} mk_trace;

/* A call: declare with MK_CALL_INIT, or set .size = sizeof(mk_call) (the
 * ABI rules above). */
typedef struct mk_call {
	size_t size;            /* sizeof(mk_call) as the caller's header
	                         * declares it */
	const char *client;     /* client name or client_id */
	const char *tool;       /* tool name */
	const char *arguments;  /* JSON object text, or NULL for {} */
	int         timeout_ms; /* 0: the client's tool_execution_timeout;
	                         * never longer than it */
	/* The caller, for per-user auth types (precedence user_id >
	 * virtual_key > session_id); ignored by server-level ones. */
	const char *user_id;       /* a signed-in user */
	const char *virtual_key;   /* a virtual key */
	const char *session_id;    /* a session */
	const char *subject_token; /* token_exchange: the caller's own
	                            * access token (a secret: never logged) */
	/* Who answers for the sign-ins the call may start, e.g. the virtual
	 * key whose trusted headers named the user, or NULL.  Each requester
	 * holds at most 100 callers' pending sign-ins of each kind (and each
	 * client at most 1,000): past it a call that needs a new one fails
	 * with MK_EBUSY until one is used or expires. */
	const char *requester;
	/* The progress the server reports while the call runs (its
	 * notifications/progress), or NULL: called on a runtime thread, in
	 * order and before the call's answer; it must not block.  total is
	 * 0 when the server gave none, message NULL when it gave none. */
	void (*progress)(void *arg, double progress, double total,
	                 const char *message);
	void           *progress_arg;
	const mk_trace *trace; /* its trace context, or NULL */
} mk_call;
#define MK_CALL_INIT                                                          \
	{                                                                     \
		.size = sizeof(mk_call)                                       \
	}

/*
 * mk_input_answer answers the request request_id waiting on client (see
 * MK_INPUT_ELICITATION) with result_json, the method's result: an
 * elicitation's {"action": "accept" | "decline" | "cancel", "content":
 * {...}} (an accepted form's fields it leaves out get the schema's
 * defaults), a sampling's CreateMessageResult ({"role", "content",
 * "model", ...}), a roots/list's {"roots": [...]}.  NULL declines: an
 * elicitation's "decline", else an error to the server.  Any thread.
 * Returns MK_OK, MK_ENOENT (no such client, or no such request waiting:
 * answered, expired, or its session closed), MK_EINVAL (result_json is
 * not such a result; *err says why), MK_EHANDLE.
 */
MK_API int mk_input_answer(mk_runtime *rt, const char *client,
                           const char *request_id, const char *result_json,
                           char **err);

/* mk_inputs_json lists the requests waiting on client: a JSON array of
 * {request_id, method, params, expires_in_ms}.  MK_OK, MK_ENOENT,
 * MK_EHANDLE, MK_EINVAL. */
MK_API int mk_inputs_json(mk_runtime *rt, const char *client, char **json);

/* Its outcome.  Exactly one of result and error is set. */
typedef struct mk_result {
	char *result;        /* the CallToolResult JSON (isError,
	                      * structuredContent kept), or NULL */
	char *error;         /* one line, no secrets, or NULL */
	char *error_kind;    /* timeout, connect, http, auth, session_gone,
	                      * protocol, server, transport_lost, cancelled,
	                      * limit (out of file descriptors),
	                      * outcome_unknown (MK_EUNKNOWN),
	                      * or NULL for a local refusal */
	int   http_status;   /* when the error had one, else 0 */
	char *auth_required; /* MK_EAUTH: the mcp_auth_required payload
	                      * (JSON: kind, mcp_client_id, mcp_client_name,
	                      * message, authorize_url, session_id,
	                      * submit_url, required_header_keys,
	                      * subject_token_missing, exchange_error) */
	char *recovery;      /* when the call recovered from an auth failure
	                      * or a dead session: JSON
	                      * {"ran": true, "path": "per_call" | "shared" |
	                      * "session", "retry_skipped": bool - the tool
	                      * was not safe to run twice}; else NULL */
} mk_result;

/*
 * mk_tool_call calls a tool and waits for the result.  Any thread but the
 * runtime's own.  On MK_OK *res holds the result; on an error *res (when
 * not NULL) explains it.  Free *res with mk_result_free.
 * Returns MK_OK, MK_EHANDLE, MK_EINVAL, MK_ENOENT (no such client),
 * MK_ESTATE (disabled, needs_reauth, pending), MK_ETIMEDOUT, MK_EUPSTREAM,
 * MK_EAUTH, MK_EBUSY (a per-user caller without a credential while its
 * client already has 1,000 callers' authorizations pending; or the
 * client's max_concurrent_calls: the call found 1,000 waiting for a
 * slot, or its deadline passed while it waited).
 */
MK_API int mk_tool_call(mk_runtime *rt, const mk_call *call, mk_result **res);

/* Completion of mk_tool_call_async: runs once, on a runtime thread; it
 * must not block or call back into the runtime synchronously.  res is the
 * callback's to free (mk_result_free). */
typedef void (*mk_done_fn)(void *arg, int rc, mk_result *res);

/*
 * mk_tool_call_async starts a tool call and returns at once - unless the
 * client's inbox is full, when the hand-off waits (5 s at most): do not
 * call it from a thread that must never wait (an event loop's, a library
 * callback's).  fn runs when the call finishes (with MK_ECLOSED if the
 * runtime closes first).  Returns MK_OK (fn will run) or an error (fn
 * will not run).
 */
MK_API int mk_tool_call_async(mk_runtime *rt, const mk_call *call,
                              mk_done_fn fn, void *arg);

/*
 * mk_tool_call_cancel gives up on the call ticket of client (its name or
 * client_id, as in the call) - mk_call_start's ticket: a call the server
 * has is cancelled there (notifications/cancelled with reason, or "by
 * the caller"); one not sent yet - waiting for a slot, a connection, a
 * credential - never is.  Its fn runs once as always: with MK_ECLOSED
 * and error_kind "cancelled", or with its answer when that came first.
 * The tool may have run (a server may finish before it hears).  Any
 * thread; returns MK_OK (asked), MK_ENOENT (no such client), MK_EINVAL,
 * MK_EHANDLE.
 */
MK_API int mk_tool_call_cancel(mk_runtime *rt, const char *client,
                               uint64_t ticket, const char *reason);

/*
 * A server's prompts and resources, asked through the same path as a
 * tool call (its client's state, credentials, recovery - always safe to
 * repeat: they read - deadline, max_concurrent_calls, cancellation),
 * and a call whose server's requests go back to its caller.
 * how->kind says what call asks: MK_CALL_TOOL is mk_tool_call's tools/call;
 * MK_CALL_PROMPT a prompts/get of the prompt call->tool, call->arguments
 * its arguments (an object of strings, or NULL); MK_CALL_RESOURCE a
 * resources/read of the URI call->tool (arguments ignored).  The result
 * is the server's (GetPromptResult, ReadResourceResult) as it sent it.
 * The lists are in the client list (mk_clients_json: "prompts",
 * "resources", "resource_templates", as the server listed them).
 * mk_call_run waits; mk_call_start calls fn when it ends, as
 * mk_tool_call_async, and names the call: *ticket (never 0; may be NULL)
 * is what mk_tool_call_cancel takes.  Results and errors as
 * mk_tool_call's.
 */
typedef enum mk_call_kind {
	MK_CALL_TOOL     = 0,
	MK_CALL_PROMPT   = 1,
	MK_CALL_RESOURCE = 2,
} mk_call_kind;

/* The server's requests a call causes (those of mk_options.inputs), for
 * its own caller: method and params as the server sent them (params:
 * JSON object text).  Called on a runtime thread; it must not block nor
 * call into the runtime.  Returns 0 to take it - then answer it with
 * mk_input_answer(rt, client, request_id, ...) from another thread,
 * within the call's deadline (as a host would) - or non-zero to decline
 * it now (an elicitation "decline", the others an error to the server).
 * A request is the call's when it came on the call's own session (a
 * per-call client's), or on a sticky connection running that call
 * alone; else it is the host's, as any. */
typedef int (*mk_relay_fn)(void *arg, const char *request_id,
                           const char *method, const char *params);

/* How a call runs: declare with MK_CALL_HOW_INIT (it sets size; see the
 * ABI rules above). */
typedef struct mk_call_how {
	size_t       size;  /* sizeof(mk_call_how), by MK_CALL_HOW_INIT */
	mk_call_kind kind;  /* what it asks (MK_CALL_TOOL) */
	mk_relay_fn  input; /* the server's requests it causes, or
	                     * NULL: the host's */
	void *input_arg;    /* input's argument */
	/* A gateway serving MCP 2026-07-28 over HTTP: the Mcp-Param-{Name}
	 * headers its caller sent with a tools/call, as JSON text {Name:
	 * value as sent}, or NULL.  They must be those the tool's
	 * x-mcp-header parameters make of the arguments (each present
	 * parameter's, its value decoded; none for an absent one): else the
	 * call fails MK_EINVAL, error_kind "header_mismatch", before it is
	 * sent. */
	const char *param_headers;
} mk_call_how;
#define MK_CALL_HOW_INIT                                                      \
	{                                                                     \
		.size = sizeof(mk_call_how)                                   \
	}

/* how may be NULL: a tool call, its requests the host's. */
MK_API int mk_call_run(mk_runtime *rt, const mk_call *call,
                       const mk_call_how *how, mk_result **res);
MK_API int mk_call_start(mk_runtime *rt, const mk_call *call,
                         const mk_call_how *how, mk_done_fn fn, void *arg,
                         uint64_t *ticket);

/* mk_result_free frees *res and nulls it; safe with NULL. */
MK_API void mk_result_free(mk_result **res);

/*
 * The state stream: an nng pub0 socket at mk_stream_url() (plus the
 * stream_listen addresses).  Subscribe with sub0 to the topic "state",
 * "tools", "pin", "store" or "input" (or "" for all).  Each message is the
 * topic, one NUL byte, then a msgpack map:
 *   state: client_id, name, state, old_state, last_failure (nil or a map
 *          of stage, message, at, since), generation, tools_count, time
 *          (RFC 3339 UTC), node_id, protocol_version ("" before the
 *          first connect), snapshot (true, and old_state the state
 *          itself, when mk_stream_snapshot asked for it)
 *   tools: client_id, name, hash (SHA-256 hex of the canonical tool
 *          list), count, diff (what changed: a version's diff, JSON text)
 *   pin:   client_id, name, state (held: tool_changes hold or block held
 *          tools of a new list back; approved; rejected), hash (the
 *          list's digest), count (tools held now), message (the held
 *          tools and what changed in each, one line), time, node_id
 *   store: healthy (bool), error (why the file cannot be written; "")
 *   input: client_id, name, request_id, method, state (pending,
 *          answered, expired, gone), message (an elicitation's), time,
 *          node_id
 * One "state" message per state transition, one "tools" message per real
 * change of a tool list, one "pin" message per change of what is held
 * and per approval or rejection, one "store" message when the store starts
 * failing (the runtime serves from memory and retries) and one when it
 * is written again, one "input" message when a server's request waits
 * for the host and one when it ends.  The string is the runtime's; never
 * NULL.
 */
MK_API const char *mk_stream_url(const mk_runtime *rt);

/* mk_node_id: this runtime's node id (mk_options.node_id, or the one made
 * for it); "" for a handle that is not open.  The runtime's string. */
MK_API const char *mk_node_id(const mk_runtime *rt);

/*
 * mk_stream_snapshot makes every client publish the state it is in now on
 * the stream ("state" events with snapshot true), each in order with its
 * transitions: a subscriber that subscribes (connected: counted in
 * mk_stats.stream_subscribers), then calls it, knows every client's state
 * and misses no change after.  Returns once every client
 * has been asked (its event may come after); MK_ETIMEDOUT past
 * timeout_ms (<= 0: the runtime's ask timeout).  Blocks; any thread but
 * an actor's.
 */
MK_API int mk_stream_snapshot(mk_runtime *rt, int timeout_ms);

/* A state-stream message, decoded by mk_stream_event_parse.  Allocated
 * by the library, whose later versions may append fields; its strings
 * are its own: whole (never cut), NUL-terminated, "" when absent, never
 * NULL, until mk_stream_event_free. */
typedef struct mk_stream_event {
	const char *topic;            /* "state", "tools", "lists" (prompts,
	                               * resources and resource templates:
	                               * hash and count), "pin", "store",
	                               * "input" */
	const char *client_id;        /* all but store */
	const char *name;             /* all but store */
	const char *state;            /* state: the new state; pin: held,
	                               * approved or rejected; input: pending,
	                               * answered, expired, gone */
	const char *old_state;        /* state: the previous one; "" when
	                               * new */
	const char *stage;            /* state: last_failure stage */
	const char *message;          /* state: last_failure message; store:
	                               * why it cannot be written ("" when
	                               * healthy); pin: the held tools;
	                               * input: an elicitation's */
	const char *at;               /* state: last_failure at */
	const char *since;            /* state: last_failure since */
	int64_t     generation;       /* state: connection generation */
	int64_t     tools_count;      /* state: tools known */
	const char *time;             /* state, pin, input: when (RFC 3339) */
	const char *node_id;          /* state, pin, input: the instance */
	const char *hash;             /* tools, lists: the new content hash;
	                               * pin: the list's digest */
	int64_t count;                /* tools, lists: how many; pin: tools
	                               * held */
	int healthy;                  /* store: 1 writes reach the file
	                               * again, 0 serving from memory
	                               * (retrying) */
	const char *request_id;       /* input: the request */
	const char *method;           /* input: its method */
	const char *protocol_version; /* state: the MCP revision the
	                               * client's server speaks ("" before
	                               * it is known) */
	int snapshot;                 /* state: 1 when mk_stream_snapshot
	                               * asked for it (not a transition) */
	const char *diff;             /* tools: what changed, JSON text (as
	                               * a version's "diff":
	                               * mk_client_tool_versions_json) */
} mk_stream_event;

/*
 * mk_stream_event_parse decodes one message received from the state
 * stream (the whole message: topic, NUL, msgpack body) into *ev (free it
 * with mk_stream_event_free).  A topic this library does not know gives
 * the topic alone.  Never blocks; any thread; needs no runtime.  Returns
 * MK_OK, MK_EPROTO (not a stream message; *ev NULL), MK_ENOMEM or
 * MK_EINVAL (ev NULL).
 */
MK_API int mk_stream_event_parse(const void *msg, size_t len,
                                 mk_stream_event **ev);

/* mk_stream_event_free frees an event and its strings; NULL is a no-op. */
MK_API void mk_stream_event_free(mk_stream_event *ev);

/*
 * mk_strerror returns a static, human-readable text for a result code.
 * Never NULL; unknown codes give "unknown error".
 */
MK_API const char *mk_strerror(int rc);

/*
 * mk_free releases a buffer the runtime returned.  NULL is a no-op.
 */
MK_API void mk_free(void *p);

/*
 * mk_free_secret releases a string that holds a secret (a token, a key,
 * a header value - the runtime's, or the embedder's own malloc'd one),
 * overwriting it first.  NULL is a no-op.
 */
MK_API void mk_free_secret(char *s);

/* ---- deprecated: kept for the programs that use them ---------------- */

#if defined(__GNUC__)
#define MK_DEPRECATED(why) __attribute__((deprecated(why)))
#else
#define MK_DEPRECATED(why)
#endif

/* mk_tool_call and mk_tool_call_async with a trace context: call->trace
 * (and mk_call_start) do it. */
MK_API int mk_tool_call_traced(mk_runtime *rt, const mk_call *call,
                               const mk_trace *trace, mk_result **res)
        MK_DEPRECATED("set mk_call.trace and call mk_tool_call");
MK_API int mk_tool_call_async_traced(mk_runtime *rt, const mk_call *call,
                                     const mk_trace *trace, mk_done_fn fn,
                                     void *arg)
        MK_DEPRECATED("set mk_call.trace and call mk_tool_call_async");
/* mk_call_start with a trace context and how NULL. */
MK_API int mk_tool_call_start(mk_runtime *rt, const mk_call *call,
                              const mk_trace *trace, mk_done_fn fn, void *arg,
                              uint64_t *ticket)
        MK_DEPRECATED("set mk_call.trace and call mk_call_start");

/* A state-stream message in fixed arrays, its strings cut to fit (the
 * diff {"truncated": true} past 8 KiB): mk_stream_event has them whole.
 * Declare with MK_EVENT_INIT (it sets size; see the ABI rules above). */
typedef struct mk_event {
	size_t size;               /* sizeof(mk_event) as the caller's header
	                            * declares it; set by MK_EVENT_INIT */
	char topic[8];             /* "state", "tools", "lists" (prompts,
	                            * resources and resource templates:
	                            * hash and count), "pin", "store",
	                            * "input" */
	char client_id[72];        /* both */
	char name[72];             /* both */
	char state[24];            /* state: the new state; pin: held,
	                            * approved or rejected */
	char old_state[24];        /* state: the previous one; "" when new */
	char stage[24];            /* state: last_failure stage; "" without */
	char message[2048];        /* state: last_failure message; store: why
	                            * it cannot be written ("" when healthy);
	                            * pin: the held tools; input: an
	                            * elicitation's */
	char    at[40];            /* state: last_failure at */
	char    since[40];         /* state: last_failure since */
	int64_t generation;        /* state: connection generation */
	int64_t tools_count;       /* state: tools known */
	char    time[40];          /* state, pin, input: when (RFC 3339) */
	char    node_id[72];       /* state, pin, input: the instance */
	char    hash[72];          /* tools, lists: the new content hash;
	                            * pin: the list's digest */
	int64_t count;             /* tools, lists: how many; pin: tools
	                            * held */
	int healthy;               /* store: 1 writes reach the file again, 0
	                            * serving from memory (retrying) */
	char request_id[40];       /* input: the request (state: pending,
	                            * answered, expired, gone; message: an
	                            * elicitation's) */
	char method[40];           /* input: its method */
	char protocol_version[16]; /* state: the MCP revision the client's
	                            * server speaks ("" before it is
	                            * known) */
	int snapshot;              /* state: 1 when mk_stream_snapshot asked
	                            * for it (not a transition) */
	char diff[8192];           /* tools: what changed, JSON text (as a
	                            * version's "diff":
	                            * mk_client_tool_versions_json);
	                            * {"truncated": true} when it does not
	                            * fit: read the versions */
} mk_event;

/* mk_event ev = MK_EVENT_INIT; */
#define MK_EVENT_INIT                                                         \
	{                                                                     \
		.size = sizeof(mk_event)                                      \
	}

/* mk_event_parse decodes a stream message into the first ev->size bytes
 * of ev (ev->size kept; the fields it holds are cleared first).  MK_OK,
 * MK_EPROTO (not a stream message) or MK_EINVAL (ev NULL or ev->size out
 * of range). */
MK_API int mk_event_parse(const void *msg, size_t len, mk_event *ev)
        MK_DEPRECATED("mk_stream_event_parse: its strings are not cut");

#ifdef __cplusplus
}
#endif

#endif /* MCPKEEP_H */
