/*
 * supervisor.h - the supervisor actor: owns the client actors' lifetimes
 * (add, remove, disable, enable, reconnect), their health-tick schedule
 * with jitter (below), and the client list view.
 *
 * Schedule: healthy -> tool_sync_interval (per client, else global);
 * unstable -> every unstable_ms (10 s); needs_reauth, disabled,
 * pending_verification -> none.  Each interval is spread +-10% so many
 * clients never tick together.  One check per client at a time.
 *
 * Messages: supervisor_msg.h.
 */
#ifndef ACTORS_SUPERVISOR_H
#define ACTORS_SUPERVISOR_H

#include "actors/client/client.h"
#include "actors/kernel/kernel.h"
#include "actors/kernel/stream.h"
#include "actors/supervisor/supervisor_msg.h"

/* kn_spawn's arg; copied at init. */
typedef struct sv_args {
	kn_stream     *stream;  /* the state stream */
	const char    *node_id; /* this instance (outlives the supervisor) */
	int64_t        sync_ms; /* global tool_sync_interval, at first */
	int64_t        exec_ms; /* global tool_execution_timeout, at first */
	int            changes; /* global tool_changes, at first */
	int64_t        unstable_ms; /* check interval while unstable */
	kn_actor      *persister;   /* the store, or NULL (memory only) */
	kn_actor      *credential;  /* the credential actor, or NULL */
	bool           cluster;     /* one node of many (a shared store) */
	const cl_host *host;        /* what the host offers MCP servers */
	tr_tracer     *tracer;      /* spans' exporter, or NULL */
} sv_args;

extern const kn_actor_ops supervisor_ops;

/* supervisor_stats_decode parses a MSG_STATS reply.  Unknown keys are
 * ignored.  Returns 0 or MK_EPROTO. */
int supervisor_stats_decode(const void *buf, size_t len, mk_stats *out);

#endif /* ACTORS_SUPERVISOR_H */
