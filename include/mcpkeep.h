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
} mk_err;

/* Log levels, lowest first. */
typedef enum mk_log_level {
	MK_LOG_DEBUG = 0, /* per-event detail, e.g. each failed health check */
	MK_LOG_INFO  = 1, /* lifecycle and state transitions */
	MK_LOG_WARN  = 2, /* something an operator should look at */
	MK_LOG_ERROR = 3, /* a failure the runtime could not absorb */
} mk_log_level;

/*
 * Options for mk_runtime_open().  Initialise with mk_options_init() and
 * change only the fields you need; later versions append fields.
 */
typedef struct mk_options {
	mk_log_level log_level; /* default MK_LOG_INFO; MCPKEEP_LOG overrides
	                         * ("debug", "info", "warn", "error") */
	int    log_json;        /* non-zero: one JSON object per log line */
	int    log_fd;          /* where log lines go; default 2 (stderr) */
	size_t stack_size;      /* actor thread stack, bytes; default 256 KiB,
	                         * minimum 64 KiB */
	int ask_timeout_ms; /* deadline of the runtime's internal asks when a
	                     * call has none of its own; default 5000 */
} mk_options;

/*
 * Runtime counters, a snapshot taken by the supervisor actor.
 */
typedef struct mk_stats {
	uint64_t actors;         /* actors running now */
	uint64_t messages;       /* messages delivered to handlers */
	uint64_t asks;           /* asks sent */
	uint64_t late_replies;   /* replies dropped: the asker's deadline had
	                          * passed */
	uint64_t expired;        /* asks skipped: expired before handling */
	uint64_t handler_errors; /* handlers that returned an error */
} mk_stats;

typedef struct mk_runtime mk_runtime;

/*
 * mk_options_init fills opts with the defaults.  Never blocks.
 */
MK_API void mk_options_init(mk_options *opts);

/*
 * mk_runtime_open boots a runtime: logging, the actor kernel, then the
 * system actors in a fixed order.  opts may be NULL for the defaults.
 * Blocks until every system actor has signalled READY.  On success *rtp
 * owns a runtime the caller releases with mk_runtime_close().
 * Returns MK_OK, MK_EINVAL (bad options), MK_ENOMEM or MK_ESYS.
 */
MK_API int mk_runtime_open(mk_runtime **rtp, const mk_options *opts);

/*
 * mk_runtime_close stops the system actors in the reverse of boot order,
 * answers every ask still in flight with MK_ECLOSED, joins every thread
 * the runtime started, frees the runtime and sets *rtp to NULL.  Blocks
 * until all of that is done.  Safe with rtp or *rtp NULL, and twice.  Must
 * not be called from a thread the runtime owns (an actor or a callback).
 */
MK_API void mk_runtime_close(mk_runtime **rtp);

/*
 * mk_runtime_stats asks the supervisor for the runtime's counters.  Blocks
 * up to timeout_ms (<= 0: the runtime's ask timeout).
 * Returns MK_OK, MK_EHANDLE, MK_EINVAL, MK_ETIMEDOUT or MK_ECLOSED.
 */
MK_API int mk_runtime_stats(mk_runtime *rt, mk_stats *out, int timeout_ms);

/*
 * mk_strerror returns a static, human-readable text for a result code.
 * Never NULL; unknown codes give "unknown error".
 */
MK_API const char *mk_strerror(int rc);

/*
 * mk_free releases a buffer the runtime returned.  NULL is a no-op.
 */
MK_API void mk_free(void *p);

#ifdef __cplusplus
}
#endif

#endif /* MCPKEEP_H */
